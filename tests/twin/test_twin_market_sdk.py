"""The venue's own public Python SDK reads the twin's market (issue 27's "Done when").

The SDK is the connector of github.com/satoridao/satori_openapi_sdk (module ``satori``,
``satori.client.Client``; it needs requests and pycryptodome). It is not published on PyPI
(the PyPI ``satori`` is another project), so this test runs only where it is importable
(e.g. ``PYTHONPATH`` pointing at a checkout) and is skipped, saying why, elsewhere. The SDK
is synchronous (requests): its calls run in a worker thread while the twin serves.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import anyio
import orjson
import pytest

from framework.sim.market import MarketSettings
from framework.venue.market import DEFAULT_MARKET_CODEC as CODEC

pytestmark = pytest.mark.anyio

PAIR = "ETH-USD"


def _sdk_client() -> Any:
    try:
        from satori.client import Client  # type: ignore[import-not-found]
    except ImportError as exc:
        pytest.skip(
            "the venue's public SDK (module satori from github.com/satoridao/"
            f"satori_openapi_sdk, not on PyPI) is not importable: {exc}"
        )
    return Client


def _body(answer: Any) -> bytes:
    """The SDK returns the parsed JSON: back to bytes for the framework's codec."""
    return orjson.dumps(answer)


async def test_the_venue_sdk_reads_time_mark_depth_trades_and_klines(
    make_twin: Callable[..., Any],
) -> None:
    client_class = _sdk_client()
    async with make_twin(market=MarketSettings(enabled=True)) as (twin, _):
        twin.step(100)
        client = client_class(base_url=twin.base_url, timeout=5)

        async def call(method: Callable[..., Any], *args: Any, **kw: Any) -> Any:
            return await anyio.to_thread.run_sync(lambda: method(*args, **kw))

        answer = await call(client.time)
        assert answer["code"] == 200 and answer["data"] == twin.now_ms()
        mark = CODEC.mark_price(200, _body(await call(client.mark_price, PAIR)), PAIR)
        assert mark.price == twin.mark(PAIR)
        index = CODEC.index_price(200, _body(await call(client.index_price, PAIR)), PAIR)
        assert index.price == twin.market.tapes[PAIR].index
        tape = twin.market.tapes[PAIR]
        book = CODEC.depth(200, _body(await call(client.depth, PAIR, 5)), PAIR)
        assert tape.book is not None and book.asks == tape.book.asks[:5]
        trades = CODEC.trades(200, _body(await call(client.trades, PAIR, 20)), PAIR)
        assert list(trades) == tape.last_trades(20)
        bars = CODEC.klines(200, _body(await call(client.kline, PAIR, "1MIN")), PAIR, "1MIN")
        assert bars and bars[-1].close == tape.last_trades(1)[0].price
        assert all(b.quantity is not None and b.quantity > Decimal(0) for b in bars)
        pairs = await call(client.pairs)
        assert {p["pairName"] for p in pairs["data"]} == {PAIR, "BTC-USD"}
