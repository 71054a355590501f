"""Start-up: the node's first calls to the venue, before any strategy starts.

One place says what fails there in one line (a FatalError: bad key, unreachable venue), and
how the venue's open orders are adopted: the journal's intents are restored first, then each
pair's open-order list (an extension beyond SPEC.md) is reconciled with them, so strategies
see what rests in ``open_orders()`` at on_start (:mod:`framework.engine.cancels`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from framework.engine.execution import ExecutionEngine
from framework.engine.venue import Venue
from framework.live.poller import MatchPoller
from framework.venue.errors import AuthError, ExtensionUnavailable, FrameworkError, SendFailed
from framework.venue.public_info import public_request

__all__ = ["FatalError", "adopt_open_orders", "initial_sync", "reach_market"]

log = logging.getLogger("framework.node")


class FatalError(FrameworkError):
    """The node cannot run (found at start-up); the message is one line."""


async def initial_sync(
    resync: Callable[[], Awaitable[None]],
    poller: MatchPoller,
    engine: ExecutionEngine,
    venue: Venue,
    *,
    pairs: Sequence[str],
    base_url: str,
) -> None:
    """Positions and balances, the match cursors, then the open orders; FatalError on failure."""
    try:
        await resync()
        await poller.initialize()
        await adopt_open_orders(engine, venue, pairs)
    except AuthError as exc:
        raise FatalError(f"the venue refused the API key or signature: {exc}") from None
    except SendFailed as exc:
        raise FatalError(f"cannot reach the venue at {base_url}: {exc}") from None
    except (FrameworkError, OSError) as exc:
        raise FatalError(f"first sync with the venue failed: {exc}") from None
    log.info("initial sync done", extra={"pairs": len(pairs)})


async def reach_market(send: Callable[[Any], Awaitable[Any]], base_url: str) -> None:
    """A paper node's one look at the venue whose market it trades on: any HTTP answer to a
    public GET will do; none is the FatalError a live node's first sync gives."""
    try:
        await send(public_request("/"))
    except SendFailed as exc:
        raise FatalError(
            f"cannot reach the venue at {base_url} (paper mode trades on its market): {exc}"
        ) from None


async def adopt_open_orders(engine: ExecutionEngine, venue: Venue, pairs: Sequence[str]) -> None:
    """Restore the journal's intents, then adopt each pair's open orders (see module).

    Orders the journal knows are adopted; those the venue does not list any more are
    queried; the others are external (counted, never touched). A venue without the
    extension turns cancels off in one log line; a pair whose list cannot be read is said
    in one warning and adopts nothing.
    """
    engine.restore()
    for pair in pairs:
        try:
            records = await venue.all_open_orders(pair)
        except ExtensionUnavailable as exc:
            engine.cancels.turn_off(str(exc))
            return
        except (FrameworkError, OSError) as exc:
            log.warning("open orders of %s not read (%s); none adopted", pair, exc)
            continue
        counts = engine.adopt(pair, list(records))
        if any(counts.values()):
            log.info("open orders of %s", pair, extra=counts)
        if counts["orphans"]:
            log.warning(
                "%s: %d resting orders carry this node's client ids (%s...) but the journal does"
                " not know them (a new, replaced or damaged journal): tracked as this node's,"
                " owned by no strategy (the kill switch and cancel_on_stop cancel them; their"
                " fills are linked)",
                pair,
                counts["orphans"],
                engine.node,
            )
        if counts["external"]:
            log.warning(
                "%s: %d resting orders at the venue were not placed by this node (external;"
                " never touched)",
                pair,
                counts["external"],
            )
