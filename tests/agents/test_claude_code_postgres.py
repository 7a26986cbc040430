"""Claude Code sessions in a shared PostgreSQL journal: import, growth, search, a decision."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.claude_code import import_claude_code
from desktop_agent.config import Settings
from desktop_agent.domain import Approval, ApprovalState, RunStatus
from desktop_agent.persistence.imported_sessions import ImportedSessions
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain
from tests.helpers import postgres
from tests.helpers.claude_code_sessions import ClaudeCodeFolder, research_session

pytestmark = pytest.mark.skipif(
    postgres.unavailable() is not None, reason=str(postgres.unavailable())
)


@pytest.fixture
def pg_client(tmp_path: Path) -> Iterator[Client]:
    """A client on a fresh database of the test server."""
    path = tmp_path / "data" / "desktop-agent.db"
    with postgres.database_for(path.parent, "postgresql"):
        Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
        c = Client(path)
        yield c
        c.close()


def test_a_session_imported_grown_searched_and_decided_on_postgresql(
    pg_client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    client = pg_client
    session = research_session(claude_home, tmp_path / "proj")
    (first,) = import_claude_code(client).sessions
    assert (first.outcome, first.steps_added) == ("new", 10)
    session.user("and the pool timeout?")
    (grown,) = import_claude_code(client).sessions
    assert (grown.outcome, grown.steps_added) == ("grown", 1)
    (same,) = import_claude_code(client).sessions
    assert same.outcome == "unchanged"
    assert [h.tool for h in client.search('"fourteen flaky assertions"')] == ["Bash"]
    journal = ImportedSessions(client.store.db)
    asked = Approval(
        id="", run_id=first.run_id, seq=0, tool="Bash", arguments={"command": "make"},
        created_at=time.time(),
    )  # fmt: skip
    approval = journal.open_approval(asked, {"name": "Bash"}, {}, "Claude Code asks to run Bash")
    assert approval.seq == 12
    client.reject(approval.id, "not now")
    drain(client.store, build_executor(client.store, client.settings))
    assert client.store.get_approval(approval.id).state is ApprovalState.REJECTED
    assert client.run(first.run_id).status is RunStatus.COMPLETED
