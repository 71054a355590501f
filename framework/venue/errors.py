"""The exception tree of the framework and the venue's error-code table (SPEC section 7).

::

    FrameworkError                     anything this framework raises on purpose
    ├── VenueError                     the venue answered with code != 200 (or HTTP 401/403/404);
    │   │                              a refusal only when ``refuses`` (a listed code or auth)
    │   ├── ParameterError             2001, 2002, 2310, 2312            family "parameter"
    │   ├── BalanceError               2102, 2122, 2123, 2124, 2201      family "balance"
    │   ├── LimitError                 2301-2306, 2317                   family "limit"
    │   ├── HaltedError                2307, 2316                        family "halted"
    │   ├── UnsupportedError           2318, 2325, 2330                  family "unsupported"
    │   ├── BusyError                  2329, 2331 (retryable)            family "busy"
    │   ├── AddressError               4001                              family "address"
    │   ├── AuthError                  HTTP/code 401, 403                family "auth"
    │   └── OrderStateError            2340, 2341 of a cancel or query   family "order"
    │                                  (order-management extension only: ORDER_CODES)
    ├── TransportError                 no venue answer was read
    │   ├── SendFailed                 failed before any byte reached the venue: safe to retry
    │   ├── AmbiguousOutcome           may have reached the venue: never blindly retry
    │   │   └── ServerFault            HTTP >= 500, whatever the body says: taken or not is unknown
    │   └── BadResponse                an answer that is not the envelope (HTTP error, not JSON)
    ├── DecodeError                    a payload that does not fit its record (names record, field)
    ├── ExtensionUnavailable           an order-management path answered 404, or its data is
    │                                  unreadable: turn the feature off (names path, reason)
    ├── TooManyPages                   a listing still full after its page bound (names path)
    └── ConfigError                    a configuration that cannot run (names path and line)

The order-management extension (cancel, open orders, query; VENUE-FACTS) is not in SPEC:
its codes 2340 (no such order) and 2341 (order already completed) are the venue twin's
(``ORDER_CODES``), raised as :class:`OrderStateError` only for those endpoints; any other
code there is a plain VenueError that says nothing about the order.

A venue refusal of one order inside a batch is not an exception: the execution engine turns
it into an OrderUpdate REJECTED event. Only whole-call failures are raised.

What says an order was *not* taken: only a code SPEC section 7 lists (``CODES``) or an auth
refusal (401, 403). An HTTP status >= 500 (even with a JSON envelope), a code the table does
not list, a body that is not the envelope, a timeout or reset after sending: none of these
says whether the venue executed the call, so the execution engine makes such a batch UNKNOWN.
"""

from __future__ import annotations

import re
from typing import Final

import attrs

__all__ = [
    "CODES",
    "ORDER_CODES",
    "ORDER_COMPLETED",
    "ORDER_NOT_FOUND",
    "AddressError",
    "AmbiguousOutcome",
    "AuthError",
    "BadResponse",
    "BalanceError",
    "BusyError",
    "CodeInfo",
    "ConfigError",
    "DecodeError",
    "ExtensionUnavailable",
    "FrameworkError",
    "HaltedError",
    "LimitError",
    "OrderStateError",
    "ParameterError",
    "SendFailed",
    "ServerFault",
    "TooManyPages",
    "TransportError",
    "UnsupportedError",
    "VenueError",
    "error_for",
    "order_error_for",
    "render_message",
]


class FrameworkError(Exception):
    """Root of every exception the framework raises on purpose."""


class VenueError(FrameworkError):
    """The venue refused a call: envelope code other than 200, or an auth status."""

    family: str = "unknown"

    def __init__(
        self,
        code: int,
        msg: str,
        *,
        http_status: int | None = None,
        sid: str | None = None,
    ) -> None:
        self.code = code
        self.msg = msg
        self.http_status = http_status
        self.sid = sid
        super().__init__(f"venue error {code}: {msg}" + (f" (sid {sid})" if sid else ""))

    @property
    def refuses(self) -> bool:
        """True when the answer surely means "not taken": a code of SPEC 7 or an auth refusal."""
        return self.code in CODES or isinstance(self, AuthError)

    @property
    def retryable(self) -> bool:
        """True only where the venue surely did not execute the order (e.g. 2329)."""
        info = CODES.get(self.code)
        return info.retryable if info is not None else False

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_venue_error, (type(self), self.code, self.msg, self.http_status, self.sid))


