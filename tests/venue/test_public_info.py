"""The public info answers (server time, pair list) read leniently: shapes the venue may send."""

from __future__ import annotations

from decimal import Decimal

import orjson
import pytest

from framework.venue.errors import AuthError, BadResponse, ExtensionUnavailable
from framework.venue.public_info import parse_pair_list, parse_server_time


def answer(data: object, code: int = 200) -> bytes:
    """The venue's envelope around data."""
    return orjson.dumps({"error": code != 200, "code": code, "msg": "SUCCESS", "data": data})


@pytest.mark.parametrize(
    "data",
    [
        1_700_000_000_123,
        "1700000000123",
        {"serverTime": 1_700_000_000_123},
        {"time": "1700000000123"},
    ],
)
def test_the_server_time_is_read_from_a_number_a_string_or_an_object(data: object) -> None:
    assert parse_server_time(200, answer(data)) == 1_700_000_000_123


def test_a_server_time_in_seconds_is_taken_as_seconds() -> None:
    assert parse_server_time(200, answer(1_700_000_000.5)) == 1_700_000_000_500


@pytest.mark.parametrize("data", [None, "soon", {"other": 1}, True, -5])
def test_an_answer_without_a_time_is_a_bad_response(data: object) -> None:
    with pytest.raises(BadResponse, match="no server time"):
        parse_server_time(200, answer(data))


def test_404_means_the_venue_does_not_offer_the_path() -> None:
    with pytest.raises(ExtensionUnavailable, match="/api/third/info/time"):
        parse_server_time(404, b"Not Found")
    with pytest.raises(ExtensionUnavailable, match="/api/third/info/pairs"):
        parse_pair_list(404, b"")


def test_a_refusal_envelope_raises_its_venue_error() -> None:
    with pytest.raises(AuthError):
        parse_pair_list(401, answer(None, 401))


def test_pairs_are_read_by_name_with_the_rules_they_state_camel_or_snake() -> None:
    data = [
        {"pairName": "ETH-USD", "minQuantity": "0.01", "max_lever": 25, "trading": "true"},
        {"symbol": "BTC-USD", "quantityDecimals": 4.0, "minNotional": "lots", "color": "red"},
        {"noName": 1},
        "not an object",
    ]
    listed = parse_pair_list(200, answer(data))
    assert list(listed) == ["ETH-USD", "BTC-USD"]
    assert listed["ETH-USD"].rules == {
        "min_quantity": Decimal("0.01"),
        "max_lever": 25,
        "trading": True,
    }
    assert listed["BTC-USD"].rules == {"quantity_decimals": 4}  # "lots" is left out


@pytest.mark.parametrize(
    "data",
    [
        {"list": [{"pair": "ETH-USD", "priceDecimals": 1}]},
        {"ETH-USD": {"priceDecimals": "1"}},
    ],
)
def test_a_list_inside_an_object_or_an_object_keyed_by_pair_is_read_too(data: object) -> None:
    assert parse_pair_list(200, answer(data))["ETH-USD"].rules == {"price_decimals": 1}


def test_an_answer_with_no_named_pair_is_a_bad_response() -> None:
    with pytest.raises(BadResponse, match="no pair with a name"):
        parse_pair_list(200, answer([{"a": 1}]))
    assert parse_pair_list(200, answer([])) == {}
