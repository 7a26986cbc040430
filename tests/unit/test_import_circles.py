"""No modules of ``desktop_agent`` import each other in a circle, however far round.

The imports between the package's modules form a graph without cycles. It is read from
the source with :mod:`ast`, so that no import can hide: every ``import`` and
``from ... import`` counts wherever it stands, at the top of a module, under
``if TYPE_CHECKING:`` or inside a function. A circle that only the type checker or a late
import sees is still a knot: none of its modules can be read, tested or moved without the
others. (``tests/unit/test_engine_structure.py`` holds the engine to the same rule, among
others of its own; this holds the whole package.)

What an import names:

* ``import a.b.c`` names the module ``a.b.c`` if there is one, else the nearest module
  above it that there is (``a.b``, else ``a``);
* ``from a.b import x`` names the module ``a.b.x`` if ``x`` is one (a submodule imported by
  name), else ``a.b`` (a package: its ``__init__``);
* a relative import names what the absolute one it stands for would.

A package's ``__init__`` that imports its own modules (its face: ``domain/__init__.py``
hands on the names of ``domain.models``) closes no circle by itself, since importing
``a.b.c`` names ``a.b.c``, not ``a.b``. Only a module that the ``__init__`` imports (or
that one of those imports) and that imports the package back, ``from desktop_agent.domain
import Run`` in ``domain.models`` say, closes one; and that circle is real: Python runs the
package's ``__init__`` first, which imports the module, which asks the half-made package
for a name it may not hold yet. ``farm-studio look`` counts such a loop through an
``__init__.py`` among the "arrows that run back up", not among its "circles"; this test
fails on it too. On any other circle the two agree.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Set
from pathlib import Path

import desktop_agent

PACKAGE = "desktop_agent"
ROOT = Path(desktop_agent.__file__).parent

Graph = dict[str, set[str]]
"""Module -> the modules of the same package it imports."""


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package in ``root``, by dotted name (a package: its ``__init__``)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join((package, *parts))] = path
    return out


def _nearest(name: str, known: Set[str]) -> str | None:
    """``name`` if it is a known module, else the nearest known module above it."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imported_modules(
    module: str, tree: ast.Module, *, is_package: bool, known: Set[str]
) -> set[str]:
    """The known modules that ``module`` (parsed as ``tree``) imports, anywhere in it."""
    here = module if is_package else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_nearest(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x, from ..y import z
                anchor = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else _nearest(base, known))
    return {m for m in found if m is not None and m != module}


def import_graph(root: Path, package: str) -> Graph:
    """Who imports whom among the modules of the package in ``root``."""
    paths = package_modules(root, package)
    known = set(paths)
    return {
        name: imported_modules(
            name,
            ast.parse(path.read_text(encoding="utf-8"), filename=str(path)),
            is_package=path.name == "__init__.py",
            known=known,
        )
        for name, path in paths.items()
    }


def _knots(graph: Graph) -> Iterator[list[str]]:
    """The strongly connected parts of ``graph`` with more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, deps = work[-1]
            dep = next(deps, None)
            if dep is not None:
                if dep not in index:
                    index[dep] = low[dep] = len(index)
                    stack.append(dep)
                    on_stack.add(dep)
                    work.append((dep, iter(sorted(graph[dep]))))
                elif dep in on_stack:
                    low[node] = min(low[node], index[dep])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                knot = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    knot.append(member)
                    if member == node:
                        break
                if len(knot) > 1:
                    yield sorted(knot)


def _shortest_circle(graph: Graph, knot: list[str]) -> list[str]:
    """The shortest way from the knot's first module back to it, inside the knot."""
    first, members = knot[0], set(knot)
    came_from: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for dep in sorted(graph[node] & members):
                if dep == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(came_from[path[-1]])
                    return [first, *reversed(path[:-1]), first]
                if dep not in came_from:
                    came_from[dep] = node
                    following.append(dep)
        frontier = following
    raise AssertionError(f"no way round {knot}")  # a knot always has one


def circles(graph: Graph) -> list[list[str]]:
    """One circle (the shortest through its first module) for each knot in ``graph``."""
    return [_shortest_circle(graph, knot) for knot in sorted(_knots(graph))]


def describe(graph: Graph, package: str) -> list[str]:
    """Each circle of ``graph`` as ``a -> b -> a``, and the knot it belongs to."""
    lines = []
    for knot in sorted(_knots(graph)):
        short = [m.removeprefix(package + ".") for m in knot]
        way = " -> ".join(m.removeprefix(package + ".") for m in _shortest_circle(graph, knot))
        lines.append(f"{way}  (a knot of {len(knot)} modules: {', '.join(short)})")
    return lines


def test_no_modules_of_the_package_import_each_other_in_a_circle() -> None:
    found = describe(import_graph(ROOT, PACKAGE), PACKAGE)
    assert not found, "modules of desktop_agent import each other in a circle:\n" + "\n".join(found)


def _package(root: Path, name: str, files: dict[str, str]) -> Path:
    """Write the package ``name`` in ``root`` (its files by path, ``__init__.py`` included)."""
    for path, text in files.items():
        (root / name / path).parent.mkdir(parents=True, exist_ok=True)
        (root / name / path).write_text(text, encoding="utf-8")
    return root / name


def test_the_checker_finds_a_circle_wherever_its_imports_hide(tmp_path: Path) -> None:
    """A type-checking import one way and a late relative one back are a circle."""
    root = _package(
        tmp_path,
        "knot",
        {
            "__init__.py": "from knot.models import Thing\n",  # a face: no circle
            "models.py": "import os\n\nclass Thing:\n    pass\n",
            "a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from knot.sub.b import B\n"
            ),
            "sub/__init__.py": "",
            "sub/b.py": "def f():\n    from .. import a\n    return a\n",
            "c.py": (
                "import knot.models.Thing\nfrom knot import Thing, models\nfrom .sub import *\n"
            ),
        },
    )
    graph = import_graph(root, "knot")
    assert graph == {
        "knot": {"knot.models"},
        "knot.models": set(),
        "knot.a": {"knot.sub.b"},
        "knot.sub": set(),
        "knot.sub.b": {"knot.a"},
        "knot.c": {"knot", "knot.models", "knot.sub"},
    }
    assert circles(graph) == [["knot.a", "knot.sub.b", "knot.a"]]
    assert describe(graph, "knot") == ["a -> sub.b -> a  (a knot of 2 modules: a, sub.b)"]


def test_a_module_that_imports_its_package_back_closes_a_circle(tmp_path: Path) -> None:
    """The ``__init__`` imports the module, which takes a name from the ``__init__``."""
    root = _package(
        tmp_path,
        "back",
        {
            "__init__.py": "from back.a import A\n\ndef helper():\n    return A\n",
            "a.py": "from back.b import B\n\nclass A:\n    pass\n",
            "b.py": "def late():\n    from back import helper\n    return helper\n",
        },
    )
    assert circles(import_graph(root, "back")) == [["back", "back.a", "back.b", "back"]]


def test_a_knot_is_shown_by_its_shortest_circle() -> None:
    graph = {
        "p.a": {"p.b"},
        "p.b": {"p.c", "p.a"},
        "p.c": {"p.a"},
        "p.d": {"p.a", "p.e"},
        "p.e": set(),
    }
    assert list(_knots(graph)) == [["p.a", "p.b", "p.c"]]
    assert circles(graph) == [["p.a", "p.b", "p.a"]]
    assert circles({"p.a": {"p.b"}, "p.b": set()}) == []
