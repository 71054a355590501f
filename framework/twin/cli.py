"""``python run.py venue``: serve the twin until Ctrl-C.

::

    python run.py venue [--host 127.0.0.1] [--port 8400] [--config FILE]
                        [--account API_KEY=0xADDRESS ...] [--balance 100000] [--seed N]
                        [--market]

Prints the REST base URL and the WebSocket URL once it accepts connections. Accounts given
with ``--account`` get ``--balance`` in every settlement coin of the configured pairs, as does
the TEST-ONLY demo account (unless the config sets ``demo_account: false``). Ctrl-C or
SIGTERM stop it cleanly (exit status 0); a bad config exits with status 2 and the reason.
``--market`` turns on the generated public market (``market.enabled`` of the settings: books,
trades and bars published, user orders filled against them).
The process runs on uvloop when it is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import signal
import sys
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs

from framework.cli import program
from framework.twin.demo import DEMO_ADDRESS, DEMO_API_KEY
from framework.twin.server import VenueTwin
from framework.twin.settings import AccountSettings, TwinSettings, load_settings
from framework.venue.errors import ConfigError
from framework.venue.rules import settle_coin_of

__all__ = ["build_parser", "main"]

_ACCOUNT = re.compile(r"([^=\s]+)=(0[xX][0-9a-fA-F]{40})")


def _account(text: str) -> tuple[str, str]:
    match = _ACCOUNT.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError("expected API_KEY=0xADDRESS (40 hex characters)")
    return match.group(1), match.group(2)


def _amount(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not a decimal amount: {text!r}") from None
    if not value.is_finite() or value < 0:
        raise argparse.ArgumentTypeError(f"not a non-negative amount: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``run.py venue``."""
    parser = argparse.ArgumentParser(
        prog=program("venue"),
        description="Serve the venue twin: a local exchange speaking the venue's private REST and "
        "WebSocket API (see the README, The venue twin).",
    )
    parser.add_argument("--host", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="TCP port, 0 for any free port (default 8400)")
    parser.add_argument("--config", help="YAML settings file (see configs/venue.yaml)")
    parser.add_argument(
        "--account",
        action="append",
        type=_account,
        default=[],
        metavar="API_KEY=0xADDRESS",
        help="accept this API key, signed (type 2) by the key of this address; repeatable",
    )
    parser.add_argument(
        "--balance",
        type=_amount,
        help="starting balance of --account and demo accounts per settlement coin (100000)",
    )
    parser.add_argument("--seed", type=int, help="seed of the price walk and of faults")
    parser.add_argument(
        "--market",
        action="store_true",
        help="publish a generated market (book, trades, bars) and fill orders against it",
    )
    return parser


def _settings(args: argparse.Namespace) -> TwinSettings:
    settings = load_settings(args.config) if args.config else TwinSettings()
    changes: dict[str, Any] = {}
    if args.host is not None:
        changes["host"] = args.host
    if args.port is not None:
        changes["port"] = args.port
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.balance is not None:
        changes["demo_balance"] = args.balance
    if args.market:
        changes["market"] = attrs.evolve(settings.market, enabled=True)
    if args.account:
        balance = args.balance if args.balance is not None else settings.demo_balance
        coins = dict.fromkeys(settle_coin_of(n, p.rules) for n, p in settings.pairs.items())
        extra = [
            AccountSettings(api_key=key, address=address, balances=dict.fromkeys(coins, balance))
            for key, address in args.account
        ]
        changes["accounts"] = [*settings.accounts, *extra]
    try:
        return attrs.evolve(settings, **changes)
    except ValueError as exc:
        raise ConfigError(f"invalid settings: {exc}") from None


async def _serve(settings: TwinSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with VenueTwin(settings) as twin:
        print(f"venue twin ready\n  REST       {twin.base_url}\n  WebSocket  {twin.ws_url}")
        if settings.market.enabled:
            print(f"  market     on: {', '.join(settings.pairs)} (seed {settings.seed})")
        if twin.demo_user_id is not None:
            print(f"  demo (TEST ONLY) APIKEY {DEMO_API_KEY} address {DEMO_ADDRESS}")
            print("  its private key is framework.twin.demo.DEMO_PRIVATE_KEY")
        print("Ctrl-C to stop", flush=True)
        await stop.wait()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed (uvicorn[standard] brings it): the CLI owns its loop."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def main(argv: list[str]) -> int:
    """Run the twin until Ctrl-C; returns the process exit status."""
    args = build_parser().parse_args(argv)
    try:
        settings = _settings(args)
    except ConfigError as exc:
        print(f"venue: {exc}", file=sys.stderr)
        return 2
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_serve(settings))
    except KeyboardInterrupt:
        print("venue twin stopped", flush=True)
        return 0
    except ConfigError as exc:
        print(f"venue: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"venue: cannot serve on {settings.host}:{settings.port}: {exc}", file=sys.stderr)
        return 1
    print("venue twin stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