def _rebuild_venue_error(
    cls: type[VenueError], code: int, msg: str, http_status: int | None, sid: str | None
) -> VenueError:
    return cls(code, msg, http_status=http_status, sid=sid)


class ParameterError(VenueError):
    """An illegal, missing or badly scaled parameter (2001, 2002, 2310, 2312)."""

    family = "parameter"


class BalanceError(VenueError):
    """Not enough balance or a hot-account failure (2102, 2122-2124, 2201)."""

    family = "balance"


class LimitError(VenueError):
    """Quantity, leverage or position bounds (2301-2306, 2317)."""

    family = "limit"


class HaltedError(VenueError):
    """The contract does not trade now (2307, 2316)."""

    family = "halted"


class UnsupportedError(VenueError):
    """An order the account or pair cannot take (2318, 2325, 2330)."""

    family = "unsupported"


class BusyError(VenueError):
    """The venue is busy or updating; the order surely was not executed (2329, 2331)."""

    family = "busy"


class AddressError(VenueError):
    """Invalid address (4001)."""

    family = "address"


class AuthError(VenueError):
    """Missing or unknown API key, or a signature that does not verify (401, 403)."""

    family = "auth"


class OrderStateError(VenueError):
    """A cancel or query refused for the order's state: 2340 no such order, 2341 completed.

    Raised only by the order-management extension's parsers (the codes are the venue twin's,
    ``ORDER_CODES``): the call did nothing, so it refuses; ``order_missing`` and
    ``order_done`` say which state the venue named.
    """

    family = "order"

    @property
    def refuses(self) -> bool:
        """True: the venue refused the call for the order's state; it did nothing."""
        return True

    @property
    def order_missing(self) -> bool:
        """True when the venue says it knows no such order (2340)."""
        return self.code == ORDER_NOT_FOUND

    @property
    def order_done(self) -> bool:
        """True when the venue says the order is already completed: filled or canceled (2341)."""
        return self.code == ORDER_COMPLETED


class TransportError(FrameworkError):
    """No venue answer could be read."""


class SendFailed(TransportError):
    """The request failed before any byte reached the venue; resending is safe."""


class AmbiguousOutcome(TransportError):
    """The request may have reached the venue (timeout or reset after sending)."""


class ServerFault(AmbiguousOutcome):
    """HTTP status >= 500: the venue failed while or after handling the call; taken or not."""

    def __init__(self, message: str, *, http_status: int, code: int | None = None) -> None:
        self.http_status = http_status
        self.code = code
        super().__init__(message)


class BadResponse(TransportError):
    """An answer that is not the venue's envelope: HTTP error or a body that is not JSON."""

    def __init__(self, message: str, *, http_status: int | None = None, excerpt: str = "") -> None:
        self.http_status = http_status
        self.excerpt = excerpt
        super().__init__(message)


class DecodeError(FrameworkError, ValueError):
    """A payload that does not fit its record; names the record and the field."""

    def __init__(self, record: str, field: str | None, reason: str) -> None:
        self.record = record
        self.field = field
        self.reason = reason
        where = f"{record}.{field}" if field else record
        super().__init__(f"cannot decode {where}: {reason}")

    @property
    def unknown_event(self) -> bool:
        """True for a frame whose event is neither a push nor an acknowledgement (not malformed)."""
        return self.record == "frame" and self.field == "event"

    def __reduce__(self) -> tuple[object, ...]:
        return (DecodeError, (self.record, self.field, self.reason))


