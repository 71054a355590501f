"""Memory soak: the daemon's RSS over a long run of positions opening and closing.

    python tests/benchmarks/bench_soak.py [--minutes 11] [--trace [--diff M N]] [--log-level L]
        [--metrics [--scrape-every S]] [--demo [CONFIG]] [--embedded] [--journal file|memory|unset]

The venue twin runs in a process of its own (``python -m framework.twin.cli --port 0``), so
only the daemon's memory is measured. The daemon (``framework.live.node.Node``, file journal
in a temp dir, match polls every second) runs one strategy that keeps a position flipping:
each position push that shows it open is answered by a market order closing it, each push
that shows it closed by one opening a new one, so every round trip makes a new position,
two pushes, two orders and two matches. Printed: RSS (VmRSS of this process) at start,
after one minute and at the end, the growth per 10 minutes after the first minute (target
< 1 MB per 10 min), the same of the twin's process, and the run's tallies.

``--metrics`` turns the daemon's metrics endpoint on (``metrics.enabled``, a free port) and
scrapes ``/metrics`` every ``--scrape-every`` seconds (default 2) from a process of its own,
as Prometheus would; the end prints the scrapes answered and the series count of the first
and last answer. ``--demo`` runs a config's pairs, polling and strategies instead of the
flipper (default ``configs/demo.yaml``: ladder and pulse), its twin settings given to the
twin's process. ``--embedded`` runs the twin inside the daemon's process, as
``venue.embedded: true`` does (the twin's memory is then counted too). ``--journal`` sets
``journal.path``: a file (default), ``:memory:``, or left unset (with ``--embedded``: the
daemon's own choice). ``--demo --embedded --journal unset --metrics`` is
``run.py live -c configs/demo.yaml`` with metrics scraped.

Each minute a line shows where the memory is: RSS and its anonymous part; CPython's
small-object allocator, bytes in live blocks / arenas mapped (``sys._debugmallocstats``: the
gap is free space in its pools; not shown under tracemalloc); glibc's malloc, in use + free
in its heaps (``mallinfo2``); what SQLite has allocated (``sqlite3_memory_used``: page caches,
statements, a journal held in memory; part of malloc's figure); the journal's file and WAL
sizes; the twin's RSS; the push rate of that minute. With ``--trace``, tracemalloc runs (RSS
is then much larger, snapshots included, and the push rate lower): the line adds the traced
total (the Python objects alive) and its peak during the minute, the growth figures are
given for the traced total too, and the end prints the growth between minute M and minute N
of ``--diff M N`` (default: minute 1 and the end; 0 is the start), the embedded twin's share
of it, and its top tracebacks. Growth of RSS with a flat traced total is below Python: an
allocator or a C library.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import itertools
import logging
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import anyio

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from framework import OrderIntent, PositionPush, Strategy  # noqa: E402
from tests.sqlite_memory import sqlite_memory_used  # noqa: E402

PAIR = "ETH-USD"
SIZE = Decimal("0.01")
DEMO = ROOT / "configs" / "demo.yaml"

# The scraper's process: GET url every `every` seconds until SIGTERM, then print
# "<answered> <failed> <series in the first answer> <series in the last>".
SCRAPER = """
import signal, sys, time, urllib.request
url, every = sys.argv[1], float(sys.argv[2])
ok = failed = 0
first = last = -1
def done(*_):
    print(ok, failed, first, last, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
while True:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = answer.read()
        series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        first = series if first < 0 else first
        last, ok = series, ok + 1
    except OSError:
        failed += 1
    time.sleep(every)
"""


class Flipper(Strategy):
    """Open a position, close it when its push shows it open, open again when closed.

    A watchdog timer restarts the flipping from the portfolio when no push came for a
    second: a push can be missed (the order of on_start may fill before the WebSocket has
    subscribed, and pushes come only on change), and without it the run would sit idle and
    measure an idle daemon.
    """

    pushes = 0
    seen = 0

    def on_start(self) -> None:
        self.submit(OrderIntent(pair=PAIR, is_long=True, quantity=SIZE))
        self.schedule("watchdog", every_s=1.0)

    def on_position(self, push: PositionPush) -> None:
        self.pushes += 1
        quantity = push.current_quantity
        if quantity:  # open: close it with the opposite side
            self.submit(OrderIntent(pair=PAIR, is_long=push.direction != "LONG", quantity=quantity))
        else:
            self.submit(OrderIntent(pair=PAIR, is_long=True, quantity=SIZE))

    def on_timer(self, name: str) -> None:
        if self.pushes == self.seen:  # stalled: act on what the portfolio knows
            held = self.portfolio.net_quantity(PAIR)
            self.log.warning("no push for 1 s: restarting from the portfolio (net %s)", held)
            if held:
                self.submit(OrderIntent(pair=PAIR, is_long=held < 0, quantity=abs(held)))
            else:
                self.submit(OrderIntent(pair=PAIR, is_long=True, quantity=SIZE))
        self.seen = self.pushes


def status_mb(pid: int | str = "self") -> dict[str, float]:
    """VmRSS, RssAnon, RssFile and RssShmem of a process (this one by default), in MB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0]) / 1024
    return out


