"""Doctor's market-data check: does the market a config asks for reach this machine?

A strategy that reads ``self.market`` and a risk gate that prices market orders by the mark
need the venue's market events; a feed that is silent makes every market order on its pair
refused as stale (9007). The check runs the node's own market pieces, not a copy: one
:class:`~framework.live.market_stream.MarketStream` session with the config's subscriptions
and one :class:`~framework.live.market_polls.PricePoll` of each pair's mark (when the config
polls it). It passes when every pair with channels hears a market event, and every polled
mark is read, within ``market.stale_after_s`` of subscribing (at most 30 s): the same bound
past which the node would refuse market orders.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, Literal

import anyio

from framework.config import Config
from framework.engine.clock import Clock
from framework.live.market_polls import PricePoll
from framework.live.market_stream import MarketStream, subscriptions_of
from framework.live.rest import RestClient
from framework.venue.market import Bar, Book, MarketRecord, MarkPrice, Trade

__all__ = ["MAX_WAIT_S", "market_flowing"]

MAX_WAIT_S: Final = 30.0
"""The check waits at most this long for the market, whatever stale_after_s says."""
_KIND: Final = {Trade: "trade", Book: "book", Bar: "bar", MarkPrice: "mark"}
_ORDER: Final = ("trade", "book", "bar", "mark", "index")
Outcome = tuple[Literal["ok", "warn", "fail", "skip"], str, str]


def _shown(record: MarketRecord) -> str:
    """A record in a few words: ``trade 2000.5``, ``book 1999.9/2000.1``, ``bar 1MIN 2000``."""
    if isinstance(record, Book):
        return f"book {record.best_bid}/{record.best_ask}"
    if isinstance(record, Bar):
        return f"bar {record.period} {record.close}"
    return f"{_KIND.get(type(record), 'index')} {record.price}"


async def market_flowing(config: Config, ws_url: str, rest: RestClient, clock: Clock) -> Outcome:
    """The market-data finding of config (see the module)."""
    market = config.market
    if not market.pairs:
        if market.source is not None:
            return "skip", "market-data", f"only a user source ({market.source}) feeds it"
        return "skip", "market-data", "no `market:` section: strategies hear no market data"
    from framework.live.market_feed import market_url

    first: dict[str, dict[str, MarketRecord]] = {pair: {} for pair in market.pairs}
    heard_at: dict[str, float] = {}
    began = time.monotonic()
    done = anyio.Event()
    subscriptions = subscriptions_of(market)
    wanted = {s.pair for s in subscriptions}
    failures: list[str] = []
    polls = [
        PricePoll(rest.send, "mark", pair, rules.mark_interval_s, on_record=_keep(first),
                  told=lambda kind, detail: failures.append(f"{kind} price: {detail}"))
        for pair, rules in market.pairs.items() if rules.mark_interval_s > 0
    ]  # fmt: skip
    polled = anyio.Event()
    out = len(polls)

    async def poll_once(poll: PricePoll) -> None:
        nonlocal out
        await poll.poll()  # bounded by the REST client's timeout; a failure is told
        out -= 1
        if not out:
            polled.set()

    def on_record(record: MarketRecord) -> None:
        _keep(first)(record)
        heard_at.setdefault(record.pair, time.monotonic() - began)
        if wanted <= heard_at.keys():
            done.set()

    states: list[tuple[str, str]] = []
    stream = None
    if subscriptions:
        stream = MarketStream(
            market_url(ws_url, market.ws_path),
            rest.builder,
            subscriptions,
            on_record=on_record,
            clock=clock,
            on_state=lambda state, detail: states.append((state, detail)),
            ack_timeout_s=config.stream.ack_timeout_s,
            open_timeout_s=config.venue.timeout_s,
        )
    bound = min(max(market.stale_after(p) or 0.0 for p in market.pairs), MAX_WAIT_S)
    limit = bound + config.stream.ack_timeout_s
    async with anyio.create_task_group() as tg:
        if stream is not None:
            tg.start_soon(stream.run)
        else:
            done.set()
        for poll in polls:
            tg.start_soon(poll_once, poll)
        if not polls:
            polled.set()
        with anyio.move_on_after(limit):
            await done.wait()
            await polled.wait()
        tg.cancel_scope.cancel()
    return _finding(first, wanted, heard_at, states, failures, stream, limit)


def _keep(first: dict[str, dict[str, MarketRecord]]) -> Callable[[MarketRecord], None]:
    """A record sink keeping the first record of each kind per pair."""

    def keep(record: MarketRecord) -> None:
        first.setdefault(record.pair, {}).setdefault(_KIND.get(type(record), "index"), record)

    return keep


def _finding(
    first: dict[str, dict[str, MarketRecord]],
    wanted: set[str],
    heard_at: dict[str, float],
    states: list[tuple[str, str]],
    failures: list[str],
    stream: MarketStream | None,
    limit: float,
) -> Outcome:
    """The one line of the market-data check."""
    if stream is not None and not any(state == "connected" for state, _ in states):
        why = next((d for s, d in reversed(states) if s in ("failed", "lost")), "")
        return "fail", "market-data", f"{stream.url}: {why or f'not subscribed within {limit:g} s'}"
    silent = sorted(wanted - heard_at.keys())
    if silent:
        return "fail", "market-data", f"{', '.join(silent)}: no market event within {limit:g} s" \
            " of subscribing: market orders on it would be refused as stale"  # fmt: skip
    parts = []
    for pair, kinds in first.items():
        if kinds:
            seen = ", ".join(_shown(kinds[k]) for k in _ORDER if k in kinds)
            after = f" (first after {heard_at[pair]:.1f} s)" if pair in heard_at else ""
            parts.append(f"{pair}: {seen}{after}")
    text = "; ".join(parts) or "nothing asked"
    if failures:
        return "warn", "market-data", f"{text}; but {'; '.join(failures)}"
    return "ok", "market-data", text
