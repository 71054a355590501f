"""``perpframe doctor``: each check's line against the venue twin, over real sockets.

Healthy and wrong-key runs go through the command line (subprocess); the other faults call
:func:`framework.live.doctor.diagnose` in-process, against a twin on 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import anyio
import pytest

from framework.engine.intents import OrderIntent, OrderStatus
from framework.live.doctor import Finding, diagnose
from framework.live.journal import Journal
from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import PriceSettings, TwinSettings

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ["config", "venue", "key", "clock", "stream", "pairs", "journal", "metrics", "market-data"]
STRATEGY = """\
strategies:
  - name: ladder
    class: strategies.ladder:Ladder
    params: {pair: ETH-USD, quantity: "0.01", spacing: "0.5", levels: 2}
"""


TWIN_MARKET = "{market: {enabled: true}, prices: {tick_interval: 0.05}}"


def embedded(tmp_path: Path, extra: str = "", twin: str = "{}") -> Path:
    """A config on the embedded twin (its settings twin), with extra top-level YAML."""
    path = tmp_path / "doctor.yaml"
    text = f"venue:\n  embedded: true\n  twin: {twin}\npairs:\n  ETH-USD: {{}}\n{STRATEGY}{extra}"
    path.write_text(text, encoding="utf-8")
    return path


def on_twin(tmp_path: Path, twin: VenueTwin, pairs: str, api_key: str = DEMO_API_KEY) -> Path:
    """A config on a running twin, with the demo secret and the given pairs: YAML."""
    path = tmp_path / "doctor.yaml"
    path.write_text(
        f"venue:\n  base_url: {twin.base_url}\n  ws_url: {twin.ws_url}\n  api_key: {api_key}\n"
        f'  api_secret: "{DEMO_PRIVATE_KEY}"\n  timeout_s: 5\npairs: {pairs}\n'
        f"journal: {{path: {tmp_path / 'journal.sqlite'}}}\n{STRATEGY}",
        encoding="utf-8",
    )
    return path


async def doctor(config: Path) -> dict[str, Finding]:
    """Every finding of the config by check name (in order)."""
    findings = await diagnose(config, lambda finding: None)
    assert [f.check for f in findings] == CHECKS
    return {f.check: f for f in findings}


def parse(stdout: str) -> dict[str, tuple[str, str]]:
    """The lines of doctor's output: check -> (status, text)."""
    found = {}
    for line in stdout.splitlines():
        status, rest = line.split(None, 1)
        check, text = rest.split(": ", 1)
        found[check] = (status, text)
    return found


def command(config: Path) -> list[str]:
    """``python run.py doctor -c config``."""
    return [sys.executable, str(ROOT / "run.py"), "doctor", "-c", str(config)]


@pytest.fixture
async def twin(anyio_backend: str) -> AsyncIterator[VenueTwin]:
    """A twin with its default pairs (ETH-USD, BTC-USD), prices still."""
    settings = TwinSettings(prices=PriceSettings(tick_interval=0))
    async with VenueTwin(settings, host="127.0.0.1", port=0) as running:
        yield running


