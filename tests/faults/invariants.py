"""The nine invariants of a whole run, checked against the twin's ground truth.

1. every intent ends in exactly one terminal state (FILLED, REJECTED, LOST, AMBIGUOUS; an
   ACCEPTED before FILLED is fine), or stays a loud UNKNOWN; an AMBIGUOUS update says
   "k of n" filled;
2. no clientOrderId reached the venue with two different payloads;
3. at most one venue order per intent: executed at most once, never sent again after a call
   the venue may have executed (sends refused before accepting, 2329 and 503, do not count),
   never refused by the venue as an already used id;
4. each match reaches the strategy once (no match id twice in on_match);
5. the node's position equals the twin's once quiet;
6. no older balance overwrote a newer one: the node's balance equals the twin's, and its
   logId is the twin's newest (not above it, and below it only after a reconnect lost pushes);
7. an order the venue executed is never REJECTED, and a REJECTED carries a code SPEC section 7
   lists (or one of the framework's own 9xxx codes), never an HTTP status or unlisted code;
8. no intent is FILLED unless the venue executed it; an update's order_id, and the order of
   a match linked to an intent, are the twin's orderId for that clientOrderId; a group
   match's candidates include the intent it filled; an AMBIGUOUS group's "k of n" counts the
   members the venue executed;
9. every fill the twin has for the account reaches the strategy.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any, Final

import orjson

from framework import OrderUpdate
from framework.engine.risk import FRAMEWORK_CODES
from tests.faults.harness import COIN, QUIET_TIMEOUT_S, SEED_ID, TERMINAL, Run
from tests.faults.trader import PAIR
from tests.faults.truth import twin_net_quantity

K_OF_N: Final = re.compile(r"\b(\d+) of (\d+)\b")
SPEC_CODES: Final = frozenset(
    {2001, 2002, 2102, 2122, 2123, 2124, 2201, 2301, 2302, 2303, 2304, 2305, 2306, 2307}
    | {2310, 2312, 2316, 2317, 2318, 2325, 2329, 2330, 2331, 4001}
)
"""The codes of SPEC section 7: the only venue codes that refuse."""
ENGINE_FIGURES: Final = (
    "orders_unknown",
    "orders_ambiguous",
    "orders_lost",
    "retries",
    "matches_held",
    "matches_ambiguous",
)
TWIN_TRAFFIC: Final = frozenset(
    {"rest_calls", "batch_calls", "orders_accepted", "orders_refused", "pushes_sent"}
    | {"ws_connections", "subscriptions"}
)


def some(items: Iterable[Any], n: int = 4) -> str:
    """The first few items, and how many there are."""
    items = list(items)
    shown = ", ".join(str(i) for i in items[:n])
    return shown + (f", ... ({len(items)} in all)" if len(items) > n else "")


def histories(updates: Iterable[OrderUpdate]) -> dict[str, list[OrderUpdate]]:
    """The updates of each client order id, in order."""
    out: dict[str, list[OrderUpdate]] = defaultdict(list)
    for u in updates:
        out[u.client_order_id].append(u)
    return out


def terminal_problems(submitted: list[str], updates: list[OrderUpdate]) -> str | None:
    """Invariant 1 over a list of submitted ids and the updates delivered, or None."""
    history = histories(updates)
    never: dict[str, list[str]] = {}
    twice: dict[str, list[str]] = {}
    for coid in submitted:
        statuses = [str(u.status) for u in history.get(coid, [])]
        terminal = [s for s in statuses if s in TERMINAL]
        if len(terminal) == 1 and statuses[-1] in TERMINAL:
            continue
        if not terminal and statuses and statuses[-1] == "UNKNOWN":
            continue  # a loud UNKNOWN
        (twice if len(terminal) > 1 else never)[coid] = statuses
    strangers = set(history) - set(submitted)
    vague = [
        (u.client_order_id, u.msg)
        for u in updates
        if str(u.status) == "AMBIGUOUS"
        and not ((m := K_OF_N.search(u.msg or "")) and int(m[1]) <= int(m[2]))
    ]
    if not (never or twice or strangers or vague):
        return None
    parts = []
    if never:
        last = Counter(s[-1] if s else "none" for s in never.values())
        parts.append(f"{len(never)} never terminal (last status {dict(last)})")
    if twice:
        parts.append(
            f"{len(twice)} with several terminal updates "
            f"(e.g. {some(f'{c}:{s}' for c, s in twice.items())})"
        )
    if strangers:
        parts.append(f"{len(strangers)} ids updated but never submitted ({some(strangers)})")
    if vague:
        parts.append(f"{len(vague)} AMBIGUOUS updates without 'k of n' (e.g. {some(vague, 2)})")
    return (
        f"1 one terminal state: {len(never) + len(twice)} of {len(submitted)} intents broke it: "
        + "; ".join(parts)
    )


def violations(run: Run) -> list[str]:
    """Every broken invariant of a finished run, one line each, with counts."""
    out: list[str] = []
    trader, twin, truth = run.trader, run.twin, run.truth
    submitted = trader.submitted
    n = len(submitted)
    history = histories(trader.updates)
    executed = {c: oid for c, oid in truth.executed().items() if c != SEED_ID}
    received = truth.received()

    if (problem := terminal_problems(submitted, trader.updates)) is not None:
        out.append(problem)

    payloads: dict[str, set[bytes]] = defaultdict(set)
    for coid, payload in received:
        payloads[coid].add(payload)
    changed = sorted(c for c, p in payloads.items() if len(p) > 1)
    if changed:
        out.append(
            f"2 one payload per id: {len(changed)} of {len(payloads)} clientOrderIds reached "
            f"the venue with two different payloads ({some(changed)})"
        )

    sends = truth.effective_sends()
    resent = sorted(c for c, k in sends.items() if k > 1)
    doubled = sorted(c for c, ids in truth.accepted.items() if len(ids) > 1)
    if resent or doubled or truth.duplicates:
        out.append(
            f"3 one venue order per intent: {len(resent)} of {len(sends)} ids sent again after "
            f"a call the venue may have executed ({some(f'{c}x{sends[c]}' for c in resent)}); "
            f"{len(doubled)} executed twice; {len(truth.duplicates)} refused by the venue as "
            f"already used ({some(truth.duplicates)})"
        )

    delivered = Counter(m.id for m in trader.matches)
    dups = sorted(i for i, k in delivered.items() if k > 1)
    if dups:
        out.append(
            f"4 each match once: {len(dups)} of {len(delivered)} match ids reached on_match "
            f"more than once ({some(f'{i}x{delivered[i]}' for i in dups)})"
        )

    mine, theirs = run.node.portfolio.net_quantity(PAIR), twin_net_quantity(twin, PAIR)
    if mine != theirs:
        out.append(f"5 positions agree: the node holds {mine} {PAIR}, the twin {theirs}")

    assert twin.demo_user_id is not None
    balance = run.node.portfolio.balance(COIN)
    venue = twin.exchange.balance(twin.demo_user_id, COIN)
    assert venue is not None
    newest = twin.exchange.last_log_id
    log_id = run.node.portfolio.log_id(COIN)
    got = None if balance is None else (balance.available_amount, balance.frozen_amount)
    # Without a reconnect no push was lost, so the newest balance push must have been taken.
    reconnected = run.summary.get("reconnects", 0) > 0
    behind = log_id != newest and not reconnected
    if got != (venue.available, venue.frozen) or (log_id is not None and log_id > newest) or behind:
        stale = run.node.portfolio.counters()["stale_account_pushes"]
        out.append(
            f"6 newest balance: the node has {COIN} (available, frozen) {got} at logId {log_id}, "
            f"the twin {(venue.available, venue.frozen)} at logId {newest} "
            f"({stale} stale pushes dropped)"
        )

    refused = sorted(c for c in executed if any(str(u.status) == "REJECTED" for u in history[c]))
    unlisted = Counter(
        u.code
        for u in trader.updates
        if str(u.status) == "REJECTED" and u.code not in SPEC_CODES | FRAMEWORK_CODES.keys()
    )
    if refused or unlisted:
        codes = Counter(u.code for c in refused for u in history[c] if str(u.status) == "REJECTED")
        out.append(
            f"7 executed never REJECTED: {len(refused)} of {len(executed)} orders the venue "
            f"executed were reported REJECTED (codes {dict(codes)}); {sum(unlisted.values())} "
            f"REJECTED updates carry a code SPEC 7 does not list ({dict(unlisted)})"
        )

    ghosts = sorted(
        c for c in submitted
        if c not in executed and any(str(u.status) == "FILLED" for u in history[c])
    )  # fmt: skip
    wrong_ids = sorted(
        {
            u.client_order_id
            for u in trader.updates
            if u.order_id is not None and u.order_id != executed.get(u.client_order_id)
        }
    )
    wrong_links = [
        m.id
        for m in trader.matches
        if m.client_order_id is not None and m.entrust_id != executed.get(m.client_order_id)
    ]
    owner = {oid: c for c, oid in executed.items()}
    outside = [
        m.id
        for m in trader.matches
        if getattr(m, "candidates", ()) and owner.get(m.entrust_id) not in m.candidates
    ]
    miscounted = []
    for u in trader.updates:
        group = getattr(u, "group", ())
        if str(u.status) != "AMBIGUOUS" or not group or group[0] != u.client_order_id:
            continue  # one check per group: at its first member's update
        m = K_OF_N.search(u.msg or "")
        said = int(m[1]) if m else None
        truly = sum(1 for c in group if c in executed)
        if said != truly:
            miscounted.append(f"{said}/{truly} of {len(group)}")
    if ghosts or wrong_ids or wrong_links or outside or miscounted:
        out.append(
            f"8 FILLED only if executed: {len(ghosts)} intents FILLED that the venue never "
            f"executed; {len(wrong_ids)} intents with an update naming another order's id; "
            f"{len(wrong_links)} matches linked to an intent whose order they are not; "
            f"{len(outside)} group matches whose candidates leave out the intent they filled; "
            f"{len(miscounted)} AMBIGUOUS groups whose 'k of n' is not what the venue executed "
            f"(said/executed: {some(miscounted)}) "
            f"(of {n} intents, {len(executed)} executed, {len(trader.matches)} matches)"
        )

    listed = run.listed()
    missing = sorted(listed - set(delivered))
    if missing:
        out.append(
            f"9 every fill delivered: {len(missing)} of {len(listed)} matches the venue has "
            f"never reached on_match ({some(missing)})"
        )
    return out


def figures(run: Run) -> dict[str, Any]:
    """The run in numbers, for messages and the report."""
    trader, twin, truth = run.trader, run.twin, run.truth
    counters = run.node.engine.counters() if run.node.engine is not None else {}
    executed = truth.executed()
    return {
        "case": run.case.name,
        "intents": len(trader.submitted),
        "final": dict(Counter(trader.final.get(c, "none") for c in trader.submitted)),
        "executed": sum(1 for c in trader.submitted if c in executed),
        "batch_calls": len(truth.calls),
        "answers": truth.answers(),
        "fills_listed": len(run.listed()),
        "fills_delivered": len({m.id for m in trader.matches} & run.listed()),
        "engine": {k: counters.get(k, 0) for k in ENGINE_FIGURES},
        "twin_faults": {
            k: v for k, v in twin.counters.snapshot().items() if v and k not in TWIN_TRAFFIC
        },
        "quiet": run.quiet,
        "quiet_s": round(run.quiet_s, 2),
        "run_s": round(run.elapsed_s, 2),
    }


def assert_run(run: Run) -> None:
    """Fail with every broken invariant (and a fault that never fired), with the figures."""
    problems = violations(run)
    if run.case.fired is not None and not run.case.fired(run):
        problems.insert(0, "the case's fault never fired: the run proves nothing")
    shown = orjson.dumps(figures(run)).decode()
    print("figures", shown)
    if problems and not run.quiet:
        problems.append(f"(the run was not quiet within {QUIET_TIMEOUT_S:g} s)")
    assert not problems, (
        f"{run.case.name}: {len(problems)} problems\n  "
        + "\n  ".join(problems)
        + f"\n  figures: {shown}"
    )
