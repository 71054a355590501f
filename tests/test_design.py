"""The house rules DESIGN.md states, enforced: sans-I/O layers, the engine apart from config
and the runtimes, live and backtest apart, no import cycle of modules or of packages, no
module over 600 lines, the public API's ``__all__`` with docstrings, one wait helper for the
tests. Each failure names the module that breaks the rule."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import itertools
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import framework

ROOT = Path(__file__).resolve().parents[1]
IO_LIBRARIES = (
    "aiohttp", "anyio", "apscheduler", "asyncio", "h11", "httpcore", "httpx", "requests",
    "socket", "sqlite3", "starlette", "uvicorn", "websockets",
)  # fmt: skip
SANS_IO = ("framework.venue", "framework.engine")
ENGINE_MUST_NOT_LOAD = (
    "framework.config",
    "framework.live",
    "framework.backtest",
    "framework.twin",
)
MAX_LINES = 600


def modules(package: str) -> list[str]:
    """Every module of a package (recursively), by dotted name."""
    pkg = importlib.import_module(package)
    out = [package]
    for info in pkgutil.walk_packages(pkg.__path__, prefix=package + "."):
        out.append(info.name)
    return sorted(out)


@functools.cache
def _loaded(name: str) -> frozenset[str]:
    """Every module loaded by importing name in a fresh interpreter."""
    code = (
        f"import sys, importlib; importlib.import_module({name!r}); "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout
    return frozenset(out.split())


def test_venue_and_engine_import_no_io_library_even_indirectly() -> None:
    for package in SANS_IO:
        for name in modules(package):
            loaded = {m.split(".")[0] for m in _loaded(name)}
            pulled = sorted(loaded & set(IO_LIBRARIES))
            assert not pulled, f"{name} imports an I/O library (directly or not): {pulled}"


def test_the_engine_loads_nothing_of_config_live_backtest_or_twin() -> None:
    for name in modules("framework.engine"):
        pulled = sorted(
            m for m in _loaded(name) if m.startswith(tuple(p for p in ENGINE_MUST_NOT_LOAD))
        )
        assert not pulled, f"{name} loads {pulled} (directly or not)"


def _imports(path: Path, name: str) -> set[str]:
    """The framework modules a module imports at import time (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("framework"))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("framework"):
                    found.add(node.module)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)

    visit(tree.body)
    return found


def test_no_import_cycles_in_the_framework() -> None:
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "framework").rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        graph[name] = _imports(path, name)
    # a module importing a package imports its __init__; both are nodes of the graph
    for name, deps in graph.items():
        graph[name] = {d for d in deps if d in graph and d != name}
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                walk(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)


def test_the_public_api_lists_exactly_what_it_exports_each_documented() -> None:
    exported = set(framework.__all__)
    public = {n for n in vars(framework) if not n.startswith("_")} - {"annotations"}
    modules_ = {n for n in public if inspect.ismodule(getattr(framework, n))}
    assert exported == public - modules_, "framework.__all__ differs from its public names"
    for name in framework.__all__:
        obj = getattr(framework, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            doc = inspect.getdoc(obj)
            assert doc and doc.strip(), f"framework.{name} has no docstring"


def test_tests_have_one_wait_helper() -> None:
    definition = re.compile(r"^\s*(async\s+)?def eventually\(", re.M)
    defined = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if definition.search(path.read_text(encoding="utf-8"))
    ]
    assert defined == ["tests/waiting.py"], f"eventually() defined in {defined}"


def test_pytest_runs_with_strict_markers_and_warnings_as_errors() -> None:
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    ini = options["ini_options"]
    assert "--strict-markers" in ini["addopts"].split()
    assert ini["filterwarnings"][0] == "error"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _every_import(path: Path) -> set[str]:
    """The framework modules a module imports anywhere (in functions too, not TYPE_CHECKING)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("framework."))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("framework."):
            found.add(node.module or "")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _package(module: str) -> str:
    """framework.live.node -> framework.live; framework.config -> framework.config."""
    return ".".join(module.split(".")[:2])


def test_the_engine_imports_nothing_of_config_live_backtest_or_twin() -> None:
    for path in sorted((ROOT / "framework" / "engine").rglob("*.py")):
        bad = sorted(m for m in _every_import(path) if m.startswith(ENGINE_MUST_NOT_LOAD))
        assert not bad, f"{_module_name(path)} imports {bad}"


@pytest.mark.parametrize(("one", "other"), [("live", "backtest"), ("backtest", "live")])
def test_live_and_backtest_do_not_import_each_other(one: str, other: str) -> None:
    for path in sorted((ROOT / "framework" / one).rglob("*.py")):
        bad = sorted(m for m in _every_import(path) if _package(m) == f"framework.{other}")
        assert not bad, f"{_module_name(path)} imports {bad}"


def test_no_import_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    by: dict[tuple[str, str], str] = {}  # (package, package it imports) -> a module doing it
    for path in sorted((ROOT / "framework").rglob("*.py")):
        name = _module_name(path)
        if name == "framework":
            continue
        for dep in _every_import(path):
            if _package(dep) != _package(name):
                graph.setdefault(_package(name), set()).add(_package(dep))
                by.setdefault((_package(name), _package(dep)), name)
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                loop = [*stack[stack.index(dep) :], dep]
                steps = [f"{a} ({by[(a, b)]})" for a, b in itertools.pairwise(loop)]
                raise AssertionError("package import cycle: " + " -> ".join([*steps, dep]))
            if dep not in state:
                walk(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_600_lines() -> None:
    over = {
        str(path.relative_to(ROOT)): _lines(path)
        for path in sorted((ROOT / "framework").rglob("*.py"))
        if _lines(path) > MAX_LINES
    }
    assert not over, f"modules over {MAX_LINES} lines (split where a concept ends): {over}"
