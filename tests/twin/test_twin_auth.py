"""Authentication: SPEC section 5 headers, the three sign types, 401s and the timestamp window."""

from __future__ import annotations

from decimal import Decimal

import httpx
import orjson
import pytest

from framework.twin import VenueTwin
from tests.twin.twin_client import (
    BALANCE,
    BATCH,
    HMAC_API_KEY,
    OTHER_KEY,
    TRADER_API_KEY,
    TRADER_KEY,
    Clock,
    TwinClient,
    eth_sign,
    order,
)

pytestmark = pytest.mark.anyio


def assert_401(response: httpx.Response, reason: str) -> None:
    assert response.status_code == 401
    body = response.json()
    assert body["error"] is True
    assert body["code"] == 401
    assert reason in body["msg"]
    assert body["data"] is None
    assert body["sid"].isdigit()


async def test_a_signed_batch_is_accepted(trader: TwinClient) -> None:
    answer = await trader.batch([order("a1")])
    assert answer["error"] is False
    assert answer["code"] == 200
    assert answer["msg"] == "SUCCESS"
    assert [d["corderId"] for d in answer["data"]] == ["a1"]


async def test_missing_apikey_is_401(trader: TwinClient, http: httpx.AsyncClient) -> None:
    body = orjson.dumps({"orders": [order("a1")], "timestamp": trader.stamp()})
    headers = {"signature": eth_sign(TRADER_KEY, body.decode()), "X-SAPI-SIGN-TYPE": "2"}
    assert_401(await http.post(BATCH, content=body, headers=headers), "missing APIKEY")


async def test_unknown_apikey_is_401(http: httpx.AsyncClient, clock: Clock) -> None:
    stranger = TwinClient(http, "st_nobody", lambda t: eth_sign(TRADER_KEY, t), clock)
    assert_401(await stranger.batch_raw([order("a1")]), "unknown APIKEY")


async def test_signature_by_another_key_is_401(http: httpx.AsyncClient, clock: Clock) -> None:
    impostor = TwinClient(http, TRADER_API_KEY, lambda t: eth_sign(OTHER_KEY, t), clock)
    assert_401(await impostor.batch_raw([order("a1")]), "signature does not verify")
    assert_401(await impostor.query_raw(BALANCE, {"symbol": "USD"}), "signature does not verify")


async def test_malformed_or_missing_signature_is_401(http: httpx.AsyncClient, clock: Clock) -> None:
    garbage = TwinClient(http, TRADER_API_KEY, lambda t: "0x1234", clock)
    assert_401(await garbage.batch_raw([order("a1")]), "signature does not verify")
    empty = TwinClient(http, TRADER_API_KEY, lambda t: "", clock)
    assert_401(await empty.batch_raw([order("a1")]), "missing signature")


async def test_signature_over_another_body_is_401(
    trader: TwinClient, http: httpx.AsyncClient
) -> None:
    body = orjson.dumps({"orders": [order("a1")], "timestamp": trader.stamp()})
    tampered = body.replace(b'"0.01"', b'"0.02"')
    headers = {"APIKEY": TRADER_API_KEY, "signature": eth_sign(TRADER_KEY, body.decode())}
    assert_401(await http.post(BATCH, content=tampered, headers=headers), "does not verify")


async def test_uppercase_hex_signature_is_accepted(http: httpx.AsyncClient, clock: Clock) -> None:
    shouting = TwinClient(
        http, TRADER_API_KEY, lambda t: "0X" + eth_sign(TRADER_KEY, t)[2:].upper(), clock
    )
    assert (await shouting.balance())["code"] == 200


async def test_missing_sign_type_header_defaults_to_2(
    http: httpx.AsyncClient, clock: Clock
) -> None:
    client = TwinClient(http, TRADER_API_KEY, lambda t: eth_sign(TRADER_KEY, t), clock, "")
    assert (await client.balance())["code"] == 200


async def test_hmac_sign_type_1_is_accepted(http: httpx.AsyncClient, clock: Clock) -> None:
    from tests.twin.conftest import client_for

    hmac_client = client_for(http, HMAC_API_KEY, clock)
    answer = await hmac_client.batch([order("h1")])
    assert answer["code"] == 200
    # The same signature under sign type 2 does not verify.
    hmac_client.sign_type = "2"
    assert_401(await hmac_client.batch_raw([order("h2")]), "sign type 2")


