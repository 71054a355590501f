"""The venue's own public SDK as a trader's script uses it: bench_tick_to_trade's third stack.

    python tests/benchmarks/sdk_stack.py SDK_PATHS BASE_URL WS_URL API_KEY SECRET PAIR [--market]

Run by ``bench_tick_to_trade.py`` in a process of its own, so the SDK's dependencies (its
``requests``, ``websocket-client``, pycryptodome) stay off the daemon's ``sys.path``, and
the way the SDK is meant to be used: its ``WebsocketAPIClient`` (a thread reading the
socket, ``on_message`` called on that thread, as in its examples) subscribes to the
position push (``api_position``) or, with ``--market``, the trade channel (``api_trade``);
the handler answers each push with the SDK's ``Client.batch_create`` (its own signing and
its ``requests`` session, keep-alive) on the same thread. Sign type 2, as the daemon's.

SDK_PATHS (``os.pathsep``-separated) go first on ``sys.path``: the SDK's source and a
directory its requirements were installed into. The only deviation from the SDK's examples:
the websocket client asks this venue for the subscribe timestamp (the SDK's ``get_time``
asks its default host, on the internet). The SDK prints every payload it signs; that goes
to /dev/null here (the cheapest place a trader's terminal or log could be).

Lines on stdout for the bench: ``ready`` once subscribed, or ``missing <why>`` (one line)
when the SDK cannot be imported. The process ends when its stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main(argv: list[str]) -> int:
    """Subscribe with the SDK and answer every push with its batch_create until stdin ends."""
    paths, base_url, ws_url, api_key, secret, pair = argv[:6]
    market = "--market" in argv[6:]
    sys.path[:0] = [p for p in paths.split(os.pathsep) if p]
    out = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the SDK's prints, for the whole run)
    try:
        from satori.client import Client, Order, OrderList
        from satori.lib.utils import get_timestamp
        from satori.websocket.client.websocket_api import WebsocketAPIClient
    except Exception as exc:  # any reason the SDK is not usable here is one line
        out.write(f"missing {type(exc).__name__}: {exc}\n")
        return 1

    client = Client(api_key=api_key, api_secret=secret, api_sign_type="2", base_url=base_url)
    event = "api_trade" if market else "api_position"

    def on_message(_: Any, message: str) -> None:
        frame = json.loads(message)
        if frame.get("event") != event:
            return
        if market:
            data = frame["data"][0]
            coid, pair = f"t{data['contractMatchPairId']}", data["pair"]
        else:
            data = frame["data"]
            coid, pair = f"t{data['positionId']}", data["symbol"]
        order = Order(coid, True, True, 10, 1, pair, 3, "0.01")
        client.batch_create(OrderList([order], str(get_timestamp())))

    class Sdk(WebsocketAPIClient):  # type: ignore[misc]
        """The SDK's websocket client, asking this venue (not its default host) the time."""

        def get_time(self) -> Any:
            return client.time()["data"]

    ws = Sdk(
        stream_url=ws_url, api_key=api_key, api_secret=secret, api_sign_type="2",
        on_message=on_message,
    )  # fmt: skip
    if market:
        ws.trade_data(pair, "1MIN")
    else:
        ws.position(pair)
    out.write("ready\n")
    sys.stdin.read()
    out.flush()
    os._exit(0)  # the SDK's socket thread is not a daemon thread; nothing is left to close


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
