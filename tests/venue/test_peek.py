"""The first look at frames and answers: what it reads, and what sends a frame the long way."""

from __future__ import annotations

import typing

import pytest

from framework.venue.models import ChangeType
from framework.venue.peek import (
    PEEK_ERRORS,
    AccountHead,
    AccountRoute,
    PositionHead,
    PositionRoute,
    peek_match_page,
    peek_opening_price,
    peek_push,
)


def test_the_change_types_a_peek_accepts_are_the_models() -> None:
    hint = typing.get_type_hints(PositionRoute)["change_type"]
    assert set(typing.get_args(hint)) == {c.value for c in ChangeType}


def test_a_position_push_is_read_by_its_routing_fields() -> None:
    head = peek_push(
        '{"event":"api_position","success":true,"data":{"changeType":"NEW",'
        '"currentQuantity":"0.5","positionId":7,"symbol":"ETH-USD","openingPrice":"x"}}'
    )
    assert isinstance(head, PositionHead)
    assert head.data == PositionRoute(
        symbol="ETH-USD", change_type="NEW", position_id=7, current_quantity="0.5"
    )


@pytest.mark.parametrize(
    ("price", "expected"),
    [('"2000.5"', "2000.5"), ("2000", 2000), ("null", None), ('{"a":1}', None), ("absent", None)],
)
def test_a_position_push_opening_price_is_read_as_sent(price: str, expected: object) -> None:
    field = "" if price == "absent" else f',"openingPrice":{price}'
    frame = (
        '{"event":"api_position","success":true,"data":{"changeType":"NEW",'
        f'"currentQuantity":"0.5","positionId":7,"symbol":"ETH-USD"{field}}}}}'
    )
    assert peek_opening_price(frame) == expected


def test_an_account_push_is_read_by_its_coin_and_log_id() -> None:
    head = peek_push(
        '{"event":"api_account","success":true,"symbol":"USD","data":{"availableAmount":"5",'
        '"frozenAmount":"0","logId":12,"symbol":"USD","coinId":1}}'
    )
    assert isinstance(head, AccountHead)
    assert head.data == AccountRoute(symbol="USD", log_id=12)


def test_a_position_push_without_its_optional_fields_is_still_read() -> None:
    head = peek_push('{"data":{"symbol":"BTC-USD","changeType":"CLOSE"},"event":"api_position"}')
    assert isinstance(head, PositionHead)
    assert (head.data.position_id, head.data.current_quantity) == (None, None)


@pytest.mark.parametrize(
    "frame",
    [
        "not json",
        '{"event":"api_position","data":{"changeType":"SIDEWAYS","symbol":"ETH-USD"}}',
        '{"event":"api_account","data":{"logId":"7","symbol":"USD"}}',
        '{"event":"api_account","success":"yes","data":{"logId":7,"symbol":"USD"}}',
        '{"data":{"logId":7}}',
        "[1, 2]",
        # acknowledgements and unknown events go the long way
        '{"event":"api_position_res","method":"SUBSCRIBE","success":true}',
        '{"event":"api_order","data":{"symbol":"ETH-USD","changeType":"NEW"}}',
        # a push missing a routing field, or with one null
        '{"event":"api_position","data":{"symbol":"ETH-USD"}}',
        '{"event":"api_position","data":{"changeType":"NEW","symbol":null}}',
        '{"event":"api_account","data":{"symbol":"USD"}}',
        '{"event":"api_account","data":{"logId":7,"symbol":"USD"},"success":true,"x":[}',
    ],
)
def test_what_a_peek_refuses(frame: str) -> None:
    with pytest.raises(PEEK_ERRORS):
        peek_push(frame)


def test_a_match_page_head() -> None:
    page = peek_match_page(
        '{"error":false,"code":200,"msg":"SUCCESS","data":[{"id":3,"entrustId":9,'
        '"symbol":"ETH-USD","averagePrice":"2000","createTimeStamp":5,"quantity":"1"}]}'
    )
    assert page.code == 200
    assert page.data is not None
    assert [(m.id, m.entrust_id, m.average_price, m.create_time_stamp) for m in page.data] == [
        (3, 9, "2000", 5)
    ]
