"""Who is who: the engine's live intents by clientOrderId and by orderId, and those in doubt.

The :class:`Ledger` is the execution engine's memory of its intents. It binds a venue
orderId to an intent only through the clientOrderId of an answer, or through evidence that
names the intent uniquely. A match record carries no clientOrderId, only the orderId
(entrustId), so a match of an order nobody named speaks for an intent in doubt (UNKNOWN, or
LOST while it may still rest) only by its pair, side and quantity, and a price within its
limit. Intents in doubt that agree in pair, side and quantity form a :class:`DoubtGroup`:
while the group has one member and no match has been counted for it, a match that agrees
resolves that member (FILLED with the match's orderId); with two or more members which one
filled is unknowable, so the match's orderId is *claimed by the group*, counted, and bound to
no intent (a list or record naming the order's owner later gives it the claim). The group is
settled by count (every member AMBIGUOUS, k of n filled) once it has as many claims as
members, or once its newest member's window is over. The ledger also remembers the orderIds
of orders filled, cancelled or claimed lately, so a late match still finds its intent or
group and is never taken for evidence about another.

Pure data structures: no I/O, no clock.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Final

import attrs

from framework.engine.intents import OrderIntent, OrderStatus
from framework.engine.journaling import JournalEntry
from framework.engine.risk import is_resting
from framework.venue.models import MatchRecord, OrderInput

__all__ = [
    "DONE_MEMORY",
    "LOST_MEMORY",
    "Batch",
    "Done",
    "DoubtGroup",
    "GroupKey",
    "Ledger",
    "Link",
    "LiveOrder",
    "order_input",
    "price_allows",
    "revive",
]

log = logging.getLogger("framework.execution")

_ZERO: Final = Decimal(0)
_UNKNOWN: Final = OrderStatus.UNKNOWN
_LOST: Final = OrderStatus.LOST
_GONE: Final = frozenset({OrderStatus.LOST, OrderStatus.AMBIGUOUS})
"""Ended in doubt, yet an open-order list or a record may still name them (Ledger.lost)."""

DONE_MEMORY: Final = 16_384
"""How many filled or group-settled orders' ids the ledger remembers to link late matches.

