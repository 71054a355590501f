"""Top-level test configuration: run anyio tests on asyncio only."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """The anyio pytest plugin's backend: the framework runs on asyncio."""
    return "asyncio"
