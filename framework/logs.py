"""Structured logging for the daemon: human lines or JSON lines, with secrets redacted.

Every record goes through :class:`SecretRedactor` on the handler, so records propagated from
any logger are covered. It replaces the configured secret values and anything shaped like a
private key (64 hex digits, optionally ``0x``-prefixed, not part of a longer hex run: a
132-character signature is left alone) in the message, its arguments, the traceback text and
string ``extra`` fields. Fields passed with ``extra={...}`` become ``key=value`` pairs in human
lines and keys of the JSON object.

Timestamps are the wall clock's, unless :func:`set_log_clock` gave another: a backtest
stamps its lines with the replay's virtual time.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Final, TextIO

import orjson

__all__ = [
    "REDACTED",
    "HumanFormatter",
    "JsonFormatter",
    "SecretRedactor",
    "configure_logging",
    "redact",
    "set_log_clock",
]

REDACTED: Final = "***"
_HEX_KEY = re.compile(r"(?<![0-9A-Fa-f])(?:0[xX])?[0-9A-Fa-f]{64}(?![0-9A-Fa-f])")
# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)
_HANDLER_NAME: Final = "framework.logs"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """The text with every secret value and hex private key replaced by ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return _HEX_KEY.sub(REDACTED, text)


class SecretRedactor(logging.Filter):
    """A handler filter that scrubs secrets from message, arguments, traceback and extras."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # Longest first, so a secret containing another is replaced whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place; never drops it."""
        record.msg = redact(record.getMessage(), self.secrets)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.secrets)
        for key, value in _extras(record).items():
            if isinstance(value, str):
                setattr(record, key, redact(value, self.secrets))
        return True


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


_clock: Callable[[], int | None] | None = None


def set_log_clock(now_ms: Callable[[], int | None] | None) -> None:
    """Stamp log lines with now_ms() (epoch ms) instead of the wall clock; None: wall clock.

    A backtest passes its virtual clock; while now_ms() returns None (no replay running
    yet) lines keep the wall clock's time.
    """
    global _clock
    _clock = now_ms


def _timestamp(record: logging.LogRecord) -> str:
    ms = _clock() if _clock is not None else None
    created = record.created if ms is None else ms / 1000
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class HumanFormatter(logging.Formatter):
    """``2030-01-01T00:00:00.000Z INFO  node: message key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        """One line (plus a traceback when there is one)."""
        name = record.name.removeprefix("framework.")
        line = f"{_timestamp(record)} {record.levelname:<5} {name}: {record.getMessage()}"
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={_plain(v)}" for k, v in extras.items())
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + record.exc_text
        return line


def _plain(value: Any) -> str:
    if isinstance(value, list | tuple | set | frozenset):
        text = ",".join(str(v) for v in value)
    else:
        text = str(value)
    return repr(text) if (" " in text or not text) else text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the extras and exc when present."""

    def format(self, record: logging.LogRecord) -> str:
        """Serialise the record with orjson (non-JSON values via str)."""
        obj: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        obj.update(_extras(record))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            obj["exc"] = record.exc_text
        return orjson.dumps(obj, default=str).decode()


def configure_logging(
    *,
    level: str = "INFO",
    json: bool = False,
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> logging.Handler:
    """Install one redacting handler on the root logger (replacing a previous one of ours)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == _HANDLER_NAME:
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(SecretRedactor(secrets))
    handler.setFormatter(JsonFormatter() if json else HumanFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Library chatter (one line per HTTP request, scheduler internals) drowns lifecycle lines.
    for noisy in ("httpx", "httpcore", "apscheduler", "websockets", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # The stream logs each reconnect with its reason and delay; stamina's own line repeats it.
    logging.getLogger("stamina").setLevel(logging.ERROR)
    return handler
