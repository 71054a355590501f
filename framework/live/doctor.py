"""``perpframe doctor -c FILE``: a preflight of a live configuration that places no order.

Each check prints one line ``STATUS  check: what was found`` (STATUS is ok, warn, fail or
skip) as soon as it is done, in this order: config, venue, key, clock, stream, pairs,
journal, metrics, market-data. A paper config (``venue.mode: paper``) makes no private call
and opens no private stream, so key and stream are skipped, saying why; no key is needed. Every check that waits on the network is bounded (the
venue's ``timeout_s``, the stream's ``ack_timeout_s``): a dead venue is a fail line, never a
hang. A check that needs what an earlier one could not give (a valid config, a reachable
venue) is skipped with the reason. Exit status: 1 when any line is fail, else 0.

The journal is read through a read-only SQLite connection (``mode=ro``) and checked with the
same ``PRAGMA quick_check`` as :meth:`framework.live.journal.Journal.open`; that method
creates, upgrades and folds the file, which a preflight must not do.
"""

from __future__ import annotations

import argparse
import socket
import sqlite3
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import quote

import anyio
import attrs

from framework.cli import add_strategy_dirs, program
from framework.config import Config, load_config
from framework.engine.clock import Clock
from framework.engine.raised import one_line
from framework.live.doctor_market import market_flowing
from framework.live.embedded import VenueAccess, open_venue
from framework.live.journal_schema import read_mode_problem
from framework.live.rest import RestClient
from framework.live.stream import StreamClient
from framework.live.wallclock import WallClock
from framework.logs import configure_logging, redact
from framework.venue.errors import (
    AuthError,
    ConfigError,
    ExtensionUnavailable,
    FrameworkError,
    VenueError,
)
from framework.venue.public_info import PAIRS_PATH, TIME_PATH, public_request
from framework.venue.signing import Signer, make_signer

__all__ = [
    "CLOCK_FAIL_MS",
    "CLOCK_WARN_MS",
    "JOURNAL_TIMEOUT_S",
    "Finding",
    "diagnose",
    "doctor_main",
]

Status = Literal["ok", "warn", "fail", "skip"]
CLOCK_WARN_MS: Final = 1_000
"""A venue clock further off than this is a warning."""
CLOCK_FAIL_MS: Final = 5_000
"""Further off than this fails: the venue refuses signatures it finds stale."""
JOURNAL_TIMEOUT_S: Final = 30.0
"""The journal's check (SQLite's quick_check reads the whole file) gives up after this."""
_OPEN: Final = "('PENDING', 'UNKNOWN', 'ACCEPTED')"
_SHOWN: Final = 10  # names listed at most in one line


@attrs.frozen(slots=True)
class Finding:
    """The outcome of one check: status, check name and what was found (one line)."""

    status: Status
    check: str
    text: str

    def line(self) -> str:
        """``STATUS  check: text``, the status padded so the checks line up."""
        return f"{self.status:<4}  {self.check}: {self.text}"


Report = Callable[[Finding], None]
Outcome = tuple[Status, str, str]
Found = Callable[[Status, str, str], None]


def doctor_main(argv: list[str]) -> int:
    """Run every check of a config file; 1 when any fails, else 0."""
    parser = argparse.ArgumentParser(
        prog=program("doctor"), description="Check a live configuration without trading."
    )
    parser.add_argument("-c", "--config", required=True, metavar="FILE", help="YAML config")
    from framework.live.cli import paper_flags  # the live command's flags, read alike

    paper_flags(parser)
    args = parser.parse_args(argv)
    # The stream's reconnect warnings would repeat what its line says: errors only.
    configure_logging(level="ERROR", json=False)

    def report(finding: Finding) -> None:
        print(finding.line(), flush=True)

    findings = anyio.run(
        partial(diagnose, args.config, report, paper=args.paper, shadow=args.shadow)
    )
    return 1 if any(f.status == "fail" for f in findings) else 0


