"""Order-management extension: golden wire format of each endpoint and lenient answer reading."""

from __future__ import annotations

import pickle
from decimal import Decimal
from typing import Any

import orjson
import pytest
from eth_account import Account
from eth_account.messages import encode_defunct

from framework.venue.errors import (
    AuthError,
    BadResponse,
    DecodeError,
    ExtensionUnavailable,
    FrameworkError,
    OrderStateError,
    ParameterError,
    ServerFault,
    TooManyPages,
    VenueError,
)
from framework.venue.order_management import (
    BatchCancelReport,
    OrderState,
    decode_cancel_all_ids,
    decode_cancel_results,
    decode_order_page,
    decode_order_record,
    parse_batch_cancel,
    parse_cancel,
    parse_cancel_all,
    parse_open_orders,
    parse_query_order,
)
from framework.venue.requests import (
    BATCH_CANCEL_PATH,
    BATCH_CANCEL_WITH_RESULTS_PATH,
    CANCEL_ALL_PATH,
    CANCEL_BY_CLIENT_ID_PATH,
    CANCEL_PATH,
    OPEN_ORDERS_PATH,
    QUERY_ORDER_PATH,
    OrderManagementPaths,
    RequestBuilder,
)
from framework.venue.signing import Secp256k1Signer

# A throwaway key published in eth-account's documentation: test data, never real funds.
KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
TS = 1700000000000


def builder(paths: OrderManagementPaths | None = None) -> RequestBuilder:
    return RequestBuilder("st_demo", Secp256k1Signer(KEY), order_paths=paths)


def oracle(text: str) -> str:
    return "0x" + Account.sign_message(encode_defunct(text=text), KEY).signature.hex().removeprefix(
        "0x"
    )


def answer(data: Any, code: int = 200, msg: str = "SUCCESS") -> bytes:
    return orjson.dumps({"error": code != 200, "code": code, "msg": msg, "data": data, "sid": "5"})


RECORD: dict[str, Any] = {
    "entrustId": 123456789,
    "clientOrderId": "pf-a1",
    "pairName": "ETH-USD",
    "isLong": True,
    "isMarket": False,
    "matchType": 1,
    "positionType": 3,
    "lever": 10,
    "price": "1850.50",
    "quantity": "0.5",
    "filledQuantity": "0.2",
    "status": "OPEN",
    "createTimeStamp": 1700000000000,
    "updateTimeStamp": 1700000000500,
}


# ---------------------------------------------------------------------------- requests


def test_cancel_order_golden() -> None:
    req = builder().cancel_order(123456789, TS)
    assert (req.method, req.path, req.body) == ("POST", CANCEL_PATH, b"")
    assert req.query == req.signed_text == "entrustId=123456789&timestamp=1700000000000"
    assert req.headers == {
        "APIKEY": "st_demo",
        "X-SAPI-SIGN-TYPE": "2",
        "signature": "0x560aab842d3b66e68c9627b657877f6196789e91276a4de0c5cd31687a9c7c440373a73e3df089c246b5f1ffba8fb7c8ba0b386a9be3c629baf3bf1aa8c76c0c1b",
        "Content-Type": "text/plain",
    }
    assert req.headers["signature"] == oracle(req.signed_text)


def test_cancel_by_client_id_signs_raw_and_sends_percent_encoded() -> None:
    req = builder().cancel_by_client_id("pf-a1 b/c", TS)
    assert req.path == CANCEL_BY_CLIENT_ID_PATH and req.body == b""
    assert req.signed_text == "clientOrderId=pf-a1 b/c&timestamp=1700000000000"
    assert req.query == "clientOrderId=pf-a1%20b%2Fc&timestamp=1700000000000"
    assert req.headers["signature"] == (
        "0xd162365e97f44b9e4d1d851ba19937e48f0de918e6feb71c9575b09c2f3d95b55454c8c47901850ae5e4f7021acb0230bf6896885d224964ddfa8bc0261a50c91b"
    )
    assert req.headers["signature"] == oracle(req.signed_text)


