"""Ground truth at the venue twin: what it read, answered and executed, whatever the node says.

Attach a :class:`Truth` to a VenueTwin before it starts serving. It reads the twin's own
ground truth (``VenueTwin.received_orders``: every order of every batchCreate body it read;
``VenueTwin.executed_orders(api_key)``: clientOrderId -> orderId of every order it accepted)
and adds two taps of its own, which only observe:

- on the twin's ASGI app, one :class:`BatchCall` per batchCreate call: the clientOrderIds of
  the body the twin read, the HTTP status and envelope code it answered, the ids the answer
  named. So a receipt can be told apart from a refusal before accepting (2329, 503);
- on the exchange's ``submit``: the orderIds it gave, and the clientOrderIds it refused as
  already used (``2001 Illegal parameter:clientOrderId``: an intent sent again after it was
  executed, which a venue without that check would have executed twice).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any, Final

import attrs
import orjson

from framework.twin.demo import DEMO_API_KEY
from framework.twin.server import VenueTwin

BATCH_PATH: Final = "/api/third/hot/order/batchCreate"
REFUSED_BEFORE_ACCEPTING: Final = frozenset({(200, 2329), (503, 503), (503, None)})
"""(HTTP status, envelope code) of answers that say nothing executed (busy, unavailable)."""

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


@attrs.define
class BatchCall:
    """One batchCreate call as the twin saw it."""

    received: list[str] = attrs.Factory(list)
    """clientOrderIds of the body the twin read (empty: the body was never read)."""
    status: int | None = None
    """HTTP status the twin answered with (None: it never answered)."""
    code: int | None = None
    """The envelope's code, when the answer was an envelope."""
    answered: list[str] = attrs.Factory(list)
    """clientOrderIds in the answer's data."""

    @property
    def refused_before_accepting(self) -> bool:
        """The answer says nothing of the call executed (2329, or 503 before accepting)."""
        return (self.status, self.code) in REFUSED_BEFORE_ACCEPTING

    def read_answer(self, body: bytes) -> None:
        """Note the envelope code and the ids the answer names."""
        try:
            envelope = orjson.loads(body)
        except orjson.JSONDecodeError:
            return
        if not isinstance(envelope, dict):
            return
        code = envelope.get("code")
        self.code = code if isinstance(code, int) else None
        data = envelope.get("data")
        if isinstance(data, list):
            self.answered = [
                str(d.get("corderId") or d.get("cOrderId")) for d in data if isinstance(d, dict)
            ]


def _order_ids(body: bytes) -> list[str]:
    """The clientOrderIds of a batchCreate body."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    orders = payload.get("orders") if isinstance(payload, dict) else None
    if not isinstance(orders, list):
        return []
    return [
        o["clientOrderId"]
        for o in orders
        if isinstance(o, dict) and isinstance(o.get("clientOrderId"), str)
    ]


def _tap(app: ASGIApp, calls: list[BatchCall]) -> ASGIApp:
    """The twin's ASGI app, noting the body and the answer of every batchCreate call."""

    async def tapped(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("path") != BATCH_PATH:
            await app(scope, receive, send)
            return
        call = BatchCall()
        calls.append(call)
        chunks: list[bytes] = []
        answer: list[bytes] = []

        async def receive_tap() -> Any:
            message = await receive()
            if message.get("type") == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    call.received = _order_ids(b"".join(chunks))
            return message

        async def send_tap(message: Any) -> None:
            kind = message.get("type")
            if kind == "http.response.start":
                call.status = message.get("status")
            elif kind == "http.response.body":
                answer.append(message.get("body", b""))
                if not message.get("more_body", False):
                    call.read_answer(b"".join(answer))
            await send(message)

        await app(scope, receive_tap, send_tap)

    return tapped


@attrs.define
class Truth:
    """What the twin received, answered and executed; attach before the twin starts."""

    twin: VenueTwin
    calls: list[BatchCall] = attrs.Factory(list)
    accepted: dict[str, list[int]] = attrs.Factory(dict)
    """clientOrderId -> orderIds the exchange gave it (the submit tap)."""
    duplicates: list[str] = attrs.Factory(list)
    """clientOrderIds the exchange refused as already used."""

    @classmethod
    def attach(cls, twin: VenueTwin) -> Truth:
        """Tap the twin's ASGI app and its exchange's submit (before ``async with twin``)."""
        truth = cls(twin)
        twin.app.starlette = _tap(twin.app.starlette, truth.calls)  # type: ignore[assignment]
        original = twin.exchange.submit
        accepted, duplicates = truth.accepted, truth.duplicates

        def submit(user_id: int, items: Any, *args: Any, **kwargs: Any) -> Any:
            outcome = original(user_id, items, *args, **kwargs)
            for coid, order_id, _pair in outcome.accepted:
                accepted.setdefault(coid, []).append(order_id)
            for index, code, msg in outcome.refusals:
                if code == 2001 and "clientOrderId" in msg:
                    duplicates.append(getattr(items[index], "client_order_id", "?"))
            return outcome

        twin.exchange.submit = submit  # type: ignore[method-assign]
        return truth

    @property
    def has_own_truth(self) -> bool:
        """The twin keeps received_orders and executed_orders itself."""
        return hasattr(self.twin, "received_orders") and hasattr(self.twin, "executed_orders")

    def received(self) -> list[tuple[str, bytes]]:
        """(clientOrderId, canonical payload) of every order of every body the twin read."""
        own = getattr(self.twin, "received_orders", None)
        assert own is not None, (
            "the twin has no received_orders ground truth (the twin work has not landed)"
        )
        return [(str(c), p if isinstance(p, bytes) else str(p).encode()) for c, p in own]

    def executed(self) -> dict[str, int]:
        """clientOrderId -> orderId of every order the twin executed for the demo account."""
        own = getattr(self.twin, "executed_orders", None)
        if own is not None:
            return dict(own(DEMO_API_KEY))
        return {c: ids[0] for c, ids in self.accepted.items()}

    def effective_sends(self) -> Counter[str]:
        """Per clientOrderId, the calls that read it and did not refuse before accepting."""
        return Counter(
            coid for call in self.calls if not call.refused_before_accepting
            for coid in call.received
        )  # fmt: skip

    def answers(self) -> dict[str, int]:
        """How the twin answered batchCreate calls: 'status/code' -> count ('None': never)."""
        return dict(Counter(f"{c.status}/{c.code}" for c in self.calls))


def twin_matches(twin: VenueTwin, pair: str) -> list[Any]:
    """Every match of the demo account on pair as the exchange holds them (listed or not)."""
    assert twin.demo_user_id is not None
    return list(twin.exchange.accounts[twin.demo_user_id].matches.get(pair, []))


def twin_net_quantity(twin: VenueTwin, pair: str) -> Decimal:
    """The demo account's signed position on pair."""
    assert twin.demo_user_id is not None
    total = Decimal(0)
    for p in twin.exchange.positions(twin.demo_user_id, pair):
        total += p.quantity if p.is_long else -p.quantity
    return total
