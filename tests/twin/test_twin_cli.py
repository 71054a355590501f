"""``run.py venue``: prints its URLs, serves signed calls, stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson

from tests.twin.twin_client import TRADER_KEY, address_of, eth_sign, order

ROOT = Path(__file__).resolve().parents[2]


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "framework.twin.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_cli_serves_until_ctrl_c() -> None:
    account = f"st_cli_key={address_of(TRADER_KEY)}"
    process = start("--port", "0", "--account", account, "--balance", "500")
    assert process.stdout is not None and process.stderr is not None
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.strip().startswith("WebSocket"):
                break
        base_url = next(x.split()[-1] for x in lines if x.strip().startswith("REST"))
        ws_url = lines[-1].split()[-1]
        assert base_url.startswith("http://127.0.0.1:")
        assert ws_url == base_url.replace("http", "ws", 1) + "/api/market/ws"
        stamp = str(int(time.time() * 1000))
        text = f"symbol=USD&timestamp={stamp}"
        headers = {"APIKEY": "st_cli_key", "signature": eth_sign(TRADER_KEY, text)}
        answer = httpx.post(f"{base_url}/api/third/hot/order/balance?{text}", headers=headers)
        assert answer.json()["data"]["availableAmount"] == "500"
        body = orjson.dumps({"orders": [order("cli")], "timestamp": stamp})
        headers = {"APIKEY": "st_cli_key", "signature": eth_sign(TRADER_KEY, body.decode())}
        answer = httpx.post(
            f"{base_url}/api/third/hot/order/batchCreate", content=body, headers=headers
        )
        assert answer.json()["code"] == 200
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
    assert process.returncode == 0
    assert "Traceback" not in err and "Traceback" not in out
    assert "stopped" in out


def test_cli_refuses_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("batch_mode: sometimes\n")
    process = start("--config", str(bad), "--port", "0")
    _, err = process.communicate(timeout=20)
    assert process.returncode == 2
    assert "batch_mode" in err and "Traceback" not in err


def test_cli_rejects_a_malformed_account() -> None:
    process = start("--account", "no-address")
    _, err = process.communicate(timeout=20)
    assert process.returncode == 2
    assert "API_KEY=0xADDRESS" in err
