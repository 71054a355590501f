"""Round trips of a backtest and their statistics (win rate, average win and loss, ...).

A round trip is one position of one strategy on one pair from flat back to flat: it opens
with the strategy's first fill on the pair while its own position there is zero, and closes
with the fill that brings that position back to zero. The strategy's own position is the
signed sum of its own fills (buys plus, sells minus), whatever other strategies hold on the
pair. A fill that goes through zero (long 0.02, sell 0.03) closes the trip with the part
that flattens it (0.02) and opens the next with the rest (short 0.01); its fee is split
between the two in the same proportion.

A trip's figures, all in the pair's settlement coin:

- ``gross``: what its fills paid and received, sells minus buys (quantity x price): over a
  flat-to-flat trip this is its realized PnL before fees, independent of how the venue
  nets the positions of several strategies on one pair;
- ``fees``: the sum of its fills' fees;
- ``net`` = gross − fees; a trip wins when net > 0 and loses when net < 0;
- holding time: from its first fill to the fill that closed it.

A trip still open at the end is counted as ``open`` and left out of the statistics.

Written here rather than taken from a library: the trade-statistics packages (empyrical,
quantstats, pyfolio) work on return series of floats, not on fills in Decimals, and none
defines a round trip per strategy on a venue that nets positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, Final

import attrs

from framework.venue.codec import plain_decimal

__all__ = [
    "UNATTRIBUTED",
    "RoundTrip",
    "TripFill",
    "round_trips",
    "statistics_by_coin",
    "trip_statistics",
]

UNATTRIBUTED: Final = "(unattributed)"
"""The strategy of a fill whose order no strategy was seen to own."""

_ZERO: Final = Decimal(0)
_AMOUNT: Final = Decimal("0.00000001")
_RATIO: Final = Decimal("0.0001")
_PCT: Final = Decimal("0.01")
_SECONDS: Final = Decimal("0.001")


@attrs.frozen(slots=True)
class TripFill:
    """One fill as round trips see it: whose, where, when, which side, how much, at what."""

    strategy: str
    pair: str
    ts: int
    is_long: bool
    quantity: Decimal
    price: Decimal
    fee: Decimal


@attrs.frozen(slots=True)
class RoundTrip:
    """One position of a strategy on a pair, from flat back to flat (see module)."""

    strategy: str
    pair: str
    is_long: bool
    """The side it opened on."""
    opened_ms: int
    closed_ms: int | None
    """None while it is still open."""
    max_quantity: Decimal
    """The largest absolute position during the trip."""
    fills: int
    gross: Decimal
    fees: Decimal

    @property
    def net(self) -> Decimal:
        """gross − fees."""
        return self.gross - self.fees

    @property
    def holding_ms(self) -> int | None:
        """From the first fill to the closing one (None while open)."""
        return None if self.closed_ms is None else self.closed_ms - self.opened_ms


@attrs.define(slots=True)
class _Open:
    is_long: bool
    opened_ms: int
    position: Decimal = _ZERO
    max_quantity: Decimal = _ZERO
    fills: int = 0
    gross: Decimal = _ZERO
    fees: Decimal = _ZERO

    def add(self, signed: Decimal, price: Decimal, fee: Decimal) -> None:
        self.position += signed
        self.max_quantity = max(self.max_quantity, abs(self.position))
        self.fills += 1
        self.gross -= signed * price
        self.fees += fee

    def trip(self, strategy: str, pair: str, closed_ms: int | None) -> RoundTrip:
        return RoundTrip(
            strategy,
            pair,
            self.is_long,
            self.opened_ms,
            closed_ms,
            self.max_quantity,
            self.fills,
            self.gross,
            self.fees,
        )


def round_trips(fills: Iterable[TripFill]) -> list[RoundTrip]:
    """Every round trip of the fills (taken in their order): closed ones, then open ones."""
    closed: list[RoundTrip] = []
    current: dict[tuple[str, str], _Open] = {}
    for f in fills:
        key = (f.strategy, f.pair)
        signed = f.quantity if f.is_long else -f.quantity
        trip = current.get(key)
        if trip is None:
            trip = current[key] = _Open(f.is_long, f.ts)
        after = trip.position + signed
        if after and (after > 0) != (trip.position > 0) and trip.position:
            # Through zero: the part that flattens closes this trip, the rest opens the next.
            part = -trip.position
            fee = (f.fee * abs(part) / f.quantity).quantize(_AMOUNT, rounding=ROUND_HALF_EVEN)
            trip.add(part, f.price, fee)
            closed.append(trip.trip(f.strategy, f.pair, f.ts))
            trip = current[key] = _Open(after > 0, f.ts)
            trip.add(after, f.price, f.fee - fee)
            continue
        trip.add(signed, f.price, f.fee)
        if not trip.position:
            closed.append(trip.trip(f.strategy, f.pair, f.ts))
            del current[key]
    return closed + [trip.trip(s, p, None) for (s, p), trip in sorted(current.items())]


def _q(value: Decimal, quantum: Decimal) -> str:
    return plain_decimal(value.quantize(quantum, rounding=ROUND_HALF_EVEN))


def trip_statistics(trips: Sequence[RoundTrip]) -> dict[str, Any]:
    """report.json's statistics of some round trips (closed ones; open ones only counted).

    ``win_rate_pct``: winners per closed trip, in %; ``average_win`` / ``average_loss``:
    the mean net of the winners / losers (None without any); ``profit_factor``: the winners'
    net over the losers' lost (None without a loser); holding times in seconds.
    """
    done = [t for t in trips if t.closed_ms is not None]
    wins = [t.net for t in done if t.net > 0]
    losses = [t.net for t in done if t.net < 0]
    won, lost = sum(wins, _ZERO), sum(losses, _ZERO)
    holding = [Decimal(t.holding_ms or 0) / 1000 for t in done]
    gross = sum((t.gross for t in done), _ZERO)
    fees = sum((t.fees for t in done), _ZERO)
    return {
        "closed": len(done),
        "open": len(trips) - len(done),
        "wins": len(wins),
        "losses": len(losses),
        "win_rate_pct": _q(Decimal(len(wins) * 100) / len(done), _PCT) if done else None,
        "average_win": _q(won / len(wins), _AMOUNT) if wins else None,
        "average_loss": _q(lost / len(losses), _AMOUNT) if losses else None,
        "profit_factor": _q(won / -lost, _RATIO) if losses else None,
        "gross_pnl": plain_decimal(gross),
        "fees": plain_decimal(fees),
        "net_pnl": plain_decimal(gross - fees),
        "average_holding_s": _q(sum(holding, _ZERO) / len(done), _SECONDS) if done else None,
        "max_holding_s": _q(max(holding), _SECONDS) if done else None,
    }


def statistics_by_coin(
    trips: Sequence[RoundTrip], coin_of: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Per settlement coin: the statistics of all its trips and of each strategy's."""
    out: dict[str, dict[str, Any]] = {}
    for coin in sorted(set(coin_of.values())):
        mine = [t for t in trips if coin_of.get(t.pair) == coin]
        if not mine:
            continue
        names = sorted({t.strategy for t in mine})
        out[coin] = {
            "all": trip_statistics(mine),
            "by_strategy": {
                n: trip_statistics([t for t in mine if t.strategy == n]) for n in names
            },
        }
    return out
