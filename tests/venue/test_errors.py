"""The SPEC section 7 table: every code, its template, family and retry safety."""

from __future__ import annotations

import pickle
import re

import pytest

from framework.venue.errors import (
    CODES,
    AmbiguousOutcome,
    BusyError,
    FrameworkError,
    SendFailed,
    TransportError,
    VenueError,
    error_for,
    render_message,
)

SPEC_CODES = {
    2001: "Illegal parameter:{param0}",
    2002: "Required parameter:{param0}",
    2102: "Insufficient balance:{param0}",
    2122: "No hot assets have been frozen",
    2123: "The amount to be frozen must be greater than 0",
    2124: "Failed to process hot account",
    2201: "Insufficient balance available",
    2301: "Quantity cannot be less than {param0}",
    2302: "Quantity cannot be greater than {param0}",
    2303: "Lever cannot be less than {param0}",
    2304: "Lever cannot be greater than {param0}",
    2305: "The quantity of one-way positions cannot be greater than {param0}",
    2306: "Total quantity of this contract positions cannot be greater than {param0}",
    2307: "Contract stops trading",
    2310: "The position margin mode is invalid, please try again.",
    2312: "Decimal places out of limit",
    2316: "10 minutes before delivery:Stop Open/Undo",
    2317: "Order too small",
    2318: "The hot account not support reverse position order!",
    2325: "Position type not supported,Supported types are{0}",
    2329: "The server is updating, please wait a moment...",
    2330: "No settlement coin found",
    2331: "Market predict price was not obtained",
    4001: "Invalid address",
}
FAMILIES = {"parameter", "balance", "limit", "halted", "unsupported", "busy", "address"}


def test_table_has_exactly_the_spec_codes_and_templates() -> None:
    assert {code: info.template for code, info in CODES.items()} == SPEC_CODES


@pytest.mark.parametrize("code", sorted(SPEC_CODES))
def test_each_code_maps_to_its_family_class(code: int) -> None:
    info = CODES[code]
    assert info.family in FAMILIES
    err = error_for(code, "m", http_status=200, sid="5")
    assert isinstance(err, VenueError) and isinstance(err, info.error_class)
    assert err.family == info.family and err.code == code and err.sid == "5"
    assert err.retryable is info.retryable


def test_only_busy_codes_are_retryable() -> None:
    assert {c for c, i in CODES.items() if i.retryable} == {2329, 2331}
    assert isinstance(error_for(2329, "x"), BusyError)


@pytest.mark.parametrize("code", sorted(SPEC_CODES))
def test_render_message_fills_placeholders(code: int) -> None:
    text = render_message(code, "0.001")
    assert "{" not in text
    template = SPEC_CODES[code]
    if re.search(r"\{(param0|0)\}", template):
        assert "0.001" in text
    else:
        assert text == template


def test_render_of_2325_uses_the_zero_placeholder() -> None:
    assert render_message(2325, "[3, 4]") == "Position type not supported,Supported types are[3, 4]"


def test_unknown_code_still_becomes_venue_error() -> None:
    err = error_for(7777, "new thing", http_status=200, sid="1")
    assert type(err) is VenueError and err.code == 7777 and "new thing" in str(err)


def test_transport_errors_are_apart_from_venue_errors() -> None:
    for cls in (SendFailed, AmbiguousOutcome):
        assert issubclass(cls, TransportError) and issubclass(cls, FrameworkError)
        assert not issubclass(cls, VenueError)
    assert not issubclass(AmbiguousOutcome, SendFailed)


def test_venue_error_pickles_with_its_fields() -> None:
    err = error_for(2301, "Quantity cannot be less than 0.001", http_status=200, sid="9")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err) and (again.code, again.msg, again.sid) == (2301, err.msg, "9")
