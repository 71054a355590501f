"""Shared fixtures of the live tests: anyio backend, an eventually() poll helper, the twin.

- ``eventually(predicate, timeout=5.0)``: the one wait of the tests (tests/waiting.py),
  also as a fixture.
- ``twin_settings``: the TwinSettings the ``twin`` fixture uses (prices still: no background
  ticks); override the fixture in a test module to change it.
- ``twin``: a running framework.twin.server.VenueTwin on 127.0.0.1, port 0.
- ``demo_signer`` / ``rest``: the twin's demo credentials and an open RestClient for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from framework.live.rest import RestClient
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from framework.venue.signing import Signer, make_signer
from tests.waiting import eventually

__all__ = ["Eventually", "eventually"]

Eventually = Callable[..., Awaitable[None]]


@pytest.fixture
def anyio_backend() -> str:
    """Live code runs on asyncio (websockets, uvicorn, apscheduler)."""
    return "asyncio"


@pytest.fixture(name="eventually")
def eventually_fixture() -> Eventually:
    """The eventually() helper, as a fixture."""
    return eventually


@pytest.fixture
def twin_settings() -> TwinSettings:
    """Default twin settings for tests: no background price ticks (deterministic)."""
    return TwinSettings(prices=PriceSettings(tick_interval=0))


@pytest.fixture
async def twin(anyio_backend: str, twin_settings: TwinSettings) -> AsyncIterator[VenueTwin]:
    """A venue twin serving on 127.0.0.1 at a free port."""
    async with VenueTwin(twin_settings, host="127.0.0.1", port=0) as running:
        yield running


@pytest.fixture
def demo_signer() -> Signer:
    """The signer of the twin's TEST-ONLY demo key."""
    return make_signer(2, DEMO_PRIVATE_KEY)


@pytest.fixture
async def rest(twin: VenueTwin, demo_signer: Signer) -> AsyncIterator[RestClient]:
    """An open RestClient for the twin's demo account."""
    async with RestClient(twin.base_url, DEMO_API_KEY, demo_signer) as client:
        yield client