def rss_mb() -> float:
    """This process's resident set size in MB."""
    return status_mb().get("VmRSS", float("nan"))


def _lib(name: str) -> ctypes.CDLL | None:
    found = ctypes.util.find_library(name)
    try:
        return ctypes.CDLL(found) if found else None
    except OSError:
        return None


_LIBC = _lib("c")


def sqlite_mb() -> float:
    """Bytes SQLite has allocated and not freed (all connections), in MB."""
    used = sqlite_memory_used()
    return float("nan") if used is None else used / 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")
    ]  # fmt: skip


def malloc_mb() -> tuple[float, float]:
    """(in use, free) bytes of glibc malloc's heaps plus its mmapped blocks, in MB."""
    if _LIBC is None or not hasattr(_LIBC, "mallinfo2"):
        return float("nan"), float("nan")
    _LIBC.mallinfo2.restype = _Mallinfo2
    info = _LIBC.mallinfo2()
    return (info.uordblks + info.hblkhd) / 2**20, info.fordblks / 2**20


def pymalloc_mb() -> tuple[float, float]:
    """(arenas mapped, bytes in allocated blocks) of CPython's small-object allocator, in MB.

    Read from ``sys._debugmallocstats()``, which writes to file descriptor 2: it is pointed at a
    temporary file for the call.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+b") as out:
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    arenas = used = float("nan")
    for line in text.splitlines():
        label, _, value = line.partition("=")
        if "bytes/arena" in label:
            arenas = int(value.strip().replace(",", "")) / 2**20
        elif label.strip() == "# bytes in allocated blocks":
            used = int(value.strip().replace(",", "")) / 2**20
    return arenas, used


def file_mb(path: str) -> float:
    """Size of a file in MB (0 when absent)."""
    try:
        return os.path.getsize(path) / 2**20
    except OSError:
        return 0.0


def twin_yaml(data: dict[str, Any]) -> str:
    """The twin settings (configs/venue.yaml form) the embedded twin would get from config data.

    Built by ``framework.live.embedded.twin_settings``: the config's ``venue.twin`` with the
    pairs of ``pairs:`` and their rules (a pair the twin knows keeps its starting mark).
    """
    import attrs
    import yaml

    from framework.config import parse_config
    from framework.live.embedded import twin_settings

    embedded = {**data, "venue": {"embedded": True, "twin": data["venue"].get("twin") or {}}}
    settings = twin_settings(parse_config(yaml.safe_dump(embedded), env={}))

    def plain(_: Any, __: Any, value: Any) -> Any:
        return str(value) if isinstance(value, Decimal) else value

    out = attrs.asdict(settings, value_serializer=plain)
    for name in ("host", "port"):  # the twin's process listens on a free port
        out.pop(name)
    return yaml.safe_dump(out)


def start_twin(settings: str | None = None) -> tuple[subprocess.Popen[str], str, str]:
    """The venue twin in a process of its own; returns it, its REST and WS addresses.

    settings: the text of a twin settings file (configs/venue.yaml form), or None.
    """
    args = [sys.executable, "-m", "framework.twin.cli", "--port", "0", "--balance", "1000000000"]
    with tempfile.TemporaryDirectory() as tmp:
        if settings is not None:
            Path(tmp, "twin.yaml").write_text(settings)
            args += ["--config", str(Path(tmp, "twin.yaml"))]
        return _started(args)


def _started(args: list[str]) -> tuple[subprocess.Popen[str], str, str]:
    twin = subprocess.Popen(
        args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert twin.stdout is not None
    rest = ws = ""
    for line in twin.stdout:
        if line.strip().startswith("REST"):
            rest = line.split()[-1]
        elif line.strip().startswith("WebSocket") or "ws://" in line:
            ws = line.split()[-1]
        if rest and ws:
            return twin, rest, ws
    twin.kill()
    raise SystemExit("the twin did not start")


def config_data(args: argparse.Namespace, venue: dict[str, Any], journal: str) -> dict[str, Any]:
    """The daemon's config (as parsed YAML): the flipper's, or the pairs, polling and
    strategies of --demo's config; venue, journal, logging and metrics from the flags."""
    if args.demo is None:
        data: dict[str, Any] = {
            "node": {"name": "soak"},
            "pairs": {PAIR: {}},
            "polling": {"match_interval_s": 1.0},
            "execution": {"calls_per_second": 10000.0},
            "strategies": [{"name": "flip", "class": "tests.benchmarks.bench_soak:Flipper"}],
        }
    else:
        import yaml

        data = yaml.safe_load(Path(args.demo).read_text())
    data["venue"] = venue
    if args.journal != "unset":
        data["journal"] = {"path": ":memory:" if args.journal == "memory" else journal}
    data["logging"] = {"level": args.log_level}
    if args.metrics:
        data["metrics"] = {"enabled": True, "port": 0}
    return data


