"""The comparison of a replay with what the live node journaled, step by step.

Why intents first: what a strategy decided is what it asked for, in order. The k-th intent
of the replay must be the live node's k-th: the same clientOrderId, strategy, pair, side,
size, price and kind, from the session's start (the warm-up counts: a strategy that already
differs before T1 is not the one that ran). Then the cancels: an order the replay cancels
must be one live asked to cancel (the recording holds the answers of live's cancel calls,
their queries naming the orders; the journal only keeps how an order ended, and a cancel
that came after the fill leaves it FILLED). Live cancels the replay did not ask for are not
checked: the live node's stop cancels too (``cancel_on_stop``), and the replay does not stop. Then the state at T1: the orders the replay
holds open when T1 is reached must be the ones the journal held open then. The first
divergence is reported with the 20 recorded events before it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl

import attrs

from framework.incident.replay import Made, ReplayOutcome, ReplayState, describe, replay_bundle
from framework.recording import LINE_ERRORS, decode_line
from framework.venue.requests import (
    BATCH_CANCEL_PATH,
    BATCH_CANCEL_WITH_RESULTS_PATH,
    CANCEL_BY_CLIENT_ID_PATH,
    CANCEL_PATH,
)

__all__ = [
    "CONTEXT",
    "MAX_PASSES",
    "Divergence",
    "Verdict",
    "compare",
    "live_ticks",
    "render",
    "replay_and_compare",
]

CONTEXT: Final = 20
"""Recorded events shown before a divergence."""


@attrs.frozen
class Divergence:
    """The first step at which the replay differs: where, what live did, what the replay did."""

    event: int
    what: str
    live: str
    replay: str


@attrs.frozen
class Verdict:
    """A comparison's result: matched (divergence None) or the first divergence."""

    events: int
    intents: int
    divergence: Divergence | None


def _live_text(i: Mapping[str, Any]) -> str:
    side = "buy" if i["is_long"] else "sell"
    price = "market" if i["is_market"] else f"@ {i['price']}"
    return f"{i['client_order_id']} {i['strategy']} {i['pair']} {side} {i['quantity']} {price}"


def _replay_text(m: Made) -> str:
    intent = m.intent
    side = "buy" if intent.is_long else "sell"
    price = "market" if intent.is_market else f"@ {intent.price}"
    return f"{m.client_order_id} {m.strategy} {intent.pair} {side} {intent.quantity} {price}"


def _same(live: Mapping[str, Any], m: Made, node: str) -> bool:
    intent = m.intent
    live_price = None if live["price"] is None else Decimal(str(live["price"]))
    coid = str(live["client_order_id"])
    chosen = not coid.startswith(node)  # a strategy's own id: it must be the same
    return (
        (not chosen or coid == m.client_order_id)
        and live["strategy"] == m.strategy
        and live["pair"] == intent.pair
        and bool(live["is_long"]) == intent.is_long
        and Decimal(str(live["quantity"])) == intent.quantity
        and bool(live["is_market"]) == intent.is_market
        and (intent.is_market or live_price == intent.price)
    )


def _intents(outcome: ReplayOutcome, node: str) -> Divergence | None:
    """The first intent, over all strategies (by event), that differs from live's."""
    live_of: dict[str, list[Mapping[str, Any]]] = {}
    for entry in outcome.journal["intents"]:
        live_of.setdefault(str(entry["strategy"]), []).append(entry)
    made_of: dict[str, list[Made]] = {}
    for m in outcome.made:
        made_of.setdefault(m.strategy, []).append(m)
    sent = {coid for _, kind, coids in outcome.sent if kind == "create" for coid in coids}
    found: list[Divergence] = []
    for strategy in sorted(set(live_of) | set(made_of)):
        theirs_all, ours_all = live_of.get(strategy, []), made_of.get(strategy, [])
        for k in range(max(len(theirs_all), len(ours_all))):
            ours = ours_all[k] if k < len(ours_all) else None
            theirs = theirs_all[k] if k < len(theirs_all) else None
            what = f"intent {k + 1} of {strategy}"
            event = ours.event if ours is not None else outcome.events
            if ours is None or theirs is None or not _same(theirs, ours, node):
                found.append(
                    Divergence(
                        event,
                        what,
                        "nothing" if theirs is None else _live_text(theirs),
                        "nothing" if ours is None else _replay_text(ours),
                    )
                )
                break
            live_sent = bool(theirs["sent"]) or theirs["order_id"] is not None
            if live_sent != (ours.client_order_id in sent):
                found.append(
                    Divergence(
                        event,
                        f"{what}: its outcome",
                        _live_text(theirs) + (" sent" if live_sent else " not sent"),
                        _replay_text(ours) + (" sent" if not live_sent else " not sent"),
                    )
                )
                break
    return min(found, key=lambda d: d.event) if found else None