@pytest.mark.parametrize(
    ("with_results", "path"),
    [(False, BATCH_CANCEL_PATH), (True, BATCH_CANCEL_WITH_RESULTS_PATH)],
)
def test_batch_cancel_signs_raw_commas_and_sends_them_as_2c(with_results: bool, path: str) -> None:
    req = builder().batch_cancel([11, 22, 33], TS, with_results=with_results)
    assert (req.method, req.path, req.body) == ("POST", path, b"")
    assert req.signed_text == "entrustIds=11,22,33&timestamp=1700000000000"
    assert req.query == "entrustIds=11%2C22%2C33&timestamp=1700000000000"
    assert req.headers["signature"] == (
        "0x96c3fd021034e1a9135b19f381ce22a422a79bf13145aaedfdea28d8998589825aeeabd63a904f357e890926174db9243e2e40e67e4728ddfe825111479843d11c"
    )
    assert req.headers["signature"] == oracle(req.signed_text)
    assert req.headers["Content-Type"] == "text/plain"


@pytest.mark.parametrize(
    ("pair", "is_long", "query", "signature"),
    [
        (
            None,
            None,
            "timestamp=1700000000000",
            "0x51b1f0738d7a30501f65b3ecd1b4d76326a36692c91d2ff4c3df098e6e5ffa07261e1029403e54ed70d2ff21696b162374b1be43000d5084fc25ae5efa609d351b",
        ),
        (
            "ETH-USD",
            None,
            "pairName=ETH-USD&timestamp=1700000000000",
            "0x7ecf95adeb8718977fdfbf08d713a00e12856fedb5a4c0208f05a6ba5867a4df0cf244d2d058cbd6abde16df3932bb1f4a91aab053be1734dd9b9803ae6f4b011b",
        ),
        (
            "ETH-USD",
            False,
            "isLong=false&pairName=ETH-USD&timestamp=1700000000000",
            "0x574ac7daccc9240409bdb361e9099a7e83e1cde78dc9266407588cd84673a4530cb345d2df27afb9ce55504748d1f152cd630aa253f84d18f02ae0f3ef6a37001b",
        ),
        (
            "ETH-USD",
            True,
            "isLong=true&pairName=ETH-USD&timestamp=1700000000000",
            "0xe0b8b40a8e3262eb06706b3de116bdeddde573b9e421f50d9892ccbd1a65d49f13f39ecd53668afde0a0c68ef424ae59207aec2f2435061c26377f666e3653731c",
        ),
    ],
)
def test_cancel_all_golden(
    pair: str | None, is_long: bool | None, query: str, signature: str
) -> None:
    req = builder().cancel_all(TS, pair=pair, is_long=is_long)
    assert (req.method, req.path, req.body) == ("POST", CANCEL_ALL_PATH, b"")
    assert req.query == req.signed_text == query
    assert req.headers["signature"] == signature == oracle(query)


def test_open_orders_golden() -> None:
    req = builder().open_orders("ETH-USD", TS, page_no=2, page_size=50)
    assert (req.method, req.path, req.body) == ("POST", OPEN_ORDERS_PATH, b"")
    assert req.query == req.signed_text
    assert req.query == "pageNo=2&pageSize=50&pairName=ETH-USD&timestamp=1700000000000"
    assert req.headers["signature"] == (
        "0x4940a315b1fdee1f6117b45181580cec17df493a7bb02ab7c512307a345cf0b211da7a769a1f199bb846b76b4830a09db727bb27b669f83480243768c2856f981b"
    )
    default = builder().open_orders("ETH-USD", TS)
    assert default.query == "pageNo=1&pageSize=50&pairName=ETH-USD&timestamp=1700000000000"


def test_query_order_golden_same_text_as_cancel_other_path() -> None:
    req = builder().query_order(123456789, TS)
    assert (req.method, req.path, req.body) == ("POST", QUERY_ORDER_PATH, b"")
    assert req.query == req.signed_text == "entrustId=123456789&timestamp=1700000000000"
    # The signed text covers no path: a query and a cancel of one id sign alike.
    assert req.headers["signature"] == builder().cancel_order(123456789, TS).headers["signature"]


def test_paths_are_configurable() -> None:
    paths = OrderManagementPaths(cancel="/v2/cancel", open_orders="/v2/open")
    b = builder(paths)
    assert b.cancel_order(1, TS).path == "/v2/cancel"
    assert b.open_orders("ETH-USD", TS).path == "/v2/open"
    assert b.query_order(1, TS).path == QUERY_ORDER_PATH


@pytest.mark.parametrize("bad", [0, -1, True, "12", 1.0])
def test_ids_must_be_positive_ints(bad: Any) -> None:
    with pytest.raises(ParameterError) as err:
        builder().cancel_order(bad, TS)
    assert err.value.code == 2001 and "entrustId" in err.value.msg
    with pytest.raises(ParameterError):
        builder().batch_cancel([1, bad], TS)


