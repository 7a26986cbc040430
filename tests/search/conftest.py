"""A journal of real runs to search: the engine with scripted model answers, real tools.

Each run leaves words found nowhere else, so a test can say exactly which step a search
must find: a phrase only in one file's content (a tool result), a reason only in one
rejected approval, a failure only in one run's error, a key-like secret only in one
tool's arguments.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, Run, RunStatus
from desktop_agent.domain.scheduling import RunTemplate
from tests.conftest import MakeExecutor, drain
from tests.helpers import postgres
from tests.helpers.fakes import Reply, ScriptedModel

HAIKU = "claude-haiku-4-5"
SONNET = "claude-sonnet-4-5"
SECRET = "sk-ant-api03-" + "Q7zv" * 8
"""Shaped like an API key: never indexed."""


@dataclass(frozen=True)
class Corpus:
    """The runs written, by what each holds."""

    reader: str  # haiku, completed: read quokka.md ("quokka population doubled")
    rejected: str  # sonnet, completed: a write_file rejected for "embargoed figures"
    failed: str  # haiku, completed: read_file of a missing "tangerine-outage.md" failed
    secret: str  # haiku, completed: append_note with SECRET in its arguments


def finish(client: Client, make_executor: MakeExecutor, replies: list[Reply]) -> None:
    """Run every runnable run with these scripted answers until none is runnable."""
    drain(client.store, make_executor(ScriptedModel(replies)))


def start(client: Client, goal: str, workspace: Path, model: str = HAIKU, **more: Any) -> Run:
    """A queued run in ``workspace``."""
    return client.start_run(goal, model=model, workspace=workspace, **more)


@pytest.fixture
def backend() -> str:
    """The database of the test: SQLite, unless its module runs on both (``BACKENDS``)."""
    return "sqlite"


@pytest.fixture
def db_path(tmp_path: Path, backend: str) -> Iterator[Path]:
    """The client's database: a SQLite file, or a fresh database on the test server."""
    path = tmp_path / "data" / "desktop-agent.db"
    with postgres.database_for(path.parent, backend):
        yield path


@pytest.fixture
def corpus(client: Client, make_executor: MakeExecutor, tmp_path: Path) -> Corpus:
    """Four finished runs (see :class:`Corpus`)."""
    ws = tmp_path / "sources"
    ws.mkdir()
    (ws / "quokka.md").write_text("Field notes: the quokka population doubled on the island.\n")

    reader = start(client, "Survey the island wildlife notes", ws)
    finish(
        client,
        make_executor,
        [Reply("Reading the notes.", [("read_file", {"path": "quokka.md"})]), Reply("Read.")],
    )

    rejected = start(
        client, "Draft the vendor memo", ws, SONNET, approval_overrides={"write_file": "ask"}
    )
    finish(
        client, make_executor, [Reply("Drafting.", [("write_file", _memo())]), Reply("Stopped.")]
    )
    (pending,) = client.approvals(ApprovalState.PENDING)
    client.reject(pending.id, "the memo cites embargoed figures")
    finish(client, make_executor, [Reply("Understood, not written.")])

    failed = start(client, "Compare the orchard yields", ws)
    missing = {"path": "tangerine-outage.md"}
    finish(client, make_executor, [Reply("Opening.", [("read_file", missing)]), Reply("Gone.")])

    secret = start(client, "Keep a scratch note", ws)
    note = {"path": "scratch.md", "text": f"token {SECRET} for later"}
    finish(client, make_executor, [Reply("Noting.", [("append_note", note)]), Reply("Noted.")])

    statuses = {r: client.run(r).status for r in (reader.id, rejected.id, failed.id, secret.id)}
    assert set(statuses.values()) == {RunStatus.COMPLETED}, statuses
    return Corpus(reader.id, rejected.id, failed.id, secret.id)


def _memo() -> dict[str, Any]:
    return {"path": "memo.md", "content": "Vendors: three lead the market.\n"}


def make_run_in(workspace: Path) -> Any:
    """A scheduler's ``make_run`` that puts every run in ``workspace``."""

    def make_run(
        template: RunTemplate,
        *,
        goal: str | None = None,
        parent_id: str | None = None,
        schedule_id: str | None = None,
        source_file: str | None = None,
    ) -> Run:
        run_id = uuid.uuid4().hex[:10]
        return template.make_run(
            run_id,
            time.time(),
            str(workspace),
            goal=goal,
            parent_id=parent_id,
            schedule_id=schedule_id,
        )

    return make_run
