"""Fixtures of the twin tests: a twin on port 0 per test, a clock, signed test clients."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from framework.twin import VenueTwin
from tests.twin.twin_client import (
    HMAC_API_KEY,
    HMAC_SECRET,
    OTHER_API_KEY,
    OTHER_KEY,
    TRADER_API_KEY,
    TRADER_KEY,
    Clock,
    TwinClient,
    eth_sign,
    hmac_sign,
    settings,
)


@pytest.fixture
def anyio_backend() -> str:
    """The twin runs on asyncio (uvicorn)."""
    return "asyncio"


@pytest.fixture
def clock() -> Clock:
    """The twin's and the clients' clock, moved by hand."""
    return Clock()


@pytest.fixture
async def twin(clock: Clock) -> AsyncIterator[VenueTwin]:
    """A twin with the test accounts, no price ticks, on a free port."""
    async with VenueTwin(settings(), port=0, clock=clock) as running:
        yield running


@pytest.fixture
async def http(twin: VenueTwin) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client bound to the twin."""
    async with httpx.AsyncClient(base_url=twin.base_url, timeout=5) as client:
        yield client


def client_for(http: httpx.AsyncClient, api_key: str, clock: Clock) -> TwinClient:
    """A signed client for one of the test accounts."""
    if api_key == HMAC_API_KEY:
        return TwinClient(http, api_key, lambda t: hmac_sign(HMAC_SECRET, t), clock, "1")
    key = TRADER_KEY if api_key == TRADER_API_KEY else OTHER_KEY
    return TwinClient(http, api_key, lambda t: eth_sign(key, t), clock)


@pytest.fixture
def trader(http: httpx.AsyncClient, clock: Clock) -> TwinClient:
    """The main test account (sign type 2, 100000 USD)."""
    return client_for(http, TRADER_API_KEY, clock)


@pytest.fixture
def other(http: httpx.AsyncClient, clock: Clock) -> TwinClient:
    """A second account (sign type 2, 100000 USD)."""
    return client_for(http, OTHER_API_KEY, clock)


@pytest.fixture
def make_twin(clock: Clock) -> Callable[..., Any]:
    """Start a twin with changed settings: ``async with make_twin(**changes) as (twin, trader)``."""

    @contextlib.asynccontextmanager
    async def make(**changes: Any) -> AsyncIterator[tuple[VenueTwin, TwinClient]]:
        async with (
            VenueTwin(settings(**changes), port=0, clock=clock) as running,
            httpx.AsyncClient(base_url=running.base_url, timeout=5) as client,
        ):
            yield running, client_for(client, TRADER_API_KEY, clock)

    return make
