"""Two real runs to compare: the engine with scripted answers and the real tools.

Run A reads a source, appends a note "alpha" and finishes. Run B does the same, but lists
the workspace between reading and noting (two inserted steps) and notes "beta" instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel

MODEL = "claude-haiku-4-5"


@dataclass(frozen=True)
class Pair:
    """The ids of the two runs."""

    a: str
    b: str


def _workspace(root: Path, name: str) -> Path:
    ws = root / name
    ws.mkdir()
    (ws / "source.md").write_text("The supplier note mentions cobalt prices.\n")
    return ws


def run_with(
    client: Client, make_executor: MakeExecutor, workspace: Path, replies: list[Reply]
) -> str:
    """A run of the same goal answered by ``replies``, run to its end."""
    run = client.start_run("Note what the source says", model=MODEL, workspace=workspace)
    drain(client.store, make_executor(ScriptedModel(replies)))
    return run.id


@pytest.fixture
def pair(client: Client, make_executor: MakeExecutor, tmp_path: Path) -> Pair:
    """Runs A and B (see the module's docstring), both completed."""
    return make_pair(client, make_executor, tmp_path)


def make_pair(client: Client, make_executor: MakeExecutor, tmp_path: Path) -> Pair:
    """Write runs A and B (see the module's docstring), both run to completion."""
    read = Reply("Reading.", [("read_file", {"path": "source.md"})])
    a = run_with(
        client,
        make_executor,
        _workspace(tmp_path, "a"),
        [
            read,
            Reply("Noting.", [("append_note", {"path": "notes.md", "text": "alpha"})]),
            Reply("Done."),
        ],
    )
    b = run_with(
        client,
        make_executor,
        _workspace(tmp_path, "b"),
        [
            read,
            Reply("Listing.", [("list_files", {"path": "."})]),
            Reply("Noting.", [("append_note", {"path": "notes.md", "text": "beta"})]),
            Reply("Done."),
        ],
    )
    return Pair(a, b)