async def diagnose(
    config_path: str | Path,
    report: Report,
    *,
    clock: Clock | None = None,
    paper: bool = False,
    shadow: bool = False,
) -> list[Finding]:
    """Run the checks of the module in order, reporting each finding; all of them. paper,
    shadow: the file read as ``live --paper`` / ``--shadow`` reads it."""
    clock = clock if clock is not None else WallClock()
    findings: list[Finding] = []
    secrets: list[str] = []

    def found(status: Status, check: str, text: str) -> None:
        finding = Finding(status, check, redact(text, secrets))
        findings.append(finding)
        report(finding)

    config = _config(str(config_path), found, partial(load_config, paper=paper, shadow=shadow))
    if config is None:
        for check in (*_VENUE_CHECKS, "journal", "metrics", "market-data"):
            found("skip", check, "the config did not load")
    else:
        secrets.extend(config.secrets())
        await _venue_checks(config, clock, found)
    return findings


def _config(path: str, found: Found, load: Callable[[str], Config]) -> Config | None:
    add_strategy_dirs(path)
    try:
        config = load(path)
    except ConfigError as exc:
        problems = str(exc).splitlines() or ["cannot be read"]
        found("fail", "config", _first(problems, path))
        return None
    from framework.live.cli import build_problems

    problems = build_problems(config)
    if problems:
        found("fail", "config", _first(problems, path))
    else:
        venue = "embedded venue twin" if config.venue.embedded else str(config.venue.base_url)
        if config.venue.is_paper:
            venue += " (paper: orders filled in-process, never sent)"
        found("ok", "config", f"{path}: venue {venue}; pairs {', '.join(config.pairs)};"
              f" {len(config.strategies)} strategies built")  # fmt: skip
    return config


def _first(problems: list[str], path: str) -> str:
    """The first problem, and how many more ``perpframe check`` lists."""
    more = len(problems) - 1
    return problems[0] + (
        f" (and {more} more: perpframe check -c {path} lists them)" if more else ""
    )


_VENUE_CHECKS: Final = ("venue", "key", "clock", "stream", "pairs")
_PAPER_KEY: Final = (
    "paper mode makes no private call; the key signs only the market's subscribes"
    " (market-data checks them)"
)
_PAPER_NO_KEY: Final = (
    "paper mode without venue.api_secret makes no signed call (the market's channels need one)"
)


async def _venue_checks(config: Config, clock: Clock, found: Found) -> None:
    """The checks in order, while the venue (the embedded twin too) is open; each bounded."""
    checks = _VENUE_CHECKS[1:]
    timeout = config.venue.timeout_s
    async with AsyncExitStack() as stack:
        try:
            with anyio.fail_after(max(timeout, 10.0)):
                access = await stack.enter_async_context(open_venue(config))
        except Exception as exc:  # the embedded twin could not start
            found("fail", "venue", f"the embedded venue twin did not start: {one_line(exc)}")
            for check in checks:
                found("skip", check, "no venue")
            await _local_checks(config, found)
            found("skip", "market-data", "no venue")
            return
        secret = access.api_secret.reveal()
        paper = config.venue.is_paper
        if paper and not secret:  # a paper node signs nothing without one: neither does this
            from framework.paper.venue import NoSigner

            signer: Signer = NoSigner(access.sign_type)
        else:
            signer = make_signer(access.sign_type, secret)
        rest = await stack.enter_async_context(
            RestClient(
                access.base_url,
                access.api_key,
                signer,
                language=config.venue.language,
                timeout=timeout,
                now_ms=clock.now_ms,
            )
        )
        reachable = await _reachable(access, rest, timeout, found)
        if reachable and paper:  # no private call, no private stream: what it needs is public
            found("skip", "key", _PAPER_KEY if secret else _PAPER_NO_KEY)
            found(*await _bounded("clock", timeout * 2, _clock(rest, clock)))
            found("skip", "stream", "paper mode opens no private stream")
            found(*await _bounded("pairs", timeout * 2, _pairs(config, rest)))
        elif reachable:
            found(*await _bounded("key", timeout * 2, _key(config, rest)))
            found(*await _bounded("clock", timeout * 2, _clock(rest, clock)))
            found(*await _stream(config, access, rest, clock))
            found(*await _bounded("pairs", timeout * 2, _pairs(config, rest)))
        else:
            for check in checks:
                found("skip", check, "the venue is not reachable")
        await _local_checks(config, found)
        if reachable:
            found(*await market_flowing(config, access.ws_url, rest, clock))
        else:
            found("skip", "market-data", "the venue is not reachable")