def test_a_healthy_config_is_ok_or_skip_on_every_line_and_exits_0(tmp_path: Path) -> None:
    journal_path = tmp_path / "journal.sqlite"
    journal = Journal.open(journal_path)
    order = OrderIntent(pair="ETH-USD", is_long=True, quantity=Decimal("0.01"), price=Decimal(1))
    journal.add("pf-1", "pf", "ladder", order, OrderStatus.ACCEPTED, 1)
    journal.add("other-1", "other", "ladder", order, OrderStatus.PENDING, 1)
    journal.add("pf-2", "pf", "ladder", order, OrderStatus.CANCELED, 1)
    journal.commit()
    journal.close()
    market = "market: {pairs: {ETH-USD: {channels: [trade, depth]}}}\n"
    config = embedded(tmp_path, f"journal: {{path: {journal_path}}}\n{market}", TWIN_MARKET)
    done = subprocess.run(
        command(config), cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    lines = parse(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(lines) == CHECKS
    statuses = {check: status for check, (status, _) in lines.items()}
    assert statuses == {
        **dict.fromkeys(CHECKS[:7], "ok"),
        "metrics": "skip",
        "market-data": "ok",
    }
    assert re.fullmatch(
        r"ETH-USD: trade \S+, book \S+/\S+, mark \S+"
        r" \(first after \d+\.\d s\)",
        lines["market-data"][1],
    ), lines["market-data"]
    assert lines["journal"][1] == (
        f"{journal_path}: healthy, 3 intents; 1 open of node pf; other owners: other (1 open)"
    )
    assert lines["pairs"][1].startswith("ETH-USD listed; ")
    assert done.stderr == ""


@pytest.mark.anyio
async def test_a_key_the_venue_does_not_know_fails_naming_key_secret_and_sign_type(
    tmp_path: Path, twin: VenueTwin
) -> None:
    config = on_twin(tmp_path, twin, "{ETH-USD: {}}", api_key="st_not_a_key_of_this_venue")
    environ = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = await anyio.run_process(command(config), cwd=ROOT, env=environ, check=False)
    lines = parse(done.stdout.decode())
    assert done.returncode == 1
    status, text = lines["key"]
    assert status == "fail"
    assert "venue.api_key, venue.api_secret and venue.sign_type (2)" in text
    assert "Unauthorized" in text
    assert lines["venue"][0] == "ok"
    assert lines["stream"][0] == "fail"  # the signed subscribe is refused as well
    assert DEMO_PRIVATE_KEY.removeprefix("0x") not in done.stdout.decode().lower()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("offset_ms", "status", "way"),
    [(2_500, "warn", "ahead of"), (-7_000, "fail", "behind"), (7_000, "fail", "ahead of")],
)
async def test_a_skewed_venue_clock_warns_above_1_s_and_fails_above_5_s(
    tmp_path: Path, anyio_backend: str, offset_ms: int, status: str, way: str
) -> None:
    found = await doctor(embedded(tmp_path, twin=f"{{clock_offset_ms: {offset_ms}}}"))
    clock = found["clock"]
    assert clock.status == status, clock
    measured = re.match(
        r"the venue's clock is (\d+\.\d{3}) s (ahead of|behind) .*"
        r" \(round trip (\d+) ms\)",
        clock.text,
    )
    assert measured is not None, clock.text
    seconds, said, round_trip = measured.groups()
    assert said == way
    # The venue's time is read between two readings of ours: off by half the round trip.
    error_ms = abs(int(Decimal(seconds) * 1000) - abs(offset_ms))
    assert error_ms <= int(round_trip) // 2 + 1, clock.text
    assert found["key"].status == "ok"  # within the twin's window: signed calls still pass


@pytest.mark.anyio
async def test_a_pair_the_venue_does_not_list_fails(tmp_path: Path, twin: VenueTwin) -> None:
    found = await doctor(on_twin(tmp_path, twin, "{ETH-USD: {}, SOL-USD: {}}"))
    pairs = found["pairs"]
    assert pairs.status == "fail"
    assert pairs.text == "not listed by the venue: SOL-USD (it lists 2: BTC-USD, ETH-USD)"


@pytest.mark.anyio
async def test_each_rule_that_differs_from_the_venues_is_a_warning(
    tmp_path: Path, twin: VenueTwin
) -> None:
    rules = '{ETH-USD: {min_quantity: "0.01", max_lever: 20}, BTC-USD: {quantity_decimals: 4}}'
    found = await doctor(on_twin(tmp_path, twin, rules))
    pairs = found["pairs"]
    assert pairs.status == "warn"
    assert pairs.text == (
        "rules differ: ETH-USD min_quantity: ours 0.01, venue 0.001;"
        " ETH-USD max_lever: ours 20, venue 100; BTC-USD min_quantity: ours 0.001, venue 0.0001"
    )


@pytest.mark.anyio
async def test_a_corrupt_journal_fails_naming_its_path(tmp_path: Path, anyio_backend: str) -> None:
    journal = tmp_path / "journal.sqlite"
    journal.write_bytes(b"not a database " * 100)
    found = await doctor(embedded(tmp_path, f"journal: {{path: {journal}}}\n"))
    line = found["journal"]
    assert line.status == "fail"
    assert line.text.startswith(f"{journal}: damaged (file is not a database)")
    assert journal.read_bytes() == b"not a database " * 100  # read, never written


@pytest.mark.anyio
async def test_a_taken_metrics_port_fails(tmp_path: Path, anyio_backend: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        found = await doctor(embedded(tmp_path, f"metrics: {{enabled: true, port: {port}}}\n"))
    metrics = found["metrics"]
    assert metrics.status == "fail"
    assert metrics.text.startswith(f"127.0.0.1:{port} cannot be bound (Address already in use)")


@pytest.mark.anyio
async def test_a_venue_that_does_not_answer_fails_and_skips_what_needs_it(
    tmp_path: Path, anyio_backend: str
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = closed.getsockname()[1]
        path = tmp_path / "doctor.yaml"
        path.write_text(
            f"venue:\n  base_url: http://127.0.0.1:{port}\n  ws_url: ws://127.0.0.1:{port}/ws\n"
            f'  api_key: k\n  api_secret: "{DEMO_PRIVATE_KEY}"\n  timeout_s: 2\n'
            f"pairs: {{ETH-USD: {{}}}}\njournal: {{path: {tmp_path / 'j.sqlite'}}}\n{STRATEGY}",
            encoding="utf-8",
        )
        found = await doctor(path)
    assert found["venue"].status == "fail"
    assert found["venue"].text.startswith(f"no answer from http://127.0.0.1:{port}")
    for check in ("key", "clock", "stream", "pairs"):
        assert (found[check].status, found[check].text) == ("skip", "the venue is not reachable")
    assert found["journal"].status == "ok"  # does not exist yet


@pytest.mark.anyio
async def test_a_config_that_does_not_load_fails_first_and_the_rest_is_skipped(
    tmp_path: Path, anyio_backend: str
) -> None:
    path = embedded(tmp_path, "pairs_typo: 1\n")
    found = await doctor(path)
    assert found["config"].status == "fail"
    assert found["config"].text.startswith("pairs_typo: unknown key")
    assert {found[c].status for c in CHECKS[1:]} == {"skip"}


@pytest.mark.anyio
async def test_market_data_that_does_not_flow_fails_and_no_section_is_a_skip(
    tmp_path: Path, anyio_backend: str
) -> None:
    market = "market: {stale_after_s: 1, pairs: {ETH-USD: {channels: [trade]}}}\n"
    # The twin's market is off: it acknowledges the subscribe and never sends a trade.
    silent = await doctor(embedded(tmp_path, market))
    assert (silent["market-data"].status, silent["market-data"].text) == (
        "fail",
        "ETH-USD: no market event within 6 s of subscribing: market orders on it would be"
        " refused as stale",
    )
    none = await doctor(embedded(tmp_path))
    assert (none["market-data"].status, none["market-data"].text) == (
        "skip",
        "no `market:` section: strategies hear no market data",
    )


@pytest.mark.anyio
async def test_a_paper_config_without_a_key_checks_what_it_uses_and_skips_the_rest(
    tmp_path: Path, twin: VenueTwin
) -> None:
    """Before: a paper config without venue.api_secret ended doctor in a traceback (the
    signer made of an empty secret). Paper mode makes no private call and opens no private
    stream: key and stream are skipped, saying why; the market it trades on is checked."""
    path = tmp_path / "paper.yaml"
    path.write_text(
        f"venue: {{base_url: {twin.base_url}, ws_url: {twin.ws_url}, mode: paper, timeout_s: 5}}\n"
        "pairs:\n  ETH-USD: {}\n"
        "market: {pairs: {ETH-USD: {channels: [], mark_interval_s: 0.2}}}\n" + STRATEGY,
        encoding="utf-8",
    )
    found = await doctor(path)
    statuses = {check: f.status for check, f in found.items()}
    assert statuses == {
        "config": "ok", "venue": "ok", "key": "skip", "clock": "ok", "stream": "skip",
        "pairs": "ok", "journal": "skip", "metrics": "skip", "market-data": "ok",
    }  # fmt: skip
    assert found["key"].text.startswith("paper mode without venue.api_secret makes no signed call")
    assert found["stream"].text == "paper mode opens no private stream"
    assert found["market-data"].text.startswith("ETH-USD: mark ")


@pytest.mark.anyio
async def test_a_journal_of_the_other_mode_fails_as_live_would_refuse_it(
    tmp_path: Path, twin: VenueTwin
) -> None:
    """Found by a first-time reader: doctor said ok of a paper run's journal, then live
    refused it. doctor now reads the journal's mode as live opens it (read only), and
    --paper reads the file as ``live --paper`` does."""
    config = on_twin(tmp_path, twin, "{ETH-USD: {}}")
    Journal.open(tmp_path / "journal.sqlite", mode="paper").close()
    found = await doctor(config)
    assert found["journal"].status == "fail"
    assert "is a paper run's: a live node does not resume it" in found["journal"].text
    as_paper = {f.check: f for f in await diagnose(config, lambda f: None, paper=True)}
    assert as_paper["journal"].status == "ok", as_paper["journal"].text
    assert "(paper: orders filled in-process, never sent)" in as_paper["config"].text
    assert (as_paper["key"].status, as_paper["stream"].status) == ("skip", "skip")
    journal = Journal.open(tmp_path / "journal.sqlite", mode="paper")  # doctor changed nothing
    assert journal.mode == "paper"
    journal.close()
