"""Codec: every record decodes from its SPEC field names; nulls, decimals, extras, errors."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.venue import models as m
from framework.venue.codec import (
    DEFAULT_CODEC,
    Codec,
    decode,
    decode_frame,
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
    assert record.extra == {}


@pytest.mark.parametrize(("cls", "wire"), RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_decimals_are_decimal_never_float(cls: type[Any], wire: dict[str, Any]) -> None:
    record = decode(cls, wire)
    for f in attrs.fields(cls):
        if f.metadata.get("kind") == "dec":
            value = getattr(record, f.name)
            assert value is None or type(value) is Decimal, f.name


@pytest.mark.parametrize(("cls", "wire"), RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_unknown_fields_are_kept_in_extra(cls: type[Any], wire: dict[str, Any]) -> None:
    record = decode(cls, {**wire, "brandNewField": [1, 2], "anotherOne": None})
    assert record.extra == {"brandNewField": [1, 2], "anotherOne": None}


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


def test_datetime_is_timezone_aware_in_the_codec_zone() -> None:
    utc = decode(m.Position, samples.POSITION)
    assert utc.create_time == datetime(2024, 3, 1, 12, 34, 56, tzinfo=UTC)
    shanghai = Codec(timezone(timedelta(hours=8))).decode(m.Position, samples.POSITION)
    assert shanghai.create_time == datetime(2024, 3, 1, 4, 34, 56, tzinfo=UTC)


def test_order_result_accepts_corderid_and_corderid_spelling() -> None:
    a = decode(m.OrderResult, {"corderId": "x1", "orderId": 5, "pairName": "ETH-USD"})
    b = decode(m.OrderResult, {"cOrderId": "x1", "orderId": 5, "pairName": "ETH-USD"})
    assert a == b
    assert a.client_order_id == "x1" and a.order_id == 5
    assert a.extra == {} and b.extra == {}


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
