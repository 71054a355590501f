"""Fills: the venue's match records turned into fills of the engine's intents, by evidence only.

A match carries the venue's orderId (``entrustId``), never a clientOrderId. The
:class:`FillLinker` links a match to an intent only on evidence that names it:

* the orderId an answer, a list or a record bound to the intent (every match of it adds to its
  fill, beyond what a venue record of it said had filled; FILLED when they add up to its
  quantity), or one filled or cancelled lately, across restarts too (a late match still names
  its intent; a CANCELED order's raises what has filled of it);
* the only intent in doubt (UNKNOWN, or LOST while it may rest) that could own the match:
  same pair and side, its price within the limit, the match its whole quantity (FILLED); a
  match that may be a part of a larger intent in doubt is evidence for none (it names its
  possible owners and is remembered by orderId, for a list or record naming its order);
* with several such intents in doubt, no intent: the orderId is counted for their doubt group
  (``candidates`` on the match), which is settled by count (see
  :class:`~framework.engine.reconcile.Ledger`).

Anything else is external. A match seen while a batch is in flight, whose order nobody named
yet, is held (the answer may name it) and decided once the batches in flight then have been
answered. While intents are in doubt, an external match is remembered by its orderId: should
a venue record name that order as an intent's later, it is that order's fill (never by its
looks: it was published as external). Held matches, counted ones and those remembered are
kept in the journal (:class:`~framework.engine.journaling.KeptAs`), written by the commit
that makes the poller's delivered mark durable, so a kill loses none; at restart
:meth:`FillLinker.recover_match` decides them again. Pure: no I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from decimal import Decimal

import msgspec

from framework.engine.early_matches import EarlyMatches
from framework.engine.events import Event, MatchFilled
from framework.engine.intents import OrderStatus
from framework.engine.journaling import JournalProtocol, KeptAs
from framework.engine.outcomes import Outcomes
from framework.engine.reconcile import Done, LiveOrder, group_key
from framework.venue.models import MatchRecord

__all__ = ["FillLinker"]

log = logging.getLogger("framework.execution")

_ZERO = Decimal(0)


class FillLinker:
    """Decides which intent (or doubt group) each match fills; see the module docstring."""

    __slots__ = ("_journal", "_node", "_publish", "early", "outcomes")

    def __init__(
        self,
        outcomes: Outcomes,
        *,
        journal: JournalProtocol | None,
        node: str,
        publish: Callable[[Event], None],
    ) -> None:
        self.outcomes = outcomes
        self.early = EarlyMatches()
        self._journal = journal
        self._node = node
        self._publish = publish

    def attribute(self, match: MatchRecord) -> MatchFilled | None:
        """The MatchFilled of a match (the caller publishes it), or None when it is held."""
        order_id = match.entrust_id
        ledger = self.outcomes.ledger
        if order_id is not None and self.early.in_flight and not ledger.knows(order_id):
            self.early.hold(match)
            self._keep(match, KeptAs.HELD)
            self.outcomes.counts["matches_held"] += 1
            return None
        return self.decide(match)

    def release_early(self) -> None:
        """Decide and publish the held matches an answer (or its absence) now explains."""
        early = self.early
        if len(early):
            for match in early.release(self.outcomes.ledger.knows):
                self._unkeep(match)
                self._publish(self.decide(match))

    def decide(self, match: MatchRecord) -> MatchFilled:
        """Link a match by the evidence rules of the module docstring."""
        outcomes = self.outcomes
        ledger = outcomes.ledger
        counts = outcomes.counts
        order_id = match.entrust_id
        if order_id is None:
            return self._external(match)
        entry = ledger.by_order_id.get(order_id)
        if entry is not None:
            self._fill(entry, match)
            return self._linked(match, entry)
        link = ledger.recently_done(order_id)
        if link is not None:
            counts["matches_linked"] += 1
            if isinstance(link, Done):  # a CANCELED order's fill listed after the cancel
                outcomes.late_fill(link, match.quantity or _ZERO)
                match = msgspec.structs.replace(match, client_order_id=link.client_order_id)
                return MatchFilled(match, link.strategy, False)
            coid, strategy, candidates = link
            if coid is not None or candidates:
                match = msgspec.structs.replace(match, client_order_id=coid, candidates=candidates)
            return MatchFilled(match, strategy, False, candidates)
        group = ledger.claimed.get(order_id)
        if group is None:
            owners = ledger.owners(match)
            if not owners:
                return self._external(match)
            if any(e.order.quantity != match.quantity for e in owners):
                return self._partial(match, owners)
            group = ledger.groups[group_key(owners[0].order)]  # one quantity: one group
            if len(owners) == 1 and not group.claimed:
                entry = ledger.resolve(owners[0])  # the one intent in doubt it can be: unique
                self._resolve(entry, match, order_id)
                return self._linked(match, entry)
            candidates = tuple(e.client_order_id for e in owners)
        else:
            candidates = group.candidates
        ledger.claim(group, order_id, match, outcomes.now())
        self._keep(match, KeptAs.COUNTED)
        counts["matches_ambiguous"] += 1
        event = MatchFilled(
            msgspec.structs.replace(match, candidates=candidates),
            group.strategy,
            False,
            candidates,
        )
        if group.complete:
            outcomes.ambiguous(group, "every member is accounted for")
        return event

    def recover_match(self, match: MatchRecord, kind: KeptAs) -> None:
        """A match the journal kept, decided again at restart."""
        ledger = self.outcomes.ledger
        order_id = match.entrust_id
        if kind is KeptAs.HELD:  # held for an answer that never came: publish it now
            self._unkeep(match)
            self._publish(self.decide(match))
            return
        entry = ledger.by_order_id.get(order_id) if order_id is not None else None
        if kind is KeptAs.UNLINKED:
            # Published as external: it counts only for an order named by its orderId (its
            # record adopted it at this start), never by looks for an intent in doubt.
            if entry is not None:
                self._unkeep(match)
                self._fill(entry, match)
            elif ledger.in_doubt:
                self._forget(ledger.note_unlinked(match))  # still kept
            else:
                self._unkeep(match)  # nothing is in doubt any more
            return
        if entry is not None:
            # The order was adopted at this start (the venue's list named it by its client
            # order id): the match is its, and counts for it beyond what its record said had
            # filled (it filled before the list was read). Not counted for the group as well.
            self._unkeep(match)
            self._fill(entry, match)
            return
        group = ledger.claimed.get(order_id) if order_id is not None else None
        if group is None:
            owners = ledger.owners(match)
            same = owners and all(e.order.quantity == match.quantity for e in owners)
            group = ledger.groups.get(group_key(owners[0].order)) if same else None
        if order_id is None or group is None:
            self._unkeep(match)  # its group was settled: nothing left to count for
            return
        ledger.claim(group, order_id, match, self.outcomes.now())
        if group.complete:
            self.outcomes.ambiguous(group, "every member is accounted for")

    # -- helpers --------------------------------------------------------------------------

    def _keep(self, match: MatchRecord, kind: KeptAs) -> None:
        """Journal a match the engine cannot settle yet (survives a kill)."""
        if self._journal is not None:
            self._journal.keep_match(self._node, match, kind)
            self.outcomes.dirty = True

    def _unkeep(self, match: MatchRecord) -> None:
        if self._journal is not None:
            self._journal.drop_match(match.id)
            self.outcomes.dirty = True

    def _external(self, match: MatchRecord) -> MatchFilled:
        outcomes = self.outcomes
        outcomes.counts["matches_external"] += 1
        ledger = outcomes.ledger
        if match.entrust_id is not None and ledger.in_doubt:
            # An intent's order in doubt, perhaps: its record may name it later (adoption at
            # the next start). Kept in the journal until then, so a restart still counts it.
            self._forget(ledger.note_unlinked(match))
            self._keep(match, KeptAs.UNLINKED)
        return MatchFilled(match, None, True)

    def _partial(self, match: MatchRecord, owners: list[LiveOrder]) -> MatchFilled:
        """A match some intent in doubt may own in part (a larger order's partial fill): no
        evidence for any, so it is counted for none; it names its possible owners, and is
        remembered by orderId (a list or record naming its order later makes it that one's)."""
        counts = self.outcomes.counts
        counts["matches_ambiguous"] += 1
        ledger = self.outcomes.ledger
        self._forget(ledger.note_unlinked(match))
        self._keep(match, KeptAs.UNLINKED)
        candidates = tuple(e.client_order_id for e in owners)
        strategies = {e.strategy for e in owners}
        strategy = strategies.pop() if len(strategies) == 1 else None
        match = msgspec.structs.replace(match, candidates=candidates)
        return MatchFilled(match, strategy, False, candidates)

    def forget_unlinked(self) -> None:
        """Nothing is in doubt any more: the external matches remembered for it go."""
        ledger = self.outcomes.ledger
        if ledger.unlinked and not ledger.in_doubt:
            self._forget(ledger.forget_unlinked())

    def _forget(self, matches: list[MatchRecord]) -> None:
        for match in matches:
            self._unkeep(match)

    def _linked(self, match: MatchRecord, entry: LiveOrder) -> MatchFilled:
        self.outcomes.counts["matches_linked"] += 1
        linked = msgspec.structs.replace(match, client_order_id=entry.client_order_id)
        return MatchFilled(linked, entry.strategy, False)

    def _fill(self, entry: LiveOrder, match: MatchRecord) -> None:
        outcomes = self.outcomes
        outcomes.add_matched(entry, match.quantity or Decimal(0))
        if entry.status is OrderStatus.ACCEPTED and entry.filled >= entry.order.quantity:
            outcomes.filled(entry)

    def _resolve(self, entry: LiveOrder, match: MatchRecord, order_id: int) -> None:
        """An UNKNOWN intent resolved by the evidence of a match: FILLED with its orderId."""
        was = entry.status
        entry.order_id = order_id
        self.outcomes.unbook(entry)
        self.outcomes.add_matched(entry, match.quantity or _ZERO)  # its whole quantity
        log.warning(
            "%s order %s resolved by evidence: match %d (entrustId %d), the only intent in"
            " doubt that could own it -> FILLED",
            was,
            entry.client_order_id,
            match.id,
            order_id,
        )
        self.outcomes.filled(entry)