async def test_ed25519_sign_type_3_is_accepted(clock: Clock) -> None:
    from Crypto.PublicKey import ECC
    from Crypto.Signature import eddsa

    key = ECC.generate(curve="ed25519", randfunc=lambda n: bytes(range(n)))
    public = "0x" + key.public_key().export_key(format="raw").hex()
    signer = eddsa.new(key, "rfc8032")

    def sign(text: str) -> str:
        return "0x" + signer.sign(text.encode()).hex()

    twin = VenueTwin(port=0, clock=clock)
    twin.add_account("st_ed25519", ed25519_public_key=public, balances={"USD": Decimal(1000)})
    async with twin, httpx.AsyncClient(base_url=twin.base_url, timeout=5) as http:
        client = TwinClient(http, "st_ed25519", sign, clock, "3")
        assert (await client.balance())["data"]["availableAmount"] == "1000"
        client.sign = lambda t: sign(t + "x")
        assert_401(await client.query_raw(BALANCE, {"symbol": "USD"}), "does not verify")


async def test_unsupported_sign_type_is_401(http: httpx.AsyncClient, clock: Clock) -> None:
    client = TwinClient(http, TRADER_API_KEY, lambda t: eth_sign(TRADER_KEY, t), clock, "9")
    assert_401(await client.batch_raw([order("a1")]), "unsupported sign type")


async def test_timestamp_outside_the_window_is_2001(trader: TwinClient, clock: Clock) -> None:
    expected = {"error": True, "code": 2001, "msg": "Illegal parameter:timestamp", "data": None}
    late = str(clock.ms() - 31_000)
    answer = await trader.batch([order("a1")], timestamp=late)
    assert {k: answer[k] for k in expected} == expected
    ahead = str(clock.ms() + 31_000)
    assert (await trader.batch([order("a1")], timestamp=ahead))["code"] == 2001
    edge = str(clock.ms() - 30_000)
    assert (await trader.batch([order("a1")], timestamp=edge))["code"] == 200
    answer = await trader.query(BALANCE, symbol="USD", timestamp=str(clock.ms() - 60_000))
    assert (answer["code"], answer["msg"]) == (2001, "Illegal parameter:timestamp")


async def test_timestamp_that_is_not_milliseconds_is_2001(trader: TwinClient) -> None:
    answer = await trader.batch([order("a1")], timestamp="yesterday")
    assert (answer["code"], answer["msg"]) == (2001, "Illegal parameter:timestamp")


async def test_query_signed_before_percent_encoding_is_accepted(
    trader: TwinClient, http: httpx.AsyncClient
) -> None:
    text = f"pairName=ETH-USD&timestamp={trader.stamp()}"
    encoded = text.replace("-", "%2D")
    headers = trader.headers(text)
    response = await http.post(
        f"/api/third/hot/order/selectContractPositionList?{encoded}", headers=headers
    )
    assert response.json()["code"] == 200
    # Signing the encoded string as sent is accepted too.
    response = await http.post(
        f"/api/third/hot/order/selectContractPositionList?{encoded}",
        headers=trader.headers(encoded),
    )
    assert response.json()["code"] == 200


async def test_auth_failures_are_counted(
    twin: VenueTwin, http: httpx.AsyncClient, clock: Clock
) -> None:
    stranger = TwinClient(http, "st_nobody", lambda t: eth_sign(TRADER_KEY, t), clock)
    await stranger.batch_raw([order("a1")])
    assert twin.counters.auth_failures == 1


async def test_secrets_stay_out_of_reprs() -> None:
    from framework.twin.auth import Credentials
    from framework.twin.settings import AccountSettings

    credentials = Credentials(user_id=1, api_key="st_secret_key", hmac_secret="hush")
    assert "hush" not in repr(credentials) and "st_secret_key" not in repr(credentials)
    account = AccountSettings(api_key="st_k", hmac_secret="hush")
    assert "hush" not in repr(account)
