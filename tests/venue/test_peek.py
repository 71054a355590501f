"""The first look at frames and answers: what it reads, and what sends a frame the long way."""

from __future__ import annotations

import typing

import pytest

from framework.venue.models import ChangeType
from framework.venue.peek import PEEK_ERRORS, HeadData, peek_frame, peek_match_page


def test_the_change_types_a_peek_accepts_are_the_models() -> None:
    hint = typing.get_type_hints(HeadData)["change_type"]
    (literal, _none) = typing.get_args(hint)
    assert set(typing.get_args(literal)) == {c.value for c in ChangeType}


def test_a_position_push_is_read_by_its_routing_fields() -> None:
    head = peek_frame(
        '{"event":"api_position","success":true,"data":{"changeType":"NEW",'
        '"currentQuantity":"0.5","positionId":7,"symbol":"ETH-USD","openingPrice":"x"}}'
    )
    assert head.event == "api_position"
    assert head.data is not None
    assert (head.data.symbol, head.data.position_id, head.data.current_quantity) == (
        "ETH-USD",
        7,
        "0.5",
    )
    assert head.data.change_type == "NEW"


@pytest.mark.parametrize(
    "frame",
    [
        "not json",
        '{"event":"api_position","data":{"changeType":"SIDEWAYS","symbol":"ETH-USD"}}',
        '{"event":"api_account","data":{"logId":"7","symbol":"USD"}}',
        '{"event":"api_account","success":"yes","data":{"logId":7,"symbol":"USD"}}',
        '{"data":{"logId":7}}',
        "[1, 2]",
    ],
)
def test_what_a_peek_refuses(frame: str) -> None:
    with pytest.raises(PEEK_ERRORS):
        peek_frame(frame)


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
