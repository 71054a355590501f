"""What perpframe calls PnL, one definition for the live summary and the backtest report.

Per pair (and summed per settlement coin in a backtest):

- ``realized``: the sum of the venue's ``profitLoss`` over the fills, before fees;
- ``fees``: the sum of their ``tradeFee`` (a cost: positive when paid);
- ``unrealized``: the open position's PnL at the mark (live: the last REST snapshot's;
  backtest: the paper venue's at its last price);
- ``gross`` = realized + unrealized (what the trades made before fees);
- ``net`` = realized − fees + unrealized = gross − fees.

Net is unknown (None) while unrealized is: a live position no snapshot has shown yet.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = ["gross_pnl", "net_pnl"]


def gross_pnl(realized: Decimal, unrealized: Decimal | None) -> Decimal | None:
    """realized + unrealized: before fees (None while unrealized is unknown)."""
    return None if unrealized is None else realized + unrealized


def net_pnl(realized: Decimal, fees: Decimal, unrealized: Decimal | None) -> Decimal | None:
    """realized − fees + unrealized: the one net PnL (None while unrealized is unknown)."""
    gross = gross_pnl(realized, unrealized)
    return None if gross is None else gross - fees