def test_empty_batch_cancel_and_client_id_refused_locally() -> None:
    with pytest.raises(ParameterError) as err:
        builder().batch_cancel([], TS)
    assert err.value.code == 2002 and "entrustIds" in err.value.msg
    with pytest.raises(ParameterError):
        builder().cancel_by_client_id("", TS)


@pytest.mark.parametrize("size", [0, -5])
def test_open_orders_page_bounds_refused_locally(size: int) -> None:
    with pytest.raises(ParameterError):
        builder().open_orders("ETH-USD", TS, page_size=size)
    with pytest.raises(ParameterError):
        builder().open_orders("ETH-USD", TS, page_no=size)


# ---------------------------------------------------------------------------- order record


def test_order_record_twin_shape() -> None:
    r = decode_order_record(RECORD)
    assert (r.entrust_id, r.client_order_id, r.pair_name) == (123456789, "pf-a1", "ETH-USD")
    assert (r.is_long, r.is_market, r.match_type, r.position_type, r.lever) == (
        True,
        False,
        1,
        3,
        10,
    )
    assert r.price == Decimal("1850.50") and r.quantity == Decimal("0.5")
    assert r.filled_quantity == Decimal("0.2") and r.remaining == Decimal("0.3")
    assert (r.status, r.state) == ("OPEN", OrderState.OPEN)
    assert (r.create_time_stamp, r.update_time_stamp) == (1700000000000, 1700000000500)
    assert r.extra == {}


def test_order_record_aliases_strings_and_numbers() -> None:
    r = decode_order_record(
        {
            "entrustId": "987",
            "corderId": "c9",
            "symbol": "BTC-USD",
            "isLong": "false",
            "lever": "5",
            "price": None,
            "quantity": 2,
            "filledQuantity": "",
            "status": "FILLED",
        }
    )
    assert (r.entrust_id, r.client_order_id, r.pair_name, r.is_long, r.lever) == (
        987,
        "c9",
        "BTC-USD",
        False,
        5,
    )
    assert r.price is None and r.quantity == Decimal(2) and r.filled_quantity is None
    assert r.state is OrderState.FILLED and r.remaining is None
    assert r.is_market is None and r.create_time_stamp is None
    assert decode_order_record({"entrustId": 1, "cOrderId": "c1"}).client_order_id == "c1"
    assert decode_order_record({"orderId": 4}).entrust_id == 4


def test_order_record_json_numbers_read_from_their_text() -> None:
    body = answer(None).replace(
        b'"data":null', b'"data":{"entrustId":1,"price":1850.10,"quantity":0.1}'
    )
    r = parse_query_order(QUERY_ORDER_PATH, 200, body)
    assert r is not None
    assert str(r.price) == "1850.10" and r.quantity == Decimal("0.1")


def test_order_record_keeps_unknown_and_unreadable_fields_in_extra() -> None:
    r = decode_order_record(
        {**RECORD, "avgPrice": "1850.4", "source": {"api": True}, "lever": "ten", "price": "NaN"}
    )
    assert r.extra == {
        "avgPrice": "1850.4",
        "source": {"api": True},
        "lever": "ten",
        "price": "NaN",
    }
    assert r.lever is None and r.price is None and r.quantity == Decimal("0.5")


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("OPEN", OrderState.OPEN),
        ("PARTIALLY_FILLED", OrderState.OPEN),
        ("filled", OrderState.FILLED),
        ("CANCELED", OrderState.CANCELED),
        ("CANCELLED", OrderState.CANCELED),
        ("EXPIRED", OrderState.UNKNOWN),
        (3, OrderState.UNKNOWN),
        (None, OrderState.UNKNOWN),
    ],
)
def test_order_state_helper(status: Any, state: OrderState) -> None:
    r = decode_order_record({"entrustId": 1, "status": status})
    assert r.state is state
    assert r.status == (None if status is None else str(status))  # kept as given


@pytest.mark.parametrize("obj", [None, True, "x", [RECORD], {"clientOrderId": "a"}])
def test_order_record_without_an_id_is_a_decode_error(obj: Any) -> None:
    with pytest.raises(DecodeError) as err:
        decode_order_record(obj)
    assert err.value.record == "OrderRecord"


# ---------------------------------------------------------------------------- open orders


def test_open_orders_page_twin_shape() -> None:
    data = {"list": [RECORD, {**RECORD, "entrustId": 2}], "total": 7, "pageNo": 1, "pageSize": 2}
    page = parse_open_orders(OPEN_ORDERS_PATH, 200, answer(data))
    assert [r.entrust_id for r in page.records] == [123456789, 2]
    assert (page.total, page.page_no, page.page_size) == (7, 1, 2)


