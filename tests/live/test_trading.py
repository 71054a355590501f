"""The live PnL per pair: the summary's net is the backtest report's (framework.pnl)."""

from __future__ import annotations

from decimal import Decimal

from framework.engine.bus import Bus
from framework.engine.events import MatchFilled
from framework.engine.portfolio import Portfolio
from framework.live.trading import TradingState
from framework.venue.models import ChangeType, MatchRecord, Position
from tests.engine.test_portfolio import position

ETH = "ETH-USD"


def fill(match_id: int, profit_loss: str, fee: str) -> MatchFilled:
    """An own match of ETH-USD."""
    record = MatchRecord(
        id=match_id, symbol=ETH, profit_loss=Decimal(profit_loss), trade_fee=Decimal(fee)
    )
    return MatchFilled(record, strategy="s")


def test_net_is_realized_minus_fees_plus_unrealized_and_unknown_with_it() -> None:
    trading = TradingState([ETH])
    trading.on_match(fill(1, "0.5", "0.125"))
    trading.on_match(fill(2, "-0.25", "0.125"))
    trading.on_snapshot(ETH, (Position(id=1, unrealized_pnl=None),))
    pnl = trading.pnl()[ETH]
    assert pnl["realized"] == Decimal("0.25") and pnl["fees"] == Decimal("0.25")
    assert pnl["unrealized"] is None and pnl["net"] is None  # not known, so net is not
    trading.on_snapshot(ETH, (Position(id=1, unrealized_pnl=Decimal("-0.5")),))
    assert trading.pnl()[ETH]["net"] == Decimal("0.25") - Decimal("0.25") + Decimal("-0.5")


def test_a_position_opened_since_the_last_snapshot_has_no_unrealized_pnl() -> None:
    """Found by a first-time reader: a short opened 22 ms before the stop showed unrealized
    "0" and a net, the value the last snapshot gave an earlier position of the pair."""
    portfolio = Portfolio()
    trading = TradingState([ETH])
    trading.follow(Bus(), portfolio, lambda client_order_id: None)
    portfolio.apply_position_push(position("1", ChangeType.NEW, pid=1))
    trading.on_snapshot(ETH, (Position(id=1, unrealized_pnl=Decimal("0.7")),))
    assert trading.pnl()[ETH]["unrealized"] == Decimal("0.7")
    portfolio.apply_position_push(position("2", ChangeType.INCREASE, pid=1))
    assert trading.pnl()[ETH]["unrealized"] == Decimal("0.7")  # as of the snapshot: the same one
    portfolio.apply_position_push(position("0", ChangeType.CLOSE, pid=1))
    assert trading.pnl()[ETH]["unrealized"] == 0  # flat
    portfolio.apply_position_push(position("1", ChangeType.NEW, pid=2))
    pnl = trading.pnl()[ETH]
    assert pnl["unrealized"] is None and pnl["net"] is None  # no snapshot showed it
