"""The order-management extension: cancels, the open-order list and the order query.

The venue has these private endpoints beyond SPEC.md (its public SDK shows paths and
parameters) but publishes no answer shapes; the shapes below are the twin's own, and they
are the contract the framework's client is written against. Turn the extension off with the
setting ``order_management: false``: the seven paths then answer HTTP 404 like any unknown
path (a venue without the extension).

Calls: POST, parameters in the query string, empty body, signed like SPEC's query-string
endpoints (names sorted, ``timestamp`` in ms; a missing timestamp is ``2002``, a bad or stale
one ``2001 Illegal parameter:timestamp``). Answers are SPEC section 2's envelope (error, code,
msg, data, sid) on HTTP 200. A missing or empty required parameter is ``2002 Required
parameter:<name>``, a malformed one ``2001 Illegal parameter:<name>``.

=================================================  ==========================================
path                                               parameters
=================================================  ==========================================
/api/third/order/cancelEntrust                     entrustId
/api/third/order/cancelEntrustByCli                clientOrderId
/api/third/order/batchCancelEntrust                entrustIds (comma-joined, at most 20)
/api/third/order/batchCancelWithRes                entrustIds (comma-joined, at most 20)
/api/third/order/cancelAll                         pairName (optional), isLong (optional)
/api/third/order/selectContractCurrentEntrustList  pairName, pageNo, pageSize
/api/third/order/queryOrder                        entrustId
=================================================  ==========================================

Order record (an element of the open-order list; ``data`` of queryOrder and of a successful
single cancel)::

    {"entrustId": 1000001, "clientOrderId": "c1", "pairName": "ETH-USD", "isLong": true,
     "isMarket": false, "matchType": 1, "positionType": 3, "lever": 10,
     "price": "1990" (null for a market order sent without price), "quantity": "1" (as
     ordered), "filledQuantity": "0.4", "status": "OPEN" | "FILLED" | "CANCELED",
     "createTimeStamp": <ms>, "updateTimeStamp": <ms of the last change>}

``OPEN``: resting, ``quantity - filledQuantity`` left. ``FILLED``: all of it filled.
``CANCELED``: ended with less, ``filledQuantity`` may be above 0 (see
:mod:`framework.sim.history`: what an IOC or market order did not fill, a FOK
without fill, a resting order cancelled by a client or by the twin itself).

* **selectContractCurrentEntrustList**: ``pairName`` required (2002 missing, 2001 unknown);
  ``pageNo`` from 1 (default 1), ``pageSize`` default 20, at most 100 (above: 2001).
  ``data = {"list": [OPEN records of the caller on pairName, entrustId ascending],
  "total": <all OPEN of that pair>, "pageNo": n, "pageSize": n}``.
* **queryOrder**: ``data`` = the record of any order the account placed in this twin run
  (open or completed; market, IOC and FOK orders too), else ``2340 Order does not exist``.
  Orders the twin creates (liquidations) are not the account's: 2340.
* **cancelEntrust** / **cancelEntrustByCli**: ``data`` = the record after the cancel
  (``CANCELED``). Unknown, forgotten or another account's order: ``2340 Order does not
  exist``; already FILLED or CANCELED: ``2341 Order is already completed``.
* **batchCancelEntrust** and **batchCancelWithRes**: code 200 whenever the call is well
  formed; ``data`` = one element per requested id, in request order: ``{"entrustId": n,
  "code": 200 | 2340 | 2341, "msg": "SUCCESS" | ...}``. Ids are cancelled in that order, so
  a repeated id gets 2341 the second time. More than ``max_cancel_ids`` (20) ids, an empty
  element or a non-integer: ``2001 Illegal parameter:entrustIds``. The twin gives per-order
  results on both paths; a client must not rely on batchCancelEntrust having them.
* **cancelAll**: ``pairName`` optional (unknown: 2001), ``isLong`` optional (``true`` or
  ``false``, else 2001). ``data = {"entrustIds": [ids cancelled, ascending]}``.

A cancel takes the order out of the book and releases exactly what it froze (its reserve,
pushed as an api_account change when above 0: an order against the position froze
nothing and pushes nothing); a partly filled order cancels its rest.
A cancel and a fill (a mark move) never interleave: whichever the twin applies first wins,
so a cancel after the full fill is 2341. Completed orders beyond the newest
``order_history_limit`` (100000) per account are forgotten (2340).

Faults (:mod:`framework.twin.faults`): latency, busy_rate (2329, nothing executed) and
unavailable_rate (HTTP 503) apply to all seven paths; drop_response_rate and
error_after_accept_rate apply to the five cancel paths once they executed (the cancel
happened, its answer is lost or a 5xx).

Settings (:class:`~framework.twin.settings.TwinSettings`): ``order_management`` (true),
``max_cancel_ids`` (20), ``order_history_limit`` (100000), and the list's
``default_page_size`` / ``max_page_size`` shared with SPEC's lists (20 / 100).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from framework.sim.events import Event
from framework.sim.exchange import CANCEL_MESSAGES, Exchange
from framework.sim.history import OrderIndex, OrderRecord
from framework.twin import wire
from framework.twin.settings import TwinSettings
from framework.twin.wire import Refused
from framework.venue.errors import ORDER_NOT_FOUND
from framework.venue.requests import (
    BATCH_CANCEL_PATH,
    BATCH_CANCEL_WITH_RESULTS_PATH,
    CANCEL_ALL_PATH,
    CANCEL_BY_CLIENT_ID_PATH,
    CANCEL_PATH,
    OPEN_ORDERS_PATH,
    QUERY_ORDER_PATH,
    OrderManagementPaths,
)

__all__ = ["ORDER_MANAGEMENT_PATHS", "OrderManagement", "Outcome"]

ORDER_MANAGEMENT_PATHS: Final = attrs.astuple(OrderManagementPaths())
"""Every path of the extension (the venue's, framework.venue.requests)."""


@attrs.frozen(slots=True, kw_only=True)
class Outcome:
    """One call's answer (code, msg, data), the events it caused, and whether it executed."""

    code: int
    msg: str
    data: Any
    events: list[Event]
    executed: bool


@attrs.define(slots=True)
class _Call:
    """What one call works with: the account's orders, its parameters, time and events."""

    user_id: int
    orders: OrderIndex
    params: Mapping[str, str]
    now_ms: int
    events: list[Event] = attrs.Factory(list)


class OrderManagement:
    """Answers the extension's calls from the exchange's order records; cancels through it."""

    def __init__(self, exchange: Exchange, settings: TwinSettings) -> None:
        """Bind to the exchange; page sizes and the id limit come from settings."""
        self.exchange = exchange
        self._default_page_size = settings.default_page_size
        self._max_page_size = settings.max_page_size
        self._max_ids = settings.max_cancel_ids
        self._handlers: dict[str, tuple[Callable[[_Call], Any], bool]] = {
            CANCEL_PATH: (self._cancel_by_id, True),
            CANCEL_BY_CLIENT_ID_PATH: (self._cancel_by_client_id, True),
            BATCH_CANCEL_PATH: (self._batch_cancel, True),
            BATCH_CANCEL_WITH_RESULTS_PATH: (self._batch_cancel, True),
            CANCEL_ALL_PATH: (self._cancel_all, True),
            OPEN_ORDERS_PATH: (self._open_orders, False),
            QUERY_ORDER_PATH: (self._query, False),
        }

    def handle(self, path: str, user_id: int, query: Mapping[str, str], now_ms: int) -> Outcome:
        """Answer one call of path for an authenticated account (timestamp already checked)."""
        handler, cancels = self._handlers[path]
        call = _Call(user_id, self.exchange.accounts[user_id].orders, query, now_ms)
        try:
            data = handler(call)
        except Refused as exc:
            # Parameter refusals come before anything is cancelled; 2340/2341 after.
            executed = cancels and exc.code in CANCEL_MESSAGES
            return Outcome(
                code=exc.code, msg=exc.msg, data=None, events=call.events, executed=executed
            )
        return Outcome(code=200, msg="SUCCESS", data=data, events=call.events, executed=cancels)

    # -- cancels -----------------------------------------------------------------------------

    def _cancel(self, call: _Call, record: OrderRecord | None) -> int:
        """Cancel one record of the caller: 200, or 2340 / 2341 with nothing changed."""
        code, events = self.exchange.cancel_order(record, call.now_ms)
        call.events.extend(events)
        return code

    def _one(self, call: _Call, record: OrderRecord | None) -> dict[str, Any]:
        code = self._cancel(call, record)
        if code != 200:
            raise Refused(code, msg=CANCEL_MESSAGES[code])
        assert record is not None
        return wire.order_object(record)

    def _cancel_by_id(self, call: _Call) -> dict[str, Any]:
        order_id = wire.required_id(call.params, "entrustId")
        return self._one(call, call.orders.get(order_id))

    def _cancel_by_client_id(self, call: _Call) -> dict[str, Any]:
        client_id = wire.required(call.params, "clientOrderId")
        return self._one(call, call.orders.by_client_id(client_id))

    def _batch_cancel(self, call: _Call) -> list[dict[str, Any]]:
        ids = wire.id_list(call.params, "entrustIds", limit=self._max_ids)
        results = []
        for order_id in ids:
            code = self._cancel(call, call.orders.get(order_id))
            results.append({"entrustId": order_id, "code": code, "msg": CANCEL_MESSAGES[code]})
        return results

    def _cancel_all(self, call: _Call) -> dict[str, Any]:
        pair = call.params.get("pairName") or None
        if pair is not None and pair not in self.exchange.markets:
            raise Refused(2001, "pairName")
        is_long = wire.flag(call.params, "isLong")
        cancelled, events = self.exchange.cancel_all(call.user_id, pair, is_long, call.now_ms)
        call.events += events
        return {"entrustIds": cancelled}

    # -- reads -------------------------------------------------------------------------------

    def _open_orders(self, call: _Call) -> dict[str, Any]:
        pair = wire.required(call.params, "pairName")
        if pair not in self.exchange.markets:
            raise Refused(2001, "pairName")
        page_no, page_size = wire.page(
            call.params, default_size=self._default_page_size, max_size=self._max_page_size
        )
        found, total = self.exchange.open_order_page(call.user_id, pair, page_no, page_size)
        return {
            "list": [wire.order_object(r) for r in found],
            "total": total,
            "pageNo": page_no,
            "pageSize": page_size,
        }

    def _query(self, call: _Call) -> dict[str, Any]:
        record = call.orders.get(wire.required_id(call.params, "entrustId"))
        if record is None:
            raise Refused(ORDER_NOT_FOUND, msg=CANCEL_MESSAGES[ORDER_NOT_FOUND])
        return wire.order_object(record)
