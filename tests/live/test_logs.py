"""Structured logs: human and JSON lines, and secrets scrubbed from every part of a record."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from framework.logs import configure_logging, redact

HEX_KEY = "0x" + "3c" * 32
SIGNATURE = "0x" + "ab" * 65  # 130 hex digits: a signature, not a key


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Route the root logger to a buffer through configure_logging, then undo it."""
    buffer = io.StringIO()
    loggers = [
        logging.getLogger(n)
        for n in ("", "httpx", "httpcore", "apscheduler", "websockets", "uvicorn.access")
    ]
    levels = [logger.level for logger in loggers]
    configure_logging(level="DEBUG", secrets=["hunter2-pass"], stream=buffer)
    yield buffer
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == "framework.logs":
            root.removeHandler(handler)
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


def test_redact_replaces_configured_secrets_and_hex_keys_only() -> None:
    text = f"a {HEX_KEY} b {HEX_KEY[2:]} c hunter2-pass d {SIGNATURE}"
    assert redact(text, ["hunter2-pass"]) == f"a *** b *** c *** d {SIGNATURE}"


def test_human_lines_carry_extras_and_scrub_message_args_and_extras(stream: io.StringIO) -> None:
    logging.getLogger("framework.node").info(
        "login with %s", "hunter2-pass", extra={"key": HEX_KEY, "pairs": ["ETH-USD", "BTC-USD"]}
    )
    line = stream.getvalue().strip()
    assert line.endswith("INFO  node: login with *** key=*** pairs=ETH-USD,BTC-USD")


def test_tracebacks_are_scrubbed(stream: io.StringIO) -> None:
    try:
        raise ValueError(f"bad key {HEX_KEY} and hunter2-pass")
    except ValueError:
        logging.getLogger("x").exception("failed")
    text = stream.getvalue()
    assert "ValueError: bad key *** and ***" in text
    assert HEX_KEY[2:] not in text and "hunter2" not in text


def test_json_lines_are_one_object_per_record(stream: io.StringIO) -> None:
    configure_logging(level="INFO", json=True, secrets=["hunter2-pass"], stream=stream)
    logging.getLogger("framework.node").info("started", extra={"port": 8080, "pw": "hunter2-pass"})
    logging.getLogger("framework.node").debug("not shown at INFO")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    record = orjson.loads(lines[0])
    assert record["msg"] == "started"
    assert record["level"] == "INFO"
    assert record["logger"] == "framework.node"
    assert record["port"] == 8080
    assert record["pw"] == "***"


def test_configure_logging_replaces_its_own_handler(stream: io.StringIO) -> None:
    root = logging.getLogger()
    before = len(root.handlers)
    handler = configure_logging(level="INFO", stream=stream)
    assert len(root.handlers) == before
    assert handler in root.handlers