class Mark(NamedTuple):
    """One measurement: when, the daemon's RSS, pushes so far, traced Python memory (MB, 0
    without --trace) and the twin's RSS when it runs in a process of its own (else None)."""

    t: float
    rss: float
    pushes: int
    traced: float
    twin: float | None


async def soak(
    args: argparse.Namespace, venue: dict[str, Any], journal: str, twin_pid: int | None = None
) -> None:
    """Run the daemon for args.minutes against venue; print RSS figures."""
    import yaml

    from framework.config import parse_config
    from framework.live.allocator import pin_malloc_thresholds
    from framework.live.node import Node
    from framework.logs import configure_logging
    from framework.twin.demo import DEMO_API_KEY, DEMO_PRIVATE_KEY

    minutes, trace, log_level = args.minutes, args.trace, args.log_level
    diff: tuple[int, int] | None = None if args.diff is None else tuple(args.diff)
    data = config_data(args, venue, journal)
    env = {"KEY": DEMO_API_KEY, "SECRET": DEMO_PRIVATE_KEY}
    config = parse_config(yaml.safe_dump(data), env=env)
    # The daemon's log on stderr, as `perpframe live` shows it: a daemon that goes down or
    # stops receiving says why there.
    configure_logging(level=log_level, secrets=config.secrets())
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # "poll skipped" under load
    pin_malloc_thresholds()  # as `perpframe live` does (framework.live.allocator)
    node = Node(config)
    marks: list[Mark] = []
    snapshots: list[tracemalloc.Snapshot] = []

    def mark(final: bool = False) -> str:
        """Record a Mark; return the line describing where the memory is."""
        gc.collect()
        status = status_mb()
        traced = tracemalloc.get_traced_memory()[0] / 2**20 if trace else 0.0
        twin = None if twin_pid is None else status_mb(twin_pid).get("VmRSS")
        marks.append(Mark(time.monotonic(), status["VmRSS"], node.tallies.pushes, traced, twin))
        minute = len(marks) - 1
        first, last = diff or (1, 0)
        if trace and (
            (not snapshots and minute == first)
            or (len(snapshots) == 1 and (final or minute == last))
        ):
            snapshots.append(tracemalloc.take_snapshot())
        used, free = malloc_mb()
        arenas, blocks = (float("nan"), float("nan")) if trace else pymalloc_mb()
        line = f"RSS {status['VmRSS']:5.1f} MB (anon {status.get('RssAnon', 0):5.1f})"
        if not trace:
            line += f"  pymalloc {blocks:4.1f}/{arenas:4.1f}"
        line += f"  malloc {used:4.1f}+{free:3.1f} free  sqlite {sqlite_mb():4.2f}"
        if trace:  # Python's live allocations now, and their peak since the last line
            current, peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            line += f"  traced {current / 2**20:4.1f} (peak {peak / 2**20:4.1f})"
        if data.get("journal", {}).get("path") == journal:
            line += f"  db {file_mb(journal):4.1f} wal {file_mb(journal + '-wal'):4.1f}"
        if twin is not None:
            line += f"  twin RSS {twin:5.1f}"
        if len(marks) >= 2:
            a, b = marks[-2:]
            line += f"  pushes {b.pushes} ({(b.pushes - a.pushes) / max(b.t - a.t, 1e-9):.0f}/s)"
        return line

    async with anyio.create_task_group() as tg:
        tg.start_soon(node.run)
        await node.started.wait()
        scraper = None
        if node.metrics_port is not None:
            url = f"http://127.0.0.1:{node.metrics_port}/metrics"
            scraper = subprocess.Popen(
                [sys.executable, "-c", SCRAPER, url, str(args.scrape_every)],
                stdout=subprocess.PIPE,
                text=True,
            )
        print(f"start     {mark()}", flush=True)
        start = time.monotonic()
        next_print = 60.0
        while (elapsed := time.monotonic() - start) < minutes * 60:
            await anyio.sleep(min(5.0, minutes * 60 - elapsed, max(0.0, next_print - elapsed)))
            if time.monotonic() - start >= next_print:
                print(f"{next_print / 60:4.0f} min  {mark()}", flush=True)
                next_print += 60.0
        previous = marks[-1].t
        line = mark(final=True)
        if marks[-1].t - previous > 1.0:
            print(f"end       {line}", flush=True)
        if node.stop_reason:  # the daemon stopped by itself: its log says why
            print(f"the daemon stopped before the end: {node.stop_reason}", flush=True)
        scraped = stop_scraper(scraper)
        node.request_stop("soak over")
    summary = node.summary()
    if len(snapshots) == 2:
        print_growth(snapshots, diff or (1, 0), len(marks) - 1)
    print()
    report(marks, "RSS", lambda m: m.rss)
    if trace:  # RSS then includes the snapshots: the traced total is the figure
        report(marks, "traced", lambda m: m.traced)
    if marks[0].twin is not None:
        report(marks, "twin RSS", lambda m: m.twin or 0.0, target=False)
    t0, t_end, pushes = marks[0].t, marks[-1].t, marks[-1].pushes
    print(
        f"pushes {pushes} ({pushes / (t_end - t0):.0f}/s), orders sent {summary['orders_sent']},"
        f" matches {summary['matches']}, reconnects {summary['reconnects']}"
    )
    if scraped:
        print(scraped)