async def _local_checks(config: Config, found: Found) -> None:
    """journal and metrics: this machine's, no venue needed."""
    journal = anyio.to_thread.run_sync(_journal, config, abandon_on_cancel=True)
    found(*await _bounded("journal", JOURNAL_TIMEOUT_S, journal))
    found(*_metrics(config))


async def _bounded(check: str, seconds: float, outcome: Coroutine[Any, Any, Outcome]) -> Outcome:
    """outcome, or a fail line when it takes longer than seconds."""
    try:
        with anyio.fail_after(seconds):
            return await outcome
    except TimeoutError:
        return "fail", check, f"no answer within {seconds:g} s"


async def _reachable(access: VenueAccess, rest: RestClient, timeout: float, found: Found) -> bool:
    where = "embedded venue twin at " + access.base_url if access.twin else access.base_url
    try:
        with anyio.fail_after(timeout):
            status, _ = await rest.send(public_request("/"))
    except TimeoutError:
        found(
            "fail",
            "venue",
            f"no answer from {access.base_url} within venue.timeout_s ({timeout:g} s)",
        )
        return False
    except FrameworkError as exc:
        found("fail", "venue", f"no answer from {access.base_url}: {one_line(exc)}")
        return False
    found("ok", "venue", f"{where} answered (HTTP {status})")
    return True


async def _key(config: Config, rest: RestClient) -> Outcome:
    """A signed balance read of each settlement coin."""
    sign_type = rest.builder.sign_type
    held = []
    for coin in config.coins():
        try:
            balance = await rest.balance(coin)
        except AuthError as exc:
            return (
                "fail",
                "key",
                (
                    f"the venue refused the signed balance read of {coin} ({one_line(exc)}): check"
                    f" venue.api_key, venue.api_secret and venue.sign_type ({sign_type})"
                ),
            )
        except VenueError as exc:
            return "fail", "key", f"key accepted, but the balance of {coin}: {one_line(exc)}"
        except FrameworkError as exc:
            return "fail", "key", f"balance of {coin} not read: {one_line(exc)}"
        held.append(f"{coin} {balance.available_amount} available")
    return "ok", "key", f"accepted (sign type {sign_type}): {', '.join(held) or 'no coin'}"


async def _clock(rest: RestClient, clock: Clock) -> Outcome:
    """The venue's clock against this machine's, at the middle of the round trip."""
    before = clock.now_ms()
    try:
        venue = await rest.server_time()
    except ExtensionUnavailable:
        return "warn", "clock", f"the venue does not serve its time (HTTP 404 on {TIME_PATH})"
    except FrameworkError as exc:
        return "warn", "clock", f"the venue's time not read: {one_line(exc)}"
    after = clock.now_ms()
    offset = venue - (before + after) // 2
    way = "ahead of" if offset >= 0 else "behind"
    text = f"the venue's clock is {abs(offset) / 1000:.3f} s {way} this machine's"
    text += f" (round trip {after - before} ms)"
    if abs(offset) > CLOCK_FAIL_MS:
        return "fail", "clock", f"{text}: above {CLOCK_FAIL_MS / 1000:g} s the venue refuses" \
            " signed calls as stale; set this machine's clock (NTP)"  # fmt: skip
    if abs(offset) > CLOCK_WARN_MS:
        return "warn", "clock", f"{text}: above {CLOCK_WARN_MS / 1000:g} s; check NTP"
    return "ok", "clock", text


async def _stream(config: Config, access: VenueAccess, rest: RestClient, clock: Clock) -> Outcome:
    """One signed subscribe per pair and coin on one connection, each acknowledged."""
    done = anyio.Event()
    states: list[tuple[str, str]] = []

    def on_state(state: str, detail: str) -> None:
        states.append((state, detail))
        if state in ("connected", "failed", "lost"):
            done.set()

    pairs, coins = list(config.pairs), config.coins()
    client = StreamClient(
        access.ws_url,
        rest.builder,
        pairs=pairs,
        coins=coins,
        on_frame=lambda frame: None,
        on_state=on_state,
        clock=clock,
        ack_timeout_s=config.stream.ack_timeout_s,
        open_timeout_s=config.venue.timeout_s,
    )
    limit = config.venue.timeout_s + config.stream.ack_timeout_s + 1.0
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.run)
        with anyio.move_on_after(limit):
            await done.wait()
        tg.cancel_scope.cancel()
    if not states or states[-1][0] != "connected":
        why = client.last_error or f"nothing within {limit:g} s"
        return "fail", "stream", f"{access.ws_url}: {why}"
    return "ok", "stream", f"{access.ws_url}: {len(pairs)} pairs and {len(coins)} coins" \
        " subscribed and acknowledged"  # fmt: skip


