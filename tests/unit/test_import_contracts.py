"""The layering holds: what the client, the CLI and the worker may import, and reach.

The import-linter contracts of ``pyproject.toml`` are run for real (``lint-imports`` in a
subprocess) on a copy of the package: the copy as it is passes, and the same copy with a
forbidden import injected in each layer fails, naming the contract and the import. Two
checks the import graph cannot see are read from the source: the GUI and the CLI never
touch the client's state, and a worker process is started in one place only.
"""

from __future__ import annotations

import ast
import itertools
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.config import Settings

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "desktop_agent"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

CONTRACTS = (
    "client-below-its-callers",
    "client-pure-engine",
    "cli-through-client",
    "worker-below-its-callers",
    "keyring-only-in-secrets",
    "one-http-stack",
)
"""Ids of the contracts this file puts to the test."""

INJECTED = {
    "cli-through-client": ("cli/output.py", "desktop_agent.engine.loop"),
    "client-below-its-callers": ("client/api.py", "desktop_agent.worker"),
    "worker-below-its-callers": ("worker/worker.py", "desktop_agent.client"),
    "client-pure-engine": ("client/checks.py", "desktop_agent.engine.loop"),
    "keyring-only-in-secrets": ("tools/mail.py", "keyring"),
    "one-http-stack": ("tools/web.py", "httpx"),
}
"""For each contract, a module of the copy and the forbidden import injected into it."""


def _contract_names() -> dict[str, str]:
    """The contracts' names by id, as ``pyproject.toml`` declares them."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return {c["id"]: c["name"] for c in contracts if "id" in c}


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the copy at ``root`` (its own pyproject), for :data:`CONTRACTS`."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [
            str(LINT_IMPORTS),
            "--config",
            str(root / "pyproject.toml"),
            "--no-cache",
            *(f"--contract={c}" for c in CONTRACTS),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the package and its pyproject, importable from its own folder."""
    root = tmp_path / "copy"
    shutil.copytree(PACKAGE, root / "desktop_agent", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_a_forbidden_import_in_each_layer_fails_the_gate_and_the_copy_as_is_passes(
    copy: Path,
) -> None:
    names = _contract_names()
    assert set(CONTRACTS) <= names.keys(), f"contracts missing from pyproject.toml: {names}"

    clean = _lint(copy)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    for contract in CONTRACTS:
        assert f"{names[contract]} KEPT" in clean.stdout, clean.stdout

    for module, imported in INJECTED.values():
        with (copy / "desktop_agent" / module).open("a", encoding="utf-8") as f:
            f.write(f"\nimport {imported}  # injected by the test\n")
    broken = _lint(copy)
    assert broken.returncode != 0, broken.stdout
    for contract, (module, imported) in INJECTED.items():
        assert f"{names[contract]} BROKEN" in broken.stdout, broken.stdout
        importer = "desktop_agent." + module.removesuffix(".py").replace("/", ".")
        assert f"{importer} -> {imported}" in broken.stdout, broken.stdout


# --------------------------------------------------------------------------- reaches

PUBLIC_STATE = {"settings", "db_path", "client", "now"}
"""Attributes of a client (and of its scheduling) that callers may read: settings, where
the database is, the client of a scheduling, its clock."""


def _sources(*patterns: str) -> Iterator[Path]:
    for pattern in patterns:
        yield from sorted(PACKAGE.glob(pattern))


def test_the_gui_and_the_cli_never_touch_the_clients_state(tmp_path: Path) -> None:
    client = Client(tmp_path / "data" / "desktop-agent.db", Settings())
    try:
        state = set(vars(client)) | set(vars(Scheduling(client)))
    finally:
        client.close()
    hidden = state - PUBLIC_STATE
    assert hidden, "the client keeps no state of its own?"
    hidden |= {"store"}  # the seam for tests and benchmarks (Client.store, Scheduling.store)
    reaches = []
    for path in _sources("gui/**/*.py", "cli/**/*.py", "httpapi/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or node.attr not in hidden:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue  # the caller's own attribute of the same name
            reaches.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
    assert not reaches, "the GUI and the CLI call the client's methods; these reach past them"


def test_tests_and_benchmarks_reach_the_journal_through_the_documented_seam() -> None:
    private = []
    bench = [p for p in (REPO / "bench").rglob("*.py") if "out" not in p.relative_to(REPO).parts]
    for path in sorted([*(REPO / "tests").rglob("*.py"), *bench]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("_store", "_db"):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue
                private.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
    assert not private, "use Client.store / Scheduling.store, not the private state"


def _builds_worker_argv(node: ast.AST) -> bool:
    """Whether ``node`` is a list that holds ``"-m", "desktop_agent"`` (a worker command)."""
    if not isinstance(node, ast.List):
        return False
    values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return any(a == "-m" and b == "desktop_agent" for a, b in itertools.pairwise(values))


def test_worker_processes_are_started_in_one_place() -> None:
    builders = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in _sources("**/*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.List) and _builds_worker_argv(node)
    ]
    assert len(builders) == 1, builders
    assert builders[0].startswith("desktop_agent/procs.py:"), builders
