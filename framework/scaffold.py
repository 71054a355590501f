"""``perpframe new-strategy NAME``: write a documented strategy skeleton and a config for it.

NAME.py holds a Strategy subclass with every hook of the hook table stubbed and explained in
one line each (the market's hooks too, and ``self.market`` read in the timer's example);
NAME.yaml runs it against the embedded venue twin (no credentials), so
``perpframe check -c NAME.yaml`` passes and ``perpframe live -c NAME.yaml`` trades play money
at once. Existing files are never overwritten.
"""

from __future__ import annotations

import argparse
import inspect
import keyword
import sys
from pathlib import Path
from typing import get_type_hints

import framework
from framework.cli import program
from framework.engine.strategy import HOOKS, Strategy
from framework.output_path import unwritable

__all__ = ["class_name", "main", "render_config", "render_strategy"]

_STRATEGY = '''\
"""{cls}: a strategy skeleton written by `perpframe new-strategy` (edit me)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs

{imports}


class {cls}(Strategy):
    """Every `every_s` seconds, buy `quantity` of `pair` at market while flat (when `trade`)."""

    @attrs.frozen(kw_only=True)
    class Params:
        """The YAML `params:` of this strategy, checked by `perpframe check`."""

        pair: str
        quantity: Decimal = Decimal("0.01")
        every_s: float = 5.0
        trade: bool = False

    def __init__(
        self, name: str, context: StrategyContext, params: Any = None, **kwargs: Any
    ) -> None:
        """Build state only: `check` builds the strategy without a venue, so no I/O here."""
        super().__init__(name, context, params, **kwargs)
        self.p = structure_params(self.Params, self.params)
'''

_BODIES = {
    "on_start": 'self.schedule("tick", self.p.every_s)',
    "on_position": 'self.log.info("position %s %s %s", push.symbol, push.direction, '
    "push.current_quantity)",
    "on_account": 'self.log.info("balance %s available %s", push.symbol, push.available_amount)',
    "on_match": "if match.client_order_id is not None:  # None: not known as ours\n"
    '    self.log.info("filled %s at %s", match.quantity, match.average_price)',
    "on_order": 'if update.status == "REJECTED":  # or ACCEPTED, FILLED, UNKNOWN...\n'
    '    self.log.warning("refused %s: %s %s", update.client_order_id, update.code, '
    "update.msg)",
    "on_timer": "pair, market = self.p.pair, self.market  # last(pair), mark, book(pair).mid...\n"
    'if name == "tick" and self.p.trade and self.portfolio.net_quantity(pair) == 0:\n'
    '    self.log.info("buying %s at market, last trade %s", pair, market.last(pair))\n'
    "    # Market order; a limit order sets price=Decimal(...), match_type, lever, "
    "position_type.\n"
    "    self.submit(OrderIntent(pair=pair, is_long=True, quantity=self.p.quantity))",
    "on_cancel_rejected": 'self.log.warning("cancel refused %s: %s %s", event.client_order_id, '
    "event.code, event.msg)",
    "on_stop": 'self.log.info("stopping with position %s", '
    "self.portfolio.net_quantity(self.p.pair))",
    "on_trade": 'self.log.debug("trade %s %s at %s", trade.pair, trade.quantity, trade.price)',
    "on_book": "# self.market.book(pair) is the latest too, read from any hook\n"
    'self.log.debug("book %s mid %s", book.pair, book.mid)',
    "on_bar": 'self.log.debug("bar %s %s close %s", bar.pair, bar.period, bar.close)',
    "on_mark": 'self.log.debug("mark %s %s", mark.pair, mark.price)',
}
"""Each hook's body in the skeleton (its docstring is the base class's); others get pass."""


def _stub(name: str) -> tuple[str, set[type]]:
    """One hook of the skeleton (every row of the hook table has one) and the types it names."""
    method = getattr(Strategy, name)
    doc, body = (inspect.getdoc(method) or "").split("\n")[0], _BODIES.get(name, "pass")
    params = [
        p.name if p.annotation is p.empty else f"{p.name}: {p.annotation}"
        for p in inspect.signature(method).parameters.values()
    ]
    lines = "".join(f"\n        {line}" for line in body.splitlines())
    text = f'\n    def {name}({", ".join(params)}) -> None:\n        """{doc}"""{lines}\n'
    hints = get_type_hints(method)
    return text, {t for k, t in hints.items() if k != "return" and isinstance(t, type)}