A late match of an order already filled arrives within the match poll's re-read window
(seconds); the oldest ids are forgotten first, so memory stays flat on a daemon that trades
for weeks (a few MB at most)."""
LOST_MEMORY: Final = 4096
"""How many LOST intents the ledger keeps as possible owners of same-looking matches and as
adoptable by a listing (the oldest are forgotten first)."""
UNLINKED_MEMORY: Final = 4096
"""How many external matches the ledger keeps while intents are in doubt (the oldest
orderId's are forgotten first; all of them once nothing is in doubt)."""
DONE_CHUNK: Final = 1024
"""Ids per generation of that memory; the oldest generation is forgotten whole.

One dict of DONE_MEMORY ids forgetting its oldest id one by one is rebuilt with a new 1.3 MB
table every ~27,000 fills: glibc's malloc then raises its mmap threshold to that size, keeps
the freed tables in its heap, and the daemon's RSS grows for minutes after its start. A
generation's table stays under 40 KB."""


@attrs.define(slots=True, eq=False)
class LiveOrder:
    """The engine's mutable record of one intent it still tracks."""

    client_order_id: str
    strategy: str
    intent: OrderIntent
    order: OrderInput  # the payload: built once, sent identically on every attempt
    status: OrderStatus
    created_ms: int
    price: Decimal | None  # the risk reference price it was booked at
    booked: bool  # counted in the risk gate's open quantity
    order_id: int | None = None
    filled: Decimal = Decimal(0)  # what is known to have filled: max(matched, reported)
    unknown_since_ms: int = 0
    matched: Decimal = Decimal(0)  # the sum of the matches linked to it
    reported: Decimal = Decimal(0)  # the most a venue record of it said had filled
    until_ms: int = 0  # LOST: a possible owner of same-looking matches until then


@attrs.define(slots=True, eq=False)
class Batch:
    """One batchCreate call: the same orders (payloads) on every attempt."""

    id: int
    orders: tuple[OrderInput, ...]
    attempt: int = 0
    entries: list[LiveOrder] = attrs.field(factory=list, repr=False)

    @property
    def client_order_ids(self) -> list[str]:
        """The clientOrderIds of the batch, in order."""
        return [o.client_order_id for o in self.orders]


def order_input(client_order_id: str, intent: OrderIntent) -> OrderInput:
    """The wire record (SPEC 2.1) of an intent under its client order id."""
    return OrderInput(
        client_order_id=client_order_id,
        is_long=intent.is_long,
        is_market=intent.is_market,
        lever=intent.lever,
        match_type=intent.match_type,
        pair_name=intent.pair,
        position_type=intent.position_type,
        price=intent.price,
        quantity=intent.quantity,
    )


def revive(
    saved: JournalEntry, reference_price: Callable[[OrderInput], Decimal | None], booked: bool
) -> LiveOrder:
    """The engine's record of an intent read back from the journal at restart."""
    order = order_input(saved.client_order_id, saved.intent)
    return LiveOrder(
        saved.client_order_id,
        saved.strategy,
        saved.intent,
        order,
        saved.status,
        saved.created_ms,
        reference_price(order),
        booked,
        saved.order_id,
        saved.filled,
        # Its matches' sum, when a record said more had filled (else they are what filled).
        matched=saved.filled if saved.matched is None else saved.matched,
        reported=saved.filled if saved.matched is not None else _ZERO,
    )


def price_allows(order: OrderInput, match: MatchRecord) -> bool:
    """False when the match's price is beyond the order's limit (it cannot be the order's)."""
    limit, price = order.price, match.average_price
    if order.is_market or limit is None or price is None:
        return True
    return price <= limit if order.is_long else price >= limit


GroupKey = tuple[str | None, bool | None, Decimal | None]
"""(pair, is_long, quantity): what a match and an in-doubt intent must share."""

Link = tuple[str | None, str | None, tuple[str, ...]]
"""(client_order_id, strategy, candidates) a match of a lately settled order is linked to."""


@attrs.define(slots=True, eq=False)
class Done:
    """A CANCELED order the ledger remembers: its late matches still raise what has filled."""

    client_order_id: str
    strategy: str
    quantity: Decimal
    matched: Decimal  # the sum of its matches
    reported: Decimal  # the most a venue record (or the cancel's answer) said had filled

    @property
    def filled(self) -> Decimal:
        """What is known to have filled: the more of the two, at most its quantity."""
        known = self.matched if self.matched >= self.reported else self.reported
        return known if known <= self.quantity else self.quantity


@attrs.define(slots=True, eq=False)
class DoubtGroup:
    """UNKNOWN intents of one pair, side and quantity, and the orderIds counted for them."""

    key: GroupKey
    members: dict[str, LiveOrder] = attrs.field(factory=dict)  # order of doubt (LOST too)
    claimed: dict[int, list[MatchRecord]] = attrs.field(factory=dict)  # orderId -> its matches
    last_claim_ms: int = 0  # when a match was last counted for it

    @property
    def candidates(self) -> tuple[str, ...]:
        """The members' client order ids, in order of doubt."""
        return tuple(self.members)

    @property
    def strategy(self) -> str | None:
        """The one strategy every member belongs to, else None."""
        names = {e.strategy for e in self.members.values()}
        return names.pop() if len(names) == 1 else None

    @property
    def complete(self) -> bool:
        """True when every member is accounted for by a claimed order."""
        return len(self.claimed) >= len(self.members)

    def last_doubt_ms(self) -> int:
        """When the newest member became UNKNOWN, or the last match was counted (a group of
        LOST members counts the fills of a price run for a window from the newest)."""
        newest = max(e.unknown_since_ms for e in self.members.values())
        return newest if newest >= self.last_claim_ms else self.last_claim_ms

    def first_unknown_ms(self) -> int | None:
        """When the oldest member still UNKNOWN (not LOST) became so; None: all are LOST."""
        return min(
            (e.unknown_since_ms for e in self.members.values() if e.status is _UNKNOWN),
            default=None,
        )


def group_key(order: OrderInput) -> GroupKey:
    """The doubt-group key of an order."""
    return (order.pair_name, order.is_long, order.quantity)


class Ledger:
    """Live intents by client order id and order id; UNKNOWN ones in doubt groups.

    A LOST intent (no answer and no evidence within the window) may still rest at the venue
    or have filled: it stays a member of its doubt group, so a same-looking match is never
    taken as unique evidence for another intent while it may be the LOST one's, and it stays
    in :attr:`lost`, so a listing or record naming it by clientOrderId adopts it, until
    ``until_ms`` (see :meth:`lose`) or until LOST_MEMORY newer ones push it out.
    """

    __slots__ = (
        "_done",
        "_done_limit",
        "_lost_due_ms",
        "_unlinked_count",
        "by_order_id",
        "claimed",
        "groups",
        "live",
        "lost",
        "released",
        "touched",
        "unfilled",
        "unknown",
        "unlinked",
    )

    def __init__(self, *, done_memory: int = DONE_MEMORY) -> None:
        self.live: dict[str, LiveOrder] = {}  # PENDING, UNKNOWN and ACCEPTED intents
        self.by_order_id: dict[int, LiveOrder] = {}
        self.unknown: dict[str, LiveOrder] = {}  # insertion order = order of doubt
        self.lost: dict[str, LiveOrder] = {}  # LOST, still possible owners (order of loss)
        self._lost_due_ms: int | None = None  # the earliest until_ms among them
        self.groups: dict[GroupKey, DoubtGroup] = {}
        self.claimed: dict[int, DoubtGroup] = {}  # orderId -> the live group that counted it
        # Groups a member left while they had counted matches (settled once complete, by the
        # caller, after the evidence at hand is all taken), and the matches counted for groups
        # that emptied (no longer kept: the caller drops them from the journal).
        self.touched: set[GroupKey] = set()
        self.released: list[MatchRecord] = []
        # ACCEPTED orders that cannot rest, not filled yet: clientOrderId -> accepted ms, in
        # order of acceptance (an OrderedDict: popping the oldest is O(1)). An order leaves it
        # when it leaves the ledger, so it holds only what is still unfilled.
        self.unfilled: OrderedDict[str, int] = OrderedDict()
        # Matches found external while intents were in doubt, by orderId. Bound to an intent
        # later (its record or its answer named the order), they are its matches: see bind.
        self.unlinked: dict[int, list[MatchRecord]] = {}
        self._unlinked_count = 0
        # Generations of remembered ids, oldest first; the last one takes new ids.
        self._done: deque[dict[int, Link | Done]] = deque([{}])
        chunk = max(1, min(DONE_CHUNK, done_memory))
        self._done_limit = (chunk, -(-done_memory // chunk) + 1)  # (ids each, generations)

    @property
    def in_doubt(self) -> bool:
        """True while some intent is UNKNOWN or LOST and may still own an unnamed match."""
        return bool(self.unknown) or bool(self.lost)

    def open_or_lost(self) -> Iterator[LiveOrder]:
        """The tracked intents, then the LOST ones still possible owners (they may rest or
        fill: the risk gate counts them as it did while they were in doubt)."""
        yield from self.live.values()
        for entry in self.lost.values():
            if entry.status is _LOST:
                yield entry

    def add(self, entry: LiveOrder) -> None:
        """Track an intent."""
        self.live[entry.client_order_id] = entry

    def find(self, client_order_id: str) -> LiveOrder | None:
        """The tracked or LOST intent of that client order id, else None."""
        entry = self.live.get(client_order_id)
        return entry if entry is not None else self.lost.get(client_order_id)

    def bind(self, entry: LiveOrder, order_id: int) -> list[MatchRecord]:
        """The venue named the intent's order id; returns its matches found before (external,
        see note_unlinked, or counted for a doubt group), its own now (the caller counts them).
        """
        entry.order_id = order_id
        if entry.status not in _GONE:
            self.by_order_id[order_id] = entry
        taken: list[MatchRecord] = []
        group = self.claimed.pop(order_id, None)
        if group is not None:  # counted for a group of same-looking intents: it is this one's
            taken.extend(group.claimed.pop(order_id, ()))
        if self.unlinked:
            found = self.unlinked.pop(order_id, [])
            self._unlinked_count -= len(found)
            taken.extend(found)
        return taken

    def note_unlinked(self, match: MatchRecord) -> list[MatchRecord]:
        """Remember a match of an order nobody named while intents are in doubt: an UNKNOWN
        intent's record may name that order later. Returns the matches it forgets to stay
        within UNLINKED_MEMORY (the oldest orderId's first)."""
        unlinked = self.unlinked
        order_id = match.entrust_id
        assert order_id is not None
        known = unlinked.get(order_id)
        if known is not None and any(m.id == match.id for m in known):
            return []  # remembered already (seen again at restart)
        forgotten: list[MatchRecord] = []
        while unlinked and self._unlinked_count >= UNLINKED_MEMORY:
            oldest = unlinked.pop(next(iter(unlinked)))
            self._unlinked_count -= len(oldest)
            forgotten.extend(oldest)
        if forgotten:
            log.warning(
                "%d external matches remembered for the intents in doubt are forgotten (more"
                " than %d): should a record name their order later, they are not counted",
                len(forgotten),
                UNLINKED_MEMORY,
            )
        unlinked.setdefault(order_id, []).append(match)
        self._unlinked_count += 1
        return forgotten

    def forget_unlinked(self) -> list[MatchRecord]:
        """Forget every remembered external match (nothing is in doubt any more); returns them."""
        forgotten = [m for matches in self.unlinked.values() for m in matches]
        self.unlinked.clear()
        self._unlinked_count = 0
        return forgotten

    def doubt(self, entry: LiveOrder, now_ms: int) -> None:
        """The intent's outcome is unknown from now on."""
        entry.unknown_since_ms = now_ms
        self.unknown[entry.client_order_id] = entry
        self._join(entry)

    def _join(self, entry: LiveOrder) -> None:
        key = group_key(entry.order)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = DoubtGroup(key)
        group.members[entry.client_order_id] = entry

    def clear_doubt(self, entry: LiveOrder) -> None:
        """The intent is no longer in doubt (evidence named it); it stays tracked."""
        self._undoubt(entry)

    def _undoubt(self, entry: LiveOrder) -> None:
        coid = entry.client_order_id
        if self.unknown.pop(coid, None) is None and self.lost.pop(coid, None) is None:
            return
        key = group_key(entry.order)
        group = self.groups.get(key)
        if group is None or group.members.pop(coid, None) is None:
            return
        if group.members:
            if group.claimed:
                self.touched.add(key)
            return
        del self.groups[key]  # its counted matches were none of its members' (all named)
        link: Link = (None, group.strategy, group.candidates)
        for order_id, matches in group.claimed.items():
            self.claimed.pop(order_id, None)
            self._remember(order_id, link)
            self.released.extend(matches)

    def lose(self, entry: LiveOrder, until_ms: int) -> list[LiveOrder]:
        """The UNKNOWN intent is LOST: untracked, but a possible owner of same-looking matches
        and adoptable by a listing until until_ms. Returns the LOST intents forgotten to stay
        within LOST_MEMORY."""
        coid = entry.client_order_id
        self.live.pop(coid, None)
        self.unfilled.pop(coid, None)
        self.unknown.pop(coid, None)
        entry.status = _LOST
        self.lost[coid] = entry
        self.shorten(entry, until_ms)
        forgotten: list[LiveOrder] = []
        while len(self.lost) > LOST_MEMORY:
            oldest = self.lost[next(iter(self.lost))]
            self._undoubt(oldest)
            forgotten.append(oldest)
        return forgotten

    def revive_lost(self, entry: LiveOrder, until_ms: int) -> None:
        """A LOST intent read back from the journal at restart: a possible owner again."""
        self.lost[entry.client_order_id] = entry
        self._join(entry)
        self.shorten(entry, until_ms)

    @property
    def lost_due_ms(self) -> int | None:
        """When the next LOST or AMBIGUOUS intent stops being remembered (None: none is)."""
        return self._lost_due_ms if self.lost else None

    def shorten(self, entry: LiveOrder, until_ms: int) -> None:
        """A LOST intent is a possible owner until until_ms (evidence said it does not rest)."""
        entry.until_ms = until_ms
        due = self._lost_due_ms
        if due is None or until_ms < due:
            self._lost_due_ms = until_ms

    def found(self, entry: LiveOrder) -> None:
        """A LOST or AMBIGUOUS intent a record names by its clientOrderId: tracked again."""
        self._undoubt(entry)
        self.live[entry.client_order_id] = entry
        if entry.order_id is not None:
            self.by_order_id[entry.order_id] = entry

    def forget_lost(self, now_ms: int) -> list[LiveOrder]:
        """Forget the LOST intents whose time as possible owners is over (a group that counted
        matches keeps its members until it is settled); returns them."""
        due = self._lost_due_ms
        if due is None or due > now_ms:
            return []  # the usual case: one comparison
        out: list[LiveOrder] = []
        nxt: int | None = None
        for entry in list(self.lost.values()):
            until = entry.until_ms
            if until <= now_ms:
                group = self.groups.get(group_key(entry.order))
                coid = entry.client_order_id
                if group is None or not group.claimed or coid not in group.members:
                    self._undoubt(entry)
                    out.append(entry)
                    continue
                until = now_ms + 1000  # its group settles first: looked at again then
            if nxt is None or until < nxt:
                nxt = until
        self._lost_due_ms = nxt
        return out

    def drop(self, entry: LiveOrder) -> None:
        """Stop tracking an intent (final); a filled or cancelled order's id is remembered."""
        coid = entry.client_order_id
        self.live.pop(coid, None)
        self.unfilled.pop(coid, None)
        self._undoubt(entry)
        if entry.order_id is not None:
            self.by_order_id.pop(entry.order_id, None)
            if entry.status is OrderStatus.FILLED:
                self._remember(entry.order_id, (coid, entry.strategy, ()))
            elif entry.status is OrderStatus.CANCELED:
                self._remember(entry.order_id, done_of(entry))

    def retire(self, entry: LiveOrder) -> None:
        """Stop tracking an order that can no longer change but by a late match (its status
        stays as told); its id is remembered, so such a match still finds it."""
        self.live.pop(entry.client_order_id, None)
        self.unfilled.pop(entry.client_order_id, None)
        self._undoubt(entry)
        if entry.order_id is not None:
            self.by_order_id.pop(entry.order_id, None)
            self._remember(entry.order_id, (entry.client_order_id, entry.strategy, ()))

    def remember(self, order_id: int, link: Link | Done) -> None:
        """Remember what a done order's late matches link to (restart: from the journal)."""
        self._remember(order_id, link)

    def _remember(self, order_id: int, link: Link | Done) -> None:
        done = self._done
        chunk, generations = self._done_limit
        if len(done[-1]) >= chunk:  # the newest generation is full: start one
            done.append({})
            if len(done) > generations:  # the full ones left hold done_memory ids at least
                done.popleft()
        done[-1][order_id] = link

    def recently_done(self, order_id: int) -> Link | Done | None:
        """What a lately filled, cancelled or group-settled order's matches are linked to."""
        for generation in reversed(self._done):
            if (link := generation.get(order_id)) is not None:
                return link
        return None

    def knows(self, order_id: int) -> bool:
        """True if the order id names a tracked intent, a live group's claim or a recent one."""
        return (
            order_id in self.by_order_id
            or order_id in self.claimed
            or self.recently_done(order_id) is not None
        )

    def owners(self, match: MatchRecord) -> list[LiveOrder]:
        """The intents in doubt that could own the match: its pair and side, at least its
        quantity (a partial fill of a larger order too), its price within their limit."""
        groups = self.groups
        if not groups:  # the usual case: nothing in doubt
            return []
        pair, is_long, quantity = match.symbol, match.is_long, match.quantity
        out: list[LiveOrder] = []
        for (p, side, size), group in groups.items():
            if p == pair and side is is_long and (quantity is None or (size or 0) >= quantity):
                out.extend(e for e in group.members.values() if price_allows(e.order, match))
        return out

    def resolve(self, entry: LiveOrder) -> LiveOrder:
        """Take the one intent that could own a match out of doubt (unique evidence)."""
        self._undoubt(entry)
        return entry

    def claim(self, group: DoubtGroup, order_id: int, match: MatchRecord, now_ms: int) -> None:
        """Count a match's order for the group, bound to none of its members."""
        group.claimed.setdefault(order_id, []).append(match)
        group.last_claim_ms = now_ms
        self.claimed[order_id] = group

    def settle(self, group: DoubtGroup, until_ms: int) -> list[LiveOrder]:
        """End the group: its members leave the ledger (those that may rest stay adoptable by
        a list or record naming them, until until_ms); its claims are remembered."""
        members = list(group.members.values())
        link: Link = (None, group.strategy, group.candidates)
        for order_id in group.claimed:
            self.claimed.pop(order_id, None)
            self._remember(order_id, link)
        group.claimed = {}
        for entry in members:
            entry.status = OrderStatus.AMBIGUOUS
            self.drop(entry)
            if is_resting(entry.order):
                self.lost[entry.client_order_id] = entry  # in no group: adoptable only
                self.shorten(entry, until_ms)
        return members

    def expired(self, horizon_ms: int) -> tuple[list[LiveOrder], list[DoubtGroup]]:
        """Intents to end as LOST, and claimed groups to settle, at horizon_ms.

        The first: UNKNOWN since horizon_ms or earlier, oldest first, whose group counted no
        match; the second: groups that counted matches and whose every member is that old.
        """
        lost: list[LiveOrder] = []
        for entry in self.unknown.values():
            if entry.unknown_since_ms > horizon_ms:
                break
            group = self.groups.get(group_key(entry.order))
            if group is None or not group.claimed:
                lost.append(entry)
        due = [g for g in self.groups.values() if g.claimed and g.last_doubt_ms() <= horizon_ms]
        return lost, due

    def next_doubt_deadline_ms(self, window_ms: int) -> int | None:
        """When the next UNKNOWN intent or claimed group reaches the end of its window."""
        best: int | None = None
        for group in self.groups.values():
            if group.claimed:
                at = group.last_doubt_ms() + window_ms
            else:
                first = group.first_unknown_ms()
                if first is None:
                    continue  # only LOST members: nothing to end until a match comes
                at = first + window_ms
            if best is None or at < best:
                best = at
        return best


def done_of(entry: LiveOrder) -> Done:
    """What the ledger remembers of a CANCELED order."""
    return Done(
        entry.client_order_id, entry.strategy, entry.order.quantity, entry.matched, entry.reported
    )
