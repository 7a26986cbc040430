"""A note sent while a step is in doubt waits for the analyst's decision, then reaches the agent.

The bug: with an unsafe POST in doubt after a SIGKILL (the run needs attention), a note
sent with ``desktop-agent steer`` was written to the journal after the step still open;
the journal then no longer folded, and a worker run with ``--until-idle`` never finished.
Here real worker child processes (``tests.approvals.child_worker``) and the real CLI: the
note is queued and the CLI says it waits for the decision; a worker leaves it queued and
goes idle; once the analyst decides, the note follows the decided step and the model
reads it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus
from tests.approvals.test_in_doubt_after_sigkill import (
    CRASH_AFTER_POST,
    REPO,
    run_child,
    settings,
)
from tests.tools.servers import HttpServer, Reply


@pytest.fixture
def server() -> Iterator[HttpServer]:
    srv = HttpServer()
    yield srv
    srv.close()


def cli(db: Path, *argv: str) -> tuple[int, str, str]:
    """``desktop-agent --db DB ARGV...`` in a child process: code, stdout, stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *argv],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("decision", ["mark_done", "retry"])
def test_a_note_to_a_run_in_doubt_waits_for_the_decision_then_is_delivered(
    tmp_path: Path, server: HttpServer, decision: str
) -> None:
    db = tmp_path / "data" / "agent.db"
    settings().save(db)
    client = Client(db)
    log = tmp_path / "children.log"
    worker = [sys.executable, "-m", "tests.approvals.child_worker", str(db)]

    server.routes["/orders/a"] = Reply(201, b'{"id": 7}')
    run_id = client.start_run(
        f"POST {server.url('/orders/a')}", model="claude-haiku-4-5", tools=["http_post"]
    ).id
    try:
        assert run_child(worker, log, DESKTOP_AGENT_CRASH_AT=CRASH_AFTER_POST) == -signal.SIGKILL
        assert run_child(worker, log) == 0, log.read_text()[-3000:]
        assert client.run(run_id).status == RunStatus.NEEDS_ATTENTION

        code, out, err = cli(db, "steer", run_id, "mind the dates")
        assert code == 0, err
        assert out.strip().splitlines() == [
            f"note queued for run {run_id}; it waits while step 2 is in doubt and is "
            f"delivered once you decide about it (`desktop-agent resolve {run_id} ACTION`)"
        ]
        # A worker finds nothing it may do: the note waits, the journal is as it was.
        assert run_child(worker, log) == 0, log.read_text()[-3000:]
        run = client.run(run_id)
        assert (run.status, run.attention_seq) == (RunStatus.NEEDS_ATTENTION, 2)
        assert "may or may not have happened" in run.status_message
        assert [(s.seq, s.status) for s in client.steps(run_id)][-1] == (2, StepStatus.STARTED)
        (note,) = client.store.pending_commands(run_id)
        assert note.kind == "steer"

        code, _out, err = cli(db, "resolve", run_id, decision)
        assert code == 0, err
        assert run_child(worker, log) == 0, log.read_text()[-3000:]

        run = client.run(run_id)
        assert run.status == RunStatus.COMPLETED, run.status_message
        steps = client.steps(run_id)
        assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
        assert all(s.status == StepStatus.COMPLETED for s in steps)
        delivered = [s for s in steps if s.kind == StepKind.STEER]
        assert [(s.seq, s.input["text"]) for s in delivered] == [(3, "mind the dates")]
        assert client.store.get_command(note.id).result == "delivered as step 3"
        hits = len(server.hits("/orders/a"))
        assert hits == (2 if decision == "retry" else 1)
    finally:
        client.close()
