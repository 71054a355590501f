"""The skeleton of ``perpframe new-strategy`` stubs the market's hooks with their records
imported, and its timer example reads ``self.market``."""

from __future__ import annotations

import importlib.util
import inspect
import logging
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from framework import Strategy
from framework.config import parse_config
from framework.engine.client_ids import ClientIdGenerator
from framework.engine.clock import VirtualClock
from framework.engine.events import Timer
from framework.engine.kernel import Kernel
from framework.scaffold import render_config, render_strategy
from framework.venue.market import Bar, Book, MarkPrice, Trade

MARKET_HOOKS = {"on_trade": Trade, "on_book": Book, "on_bar": Bar, "on_mark": MarkPrice}


def skeleton(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The module new-strategy writes for name, imported from its file (for this test)."""
    path = tmp_path / f"{name}.py"
    path.write_text(render_strategy(name), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # its annotations are resolved by name
    spec.loader.exec_module(module)
    return module


def test_each_market_hook_is_stubbed_with_its_docstring_and_its_record_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = skeleton(tmp_path, "sk_hooks", monkeypatch).SkHooks
    for hook, record in MARKET_HOOKS.items():
        method = getattr(cls, hook)
        assert method is not getattr(Strategy, hook)
        assert inspect.getdoc(method) == inspect.getdoc(getattr(Strategy, hook)).split("\n")[0]
        hints = get_type_hints(method)  # a NameError if the record were not imported
        assert record in hints.values()


def test_the_skeletons_timer_reads_the_market_and_its_config_names_the_market_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cls = skeleton(tmp_path, "sk_run", monkeypatch).SkRun
    text = render_config("sk_run")
    assert "# market:" in text and "#     ETH-USD: {channels: [trade, depth]}" in text
    config = parse_config(text, env={}, resolve_strategies=False)  # built from cls below
    clock = VirtualClock(1_700_000_000_000)
    kernel = Kernel(config, clock)
    kernel.build_engine(ids=ClientIdGenerator.ephemeral("t", now_ms=clock.ms, random_bits=1))
    (bot,) = kernel.load_strategies(
        schedule=lambda *_: None,
        factories=[lambda context: cls("sk_run", context, {"pair": "ETH-USD", "trade": True})],
    )
    kernel.start()
    kernel.feeds("market", (Trade,))
    kernel.intake(Trade(pair="ETH-USD", price=Decimal("2001.5"), quantity=Decimal(1)))
    caplog.set_level(logging.INFO)
    kernel.bus.publish(Timer("tick", "sk_run", clock.now()))
    assert "buying ETH-USD at market, last trade 2001.5" in caplog.messages
    assert kernel.engine.next_batch() is not None  # its market order went out
    assert bot.name == "sk_run"
