"""The shadow's ledger: outcomes, gaps, summaries and the alarm, on hand-made sides."""

from __future__ import annotations

from decimal import Decimal as D

from framework.shadow.compare import Bands, Shadow, Summary


def fill(shadow: Shadow, side: str, coid: str, price: str, at: int, *, taker: bool = True) -> None:
    shadow.filled(
        side,  # type: ignore[arg-type]
        coid,
        price=D(price),
        quantity=D("1"),
        fee=D("0.1"),
        pnl=D(0),
        taker=taker,
        at=at,
    )


def test_each_outcome_and_the_price_gap_sign() -> None:
    shadow = Shadow(settle_ms=1000)
    for coid in "abcde":
        shadow.sent(coid, "ETH-USD", True, D(1), at=0)
    fill(shadow, "live", "a", "100", 10)
    fill(shadow, "paper", "a", "99.9", 5)  # paper bought cheaper: +10 bps, 5 ms sooner
    fill(shadow, "live", "b", "100", 10)
    shadow.ended("paper", "b", 10)
    shadow.answered("live", "c", 2310, 3)
    shadow.answered("paper", "c", 2310, 3)
    shadow.answered("live", "d", 2310, 3)
    shadow.answered("paper", "d", None, 3)
    shadow.unknown("e", 4)
    shadow.tick(2000)  # b's live side, d's paper side and e's paper side close by time
    diffs = {d.client_order_id: d for d in shadow.closed}
    assert {k: d.outcome for k, d in diffs.items()} == {
        "a": "both filled",
        "b": "live only",
        "c": "both refused",
        "d": "refused apart",
        "e": "unknown",
    }
    a = diffs["a"]
    assert a.price_gap_bps == D(10) and a.first_fill_gap_ms == -5 and a.fee_gap == 0
    assert not shadow.open


def test_a_sell_gap_is_positive_when_paper_sold_dearer() -> None:
    shadow = Shadow()
    shadow.sent("s", "ETH-USD", False, D(1), at=0)
    fill(shadow, "live", "s", "100", 1)
    fill(shadow, "paper", "s", "100.05", 1)
    (diff,) = shadow.closed
    assert diff.price_gap_bps == D(5)


def test_summary_and_alarm_fire_once_per_excursion() -> None:
    alarms: list[tuple[str, list[str], Summary]] = []
    shadow = Shadow(
        bands=Bands(min_orders=4), on_alarm=lambda p, why, s: alarms.append((p, why, s))
    )
    for i in range(6):  # paper fills every order, live only half: ratio 2.0
        coid = f"o{i}"
        shadow.sent(coid, "ETH-USD", True, D(1), at=0)
        fill(shadow, "paper", coid, "100", 1)
        if i % 2:
            fill(shadow, "live", coid, "100", 1)
        else:
            shadow.ended("live", coid, 1)
    summary = shadow.summary("ETH-USD")
    assert summary.orders == 6 and summary.fill_ratio == D(2)
    assert "paper fills 2.00x live" in summary.text()
    assert len(alarms) == 1  # fired when the window reached 4 orders, not again while outside
    pair, why, _ = alarms[0]
    assert pair == "ETH-USD" and any("fill ratio" in w for w in why)