def compare(outcome: ReplayOutcome) -> Verdict:
    """The replay against the live slice: matched, or the first divergence."""
    made = outcome.made
    t1 = int(outcome.manifest["window"]["from_ms"])
    node = str(outcome.journal["node"])
    in_window = sum(1 for m in made if m.ms >= t1)

    def diverged(divergence: Divergence) -> Verdict:
        return Verdict(outcome.window_events, in_window, divergence)

    first = _intents(outcome, node)
    if first is not None:
        return diverged(first)
    # Every intent matched its live one, strategy by strategy: the replay's ids name them.
    live_of: dict[str, list[Mapping[str, Any]]] = {}
    for entry in outcome.journal["intents"]:
        live_of.setdefault(str(entry["strategy"]), []).append(entry)
    as_live = {m.client_order_id: live_of[m.strategy][m.rank - 1] for m in made}
    asked = _live_cancels(outcome.recording, outcome.journal["intents"])
    for ms, kind, coids in outcome.sent:
        if kind != "cancel":
            continue
        for coid in coids:
            theirs = as_live.get(coid)
            live_id = coid if theirs is None else str(theirs["client_order_id"])
            if live_id not in asked:
                status = None if theirs is None else theirs.get("status")
                return diverged(
                    Divergence(
                        _event_at(made, ms, outcome.events),
                        "cancel",
                        f"{live_id} never cancelled (it ended {status or 'unknown'})",
                        f"cancel {coid}",
                    )
                )
    expected = outcome.journal.get("open_at_t1")
    found = outcome.open_at_t1
    if found is not None and expected is not None:
        mapped = sorted(str(as_live[c]["client_order_id"]) if c in as_live else c for c in found)
        if sorted(expected) != mapped:
            return diverged(
                Divergence(
                    _event_at(made, t1, outcome.events),
                    "open orders at --from",
                    ", ".join(sorted(expected)) or "none",
                    ", ".join(mapped) or "none",
                )
            )
    return Verdict(outcome.window_events, in_window, None)


_CANCEL_PATHS: Final = frozenset(
    {CANCEL_PATH, CANCEL_BY_CLIENT_ID_PATH, BATCH_CANCEL_PATH, BATCH_CANCEL_WITH_RESULTS_PATH}
)


def _live_cancels(recording: bytes, intents: Sequence[Mapping[str, Any]]) -> set[str]:
    """The clientOrderIds live asked to cancel: the recorded answers of its cancel calls
    name them (entrustId, entrustIds or clientOrderId in the query)."""
    by_order = {str(i["order_id"]): str(i["client_order_id"]) for i in intents if i["order_id"]}
    asked: set[str] = set()
    for line in recording.splitlines():
        if b"ancel" not in line:
            continue
        try:
            record = decode_line(line)
        except LINE_ERRORS:
            continue
        if record.path not in _CANCEL_PATHS:
            continue
        for key, value in parse_qsl(record.query or ""):
            if key == "clientOrderId":
                asked.add(value)
            elif key in ("entrustId", "entrustIds"):
                asked.update(by_order.get(v, v) for v in value.split(","))
    return asked


def _event_at(made: Sequence[Made], ms: int, default: int) -> int:
    before = [m.event for m in made if m.ms <= ms]
    return before[-1] if before else default


MAX_PASSES: Final = 3
"""Replays run at most by :func:`replay_and_compare` (the first, then the calibrated ones)."""


def live_ticks(outcome: ReplayOutcome, upto: int) -> dict[tuple[str, str, int], int]:
    """The timer ticks (up to event upto) whose intent live made later than the tick's
    nominal time: the tick -> the ms live made it at."""
    live_of: dict[str, list[Mapping[str, Any]]] = {}
    for entry in outcome.journal["intents"]:
        live_of.setdefault(str(entry["strategy"]), []).append(entry)
    found: dict[tuple[str, str, int], int] = {}
    for m in outcome.made:
        if m.fire is None or m.event > upto:
            continue
        theirs = live_of.get(m.strategy, [])
        if m.rank <= len(theirs):
            created = int(theirs[m.rank - 1]["created_ms"])
            if created > m.fire[2] + 1:
                found.setdefault(m.fire, created)
    return found


def replay_and_compare(
    bundle: str | Path,
    *,
    break_at: int | None = None,
    on_break: Callable[[ReplayState], None] | None = None,
) -> tuple[ReplayOutcome, Verdict]:
    """Replay and compare; on a divergence, replay again with the timer ticks that made
    intents run when live made them (a loaded event loop runs a tick late, after frames
    that came meanwhile), keeping the pass that went furthest. With break_at, a last pass
    stops there."""
    outcome = replay_bundle(bundle)
    verdict = compare(outcome)
    delays: dict[tuple[str, str, int], int] = {}
    for _ in range(MAX_PASSES - 1):
        if verdict.divergence is None:
            break
        found = {**live_ticks(outcome, verdict.divergence.event), **delays}
        if found == delays:
            break
        again = replay_bundle(bundle, delays=found)
        second = compare(again)
        if second.divergence is not None and second.divergence.event <= verdict.divergence.event:
            break
        outcome, verdict, delays = again, second, found
    if break_at is not None:
        outcome = replay_bundle(bundle, break_at=break_at, on_break=on_break, delays=delays)
        verdict = compare(outcome)
    return outcome, verdict


def _events_before(recording: bytes, event: int) -> list[str]:
    lines = recording.splitlines()
    first = max(0, event - CONTEXT)
    out = []
    for number in range(first, min(event, len(lines))):
        try:
            record = decode_line(lines[number])
        except LINE_ERRORS:
            continue
        out.append(f"  {number + 1:>7} {int(record.ts)} {describe(record)}")
    return out


def render(verdict: Verdict, outcome: ReplayOutcome) -> str:
    """The closing text: "replay matched: ..." or the divergence and the events before it."""
    if verdict.divergence is None:
        return f"replay matched: {verdict.events} events, {verdict.intents} intents"
    d = verdict.divergence
    t1 = int(outcome.manifest["window"]["from_ms"])
    lines = [
        f"replay diverged at event {d.event}: {d.what}",
        f"  live:   {d.live}",
        f"  replay: {d.replay}",
        f"the {CONTEXT} events before it (number, ts, event):",
        *_events_before(outcome.recording, d.event),
    ]
    made_before = [m for m in outcome.made if m.event <= d.event]
    if made_before and made_before[-1].ms < t1:
        lines.append("(this is in the warm-up, before --from)")
    return "\n".join(lines)