def _imports(types: set[type]) -> str:
    """The import lines of types: the framework's public API, else their own module."""
    public = {t.__name__ for t in types if getattr(framework, t.__name__, None) is t}
    lines = ["from framework import (", *(f"    {n}," for n in sorted(public)), ")"]
    others: dict[str, list[str]] = {  # besides the hooks' types, what the skeleton uses
        "framework.config": ["structure_params"],
        "framework.engine.strategy": ["StrategyContext"],
    }
    for t in types:
        if t.__name__ not in public and t.__module__.startswith("framework."):
            others.setdefault(t.__module__, []).append(t.__name__)
    lines += [f"from {m} import {', '.join(sorted(n))}" for m, n in sorted(others.items())]
    return "\n".join(lines)


_CONFIG = """\
# {name}: runs {module}.py ({cls}) against the embedded venue twin: no credentials, play money.
#
#   perpframe check -c {name}.yaml
#   perpframe live  -c {name}.yaml --duration 60
#   perpframe record -c {name}.yaml --out {name}.jsonl.gz --duration 120
#   perpframe backtest -c {name}.yaml --recording {name}.jsonl.gz
#
# {module}.py is found in the working directory or beside this file.

venue:
  embedded: true
  twin:
    prices:
      tick_interval: 0.25     # a new mark every 250 ms
      max_step_ticks: 60      # moving up to 60 price ticks

pairs:
  {pair}: {{}}

polling:
  match_interval_s: 0.5

# market:                     # the pair's market events: on_trade, on_book... and self.market
#   stale_after_s: 10         # market orders are refused (9007) on older market data
#   pairs:
#     {pair}: {{channels: [trade, depth]}}

strategies:
  - name: {name}
    class: {module}:{cls}
    params:
      pair: {pair}
      quantity: "0.01"
      every_s: 5.0
      trade: true

logging:
  level: INFO
"""


def class_name(name: str) -> str:
    """The CamelCase class name for a module name (my_bot -> MyBot)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "Bot"


def render_strategy(name: str) -> str:
    """The text of NAME.py: its Params and a stub of every hook of the hook table."""
    stubs, used = [], {framework.OrderIntent, framework.Strategy}
    for row in HOOKS:
        if row.name in vars(Strategy):  # the framework's hooks (a plug-in's are its own)
            text, types = _stub(row.name)
            stubs.append(text)
            used |= types
    return _STRATEGY.format(cls=class_name(name), imports=_imports(used)) + "".join(stubs)


def render_config(name: str, pair: str = "ETH-USD") -> str:
    """The text of NAME.yaml."""
    return _CONFIG.format(name=name, module=name, cls=class_name(name), pair=pair)


def main(argv: list[str]) -> int:
    """Write NAME.py and NAME.yaml into the working directory (or --dir); 0 when written."""
    parser = argparse.ArgumentParser(
        prog=program("new-strategy"),
        description="Write a documented strategy skeleton NAME.py and a config NAME.yaml "
        "that runs it against the embedded venue twin.",
    )
    parser.add_argument("name", metavar="NAME", help="module name: letters, digits, _")
    parser.add_argument("--pair", default="ETH-USD", help="pair to trade (default ETH-USD)")
    parser.add_argument("--dir", default=".", help="where to write (default: here)")
    args = parser.parse_args(argv)
    name: str = args.name
    if not name.isidentifier() or keyword.iskeyword(name) or not name.isascii():
        parser.error(f"NAME must be a Python module name (letters, digits, _), got {name!r}")
    if name in sys.stdlib_module_names or name in ("framework", "strategies", "tests"):
        parser.error(f"NAME {name!r} would shadow a module of that name; choose another")
    directory = Path(args.dir)
    problem = unwritable(directory, directory=True)
    if problem is not None:
        print(f"new-strategy: cannot write to {directory}: {problem}", file=sys.stderr)
        return 1
    targets = {
        directory / f"{name}.py": render_strategy(name),
        directory / f"{name}.yaml": render_config(name, args.pair),
    }
    existing = [str(p) for p in targets if p.exists()]
    if existing:
        verb = "exists" if len(existing) == 1 else "exist"
        print(f"new-strategy: {', '.join(existing)} {verb}; nothing written", file=sys.stderr)
        return 1
    directory.mkdir(parents=True, exist_ok=True)
    for path, text in targets.items():
        path.write_text(text, encoding="utf-8")
    py, yaml = (str(p) for p in targets)
    print(f"wrote {py} and {yaml}")
    print(f"next: perpframe check -c {yaml} && perpframe live -c {yaml} --duration 60")
    return 0
