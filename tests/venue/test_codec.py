"""Codec: every record decodes from its SPEC field names; nulls, decimals, unknown keys, errors."""

from __future__ import annotations

import re
import typing
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.venue import models as m
from framework.venue.codec import (
    DEFAULT_CODEC,
    decode,
    decode_batch_answer,
    decode_frame,
    decode_json,
    decode_match_answer,
    dumps_compact,
    encode,
    plain_decimal,
)
from framework.venue.errors import DecodeError
from tests.venue import samples


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


RECORDS: list[tuple[type[Any], dict[str, Any]]] = [
    (m.Position, samples.POSITION),
    (m.AccountBalance, samples.BALANCE),
    (m.MatchRecord, samples.MATCH),
    (m.PositionPush, samples.POSITION_PUSH["data"]),
    (m.AccountPush, samples.ACCOUNT_PUSH["data"]),
    (m.SubscribeAck, samples.POSITION_ACK),
]


@pytest.mark.parametrize(("cls", "wire"), RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_every_spec_field_maps_to_its_snake_case_attribute(
    cls: type[Any], wire: dict[str, Any]
) -> None:
    record = decode(cls, wire)
    for key, value in wire.items():
        got = getattr(record, snake(key))
        if value is None:
            assert got is None, key
        elif isinstance(got, Decimal):
            assert got == Decimal(value), key
        elif isinstance(got, datetime):
            assert got.tzinfo is not None, key
        else:
            assert got == value, key


@pytest.mark.parametrize(("cls", "wire"), RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_decimals_are_decimal_never_float(cls: type[Any], wire: dict[str, Any]) -> None:
    record = decode(cls, wire)
    for f in msgspec.structs.fields(cls):
        if "Decimal" in str(f.type):
            value = getattr(record, f.name)
            assert value is None or type(value) is Decimal, f.name


@pytest.mark.parametrize(("cls", "wire"), RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_unknown_fields_the_venue_adds_later_are_skipped(
    cls: type[Any], wire: dict[str, Any]
) -> None:
    added = {**wire, "brandNewField": [1, {"deep": 2}], "anotherOne": None}
    assert decode(cls, added) == decode(cls, wire)
    assert decode_json(cls, orjson.dumps(added)) == decode(cls, wire)


@pytest.mark.parametrize(("cls", "wire"), RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_encode_gives_back_the_wire_object(cls: type[Any], wire: dict[str, Any]) -> None:
    record = decode(cls, wire)
    again = decode(cls, encode(record))
    assert again == record


def test_nulls_stay_none_for_optional_fields() -> None:
    nulled = {k: None for k in samples.POSITION} | {"id": 1}
    record = decode(m.Position, nulled)
    assert record.id == 1
    assert record.opening_price is None and record.create_time is None and record.is_long is None


def test_venue_datetime_text_is_read_as_timezone_aware_utc() -> None:
    utc = decode(m.Position, samples.POSITION)
    assert utc.create_time == datetime(2024, 3, 1, 12, 34, 56, tzinfo=UTC)
    assert utc.create_time is not None and utc.create_time.tzinfo is UTC
    match = decode_json(m.MatchRecord, orjson.dumps(samples.MATCH))
    assert match.create_time == datetime(2024, 3, 1, 12, 34, 57, tzinfo=UTC)
    assert encode(match)["createTime"] == "2024-03-01 12:34:57"


def test_order_result_accepts_corderid_and_corderid_spelling() -> None:
    a = decode(m.OrderResult, {"corderId": "x1", "orderId": 5, "pairName": "ETH-USD"})
    b = decode(m.OrderResult, {"cOrderId": "x1", "orderId": 5, "pairName": "ETH-USD"})
    assert a == b
    assert a.client_order_id == "x1" and a.order_id == 5
    body = {"code": 200, "error": False, "data": [{"corderId": "x1", "orderId": 5}]}
    assert decode_batch_answer(orjson.dumps(body)) == [
        m.OrderResult(client_order_id="x1", order_id=5)
    ]


def test_int64_ids_survive_exactly() -> None:
    record = decode(m.OrderResult, samples.ORDER_RESULT)
    assert record.order_id == 9007199254740993


def test_envelope_sid_is_a_string_even_if_sent_as_number() -> None:
    assert decode(m.Envelope, {**samples.ENVELOPE, "sid": 77}).sid == "77"
    assert decode(m.Envelope, samples.ENVELOPE).ok


def test_frame_decodes_position_push_with_enums() -> None:
    push = decode_frame(samples.POSITION_PUSH)
    assert isinstance(push, m.PositionPush)
    assert push.change_type is m.ChangeType.INCREASE and push.direction is m.Direction.SHORT
    assert push.current_quantity == Decimal("1.5") and push.success is True


def test_frame_decodes_account_push_with_log_id() -> None:
    push = decode_frame(samples.ACCOUNT_PUSH)
    assert isinstance(push, m.AccountPush)
    assert push.log_id == 123456789012 and push.available_amount == Decimal("98722.5")


def test_frame_decodes_ack() -> None:
    ack = decode_frame(samples.POSITION_ACK)
    assert isinstance(ack, m.SubscribeAck) and ack.success and ack.pair == "ETH-USD"


def test_unknown_event_is_a_decode_error_naming_event() -> None:
    with pytest.raises(DecodeError) as err:
        decode_frame({"event": "api_orderbook", "data": {}})
    assert err.value.field == "event" and "api_orderbook" in str(err.value)


@pytest.mark.parametrize(
    ("cls", "wire", "field"),
    [
        (
            m.PositionPush,
            {**samples.POSITION_PUSH["data"], "currentQuantity": "1.2.3"},
            "currentQuantity",
        ),
        (m.PositionPush, {**samples.POSITION_PUSH["data"], "changeType": "FLIP"}, "changeType"),
        (m.PositionPush, {**samples.POSITION_PUSH["data"], "positionId": "abc"}, "positionId"),
        (m.AccountPush, {**samples.ACCOUNT_PUSH["data"], "logId": None}, "logId"),
        (
            m.AccountPush,
            {**samples.ACCOUNT_PUSH["data"], "availableAmount": "NaN"},
            "availableAmount",
        ),
        (m.Position, {**samples.POSITION, "isLong": "yes"}, "isLong"),
        (m.Position, {**samples.POSITION, "createTime": "yesterday"}, "createTime"),
        (m.MatchRecord, {**samples.MATCH, "averagePrice": [1]}, "averagePrice"),
        (m.OrderResult, {"orderId": 5}, "cOrderId"),
        (m.SubscribeAck, {"event": "api_account_res"}, "success"),
    ],
)
def test_malformed_field_raises_decode_error_naming_record_and_field(
    cls: type[Any], wire: dict[str, Any], field: str
) -> None:
    with pytest.raises(DecodeError) as err:
        decode(cls, wire)
    assert err.value.record == cls.__name__
    assert err.value.field == field
    assert cls.__name__ in str(err.value) and field in str(err.value)


def _fields_typed(cls: type[Any], kind: type) -> list[msgspec.structs.FieldInfo]:
    return [
        f for f in msgspec.structs.fields(cls) if f.type is kind or kind in typing.get_args(f.type)
    ]


CHECKED = [rec for rec in RECORDS if rec[0] is not m.SubscribeAck]


@pytest.mark.parametrize(("cls", "wire"), CHECKED, ids=lambda x: getattr(x, "__name__", ""))
@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_every_decimal_field_refuses_a_value_that_is_not_finite(
    cls: type[Any], wire: dict[str, Any], bad: str
) -> None:
    fields = _fields_typed(cls, Decimal)
    assert fields, cls
    for f in fields:
        with pytest.raises(DecodeError) as err:
            decode(cls, {**wire, f.encode_name: bad})
        assert err.value.field == f.encode_name, (cls, f.name)
        assert "finite" in str(err.value)


@pytest.mark.parametrize(("cls", "wire"), CHECKED, ids=lambda x: getattr(x, "__name__", ""))
def test_every_date_time_field_without_a_zone_is_read_as_utc(
    cls: type[Any], wire: dict[str, Any]
) -> None:
    for f in _fields_typed(cls, datetime):
        record = decode(cls, {**wire, f.encode_name: "2024-03-01 12:34:56"})
        assert getattr(record, f.name) == datetime(2024, 3, 1, 12, 34, 56, tzinfo=UTC), f.name
        zoned = decode(cls, {**wire, f.encode_name: "2024-03-01T12:34:56+02:00"})
        assert getattr(zoned, f.name).utcoffset().total_seconds() == 7200, f.name


@pytest.mark.parametrize("payload", [None, [], "text", 5, 1.5])
def test_non_object_payload_is_a_decode_error(payload: Any) -> None:
    with pytest.raises(DecodeError) as err:
        decode(m.Position, payload)
    assert err.value.record == "Position"


def test_decode_list_rejects_non_array() -> None:
    with pytest.raises(DecodeError):
        DEFAULT_CODEC.decode_list(m.MatchRecord, {"id": 1})


def test_float_numbers_are_read_through_their_shortest_text() -> None:
    record = decode(m.AccountBalance, {**samples.BALANCE, "availableAmount": 0.1})
    assert record.available_amount == Decimal("0.1")


@given(st.decimals(allow_nan=False, allow_infinity=False, places=None))
def test_plain_decimal_has_no_exponent_and_keeps_the_value(value: Decimal) -> None:
    text = plain_decimal(value)
    assert "E" not in text and "e" not in text
    assert Decimal(text) == value
    if "." in text:
        assert not text.endswith("0")


def test_plain_decimal_examples() -> None:
    assert plain_decimal(Decimal("1E+1")) == "10"
    assert plain_decimal(Decimal("1.500")) == "1.5"
    assert plain_decimal(Decimal("0E-8")) == "0"
    assert plain_decimal(Decimal("-0.0")) == "0"
    assert plain_decimal(Decimal("1E-7")) == "0.0000001"


@given(st.text())
def test_dumps_compact_is_ascii_and_space_free_json(text: str) -> None:
    body = dumps_compact({"a": text, "b": [1, "x y"]})
    assert body.isascii()
    import json

    assert json.loads(body) == {"a": text, "b": [1, "x y"]}
    assert body == json.dumps({"a": text, "b": [1, "x y"]}, separators=(",", ":")).encode()


def test_frame_errors_name_the_record_field_and_path_from_the_bytes() -> None:
    frame = {**samples.POSITION_PUSH, "data": {**samples.POSITION_PUSH["data"], "symbol": 5}}
    with pytest.raises(DecodeError) as err:
        decode_frame(orjson.dumps(frame))
    assert (err.value.record, err.value.field) == ("PositionPush", "symbol")
    assert "Expected `str`, got `int` - at `$.data.symbol`" in str(err.value)


def test_a_frame_that_is_not_json_is_a_decode_error_without_field() -> None:
    with pytest.raises(DecodeError) as err:
        decode_frame(b'{"event": "api_position", ')
    assert err.value.record == "frame" and err.value.field is None
    assert err.value.reason.startswith("not JSON")


def test_frame_text_and_parsed_frame_decode_alike() -> None:
    for frame in (samples.POSITION_PUSH, samples.ACCOUNT_PUSH, samples.POSITION_ACK):
        assert decode_frame(orjson.dumps(frame)) == decode_frame(frame)
        assert decode_frame(orjson.dumps(frame).decode()) == decode_frame(frame)


def test_a_failed_push_frame_keeps_its_success_flag() -> None:
    push = decode_frame(orjson.dumps({**samples.POSITION_PUSH, "success": False}))
    assert isinstance(push, m.PositionPush) and push.success is False


def test_match_answer_decodes_every_match_and_none_for_a_refusal() -> None:
    ok = {"error": False, "code": 200, "msg": "SUCCESS", "data": [samples.MATCH], "sid": "1"}
    assert decode_match_answer(orjson.dumps(ok)) == [decode(m.MatchRecord, samples.MATCH)]
    assert decode_match_answer(orjson.dumps({**ok, "data": None})) == []
    assert decode_match_answer(orjson.dumps({**ok, "code": 2001, "data": None})) is None
    bad = {**ok, "data": [samples.MATCH, {**samples.MATCH, "tradeFee": "x"}]}
    with pytest.raises(DecodeError) as err:
        decode_match_answer(orjson.dumps(bad))
    assert (err.value.record, err.value.field) == ("MatchRecord", "tradeFee")


def test_records_are_frozen_and_changed_with_replace() -> None:
    match = decode(m.MatchRecord, samples.MATCH)
    with pytest.raises(AttributeError):
        match.client_order_id = "x"  # type: ignore[misc]
    linked = msgspec.structs.replace(match, client_order_id="x", candidates=("x", "y"))
    assert linked.client_order_id == "x" and linked.id == match.id
    assert "clientOrderId" not in encode(linked) and "candidates" not in encode(linked)


_DECIMALS = st.decimals(
    allow_nan=False, allow_infinity=False, places=8, min_value=-(10**12), max_value=10**12
)
_TIMES = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2099, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=0))


@given(
    st.builds(
        m.MatchRecord,
        id=st.integers(min_value=1, max_value=2**63 - 1),
        entrust_id=st.none() | st.integers(min_value=1, max_value=2**63 - 1),
        create_time=st.none() | _TIMES,
        symbol=st.none() | st.text(max_size=12),
        is_long=st.none() | st.booleans(),
        average_price=st.none() | _DECIMALS,
        quantity=st.none() | _DECIMALS,
        trade_fee=st.none() | _DECIMALS,
    )
)
def test_a_match_survives_encode_then_decode(match: m.MatchRecord) -> None:
    wire = encode(match)
    assert decode(m.MatchRecord, wire) == match
    assert decode_json(m.MatchRecord, orjson.dumps(wire)) == match


@given(
    st.builds(
        m.PositionPush,
        change_type=st.sampled_from(m.ChangeType),
        current_quantity=st.none() | _DECIMALS,
        direction=st.none() | st.sampled_from(m.Direction),
        position_id=st.none() | st.integers(min_value=0, max_value=2**63 - 1),
        symbol=st.text(max_size=12),
        opening_price=st.none() | _DECIMALS,
    ),
    st.booleans(),
)
def test_a_position_push_survives_its_frame(push: m.PositionPush, success: bool) -> None:
    frame = {"event": "api_position", "success": success, "data": encode(push)}
    assert decode_frame(orjson.dumps(frame)) == msgspec.structs.replace(push, success=success)
