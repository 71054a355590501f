"""A live session to bundle: the shipped Pulse strategy against the venue twin on 127.0.0.1,
recording on, journal on disk, the twin's TEST-ONLY secret written in the config file."""

from __future__ import annotations

from pathlib import Path

from framework.config import load_live_config
from framework.live.node import Node
from framework.recording import RecordingReader
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings
from tests.node_running import running
from tests.waiting import eventually

__all__ = ["SECRET", "live_session"]

SECRET = DEMO_PRIVATE_KEY
"""The API secret (a private key) written in the session's config file."""


def config_text(base_url: str, ws_url: str, tmp: Path, cls: str) -> str:
    """The live config: the secret literally in the file, the worst case for a bundle."""
    return f"""\
venue:
  base_url: {base_url}
  ws_url: {ws_url}
  api_key: {DEMO_API_KEY}
  api_secret: "{SECRET}"
pairs:
  BTC-USD: {{quantity_decimals: 4, min_quantity: "0.0001"}}
polling:
  match_interval_s: 0.1
journal: {{path: {tmp / "journal.sqlite"}}}
recording: {{path: {tmp / "session.jsonl"}}}
strategies:
  - name: pulse
    class: {cls}
    params: {{pair: BTC-USD, quantity: "0.002", every_s: 0.25, hold: 1}}
logging: {{level: WARNING}}
"""


async def live_session(
    tmp: Path, orders: int = 8, cls: str = "strategies.pulse:Pulse"
) -> tuple[Path, int]:
    """Run the node until it sent ``orders`` orders; (config path, first recorded ts)."""
    settings = TwinSettings(prices=PriceSettings(tick_interval=0.1, max_step_ticks=400), seed=5)
    async with VenueTwin(settings, host="127.0.0.1", port=0) as twin:
        path = tmp / "live.yaml"
        path.write_text(config_text(twin.base_url, twin.ws_url, tmp, cls))
        node = Node(load_live_config(path))
        async with running(node):
            await eventually(lambda: node.engine.counters()["orders_sent"] >= orders, timeout=30)
    first = next(RecordingReader(tmp / "session.jsonl").records()).ts
    return path, first
