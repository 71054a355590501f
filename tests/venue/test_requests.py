"""Golden wire format of every endpoint: method, path, query, body, headers, signature."""

from __future__ import annotations

from decimal import Decimal

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct

from framework.venue.errors import BadResponse, BusyError, ParameterError, VenueError
from framework.venue.models import MatchType, OrderInput, PositionType
from framework.venue.requests import (
    BALANCE_PATH,
    BATCH_CREATE_PATH,
    MATCHES_PATH,
    POSITIONS_PATH,
    RequestBuilder,
    parse_response,
)
from framework.venue.signing import Secp256k1Signer

# A throwaway key published in eth-account's documentation: test data, never real funds.
KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
TS = 1700000000000


def builder(language: str | None = None) -> RequestBuilder:
    return RequestBuilder("st_demo", Secp256k1Signer(KEY), language=language)


def oracle(text: str) -> str:
    return "0x" + Account.sign_message(encode_defunct(text=text), KEY).signature.hex().removeprefix(
        "0x"
    )


ORDERS = [
    OrderInput(
        client_order_id="a1",
        is_long=True,
        is_market=False,
        lever=10,
        match_type=MatchType.GTC,
        pair_name="ETH-USD",
        position_type=PositionType.ISOLATED,
        price=Decimal("1850.50"),
        quantity=Decimal("1E+1"),
    ),
    OrderInput(
        client_order_id="a2",
        is_long=False,
        is_market=True,
        lever=5,
        match_type=MatchType.IOC,
        pair_name="BTC-USD",
        position_type=PositionType.CROSS,
        price=None,
        quantity=Decimal("0.010"),
    ),
]


def test_batch_create_golden() -> None:
    req = builder().batch_create(ORDERS, TS)
    assert (req.method, req.path, req.query) == ("POST", BATCH_CREATE_PATH, "")
    assert req.body == (
        b'{"orders":[{"clientOrderId":"a1","isLong":true,"isMarket":false,"lever":10,'
        b'"matchType":1,"pairName":"ETH-USD","positionType":3,"price":"1850.5","quantity":"10"},'
        b'{"clientOrderId":"a2","isLong":false,"isMarket":true,"lever":5,"matchType":2,'
        b'"pairName":"BTC-USD","positionType":4,"quantity":"0.01"}],"timestamp":"1700000000000"}'
    )
    assert req.signed_text.encode() == req.body
    assert req.headers == {
        "APIKEY": "st_demo",
        "X-SAPI-SIGN-TYPE": "2",
        "signature": "0x5ab955e1671b8b8d46f845f13de42e8216bf9b6f2ca83ce977236ae0250129d75c79dcf46831872debcd0a0b4b4dca272d58f9facaf39bc63a9e48a9c699845a1c",
        "Content-Type": "application/json",
    }
    assert req.headers["signature"] == oracle(req.body.decode())


def test_positions_golden() -> None:
    req = builder().positions("ETH-USD", TS, page_no=1, page_size=100)
    assert (req.method, req.path, req.body) == ("POST", POSITIONS_PATH, b"")
    assert req.query == "pageNo=1&pageSize=100&pairName=ETH-USD&timestamp=1700000000000"
    assert req.signed_text == req.query
    assert req.target == POSITIONS_PATH + "?" + req.query
    assert req.headers["signature"] == (
        "0x010163ed5f722d70cbec5e439567a9b1a821d0f263c9997ee3e347ca14dfded35b6cf2446ba15b234d9d5140d7b81375d40ca84b3f8f63acfadc8c23472a6c551b"
    )
    assert req.headers["Content-Type"] == "text/plain"


def test_balance_golden() -> None:
    req = builder().balance("USD", TS)
    assert (req.path, req.query, req.body) == (
        BALANCE_PATH,
        "symbol=USD&timestamp=1700000000000",
        b"",
    )
    assert req.headers["signature"] == (
        "0x7651783442072c7669fecd4e40523698592dc144b77135132613f356a8679b563ab3f9165e0d68fba7046e150bd9588c582aae49df72b4da0bd5992658a8eb261c"
    )


def test_matches_golden_with_every_parameter() -> None:
    req = builder().matches("ETH-USD", TS, match_id=123, page_no=2, page_size=50)
    assert req.path == MATCHES_PATH
    assert req.query == "matchId=123&pageNo=2&pageSize=50&pairName=ETH-USD&timestamp=1700000000000"
    assert req.headers["signature"] == (
        "0x18ea810e3c3b81f90dfabb8930ae28657442503c2fc838ed1319d5b4ab2c068343f9f60bb195f41fe77f76b52111eb0b641efc82557ec0603056f642cec4796d1b"
    )


def test_matches_leaves_unset_optionals_out() -> None:
    req = builder().matches("ETH-USD", TS)
    assert req.query == "pairName=ETH-USD&timestamp=1700000000000"
    assert req.headers["signature"] == oracle(req.query)


def test_subscribe_message_golden() -> None:
    msg = builder().subscribe("api_position", TS, pair="ETH-USD")
    assert msg == {
        "method": "SUBSCRIBE",
        "event": "api_position",
        "pair": "ETH-USD",
        "apiKey": "st_demo",
        "signType": "2",
        "signature": "0x54687e5eeb3f6cc8b0cdd64de56baac1f32a5efa72b6dea2295485f0bba392bf6aca02fcae4d89c14bb139e3b77aa2777dde510a4ea7eca6fb999332efefb9551c",
        "timestamp": TS,
    }
    account = builder().subscribe("api_account", TS, symbol="USD")
    assert account["symbol"] == "USD" and account["signature"] == oracle(str(TS))