@pytest.mark.parametrize("key", ["records", "rows"])
def test_open_orders_page_other_list_keys_and_unknowns_kept(key: str) -> None:
    page = decode_order_page({key: [RECORD], "total": "1", "pages": 1})
    assert len(page.records) == 1 and page.total == 1 and page.extra == {"pages": 1}


def test_open_orders_bare_list_and_null() -> None:
    page = parse_open_orders(OPEN_ORDERS_PATH, 200, answer([RECORD]))
    assert len(page.records) == 1 and page.total is None and page.page_no is None
    empty = parse_open_orders(OPEN_ORDERS_PATH, 200, answer(None))
    assert empty.records == () and empty.total is None
    assert decode_order_page({"list": None, "total": 0}).records == ()


@pytest.mark.parametrize(
    "data",
    ["orders", 5, True, {"total": 3}, {"list": "x"}, [RECORD, "x"], [{"clientOrderId": "a"}]],
)
def test_open_orders_unreadable_shape_is_extension_unavailable(data: Any) -> None:
    with pytest.raises(ExtensionUnavailable) as err:
        parse_open_orders(OPEN_ORDERS_PATH, 200, answer(data))
    assert err.value.path == OPEN_ORDERS_PATH and "unreadable" in err.value.reason
    assert OPEN_ORDERS_PATH in str(err.value)


# ---------------------------------------------------------------------------- query, cancel


def test_query_order_record_null_and_bad_shape() -> None:
    r = parse_query_order(QUERY_ORDER_PATH, 200, answer(RECORD))
    assert r is not None and r.entrust_id == 123456789
    assert parse_query_order(QUERY_ORDER_PATH, 200, answer(None)) is None
    with pytest.raises(ExtensionUnavailable):
        parse_query_order(QUERY_ORDER_PATH, 200, answer([RECORD]))


@pytest.mark.parametrize("path", [CANCEL_PATH, CANCEL_BY_CLIENT_ID_PATH])
def test_cancel_record_or_anything_is_success(path: str) -> None:
    r = parse_cancel(path, 200, answer({**RECORD, "status": "CANCELED"}))
    assert r is not None and r.state is OrderState.CANCELED
    for data in (None, True, "ok", 1, [1], {"result": True}):
        assert parse_cancel(path, 200, answer(data)) is None


@pytest.mark.parametrize(("code", "missing", "done"), [(2340, True, False), (2341, False, True)])
def test_cancel_refused_for_order_state(code: int, missing: bool, done: bool) -> None:
    with pytest.raises(OrderStateError) as err:
        parse_cancel(CANCEL_PATH, 200, answer(None, code, "order state"))
    exc = err.value
    assert (exc.code, exc.msg, exc.sid, exc.family) == (code, "order state", "5", "order")
    assert (exc.order_missing, exc.order_done, exc.refuses, exc.retryable) == (
        missing,
        done,
        True,
        False,
    )


def test_cancel_unknown_code_is_a_plain_venue_error_not_an_order_refusal() -> None:
    with pytest.raises(VenueError) as err:
        parse_cancel(CANCEL_PATH, 200, answer(None, 2399, "odd"))
    assert type(err.value) is VenueError and err.value.code == 2399
    assert not err.value.refuses


def test_order_state_codes_only_on_the_extension() -> None:
    from framework.venue.requests import BATCH_CREATE_PATH, parse_response

    with pytest.raises(VenueError) as err:
        parse_response(BATCH_CREATE_PATH, 200, answer(None, 2340, "x"))
    assert type(err.value) is VenueError and not err.value.refuses


def test_listed_codes_keep_their_family_on_the_extension() -> None:
    with pytest.raises(ParameterError):
        parse_cancel(CANCEL_PATH, 200, answer(None, 2001, "Illegal parameter:entrustId"))
    with pytest.raises(AuthError):
        parse_cancel(CANCEL_PATH, 401, answer(None, 401, "unauthorized"))


# ---------------------------------------------------------------------------- batch cancel


def test_batch_cancel_per_order_results() -> None:
    data = [
        {"entrustId": 11, "code": 200, "msg": "SUCCESS"},
        {"entrustId": "22", "code": 2341, "msg": "order already completed", "at": 5},
    ]
    report = parse_batch_cancel(BATCH_CANCEL_WITH_RESULTS_PATH, 200, answer(data), [11, 22, 33])
    ok, done = report.results
    assert (ok.entrust_id, ok.ok, ok.msg) == (11, True, "SUCCESS")
    assert (done.entrust_id, done.ok, done.order_done, done.order_missing) == (
        22,
        False,
        True,
        False,
    )
    assert done.extra == {"at": 5}
    assert report.unreported == (33,)  # not named by the answer: no evidence


