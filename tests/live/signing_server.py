"""A small HTTP/1.1 server on 127.0.0.1 that checks the venue's signature itself.

It recovers the signer's address with eth-account (independent of framework.venue.signing),
answers with the SPEC envelope, and can misbehave on demand: drop the connection after reading
a request, stall, or answer with a non-JSON HTTP error. Used by the RestClient tests and the
REST benchmark; it is not the venue twin.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import orjson
from eth_account import Account
from eth_account.messages import encode_defunct

Handler = Callable[[str, str, bytes], Any]


def recover(text: str, signature: str) -> str | None:
    """The address that signed text, or None for a malformed signature."""
    try:
        return str(Account.recover_message(encode_defunct(text=text), signature=signature))
    except Exception:
        return None


class SigningServer:
    """Answers REST calls after checking APIKEY and the signature; records what it saw."""

    def __init__(self, api_key: str, address: str, *, verify: bool = True) -> None:
        self.api_key = api_key
        self.address = address
        self.verify = verify
        self.mode = "ok"  # ok | drop | stall | html
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.data: Callable[[str, str, bytes], Any] = lambda path, query, body: []
        self.code = 200
        self.port = 0
        self.connections = 0
        self._sid = itertools.count(1)
        self._server: asyncio.base_events.Server | None = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> SigningServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                _method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                path, _, query = target.partition("?")
                self.requests.append((path, query, headers, body))
                if self.mode == "drop":
                    writer.transport.abort()
                    return
                if self.mode == "stall":
                    await asyncio.sleep(3600)
                status, payload = self._answer(path, query, headers, body)
                ctype = b"text/html" if self.mode == "html" else b"application/json"
                writer.write(
                    b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
                    % (status, ctype, len(payload))
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _answer(
        self, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, bytes]:
        if self.mode == "html":
            return 503, b"<html><body>Service Unavailable</body></html>"
        sid = str(next(self._sid))
        if self.verify:
            text = body.decode() if body else unquote(query)
            signer = recover(text, headers.get("signature", ""))
            if headers.get("apikey") != self.api_key or signer != self.address:
                env = {"error": True, "code": 401, "msg": "unauthorized", "data": None, "sid": sid}
                return 401, orjson.dumps(env)
            if headers.get("x-sapi-sign-type") != "2":
                return 401, orjson.dumps(
                    {"error": True, "code": 401, "msg": "sign type", "sid": sid}
                )
        if self.code != 200:
            env = {
                "error": True,
                "code": self.code,
                "msg": f"refused {self.code}",
                "data": None,
                "sid": sid,
            }
            return 200, orjson.dumps(env)
        data = self.data(path, query, body)
        return 200, orjson.dumps(
            {"error": False, "code": 200, "msg": "SUCCESS", "data": data, "sid": sid}
        )