def test_accept_language_header_is_optional_and_checked() -> None:
    assert "Accept-Language" not in builder().balance("USD", TS).headers
    assert builder("en-US").balance("USD", TS).headers["Accept-Language"] == "en-US"
    with pytest.raises(ValueError, match="language"):
        builder("fr-FR")


def test_query_values_are_signed_raw_and_sent_percent_encoded() -> None:
    req = builder().positions("A B/C", TS)
    assert req.signed_text == "pairName=A B/C&timestamp=1700000000000"
    assert req.query == "pairName=A%20B%2FC&timestamp=1700000000000"
    assert req.headers["signature"] == oracle(req.signed_text)


def test_more_than_twenty_orders_refused_locally() -> None:
    with pytest.raises(ParameterError) as err:
        builder().batch_create([ORDERS[0]] * 21, TS)
    assert err.value.code == 2001 and "orders" in err.value.msg


def test_empty_batch_refused_locally() -> None:
    with pytest.raises(ParameterError) as err:
        builder().batch_create([], TS)
    assert err.value.code == 2002


@pytest.mark.parametrize("size", [0, 101, -1])
def test_position_page_size_out_of_range_refused_locally(size: int) -> None:
    with pytest.raises(ParameterError) as err:
        builder().positions("ETH-USD", TS, page_size=size)
    assert err.value.code == 2001 and "pageSize" in err.value.msg


def test_non_ascii_client_order_id_is_escaped_like_the_sdk() -> None:
    order = OrderInput(
        client_order_id="é1",
        is_long=True,
        is_market=True,
        lever=1,
        match_type=MatchType.IOC,
        pair_name="ETH-USD",
        position_type=PositionType.CROSS,
        quantity=Decimal(1),
    )
    req = builder().batch_create([order], TS)
    assert b'"clientOrderId":"\\u00e91"' in req.body
    assert req.headers["signature"] == oracle(req.body.decode())


def test_builder_repr_has_no_key_material() -> None:
    text = repr(builder())
    assert "st_demo" not in text and KEY[2:] not in text


def test_parse_response_success_decodes_records() -> None:
    body = b'{"error":false,"code":200,"msg":"SUCCESS","data":[{"corderId":"a1","orderId":7,"pairName":"ETH-USD"}],"sid":"9"}'
    results = parse_response(BATCH_CREATE_PATH, 200, body)
    assert [(r.client_order_id, r.order_id) for r in results] == [("a1", 7)]


def test_parse_response_error_code_raises_family_with_sid() -> None:
    body = b'{"error":true,"code":2329,"msg":"The server is updating, please wait a moment...","data":null,"sid":"77"}'
    with pytest.raises(BusyError) as err:
        parse_response(BATCH_CREATE_PATH, 200, body)
    assert err.value.retryable and err.value.sid == "77" and err.value.http_status == 200


def test_parse_response_unknown_code_is_still_venue_error() -> None:
    with pytest.raises(VenueError) as err:
        parse_response(BALANCE_PATH, 200, b'{"error":true,"code":9999,"msg":"odd","sid":"1"}')
    assert type(err.value) is VenueError and err.value.code == 9999 and not err.value.retryable


def test_parse_response_non_json_gives_status_and_bounded_excerpt() -> None:
    body = b"<html>" + b"x" * 5000 + b"</html>"
    with pytest.raises(BadResponse) as err:
        parse_response(BALANCE_PATH, 404, body)
    assert err.value.http_status == 404 and "404" in str(err.value)
    assert len(str(err.value)) < 400


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (500, b'{"error":true,"code":500,"msg":"Internal Server Error","data":null}', 500),
        (503, b'{"error":true,"code":2329,"msg":"busy","data":null,"sid":"9"}', 2329),
        (503, b"<html>" + b"x" * 5000 + b"</html>", None),
        (502, b"", None),
    ],
)
def test_parse_response_http_5xx_is_a_server_fault_whatever_the_body(
    status: int, body: bytes, code: int | None
) -> None:
    from framework.venue.errors import AmbiguousOutcome, ServerFault

    with pytest.raises(ServerFault) as err:
        parse_response(BATCH_CREATE_PATH, status, body)
    assert isinstance(err.value, AmbiguousOutcome)  # never a refusal
    assert err.value.http_status == status and err.value.code == code
    assert str(status) in str(err.value) and len(str(err.value)) < 400


def test_only_listed_codes_and_auth_refuse() -> None:
    from framework.venue.errors import CODES, VenueError

    for code in CODES:
        with pytest.raises(VenueError) as err:
            parse_response(BATCH_CREATE_PATH, 200, b'{"error":true,"code":%d,"msg":"x"}' % code)
        assert err.value.refuses, code
    with pytest.raises(VenueError) as unlisted:
        parse_response(BATCH_CREATE_PATH, 200, b'{"error":true,"code":7777,"msg":"odd"}')
    assert not unlisted.value.refuses
    with pytest.raises(VenueError) as auth:
        parse_response(BATCH_CREATE_PATH, 401, b'{"error":true,"code":401,"msg":"Unauthorized"}')
    assert auth.value.refuses


def test_parse_response_401_envelope_is_auth_error() -> None:
    from framework.venue.errors import AuthError

    with pytest.raises(AuthError):
        parse_response(
            BALANCE_PATH,
            401,
            b'{"error":true,"code":401,"msg":"unauthorized","data":null,"sid":"1"}',
        )