@pytest.mark.parametrize(
    "data",
    [None, True, "done", {"success": True}, [11, 22], [{"entrustId": 11}], [{"code": 200}]],
)
def test_batch_cancel_without_per_order_results_reports_none(data: Any) -> None:
    report = parse_batch_cancel(BATCH_CANCEL_PATH, 200, answer(data), [11, 22])
    assert report == BatchCancelReport(results=(), unreported=(11, 22))
    assert decode_cancel_results(data) is None


def test_batch_cancel_reports_add() -> None:
    a = parse_batch_cancel(BATCH_CANCEL_PATH, 200, answer(None), [1])
    b = parse_batch_cancel(
        BATCH_CANCEL_PATH, 200, answer([{"entrustId": 2, "code": 200, "msg": ""}]), [2]
    )
    both = a + b
    assert both.unreported == (1,) and [r.entrust_id for r in both.results] == [2]


def test_batch_cancel_refused_whole_call_raises() -> None:
    with pytest.raises(ParameterError):
        parse_batch_cancel(BATCH_CANCEL_PATH, 200, answer(None, 2001, "Illegal"), [1])


# ---------------------------------------------------------------------------- cancel all


@pytest.mark.parametrize(
    ("data", "ids"),
    [
        ({"entrustIds": [1, 2]}, (1, 2)),
        ([3, "4"], (3, 4)),
        ([RECORD], (123456789,)),
        ({"entrustIds": []}, ()),
        (None, None),
        (True, None),
        ({"count": 2}, None),
        (["a"], None),
    ],
)
def test_cancel_all_ids(data: Any, ids: tuple[int, ...] | None) -> None:
    assert parse_cancel_all(CANCEL_ALL_PATH, 200, answer(data)) == ids
    assert decode_cancel_all_ids(data) == ids


# ---------------------------------------------------------------------------- transport


@pytest.mark.parametrize(
    "parse",
    [
        lambda s, b: parse_cancel(CANCEL_PATH, s, b),
        lambda s, b: parse_batch_cancel(BATCH_CANCEL_PATH, s, b, [1]),
        lambda s, b: parse_cancel_all(CANCEL_ALL_PATH, s, b),
        lambda s, b: parse_open_orders(OPEN_ORDERS_PATH, s, b),
        lambda s, b: parse_query_order(QUERY_ORDER_PATH, s, b),
    ],
)
def test_http_404_is_extension_unavailable_5xx_a_server_fault(parse: Any) -> None:
    for body in (b"<html>Not Found</html>", b"", answer(None, 404, "Not Found")):
        with pytest.raises(ExtensionUnavailable) as err:
            parse(404, body)
        assert err.value.http_status == 404
    with pytest.raises(ServerFault) as fault:
        parse(500, answer(None, 2340, "x"))
    assert fault.value.code == 2340  # ambiguous whatever the body says
    with pytest.raises(BadResponse):
        parse(200, b"<html>ok</html>")


def test_404_with_an_order_state_code_is_the_order_not_the_path() -> None:
    with pytest.raises(OrderStateError) as err:
        parse_cancel(CANCEL_PATH, 404, answer(None, 2340, "order does not exist"))
    assert err.value.order_missing and err.value.http_status == 404


def test_new_exceptions_pickle_and_sit_in_the_tree() -> None:
    unavailable = pickle.loads(pickle.dumps(ExtensionUnavailable("/p", "why", http_status=404)))
    assert (unavailable.path, unavailable.reason, unavailable.http_status) == ("/p", "why", 404)
    pages = pickle.loads(pickle.dumps(TooManyPages("/p", 3, (1, 2))))
    assert (pages.path, pages.pages, pages.records) == ("/p", 3, (1, 2))
    state = pickle.loads(pickle.dumps(OrderStateError(2341, "done", sid="1")))
    assert type(state) is OrderStateError and state.order_done
    assert all(
        issubclass(c, FrameworkError) for c in (ExtensionUnavailable, TooManyPages, OrderStateError)
    )
    import framework.venue.errors as errors

    doc = errors.__doc__ or ""
    assert all(n in doc for n in ("ExtensionUnavailable", "TooManyPages", "OrderStateError"))
