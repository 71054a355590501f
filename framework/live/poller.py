"""MatchPoller: scheduled match-result polls per pair (apscheduler 3.11), each match once.

Every ``interval_s`` an apscheduler interval job polls one pair (``max_instances=1`` and
``coalesce``, so a slow poll is never run twice at once and missed runs collapse into one);
a per-pair lock also serialises the job with :meth:`MatchPoller.poll_now`, the immediate poll
a resync asks for. The paging decisions are :class:`framework.engine.matches.MatchCursor`'s:
newest page first, then backward by ``matchId`` through a window below the newest id
delivered (``reread_ids``, ``reread_age_s``), because the venue may list a match late, after
a higher id.

New matches are handed to ``on_match`` oldest first. After each one its id is made durable
through the :class:`CursorStore` (the Journal), in the same commit as whatever the engine
buffered for it (a fill, or a match it holds until an answer names its order), so a restart
delivers nothing twice and misses nothing: a match is re-read and delivered after a restart
only when the process died between handing it over and that commit. On a first start the
cursor is set at the newest existing match, unless ``backfill`` asks for the whole history. A
venue whose newest match is below the stored cursor is not the venue the journal knew (a
fresh venue twin behind a kept journal): one warning, and the pair starts over there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Protocol

import anyio
import attrs
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from framework.engine.matches import MatchCursor
from framework.engine.venue import Venue
from framework.venue.errors import TransportError, VenueError
from framework.venue.models import MatchRecord

__all__ = ["CursorStore", "MatchPoller", "MemoryCursorStore", "PollerStats"]

log = logging.getLogger("framework.poller")


class CursorStore(Protocol):
    """Where match cursors survive restarts (framework.live.journal.Journal is one)."""

    def get_match_cursor(self, pair: str) -> int | None:
        """The newest match id delivered for pair, or None on a first start."""
        ...

    def load_match_window(self, pair: str) -> tuple[int | None, int | None, set[int]]:
        """(newest id delivered, window floor, ids delivered above the floor) of pair."""
        ...

    def mark_match_seen(self, pair: str, match_id: int) -> None:
        """Commit what is buffered and that match_id of pair was delivered."""
        ...

    def save_match_window(self, pair: str, high: int, floor: int | None) -> None:
        """Persist pair's newest id and window floor; forget delivered ids outside them."""
        ...


@attrs.define
class MemoryCursorStore:
    """A CursorStore kept in memory (tests, paper runs)."""

    cursors: dict[str, int] = attrs.field(factory=dict)
    floors: dict[str, int | None] = attrs.field(factory=dict)
    seen: dict[str, set[int]] = attrs.field(factory=dict)

    def get_match_cursor(self, pair: str) -> int | None:
        """The stored cursor of pair."""
        return self.cursors.get(pair)

    def load_match_window(self, pair: str) -> tuple[int | None, int | None, set[int]]:
        """The stored window of pair."""
        return self.cursors.get(pair), self.floors.get(pair), set(self.seen.get(pair, ()))

    def mark_match_seen(self, pair: str, match_id: int) -> None:
        """Remember a delivered id."""
        self.seen.setdefault(pair, set()).add(match_id)
        if match_id > self.cursors.get(pair, match_id - 1):
            self.cursors[pair] = match_id

    def save_match_window(self, pair: str, high: int, floor: int | None) -> None:
        """Store the window of pair."""
        self.cursors[pair] = high
        self.floors[pair] = floor
        low = floor if floor is not None else high
        self.seen[pair] = {i for i in self.seen.get(pair, ()) if low < i <= high}


