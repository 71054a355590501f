"""Sans-I/O request building and response parsing (SPEC 4, 5, and the order-management extension).

A :class:`RequestBuilder` turns typed arguments and a timestamp passed in into a
:class:`PreparedRequest` (method, path, query, body bytes, headers) that any transport sends
as it is. The text it signs is exactly what goes on the wire: the compact JSON body for
batchCreate, and for the query-string endpoints the ``name=value`` pairs joined with ``&``,
names ascending, unset optional parameters left out (signed before percent-encoding, as the
venue's public SDK does). :func:`parse_response` turns a status and body into records or the
matching exception.

The order-management extension (VENUE-FACTS: cancel, batch cancel, cancel all, open orders,
query one order) is built here too, on paths a :class:`OrderManagementPaths` holds (the
SDK's by default); :mod:`framework.venue.order_management` reads its answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final
from urllib.parse import quote

import attrs
import orjson

from framework.venue import models as m
from framework.venue.codec import DEFAULT_CODEC, Codec, dumps_compact, encode_orders
from framework.venue.errors import (
    BadResponse,
    DecodeError,
    ParameterError,
    ServerFault,
    VenueError,
    error_for,
)
from framework.venue.signing import Signer

__all__ = [
    "BALANCE_PATH",
    "BATCH_CANCEL_PATH",
    "BATCH_CANCEL_WITH_RESULTS_PATH",
    "BATCH_CREATE_PATH",
    "CANCEL_ALL_PATH",
    "CANCEL_BY_CLIENT_ID_PATH",
    "CANCEL_PATH",
    "MATCHES_PATH",
    "MAX_BATCH",
    "MAX_CANCEL_BATCH",
    "MAX_PAGE_SIZE",
    "OPEN_ORDERS_PATH",
    "POSITIONS_PATH",
    "QUERY_ORDER_PATH",
    "OrderManagementPaths",
    "PreparedRequest",
    "RequestBuilder",
    "excerpt",
    "parse_envelope",
    "parse_response",
    "read_envelope",
    "server_fault",
]

BATCH_CREATE_PATH: Final = "/api/third/hot/order/batchCreate"
POSITIONS_PATH: Final = "/api/third/hot/order/selectContractPositionList"
BALANCE_PATH: Final = "/api/third/hot/order/balance"
MATCHES_PATH: Final = "/api/third/order/selectContractMatchPairList"
MAX_BATCH: Final = 20
MAX_PAGE_SIZE: Final = 100
LANGUAGES: Final = ("zh-CN", "en-US")

# The order-management extension (VENUE-FACTS, from the public SDK; not in SPEC.md).
CANCEL_PATH: Final = "/api/third/order/cancelEntrust"
CANCEL_BY_CLIENT_ID_PATH: Final = "/api/third/order/cancelEntrustByCli"
BATCH_CANCEL_PATH: Final = "/api/third/order/batchCancelEntrust"
BATCH_CANCEL_WITH_RESULTS_PATH: Final = "/api/third/order/batchCancelWithRes"
CANCEL_ALL_PATH: Final = "/api/third/order/cancelAll"
OPEN_ORDERS_PATH: Final = "/api/third/order/selectContractCurrentEntrustList"
QUERY_ORDER_PATH: Final = "/api/third/order/queryOrder"
MAX_CANCEL_BATCH: Final = 20
"""Ids per batch-cancel call by default: the venue's limit is not published (batchCreate's)."""


@attrs.frozen(slots=True)
class OrderManagementPaths:
    """The order-management extension's paths (the public SDK's by default; configurable)."""

    cancel: str = CANCEL_PATH
    cancel_by_client_id: str = CANCEL_BY_CLIENT_ID_PATH
    batch_cancel: str = BATCH_CANCEL_PATH
    batch_cancel_with_results: str = BATCH_CANCEL_WITH_RESULTS_PATH
    cancel_all: str = CANCEL_ALL_PATH
    open_orders: str = OPEN_ORDERS_PATH
    query_order: str = QUERY_ORDER_PATH


@attrs.frozen(slots=True)
class PreparedRequest:
    """One request ready for the wire; signed_text is what the signature covers."""

    method: str
    path: str
    query: str
    body: bytes
    headers: dict[str, str] = attrs.field(repr=False)
    signed_text: str = attrs.field(repr=False)

    @property
    def target(self) -> str:
        """Path plus query string, as it goes on the request line."""
        return f"{self.path}?{self.query}" if self.query else self.path


def _check_id(name: str, value: object) -> int:
    if type(value) is not int or value < 1:
        raise ParameterError(2001, f"Illegal parameter:{name} (got {value!r}, expected an id >= 1)")
    return value


def _check_page(name: str, value: int | None, limit: int | None) -> None:
    if value is None:
        return
    if type(value) is not int or value < 1 or (limit is not None and value > limit):
        bound = f"an integer from 1 to {limit}" if limit else "a positive integer"
        raise ParameterError(2001, f"Illegal parameter:{name} (got {value!r}, expected {bound})")


class RequestBuilder:
    """Builds signed requests for one API key; pure: the timestamp is passed in."""

    __slots__ = (
        "_api_key",
        "_base_headers",
        "_query_content_type",
        "_signer",
        "order_paths",
        "sign_type",
    )

    def __init__(
        self,
        api_key: str,
        signer: Signer,
        *,
        language: str | None = None,
        query_content_type: str = "text/plain",
        order_paths: OrderManagementPaths | None = None,
    ) -> None:
        if language is not None and language not in LANGUAGES:
            raise ValueError(f"language: expected one of {', '.join(LANGUAGES)}, got {language!r}")
        self._api_key = api_key
        self._signer = signer
        self.sign_type = signer.sign_type
        self._query_content_type = query_content_type
        self.order_paths = order_paths if order_paths is not None else OrderManagementPaths()
        base = {"APIKEY": api_key, "X-SAPI-SIGN-TYPE": str(signer.sign_type)}
        if language is not None:
            base["Accept-Language"] = language
        self._base_headers = base

    def __repr__(self) -> str:
        return f"RequestBuilder(sign_type={self.sign_type})"

    def _headers(self, signature: str, content_type: str) -> dict[str, str]:
        headers = dict(self._base_headers)
        headers["signature"] = signature
        headers["Content-Type"] = content_type
        return headers

    def batch_create(self, orders: Sequence[m.OrderInput], timestamp_ms: int) -> PreparedRequest:
        """POST batchCreate: at most 20 orders; the compact body is the signed text."""
        if not orders:
            raise ParameterError(2002, "Required parameter:orders")
        if len(orders) > MAX_BATCH:
            raise ParameterError(
                2001, f"Illegal parameter:orders ({len(orders)} orders, at most {MAX_BATCH})"
            )
        body = dumps_compact({"orders": encode_orders(orders), "timestamp": str(timestamp_ms)})
        text = body.decode("ascii")
        return PreparedRequest(
            "POST",
            BATCH_CREATE_PATH,
            "",
            body,
            self._headers(self._signer.sign(text), "application/json"),
            text,
        )

    def _query_request(self, path: str, params: dict[str, Any]) -> PreparedRequest:
        items = sorted((k, str(v)) for k, v in params.items() if v is not None)
        text = "&".join(f"{k}={v}" for k, v in items)
        sent = "&".join(f"{k}={quote(v, safe='-_.~')}" for k, v in items)
        return PreparedRequest(
            "POST",
            path,
            sent,
            b"",
            self._headers(self._signer.sign(text), self._query_content_type),
            text,
        )

    def positions(
        self,
        pair: str,
        timestamp_ms: int,
        *,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> PreparedRequest:
        """POST selectContractPositionList; pageSize above 100 is refused locally (2001)."""
        _check_page("pageNo", page_no, None)
        _check_page("pageSize", page_size, MAX_PAGE_SIZE)
        params = {"pairName": pair, "pageNo": page_no, "pageSize": page_size}
        params["timestamp"] = timestamp_ms
        return self._query_request(POSITIONS_PATH, params)

    def balance(self, symbol: str, timestamp_ms: int) -> PreparedRequest:
        """POST balance of one settlement coin."""
        return self._query_request(BALANCE_PATH, {"symbol": symbol, "timestamp": timestamp_ms})

    def matches(
        self,
        pair: str,
        timestamp_ms: int,
        *,
        match_id: int | None = None,
        page_no: int | None = None,
        page_size: int | None = None,
    ) -> PreparedRequest:
        """POST selectContractMatchPairList; matchId is a strict upper bound when given."""
        _check_page("pageNo", page_no, None)
        _check_page("pageSize", page_size, None)
        params: dict[str, Any] = {
            "matchId": match_id,
            "pageNo": page_no,
            "pageSize": page_size,
            "pairName": pair,
            "timestamp": timestamp_ms,
        }
        return self._query_request(MATCHES_PATH, params)

    # ------------------------------------------------ order-management extension (VENUE-FACTS)

    def cancel_order(self, entrust_id: int, timestamp_ms: int) -> PreparedRequest:
        """POST cancelEntrust: cancel one order by the venue's id (entrustId)."""
        params = {"entrustId": _check_id("entrustId", entrust_id), "timestamp": timestamp_ms}
        return self._query_request(self.order_paths.cancel, params)

    def cancel_by_client_id(self, client_order_id: str, timestamp_ms: int) -> PreparedRequest:
        """POST cancelEntrustByCli: cancel one order by its clientOrderId."""
        if type(client_order_id) is not str or not client_order_id:
            raise ParameterError(2002, "Required parameter:clientOrderId")
        params = {"clientOrderId": client_order_id, "timestamp": timestamp_ms}
        return self._query_request(self.order_paths.cancel_by_client_id, params)

    def batch_cancel(
        self, entrust_ids: Sequence[int], timestamp_ms: int, *, with_results: bool = False
    ) -> PreparedRequest:
        """POST batchCancelEntrust (batchCancelWithRes with_results): entrustIds comma-joined.

        The signed text carries the commas raw; the query string sends them as %2C (the
        percent-encoding of every query value). The venue's limit of ids per call is not
        published: callers split (RestClient.batch_cancel).
        """
        if not entrust_ids:
            raise ParameterError(2002, "Required parameter:entrustIds")
        ids = ",".join(str(_check_id("entrustIds", i)) for i in entrust_ids)
        paths = self.order_paths
        path = paths.batch_cancel_with_results if with_results else paths.batch_cancel
        return self._query_request(path, {"entrustIds": ids, "timestamp": timestamp_ms})

    def cancel_all(
        self, timestamp_ms: int, *, pair: str | None = None, is_long: bool | None = None
    ) -> PreparedRequest:
        """POST cancelAll: every open order, or of one pair, or of one side ("true"/"false")."""
        side = None if is_long is None else ("true" if is_long else "false")
        params = {"isLong": side, "pairName": pair, "timestamp": timestamp_ms}
        return self._query_request(self.order_paths.cancel_all, params)

    def open_orders(
        self, pair: str, timestamp_ms: int, *, page_no: int = 1, page_size: int = 50
    ) -> PreparedRequest:
        """POST selectContractCurrentEntrustList: one page of a pair's open orders."""
        _check_page("pageNo", page_no, None)
        _check_page("pageSize", page_size, None)
        params = {
            "pageNo": page_no,
            "pageSize": page_size,
            "pairName": pair,
            "timestamp": timestamp_ms,
        }
        return self._query_request(self.order_paths.open_orders, params)

    def query_order(self, entrust_id: int, timestamp_ms: int) -> PreparedRequest:
        """POST queryOrder: one order by the venue's id (entrustId)."""
        params = {"entrustId": _check_id("entrustId", entrust_id), "timestamp": timestamp_ms}
        return self._query_request(self.order_paths.query_order, params)

    def subscribe(
        self, event: str, timestamp_ms: int, *, pair: str | None = None, symbol: str | None = None
    ) -> dict[str, Any]:
        """A signed WebSocket subscribe message; the signed text is the timestamp's string."""
        if event == "api_position" and not pair:
            raise ValueError("subscribe api_position needs a pair")
        if event == "api_account" and not symbol:
            raise ValueError("subscribe api_account needs a symbol")
        message: dict[str, Any] = {"method": "SUBSCRIBE", "event": event}
        if pair is not None:
            message["pair"] = pair
        if symbol is not None:
            message["symbol"] = symbol
        message["apiKey"] = self._api_key
        message["signType"] = str(self.sign_type)
        message["signature"] = self._signer.sign(str(timestamp_ms))
        message["timestamp"] = timestamp_ms
        return message


