"""SimVenue: the paper venue as the execution engine's Venue, on the backtest's virtual time.

The live node's executor talks to a :class:`~framework.live.rest.RestClient`; a backtest's
talks to this, over the :class:`~framework.backtest.paper.PaperVenue`'s account: the same
:class:`~framework.engine.venue.Venue` protocol, answered with the records, pages and
refusals a RestClient decodes from the twin for the same state (tests/live/test_sim_venue.py
holds both to that). Split from paper.py, where the account and its prices are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from functools import partial
from typing import Any

from framework.backtest.paper import PAGE_SIZE, PAPER_USER, PaperVenue
from framework.engine.cancels import CancelAnswer, CancelBatch
from framework.engine.venue import Answer
from framework.sim.exchange import CANCEL_MESSAGES
from framework.sim.records import balance_record, match_record, order_record, position_record
from framework.venue.errors import ORDER_NOT_FOUND, error_for, order_error_for, render_message
from framework.venue.models import (
    AccountBalance,
    MatchRecord,
    OrderInput,
    OrderResult,
    Position,
)
from framework.venue.order_management import OrderRecord as VenueOrder
from framework.venue.requests import MAX_PAGE_SIZE

__all__ = ["SimVenue"]


class SimVenue:
    """The paper venue as the engine's :class:`~framework.engine.venue.Venue`, on virtual time.

    A batch reaches the paper account after its latency (``latency_ms`` when given, else a
    draw of the paper venue's latency model, :meth:`PaperVenue.arrival_delay_ms`; cancels
    and queries at once), and the pushes a call makes come after its answer reached the engine, as live.
    :meth:`start` is how the executor awaits an answer here: it runs the call's coroutine at
    once, with no event loop, and resumes one that waits out its latency at that virtual
    time (through ``schedule``). Every read answers from the paper account's exchange with
    the records, pages and refusals a RestClient decodes from the twin's answers for the same
    state (the shared reads of :class:`~framework.sim.exchange.Exchange`).
    """

    def __init__(
        self,
        paper: PaperVenue,
        *,
        now_ms: Callable[[], int],
        schedule: Callable[[int, Callable[[], None]], None],
        latency_ms: int | None = None,
    ) -> None:
        self.paper = paper
        self.latency_ms = latency_ms
        self._now_ms = now_ms
        self._schedule = schedule
        self._waiting: dict[Coroutine[Any, Any, None], None] = {}

    def start(self, answer: Answer, sent: Any, reply: Awaitable[Any]) -> None:
        """Run answer(sent, reply) now; the pushes the call makes follow its answer."""
        self._step(answer(sent, reply))

    def _step(self, coroutine: Coroutine[Any, Any, None]) -> None:
        paper = self.paper
        self._waiting.pop(coroutine, None)
        paper.hold_pushes()
        try:
            at = coroutine.send(None)
        except StopIteration:
            return
        finally:
            paper.release_pushes()
        self._waiting[coroutine] = None
        self._schedule(at, partial(self._step, coroutine))

    def abandon(self) -> int:
        """Close the calls still waiting out their latency (the run ended first): each is
        answered now as cancelled in flight, as a live stop's timeout does, never later when
        garbage collection would close it. Returns how many there were."""
        waiting, self._waiting = list(self._waiting), {}
        for coroutine in waiting:
            coroutine.close()
        return len(waiting)

    def send_batch(self, orders: Sequence[OrderInput]) -> Awaitable[list[OrderResult]]:
        """The batch, placed when it reaches the paper account (its latency from now)."""
        latency = self.latency_ms
        delay = self.paper.arrival_delay_ms() if latency is None else latency
        return self._create(orders, self._now_ms() + delay)

    async def _create(self, orders: Sequence[OrderInput], at: int) -> list[OrderResult]:
        if at > self._now_ms():
            await _Until(at)
        return self.paper.batch_create(orders, self._now_ms())

    async def cancel(self, batch: CancelBatch) -> dict[int | str, CancelAnswer]:
        """Cancel paper orders by id, or one by its clientOrderId (the twin's rules)."""
        paper, now = self.paper, self._now_ms()
        if batch.by_client_id:
            (coid,) = batch.client_order_ids
            return {coid: paper.cancel_by_client_id(coid, now)}
        answers = paper.cancel(batch.order_ids, now)
        if len(answers) == 1:
            return answers
        # The venue's batch cancel names no filled quantity or orderId per order (RestClient
        # decodes none): the engine then knows, here as live, only what matches tell it.
        return {oid: CancelAnswer(a.code, CANCEL_MESSAGES[a.code]) for oid, a in answers.items()}

    async def query_order(self, entrust_id: int) -> VenueOrder:
        """A paper order's record, open or completed; 2340 (OrderStateError) when unknown."""
        record = self.paper.exchange.accounts[PAPER_USER].orders.get(entrust_id)
        if record is None:
            raise order_error_for(ORDER_NOT_FOUND, CANCEL_MESSAGES[ORDER_NOT_FOUND])
        return order_record(record)

    async def warm_up(self) -> None:
        """Nothing to open: the paper account is in-process."""

    async def cancel_all(
        self, pair: str | None = None, is_long: bool | None = None
    ) -> tuple[int, ...] | None:
        """Cancel every open paper order (of pair, of one side): the ids, ascending."""
        if pair is not None:
            self._page(pair, None, None)
        return self.paper.cancel_all(pair, is_long, self._now_ms())

    async def all_open_orders(self, pair: str) -> list[VenueOrder]:
        """Every open paper order of pair, entrustId ascending."""
        self._page(pair, None, None)
        return [
            order_record(r)
            for r in self.paper.exchange.accounts[PAPER_USER].orders.open_orders(pair)
        ]

    async def positions(
        self, pair: str, page_no: int | None = None, page_size: int | None = None
    ) -> list[Position]:
        """One page of the paper account's positions on pair."""
        exchange = self.paper.exchange
        found = exchange.position_page(PAPER_USER, pair, *self._page(pair, page_no, page_size))
        return [position_record(exchange, exchange.accounts[PAPER_USER], p) for p in found]

    async def balance(self, symbol: str) -> AccountBalance:
        """The paper balance of one coin (2122: not held, 4001: no such coin)."""
        found = self.paper.exchange.balance_answer(PAPER_USER, symbol)
        if isinstance(found, tuple):
            raise error_for(*found)
        return balance_record(PAPER_USER, found)

    async def matches(
        self,
        pair: str,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> list[MatchRecord]:
        """One page of the paper matches of pair, newest first, ids below match_id."""
        page_no, page_size = self._page(pair, page_no, page_size)
        found = self.paper.exchange.matches(
            PAPER_USER,
            pair,
            before=match_id,
            page_no=page_no,
            page_size=page_size,
            now_ms=self._now_ms(),
        )
        return [match_record(m) for m in found]

    def _page(self, pair: str, page_no: int | None, page_size: int | None) -> tuple[int, int]:
        """pageNo and pageSize as the twin reads them; 2001 for an unknown pair, a page below
        1 or a bad size."""
        if pair not in self.paper.exchange.markets:
            raise error_for(2001, render_message(2001, "pairName"))
        if page_no is not None and page_no < 1:
            raise error_for(2001, render_message(2001, "pageNo"))
        page_size = PAGE_SIZE if page_size is None else page_size
        if not 0 < page_size <= MAX_PAGE_SIZE:
            raise error_for(2001, render_message(2001, "pageSize"))
        return page_no or 1, page_size


class _Until:
    """Awaited by a call that waits for virtual time: SimVenue resumes it at ``at`` ms."""

    __slots__ = ("at",)

    def __init__(self, at: int) -> None:
        self.at = at

    def __await__(self) -> Generator[int, None, None]:
        yield self.at
