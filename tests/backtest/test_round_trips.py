"""Round trips: flat to flat per strategy and pair, through zero, and their statistics."""

from __future__ import annotations

from decimal import Decimal

from framework.backtest.round_trips import TripFill, round_trips, trip_statistics


def fill(strategy: str, ts: int, side: str, quantity: str, price: str, fee: str = "0") -> TripFill:
    """A fill of ETH-USD: side is buy or sell."""
    return TripFill(
        strategy, "ETH-USD", ts, side == "buy", Decimal(quantity), Decimal(price), Decimal(fee)
    )


def test_a_trip_runs_from_flat_to_flat_and_its_gross_is_sells_minus_buys() -> None:
    (trip,) = round_trips(
        [
            fill("a", 1000, "buy", "0.01", "2000", "0.01"),
            fill("a", 2000, "buy", "0.02", "2010", "0.02"),
            fill("a", 5000, "sell", "0.03", "2020", "0.03"),
        ]
    )
    assert (trip.is_long, trip.opened_ms, trip.closed_ms, trip.fills) == (True, 1000, 5000, 3)
    assert trip.max_quantity == Decimal("0.03")
    assert trip.gross == Decimal("0.03") * 2020 - Decimal("0.01") * 2000 - Decimal("0.02") * 2010
    assert trip.fees == Decimal("0.06") and trip.net == trip.gross - trip.fees
    assert trip.holding_ms == 4000


def test_a_fill_through_zero_closes_one_trip_and_opens_the_next_sharing_its_fee() -> None:
    first, second = round_trips(
        [
            fill("a", 1000, "buy", "0.02", "2000", "0.02"),
            fill("a", 2000, "sell", "0.03", "2001", "0.03"),  # 0.02 closes, 0.01 opens short
            fill("a", 3000, "buy", "0.01", "1999", "0.01"),
        ]
    )
    assert (first.is_long, first.closed_ms, first.gross) == (True, 2000, Decimal("0.02"))
    assert first.fees == Decimal("0.04")  # 0.02 of its own, 2/3 of the 0.03
    assert (second.is_long, second.opened_ms, second.closed_ms) == (False, 2000, 3000)
    assert second.gross == Decimal("0.02") and second.fees == Decimal("0.02")


def test_strategies_on_one_pair_have_their_own_trips_and_open_ones_come_last() -> None:
    trips = round_trips(
        [
            fill("a", 1000, "buy", "1", "10"),
            fill("b", 1500, "sell", "1", "10"),  # b's own short: not a's close
            fill("a", 2000, "sell", "1", "12"),
        ]
    )
    assert [(t.strategy, t.closed_ms) for t in trips] == [("a", 2000), ("b", None)]


def test_statistics_count_wins_losses_and_leave_open_trips_out() -> None:
    trips = round_trips(
        [
            fill("a", 0, "buy", "1", "10", "0.5"),
            fill("a", 2000, "sell", "1", "13", "0.5"),  # net 2
            fill("a", 3000, "sell", "1", "13", "0.5"),
            fill("a", 4000, "buy", "1", "14", "0.5"),  # net -2
            fill("a", 5000, "buy", "1", "10", "0.5"),
            fill("a", 9000, "sell", "1", "14", "0.5"),  # net 3
            fill("a", 9500, "buy", "1", "10"),  # open
        ]
    )
    stats = trip_statistics(trips)
    assert (stats["closed"], stats["open"], stats["wins"], stats["losses"]) == (3, 1, 2, 1)
    assert stats["win_rate_pct"] == "66.67"
    assert stats["average_win"] == "2.5" and stats["average_loss"] == "-2"
    assert stats["profit_factor"] == "2.5"
    assert stats["net_pnl"] == "3" and stats["fees"] == "3"
    assert stats["average_holding_s"] == "2.333" and stats["max_holding_s"] == "4"


def test_no_trip_gives_no_ratios() -> None:
    stats = trip_statistics([])
    assert stats["closed"] == 0 and stats["win_rate_pct"] is None
    assert stats["profit_factor"] is None and stats["average_holding_s"] is None