def excerpt(body: bytes | str, limit: int = 200) -> str:
    """A bounded, printable excerpt of a body for error messages and logs."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def parse_envelope(status: int, body: bytes, codec: Codec = DEFAULT_CODEC) -> m.Envelope:
    """Read the envelope of an answer; raise VenueError for code != 200, BadResponse if none.

    An HTTP status >= 500 raises :class:`ServerFault` whatever the body holds (an envelope
    with an error code included): such an answer does not say whether the call was taken.
    """
    if status >= 500:
        raise server_fault(status, body)
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadResponse(
            f"HTTP {status}: body is not JSON: {excerpt(body)!r}",
            http_status=status,
            excerpt=excerpt(body),
        ) from None
    return read_envelope(status, obj, body, codec)


def read_envelope(
    status: int,
    obj: Any,
    body: bytes,
    codec: Codec = DEFAULT_CODEC,
    *,
    refusal: Callable[..., VenueError] = error_for,
) -> m.Envelope:
    """The envelope of an answer already parsed from body (status < 500), as parse_envelope.

    refusal makes the exception of a code != 200 (``error_for``; the order-management
    extension passes its own, which knows its order-state codes).
    """
    if type(obj) is not dict or "code" not in obj:
        raise BadResponse(
            f"HTTP {status}: body is not the venue's envelope: {excerpt(body)!r}",
            http_status=status,
            excerpt=excerpt(body),
        )
    try:
        env = codec.decode(m.Envelope, obj)
    except DecodeError as exc:
        raise BadResponse(
            f"HTTP {status}: malformed envelope ({exc}): {excerpt(body)!r}",
            http_status=status,
            excerpt=excerpt(body),
        ) from None
    if env.code != 200 or env.error:
        raise refusal(env.code, env.msg or "", http_status=status, sid=env.sid)
    if status >= 300:
        raise BadResponse(
            f"HTTP {status} with a success envelope: {excerpt(body)!r}",
            http_status=status,
            excerpt=excerpt(body),
        )
    return env


def server_fault(status: int, body: bytes) -> ServerFault:
    """The ServerFault of an HTTP status >= 500 answer (the envelope's code kept if any)."""
    code: int | None = None
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if type(obj) is dict and type(obj.get("code")) is int:
        code = obj["code"]
    return ServerFault(
        f"HTTP {status}: the venue failed while or after handling the call"
        f" ({excerpt(body)!r}); it may have executed it",
        http_status=status,
        code=code,
    )


def parse_response(path: str, status: int, body: bytes, codec: Codec = DEFAULT_CODEC) -> Any:
    """Records of an endpoint's answer: list of OrderResult/Position/MatchRecord or a balance."""
    env = parse_envelope(status, body, codec)
    data = env.data
    if path == BATCH_CREATE_PATH:
        return codec.decode_list(m.OrderResult, [] if data is None else data)
    if path == POSITIONS_PATH:
        return codec.decode_list(m.Position, [] if data is None else data)
    if path == MATCHES_PATH:
        return codec.decode_list(m.MatchRecord, [] if data is None else data)
    if path == BALANCE_PATH:
        return codec.decode(m.AccountBalance, data)
    raise ValueError(f"unknown endpoint path {path!r}")