def print_growth(snapshots: list[tracemalloc.Snapshot], diff: tuple[int, int], end: int) -> None:
    """What grew between the two snapshots: the twin's share, then the top 15 tracebacks."""
    first, last = diff
    until = f"minute {last}" if 0 < last < end else "the end"
    stats = snapshots[1].compare_to(snapshots[0], "filename")
    twin = sum(
        st.size_diff for st in stats if f"framework{os.sep}twin{os.sep}" in str(st.traceback)
    )
    total = sum(st.size_diff for st in stats)
    print(f"\ngrowth (tracemalloc, minute {first} -> {until}): {total / 1024:+.1f} KiB,")
    print(f"  of which framework/twin/ {twin / 1024:+.1f} KiB (the embedded twin's)")
    print("top 15 by traceback:")
    for stat in snapshots[1].compare_to(snapshots[0], "traceback")[:15]:
        print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
        frames = stat.traceback.format(most_recent_first=True)
        for frame in [f.strip() for f in frames if f.lstrip().startswith("File")][:4]:
            print(f"      {frame.replace(str(ROOT) + os.sep, '')}")


def report(
    marks: list[Mark], name: str, value: Callable[[Mark], float], *, target: bool = True
) -> None:
    """A figure at start, after 1 minute and at the end, and its growth per 10 min after it."""
    first, last = marks[0], marks[-1]
    print(f"{name + ' at start':<25}{value(first):8.1f} MB")
    if len(marks) < 3:
        print(f"{name + ' at the end':<25}{value(last):8.1f} MB  (run >= 2 minutes for a rate)")
        return
    one = marks[1]
    per_10 = (value(last) - value(one)) / ((last.t - one.t) / 600)
    print(f"{name + ' after 1 minute':<25}{value(one):8.1f} MB")
    print(f"{name + ' at the end':<25}{value(last):8.1f} MB  ({(last.t - first.t) / 60:.1f} min)")
    verdict = "met" if per_10 < 1.0 else "NOT met"
    if last.t - one.t < 599:
        verdict += f", but over {(last.t - one.t) / 60:.1f} min: the target is measured over 10"
    stalled = [
        (a, b) for a, b in itertools.pairwise(marks) if b.t - a.t > 5 and a.pushes == b.pushes
    ]
    if stalled:  # an idle daemon's flat RSS proves nothing
        verdict = f"NOT measured: no push in {len(stalled)} interval(s), see the daemon's log"
    line = f"{name + ' growth after 1 min':<25}{per_10:8.2f} MB per 10 min"
    print(line + (f" (target < 1: {verdict})" if target else ""))


