"""The engine's modules stay independent parts: no cycle, no back door into the loop.

The run loop composes helpers (commands, waits, budgets, tool calls, model calls, ...)
that share one explicit state object (``engine/run_state.py``). These checks keep it so,
read from the source with :mod:`ast`, so that no import can hide from them:

* the imports between engine modules form a graph without cycles, counting imports
  under ``if TYPE_CHECKING:`` and inside functions (a cycle that only the type checker or
  a late import sees is still a knot: neither part can be read or tested alone);
* no engine module but the loop imports ``engine.loop``: a helper that needs something of
  the loop gets it from the state or as a parameter;
* no engine module reads or writes another object's private attribute (``x._name``). The
  rule is deliberately simple: an attribute whose name starts with one underscore may be
  reached only through ``self`` or ``cls``, or through a name the same module defines at
  its top level (its own private helpers). Dunder names (``__class__``) are not private;
* no engine function is more complex than :data:`MAX_COMPLEXITY` (ruff's ``C901``, McCabe):
  a long chain of cases becomes a table of small functions, one per case.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import desktop_agent.engine

PACKAGE = "desktop_agent.engine"
ENGINE = Path(desktop_agent.engine.__file__).parent
LOOP = f"{PACKAGE}.loop"
MAX_COMPLEXITY = 12
COMPOSERS = frozenset({LOOP})
"""Modules allowed to import the loop: the loop itself (there is no other composition root
inside the engine; the worker composes the engine from outside)."""


def _modules() -> dict[str, ast.Module]:
    """Every module of the engine package, parsed, by dotted name."""
    out = {}
    for path in sorted(ENGINE.glob("*.py")):
        name = PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"
        out[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return out


def _engine_imports(tree: ast.Module, known: set[str]) -> set[str]:
    """Engine modules ``tree`` imports anywhere (top level, TYPE_CHECKING, functions).

    ``from desktop_agent.engine import budget`` imports the module ``budget``;
    ``from desktop_agent.engine.ports import X`` imports ``ports``.
    """
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PACKAGE + "."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x / from .x import y
                base = f"{PACKAGE}.{base}" if base else PACKAGE
            if base == PACKAGE:
                found.update(f"{PACKAGE}.{a.name}" for a in node.names)
            elif base.startswith(PACKAGE + "."):
                found.add(base)
    return {m for m in found if m in known}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _engine_imports(tree, known) - {name} for name, tree in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each back edge a depth-first search finds (empty: a DAG)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def _short(name: str) -> str:
    return name.removeprefix(PACKAGE + ".")


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names bound at the top level of a module (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _private_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, text)`` of each ``x._name`` where ``x`` is not ``self``, ``cls`` or ours."""
    return sorted(_each_private_read(tree))


def _each_private_read(tree: ast.Module) -> Iterator[tuple[int, str]]:
    own = _top_level_names(tree) | {"self", "cls"}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or (attr.startswith("__") and attr.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in own:
            continue
        yield node.lineno, ast.unparse(node)


def test_the_engine_import_graph_has_no_cycle() -> None:
    cycles = _cycles(_graph())
    shown = [" -> ".join(_short(m) for m in cycle) for cycle in cycles]
    assert not shown, "engine modules import each other in a cycle:\n" + "\n".join(shown)


def test_only_the_loop_imports_the_loop() -> None:
    importers = sorted(
        _short(module)
        for module, deps in _graph().items()
        if LOOP in deps and module not in COMPOSERS
    )
    assert not importers, f"these engine modules import engine.loop: {importers}"


def test_no_engine_module_reaches_into_another_objects_private_attributes() -> None:
    found = [
        f"{_short(name)}:{line}: {text}"
        for name, tree in _modules().items()
        for line, text in _private_reads(tree)
    ]
    assert not found, "private attributes read across objects:\n" + "\n".join(found)


def test_no_engine_function_is_too_complex() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [
            str(ruff),
            "check",
            "--no-cache",
            "--output-format=concise",
            "--select=C901",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            str(ENGINE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"too complex (over {MAX_COMPLEXITY}):\n{done.stdout}"


def test_the_checks_see_what_they_look_for() -> None:
    """The parsers find imports in every place they can hide, and private reads."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from desktop_agent.engine import budget as budgets\n"
        "if TYPE_CHECKING:\n"
        "    from desktop_agent.engine.loop import Activation\n"
        "def f(act):\n"
        "    from desktop_agent.engine.waits import close_wait\n"
        "    import desktop_agent.engine.ports\n"
        "    return act._outcome, act.__class__, self_._x\n"
        "_cache = {}\n"
        "def g(self):\n"
        "    return self._y, _cache._z\n"
    )
    tree = ast.parse(source)
    known = {f"{PACKAGE}.{m}" for m in ("budget", "loop", "waits", "ports", "state")}
    assert _engine_imports(tree, known) == known - {f"{PACKAGE}.state"}
    assert [text for _, text in _private_reads(tree)] == ["act._outcome", "self_._x"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