@attrs.define
class PollerStats:
    """Counters of a MatchPoller."""

    polls: int = 0
    pages: int = 0
    matches: int = 0
    errors: int = 0
    ignored_records: int = 0
    late_matches: int = 0
    venue_resets: int = 0
    callback_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict."""
        return attrs.asdict(self)


class MatchPoller:
    """Polls the match results of each pair on a schedule and on demand; see module doc."""

    def __init__(
        self,
        venue: Venue,
        *,
        pairs: Sequence[str],
        interval_s: float,
        page_size: int,
        store: CursorStore,
        on_match: Callable[[MatchRecord], None],
        backfill: bool = False,
        on_state: Callable[[str, str], None] | None = None,
        reread_ids: int = 0,
        reread_age_s: float = 0.0,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(
                f"MatchPoller interval_s: expected a positive number, got {interval_s}"
            )
        if page_size < 1:
            raise ValueError(f"MatchPoller page_size: expected at least 1, got {page_size}")
        self._venue = venue
        self.pairs = tuple(dict.fromkeys(pairs))
        self.interval_s = interval_s
        self.page_size = page_size
        self._store = store
        self._on_match = on_match
        self.backfill = backfill
        self.reread_ids = reread_ids
        self.reread_age_ms = int(reread_age_s * 1000)
        self._on_state = on_state
        self._cursors: dict[str, MatchCursor] = {}
        self._locks = {pair: anyio.Lock() for pair in self.pairs}
        self._scheduler: AsyncIOScheduler | None = None
        self._owns_scheduler = False
        self.stats = PollerStats()
        self.state = "idle"
        self.last_error = ""
        self.last_poll: dict[str, datetime] = {}

    def __repr__(self) -> str:
        return f"MatchPoller(pairs={self.pairs!r}, interval_s={self.interval_s})"

    @property
    def scheduler(self) -> AsyncIOScheduler | None:
        """The scheduler holding the jobs, while started."""
        return self._scheduler

    def cursor(self, pair: str) -> int | None:
        """The newest match id published (or set at first start) for pair."""
        c = self._cursors.get(pair)
        return c.last_id if c is not None else self._store.get_match_cursor(pair)

    async def poll_now(self, pair: str | None = None) -> int:
        """Poll one pair (or every pair) now; returns how many new matches were published.

        Waits for a poll of the same pair in progress, so what it returns is up to date.
        REST errors propagate to the caller.
        """
        pairs = self.pairs if pair is None else (pair,)
        total = 0
        for p in pairs:
            total += await self._poll(p)
        return total

    async def initialize(self) -> None:
        """Load every pair's cursor; on a first start set it at the newest existing match.

        Call before strategies start trading, so no fill of theirs predates the cursor.
        """
        for pair in self.pairs:
            if self.cursor(pair) is None and not self.backfill:
                await self._poll(pair)

    async def _poll(self, pair: str) -> int:
        lock = self._locks.get(pair)
        if lock is None:
            raise ValueError(f"MatchPoller: pair {pair!r} is not polled (pairs: {self.pairs})")
        async with lock:
            cursor = self._cursors.get(pair)
            if cursor is None:
                high, floor, seen = self._store.load_match_window(pair)
                cursor = MatchCursor(
                    high,
                    backfill=self.backfill,
                    floor=floor,
                    seen=seen,
                    reread_ids=self.reread_ids,
                    reread_age_ms=self.reread_age_ms,
                )
                self._cursors[pair] = cursor
            self.stats.polls += 1
            rnd = cursor.start()
            while True:
                page = await self._venue.matches(
                    pair, match_id=rnd.request_id, page_size=self.page_size
                )
                self.stats.pages += 1
                if not rnd.feed(page):
                    break
            self.stats.ignored_records += rnd.ignored
            if rnd.reset:
                self.stats.venue_resets += 1
                log.warning(
                    "%s: the venue's newest match is below the stored cursor %s: it is not the"
                    " venue the journal knew (a fresh venue twin?); starting after its newest",
                    pair,
                    cursor.last_id,
                )
            store = self._store
            published, moved = cursor.publish(
                rnd, self._deliver, partial(store.mark_match_seen, pair)
            )
            self.stats.late_matches += rnd.late
            if moved and cursor.last_id is not None:
                store.save_match_window(pair, cursor.last_id, cursor.floor)
                if rnd.initialise:
                    log.info("%s starts after match %d (no backfill)", pair, cursor.last_id)
            self.stats.matches += published
            self.last_poll[pair] = datetime.now(UTC)
            return published

    def _deliver(self, match: MatchRecord) -> None:
        try:
            self._on_match(match)
        except Exception:
            # One bad match must not wedge the pair: every later poll would fail on it.
            self.stats.callback_errors += 1
            log.exception("on_match failed for match %s of %s; moving on", match.id, match.symbol)

    async def _job(self, pair: str) -> None:
        """The scheduled poll of one pair: errors are logged and counted, never raised."""
        try:
            await self._poll(pair)
        except asyncio.CancelledError:
            # The top frame of a task apscheduler started: nobody awaits it, so ending
            # quietly here keeps a shutdown from being reported as a failed job.
            log.debug("poll of %s cancelled", pair)
            return
        except (TransportError, VenueError) as exc:
            self._failed(pair, exc)
        except Exception as exc:
            log.exception("poll of %s failed unexpectedly", pair)
            self._failed(pair, exc)
        else:
            if self.state != "ok" and self._scheduler is not None:  # not after shutdown()
                self._set_state("ok", "")

    def _failed(self, pair: str, exc: Exception) -> None:
        self.stats.errors += 1
        self.last_error = f"{pair}: {type(exc).__name__}: {exc}"
        log.warning("poll of %s failed: %s", pair, exc)
        self._set_state("error", self.last_error)

    def _set_state(self, state: str, detail: str) -> None:
        self.state = state
        if self._on_state is not None:
            try:
                self._on_state(state, detail)
            except Exception:
                log.exception("on_state callback failed")

    def start(self, scheduler: AsyncIOScheduler | None = None) -> None:
        """Add one interval job per pair to scheduler (or to a scheduler of its own).

        Needs a running asyncio loop. A scheduler passed in is started here if it is not
        running yet; it is the caller's to shut down.
        """
        if self._scheduler is not None:
            raise RuntimeError("MatchPoller already started")
        if scheduler is None:
            scheduler = AsyncIOScheduler(timezone=UTC)
            self._owns_scheduler = True
        self._scheduler = scheduler
        first = datetime.now(UTC) + timedelta(seconds=self.interval_s)
        for pair in self.pairs:
            scheduler.add_job(
                self._job,
                "interval",
                seconds=self.interval_s,
                args=(pair,),
                id=_job_id(pair),
                name=f"match poll {pair}",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
                next_run_time=first,
                replace_existing=True,
            )
        if not scheduler.running:
            scheduler.start()
        self._set_state("ok", f"every {self.interval_s} s")

    def shutdown(self) -> None:
        """Remove the jobs (and stop the scheduler if it is the poller's own)."""
        scheduler = self._scheduler
        if scheduler is None:
            return
        self._scheduler = None
        for pair in self.pairs:
            job: Any = scheduler.get_job(_job_id(pair))
            if job is not None:
                job.remove()
        if self._owns_scheduler and scheduler.running:
            scheduler.shutdown(wait=False)
        self._owns_scheduler = False
        self._set_state("stopped", "")

    async def aclose(self) -> None:
        """Shut down, then wait for polls in progress to finish (their cursors are saved)."""
        self.shutdown()
        for lock in self._locks.values():
            async with lock:
                pass


def _job_id(pair: str) -> str:
    return f"match-poll:{pair}"
