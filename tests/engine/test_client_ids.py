"""Client order ids: short, venue-safe, unique per id space, user ids validated."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.engine.client_ids import (
    ClientIdError,
    ClientIdGenerator,
    base36,
    check_client_order_id,
)

VENUE_SAFE = re.compile(r"[A-Za-z0-9_-]{1,32}")


class SharedCounter:
    """An IdSource standing in for one journal shared by several generators."""

    def __init__(self, tag: str = "k3x9a") -> None:
        self.tag = tag
        self.next = 0
        self.reservations = 0

    def id_tag(self) -> str:
        return self.tag

    def reserve_ids(self, count: int) -> int:
        self.reservations += 1
        first = self.next
        self.next += count
        return first


def test_generated_ids_are_short_and_venue_safe() -> None:
    gen = ClientIdGenerator("node123456", SharedCounter("abcdefghijkl"), block_size=10)
    gen._next = gen._end = 2**36 - 1  # the largest sequence number in 32 characters
    coid = gen.next()
    assert VENUE_SAFE.fullmatch(coid), coid


def test_generators_sharing_a_source_never_collide() -> None:
    source = SharedCounter()
    a = ClientIdGenerator("pf", source, block_size=7)
    b = ClientIdGenerator("pf", source, block_size=7)
    ids = [g.next() for _ in range(50) for g in (a, b)]
    assert len(set(ids)) == len(ids) == 100
    assert source.reservations == 16  # a block at a time, not an id at a time


def test_restart_continues_after_the_reserved_blocks() -> None:
    source = SharedCounter()
    first = ClientIdGenerator("pf", source, block_size=100)
    before = {first.next() for _ in range(3)}
    again = ClientIdGenerator("pf", source, block_size=100)  # a new process, same journal
    assert again.next() not in before


def test_ephemeral_ids_differ_by_start_time_and_randomness() -> None:
    a = ClientIdGenerator.ephemeral("pf", now_ms=1_700_000_000_000, random_bits=1)
    b = ClientIdGenerator.ephemeral("pf", now_ms=1_700_000_000_000, random_bits=2)
    c = ClientIdGenerator.ephemeral("pf", now_ms=1_700_000_000_001, random_bits=1)
    assert len({a.next(), b.next(), c.next()}) == 3
    assert VENUE_SAFE.fullmatch(a.next())


def test_node_name_is_checked() -> None:
    with pytest.raises(ClientIdError, match="node"):
        ClientIdGenerator("no-dash", SharedCounter())
    with pytest.raises(ClientIdError, match="node"):
        ClientIdGenerator("x" * 11, SharedCounter())


@given(st.text(max_size=40))
def test_user_id_check_accepts_exactly_the_venue_safe_ids(text: str) -> None:
    if VENUE_SAFE.fullmatch(text):
        check_client_order_id(text)
    else:
        with pytest.raises(ClientIdError):
            check_client_order_id(text)


def test_user_ids_may_not_enter_the_generated_space() -> None:
    gen = ClientIdGenerator("pf", SharedCounter())
    gen.check_user_id("mine-1")
    with pytest.raises(ClientIdError, match="reserved"):
        gen.check_user_id("pfk3x9a-0")


@given(st.integers(min_value=0, max_value=2**64))
def test_base36_round_trips(value: int) -> None:
    assert int(base36(value), 36) == value