async def _pairs(config: Config, rest: RestClient) -> Outcome:
    """Each configured pair listed by the venue, with the rules it states equal to ours."""
    try:
        listed = await rest.pair_list()
    except ExtensionUnavailable:
        return "warn", "pairs", f"the venue does not publish its pairs (HTTP 404 on {PAIRS_PATH})"
    except FrameworkError as exc:
        return "warn", "pairs", f"the venue's pair list not read: {one_line(exc)}"
    unknown = [pair for pair in config.pairs if pair not in listed]
    if unknown:
        names = ", ".join(sorted(listed)[:_SHOWN]) + (", ..." if len(listed) > _SHOWN else "")
        return "fail", "pairs", f"not listed by the venue: {', '.join(unknown)}" \
            f" (it lists {len(listed)}: {names or 'none'})"  # fmt: skip
    differences = []
    compared = 0
    for pair, rules in config.pairs.items():
        for field, theirs in listed[pair].rules.items():
            ours = getattr(rules, field)
            if field == "settle_coin":
                ours = config.settle_coin(pair)
            compared += 1
            same = Decimal(ours) == theirs if isinstance(theirs, Decimal) else ours == theirs
            if not same:
                differences.append(f"{pair} {field}: ours {ours}, venue {theirs}")
    if differences:
        return "warn", "pairs", "rules differ: " + "; ".join(differences)
    if not compared:
        return "ok", "pairs", f"{', '.join(config.pairs)} listed; the venue states no rule"
    return "ok", "pairs", f"{', '.join(config.pairs)} listed; {compared} rules agree"


def _journal(config: Config) -> Outcome:
    """The journal file: SQLite's quick_check, its intents, open ones by owner (read-only)."""
    path = config.journal.path
    if path is None or path == ":memory:":
        return "skip", "journal", "not set (a temporary file): nothing kept across runs"
    if not Path(path).exists():
        return "ok", "journal", f"{path} does not exist yet: live creates it"
    node = config.node.name
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        return "fail", "journal", f"{path}: cannot be opened ({exc})"
    try:
        problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError("; ".join(" ".join(p.split()) for p in problems))
        total = conn.execute("SELECT count(*) FROM intents").fetchone()[0]
        owners = dict(
            conn.execute(
                f"SELECT owner, count(*) FROM intents WHERE status IN {_OPEN} GROUP BY owner"
            ).fetchall()
        )
        unfolded = conn.execute("SELECT count(*) FROM log").fetchone()[0]
        refused = read_mode_problem(conn, path, config.venue.mode)  # as live would open it
    except sqlite3.Error as exc:
        if "no such table" in str(exc):
            return "fail", "journal", f"{path}: not a perpframe journal ({exc})"
        return "fail", "journal", f"{path}: damaged ({' '.join(str(exc).split())}); move it" \
            " aside and start with a new journal, or restore a copy"  # fmt: skip
    finally:
        conn.close()
    if refused is not None:
        return "fail", "journal", refused
    mine = owners.pop(node, 0)
    others = ", ".join(f"{o} ({n} open)" for o, n in sorted(owners.items())[:_SHOWN]) or "none"
    text = f"{path}: healthy, {total} intents; {mine} open of node {node}; other owners: {others}"
    if unfolded:
        text += f"; {unfolded} commits not folded yet (counted when live opens it)"
    return "ok", "journal", text


def _metrics(config: Config) -> Outcome:
    """Whether the metrics endpoint could listen on its host and port."""
    metrics = config.metrics
    if not metrics.enabled:
        return "skip", "metrics", "metrics.enabled is false"
    where = f"{metrics.host}:{metrics.port}"
    family = socket.AF_INET6 if ":" in metrics.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the endpoint binds
        try:
            sock.bind((metrics.host, metrics.port))
        except OSError as exc:
            return "fail", "metrics", f"{where} cannot be bound ({exc.strerror}): is another" \
                " node or program listening there? set metrics.port"  # fmt: skip
    return "ok", "metrics", f"{where} is free"