def stop_scraper(scraper: subprocess.Popen[str] | None) -> str:
    """Stop the scraper's process; the line saying what it scraped ("" without one)."""
    if scraper is None:
        return ""
    scraper.terminate()
    out, _ = scraper.communicate(timeout=30)
    try:
        ok, failed, first, last = (int(n) for n in out.split())
    except ValueError:
        return f"metrics scraper: no tally (exit status {scraper.returncode})"
    return (
        f"/metrics scraped {ok} times ({failed} failed), series in the first answer {first},"
        f" in the last {last}"
    )


def main() -> None:
    """Parse the flags, start the twin, soak."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=11.0)
    parser.add_argument(
        "--trace", action="store_true", help="tracemalloc: print what grew after minute 1"
    )
    parser.add_argument(
        "--log-level", default="WARNING", help="the daemon's log level (stderr; default WARNING)"
    )
    parser.add_argument(
        "--diff",
        type=int,
        nargs=2,
        metavar=("M", "N"),
        help="with --trace: compare minute M (0: the start) with minute N (default: 1, the end)",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="serve the metrics endpoint and scrape /metrics from another process",
    )
    parser.add_argument(
        "--scrape-every", type=float, default=2.0, metavar="S", help="seconds between scrapes (2)"
    )
    parser.add_argument(
        "--demo",
        nargs="?",
        const=str(DEMO),
        metavar="CONFIG",
        help="run this config's pairs, polling and strategies (default configs/demo.yaml)",
    )
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="the twin in the daemon's process (venue.embedded), counted in its RSS",
    )
    parser.add_argument(
        "--journal",
        choices=("file", "memory", "unset"),
        default="file",
        help="journal.path: a file in a temp dir (default), :memory:, or unset (--embedded only:"
        " the daemon's own choice, as configs/demo.yaml leaves it)",
    )
    args = parser.parse_args()
    if args.journal == "unset" and not args.embedded:
        parser.error("--journal unset needs --embedded (a venue of its own needs journal.path)")
    if args.trace:
        tracemalloc.start(8)
    demo: dict[str, Any] = {}
    if args.demo is not None:
        import yaml

        demo = yaml.safe_load(Path(args.demo).read_text())
    twin = None
    if args.embedded:
        venue: dict[str, Any] = {"embedded": True, "twin": demo.get("venue", {}).get("twin")}
        if venue["twin"] is None:
            del venue["twin"]
    else:
        twin, rest, ws = start_twin(twin_yaml(demo) if demo else None)
        key = {"api_key": "${KEY}", "api_secret": "${SECRET}"}
        venue = {"base_url": rest, "ws_url": ws, **key}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            pid = None if twin is None else twin.pid
            anyio.run(soak, args, venue, f"{tmp}/journal.db", pid)
    finally:
        if twin is not None:
            twin.terminate()
            twin.wait()


if __name__ == "__main__":
    main()
