"""A small test-side client of the twin, written from SPEC.md alone.

It signs with eth-account (and the standard library's hmac), never with the framework's
signer, so the twin's verifier is checked against an independent implementation.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import attrs
import httpx
import orjson
from eth_account import Account
from eth_account.messages import encode_defunct

from framework.twin.settings import AccountSettings, PriceSettings, TwinSettings

BATCH = "/api/third/hot/order/batchCreate"
POSITIONS = "/api/third/hot/order/selectContractPositionList"
BALANCE = "/api/third/hot/order/balance"
MATCHES = "/api/third/order/selectContractMatchPairList"

# Test keys: well-known development keys (Hardhat accounts #1 and #2); never real funds.
TRADER_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
TRADER_API_KEY = "st_trader_test_key_000000000000000000000000"
OTHER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
OTHER_API_KEY = "st_other_test_key_0000000000000000000000000"
HMAC_API_KEY = "st_hmac_test_key_00000000000000000000000000"
HMAC_SECRET = "test-only-hmac-secret"
POOR_API_KEY = "st_poor_test_key_00000000000000000000000000"
NOCOIN_API_KEY = "st_nocoin_test_key_000000000000000000000000"
START_BALANCE = Decimal("100000")
NOW = 1_800_000_000.0


def address_of(key: str) -> str:
    """The address of a private key, computed by eth-account."""
    return str(Account.from_key(key).address)


def eth_sign(key: str, text: str) -> str:
    """An EIP-191 personal-message signature by eth-account: 0x + r + s + v (27/28)."""
    signed = Account.sign_message(encode_defunct(text=text), private_key=key)
    return "0x" + bytes(signed.signature).hex()


def hmac_sign(secret: str, text: str) -> str:
    """A sign type 1 signature computed with the standard library."""
    return "0x" + hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


@attrs.define
class Clock:
    """A clock the test moves by hand (seconds since the epoch)."""

    now: float = NOW

    def __call__(self) -> float:
        """The current time."""
        return self.now

    def ms(self) -> int:
        """The current time in milliseconds."""
        return int(self.now * 1000)


def settings(**changes: Any) -> TwinSettings:
    """Test settings: no price ticks, the test accounts, any field overridden."""
    accounts = [
        AccountSettings(
            api_key=TRADER_API_KEY,
            address=address_of(TRADER_KEY),
            balances={"USD": START_BALANCE},
        ),
        AccountSettings(
            api_key=OTHER_API_KEY, address=address_of(OTHER_KEY), balances={"USD": START_BALANCE}
        ),
        AccountSettings(
            api_key=HMAC_API_KEY, hmac_secret=HMAC_SECRET, balances={"USD": START_BALANCE}
        ),
        AccountSettings(
            api_key=POOR_API_KEY, address=address_of(OTHER_KEY), balances={"USD": Decimal(0)}
        ),
        AccountSettings(api_key=NOCOIN_API_KEY, address=address_of(OTHER_KEY), balances={}),
    ]
    base = TwinSettings(accounts=accounts, prices=PriceSettings(tick_interval=0))
    return attrs.evolve(base, **changes)


def order(
    cid: str,
    *,
    long: bool = True,
    market: bool = True,
    lever: int = 10,
    match_type: int = 2,
    pair: str = "ETH-USD",
    position_type: int = 3,
    price: str | None = None,
    quantity: str = "0.01",
) -> dict[str, Any]:
    """One wire order (SPEC 2.1), keys in the SDK's order, price left out when None."""
    item: dict[str, Any] = {
        "clientOrderId": cid,
        "isLong": long,
        "isMarket": market,
        "lever": lever,
        "matchType": match_type,
        "pairName": pair,
        "positionType": position_type,
    }
    if price is not None:
        item["price"] = price
    item["quantity"] = quantity
    return item


class TwinClient:
    """Signs and sends the four SPEC calls; returns parsed envelopes or raw responses."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        api_key: str,
        sign: Callable[[str], str],
        clock: Callable[[], float] = time.time,
        sign_type: str = "2",
    ) -> None:
        """http is bound to the twin's base URL."""
        self.http = http
        self.api_key = api_key
        self.sign = sign
        self.clock = clock
        self.sign_type = sign_type

    def stamp(self) -> str:
        """The current timestamp in milliseconds, as text."""
        return str(int(self.clock() * 1000))

    def headers(self, text: str) -> dict[str, str]:
        """The SPEC section 5 headers for a signed text."""
        return {
            "APIKEY": self.api_key,
            "signature": self.sign(text),
            "X-SAPI-SIGN-TYPE": self.sign_type,
        }

    async def batch_raw(
        self, orders: list[dict[str, Any]], *, timestamp: str | None = None
    ) -> httpx.Response:
        """POST batchCreate; the signed text is the compact body."""
        body = orjson.dumps({"orders": orders, "timestamp": timestamp or self.stamp()})
        headers = {**self.headers(body.decode()), "Content-Type": "application/json"}
        return await self.http.post(BATCH, content=body, headers=headers)

    async def batch(self, orders: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
        """batchCreate's envelope (HTTP 200 expected)."""
        response = await self.batch_raw(orders, **kw)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    def query_string(self, params: dict[str, Any]) -> str:
        """name=value pairs in ascending name order, timestamp added when absent."""
        params = {"timestamp": self.stamp(), **params}
        return "&".join(f"{k}={params[k]}" for k in sorted(params) if params[k] is not None)

    async def query_raw(self, path: str, params: dict[str, Any]) -> httpx.Response:
        """POST a query endpoint: signed query string, empty text/plain body."""
        text = self.query_string(params)
        headers = {**self.headers(text), "Content-Type": "text/plain"}
        return await self.http.post(f"{path}?{text}", content=b"", headers=headers)

    async def query(self, path: str, **params: Any) -> dict[str, Any]:
        """A query endpoint's envelope (HTTP 200 expected)."""
        response = await self.query_raw(path, params)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    async def positions(self, pair: str = "ETH-USD", **params: Any) -> dict[str, Any]:
        """selectContractPositionList."""
        return await self.query(POSITIONS, pairName=pair, **params)

    async def balance(self, symbol: str = "USD") -> dict[str, Any]:
        """balance."""
        return await self.query(BALANCE, symbol=symbol)

    async def matches(self, pair: str = "ETH-USD", **params: Any) -> dict[str, Any]:
        """selectContractMatchPairList."""
        return await self.query(MATCHES, pairName=pair, **params)

    def subscribe_message(self, event: str, **extra: Any) -> str:
        """A signed SPEC section 6 subscribe message."""
        stamp = int(self.clock() * 1000)
        message = {
            "method": "SUBSCRIBE",
            "event": event,
            "apiKey": self.api_key,
            "signType": self.sign_type,
            "signature": self.sign(str(stamp)),
            "timestamp": stamp,
            **extra,
        }
        return orjson.dumps(message).decode()


async def recv_json(ws: Any, timeout: float = 5.0) -> dict[str, Any]:
    """The next frame of a websockets connection, parsed."""
    frame = await asyncio.wait_for(ws.recv(), timeout)
    result: dict[str, Any] = orjson.loads(frame)
    return result
