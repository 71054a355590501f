"""The price track: a track told where its points are, unsorted, answers as the loaded one."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from framework.backtest.prices import PriceTrack

PAIRS = ["ETH-USD", "BTC-USD"]

entries = st.lists(st.tuples(st.integers(0, 20), st.integers(1, 50).map(Decimal)), max_size=30)


def _copy(pairs: dict[str, list[tuple[int, Decimal]]]) -> dict[str, list[tuple[int, Decimal]]]:
    return {pair: list(found) for pair, found in pairs.items()}


@given(st.dictionaries(st.sampled_from(PAIRS), entries), st.integers(-1, 25))
def test_a_later_track_loads_on_first_use_and_answers_as_the_loaded_one(
    pairs: dict[str, list[tuple[int, Decimal]]], ts: int
) -> None:
    loaded = PriceTrack.from_pairs(_copy(pairs))
    lazy = PriceTrack.later(lambda: PriceTrack.from_pairs(_copy(pairs)))
    assert not lazy.loaded
    for pair in [*PAIRS, "XRP-USD"]:
        assert lazy.last_at(pair, ts) == loaded.last_at(pair, ts)
    assert lazy.loaded
    assert lazy.rows == loaded.rows


def test_of_two_prices_in_one_ms_the_one_found_later_counts() -> None:
    pairs = {"ETH-USD": [(5, Decimal(1)), (7, Decimal(2)), (7, Decimal(3)), (6, Decimal(4))]}
    track = PriceTrack.from_pairs(_copy(pairs))
    assert track.last_at("ETH-USD", 100) == Decimal(3)
    assert track.last_at("ETH-USD", 6) == Decimal(4)