class ExtensionUnavailable(FrameworkError):
    """An order-management extension path the venue does not offer: HTTP 404 or unreadable data.

    The caller turns the feature off (one log line); nothing says the call had an effect.
    """

    def __init__(self, path: str, reason: str, *, http_status: int | None = None) -> None:
        self.path = path
        self.reason = reason
        self.http_status = http_status
        super().__init__(f"extension unavailable: {path}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_unavailable, (self.path, self.reason, self.http_status))


def _rebuild_unavailable(path: str, reason: str, http_status: int | None) -> ExtensionUnavailable:
    return ExtensionUnavailable(path, reason, http_status=http_status)


class TooManyPages(FrameworkError):
    """A paged listing still had full pages after max_pages; records holds what was read."""

    def __init__(self, path: str, pages: int, records: tuple[object, ...] = ()) -> None:
        self.path = path
        self.pages = pages
        self.records = records
        super().__init__(
            f"{path}: still full after {pages} pages ({len(records)} records read);"
            " raise max_pages or page_size"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (TooManyPages, (self.path, self.pages, self.records))


class ConfigError(FrameworkError):
    """A configuration that cannot run; the message names the path and line."""


@attrs.frozen(slots=True)
class CodeInfo:
    """One row of SPEC section 7: message template, family and whether a retry is safe."""

    code: int
    template: str
    family: str
    retryable: bool
    error_class: type[VenueError]


def _row(code: int, template: str, cls: type[VenueError], retryable: bool = False) -> CodeInfo:
    return CodeInfo(code, template, cls.family, retryable, cls)


CODES: Final[dict[int, CodeInfo]] = {
    info.code: info
    for info in (
        _row(2001, "Illegal parameter:{param0}", ParameterError),
        _row(2002, "Required parameter:{param0}", ParameterError),
        _row(2102, "Insufficient balance:{param0}", BalanceError),
        _row(2122, "No hot assets have been frozen", BalanceError),
        _row(2123, "The amount to be frozen must be greater than 0", BalanceError),
        _row(2124, "Failed to process hot account", BalanceError),
        _row(2201, "Insufficient balance available", BalanceError),
        _row(2301, "Quantity cannot be less than {param0}", LimitError),
        _row(2302, "Quantity cannot be greater than {param0}", LimitError),
        _row(2303, "Lever cannot be less than {param0}", LimitError),
        _row(2304, "Lever cannot be greater than {param0}", LimitError),
        _row(2305, "The quantity of one-way positions cannot be greater than {param0}", LimitError),
        _row(
            2306,
            "Total quantity of this contract positions cannot be greater than {param0}",
            LimitError,
        ),
        _row(2307, "Contract stops trading", HaltedError),
        _row(2310, "The position margin mode is invalid, please try again.", ParameterError),
        _row(2312, "Decimal places out of limit", ParameterError),
        _row(2316, "10 minutes before delivery:Stop Open/Undo", HaltedError),
        _row(2317, "Order too small", LimitError),
        _row(2318, "The hot account not support reverse position order!", UnsupportedError),
        _row(2325, "Position type not supported,Supported types are{0}", UnsupportedError),
        _row(2329, "The server is updating, please wait a moment...", BusyError, retryable=True),
        _row(2330, "No settlement coin found", UnsupportedError),
        _row(2331, "Market predict price was not obtained", BusyError, retryable=True),
        _row(4001, "Invalid address", AddressError),
    )
}
"""Every code of SPEC section 7 with its message template, family and retry safety."""

_PLACEHOLDER = re.compile(r"\{(param0|0)\}")


def render_message(code: int, *params: object) -> str:
    """Fill a code's template: {param0} and {0} take the first parameter."""
    info = CODES.get(code)
    if info is None:
        return str(params[0]) if params else f"error {code}"
    value = str(params[0]) if params else ""
    return _PLACEHOLDER.sub(lambda _m: value, info.template)


def error_for(
    code: int, msg: str, *, http_status: int | None = None, sid: str | None = None
) -> VenueError:
    """The VenueError subclass for a code; unknown codes still give a VenueError."""
    info = CODES.get(code)
    if info is not None:
        cls: type[VenueError] = info.error_class
    elif code in (401, 403) or http_status in (401, 403):
        cls = AuthError
    else:
        cls = VenueError
    return cls(code, msg, http_status=http_status, sid=sid)


ORDER_NOT_FOUND: Final = 2340
"""Order-management extension (the venue twin's code): the venue knows no such order."""
ORDER_COMPLETED: Final = 2341
"""Order-management extension (the venue twin's code): the order is already filled or canceled."""
ORDER_CODES: Final[dict[int, str]] = {
    ORDER_NOT_FOUND: "order does not exist",
    ORDER_COMPLETED: "order already completed",
}
"""Codes of the order-management extension (not SPEC section 7) and what each says."""


def order_error_for(
    code: int, msg: str, *, http_status: int | None = None, sid: str | None = None
) -> VenueError:
    """error_for for the order-management endpoints: ORDER_CODES give an OrderStateError."""
    if code in ORDER_CODES:
        return OrderStateError(code, msg, http_status=http_status, sid=sid)
    return error_for(code, msg, http_status=http_status, sid=sid)
