"""An Agent SDK run whose worker is SIGKILLed mid-run goes on in another worker.

Real worker processes (``tests.agents.sdk_worker``: the production wiring, a 1.5 s
lease) drive the session. The first is killed (``DESKTOP_AGENT_CRASH_AT``: SIGKILL, no
cleanup) right after the call the analyst approved ran, before the journal recorded its
outcome. Each worker has a temporary folder of its own (``TMPDIR``), and the first one's
is deleted before the second starts: the second has nothing of the session on disk but
what it reads from the journal's database. It claims the run once the lease ran out,
finds the call's result in the stored session, closes the step with it (the call is not
run again) and resumes the session to its end; the run is in the run list, its steps in
the timeline, search and usage. On a SQLite file and on the tests' PostgreSQL server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain
from tests.helpers import postgres
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text, ToolUse
from tests.helpers.polling import wait_status, wait_until

REPO = Path(__file__).resolve().parents[2]
MODEL = "claude-sonnet-5-5"
COMMAND = {"command": "echo effect >> effect.txt", "description": "Append to effect.txt"}

pytestmark = pytest.mark.crash


def results_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def script(body: dict[str, Any], _index: int) -> Stream:
    if not results_of(body):
        return Stream([Text("I will append a line to effect.txt."), ToolUse("Bash", COMMAND)])
    return Stream([Text("Done: the line is in effect.txt (market notes, quarterly).")])


@pytest.fixture(params=postgres.BACKENDS)
def db_path(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """The database, as a SQLite file or on the tests' PostgreSQL server."""
    with postgres.database_for(tmp_path / "data", request.param):
        yield tmp_path / "data" / "desktop-agent.db"


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(script) as fake:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
        yield fake


class Children:
    """Worker processes, each in a session of its own (its CLI child goes with it)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, db: Path, tmp: Path, **env: str) -> subprocess.Popen[bytes]:
        tmp.mkdir(parents=True, exist_ok=True)
        full = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp), **env}
        with self.log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.agents.sdk_worker", str(db)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=full,
                cwd=REPO,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def wait(self, proc: subprocess.Popen[bytes], timeout: float = 120) -> int | None:
        """The process's exit code, or None if it still runs after ``timeout`` seconds."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.wait(timeout=timeout)
        return None

    @staticmethod
    def alive(proc: subprocess.Popen[bytes]) -> bool:
        """Whether a process of ``proc``'s group (the worker's session) still runs."""
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def close(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the worker, and a CLI it left behind
            proc.wait(timeout=30)


def test_a_worker_killed_after_an_approved_call_ran_is_resumed_from_the_journal_store(
    client: Client, api: FakeAnthropic, tmp_path: Path, db_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    run = client.start_run(
        "Append a line to effect.txt", model=MODEL, workspace=ws, agent="agent-sdk"
    )
    drain(client.store, build_executor(client.store, client.settings))
    [approval] = client.approvals()
    client.approve(approval.id)

    children = Children(tmp_path / "workers.log")
    try:
        first = children.start(
            db_path, tmp_path / "tmp-first", DESKTOP_AGENT_CRASH_AT="after_effect:1"
        )
        code = children.wait(first, timeout=40)
        assert code == -signal.SIGKILL, children.log.read_text()[-3000:]
        assert (ws / "effect.txt").read_text() == "effect\n"  # the approved call ran
        call = client.store.load_steps(run.id)[2]
        assert (call.kind, call.status) == (StepKind.TOOL_CALL, StepStatus.STARTED)
        # The CLI it started died with it (no turn goes on alone, spending).
        wait_until(lambda: not children.alive(first), what="the first worker's CLI gone")
        shutil.rmtree(tmp_path / "tmp-first")  # nothing of the session left on a disk

        children.start(db_path, tmp_path / "tmp-second")
        done = wait_status(
            client, run.id, RunStatus.COMPLETED, RunStatus.NEEDS_ATTENTION, timeout=120
        )
        assert done.status == RunStatus.COMPLETED, (
            done.status_message,
            children.log.read_text()[-3000:],
        )
    finally:
        children.close()

    assert (ws / "effect.txt").read_text() == "effect\n"  # and not a second time
    steps = client.store.load_steps(run.id)
    assert [(s.kind, s.status) for s in steps] == [
        (StepKind.MODEL_CALL, StepStatus.COMPLETED),
        (StepKind.APPROVAL, StepStatus.COMPLETED),
        (StepKind.TOOL_CALL, StepStatus.COMPLETED),
        (StepKind.MODEL_CALL, StepStatus.COMPLETED),
    ]
    assert steps[2].attempt == 1 and not steps[2].output["is_error"]
    # The second worker's session was the first one's, read back from the database.
    last = api.bodies()[-1]
    assert results_of(last)[-1]["tool_use_id"] == steps[0].output["content"][-1]["id"]
    assert client.run(run.id).spec.session_id
    # In the run list, search and usage like any run.
    assert run.id in [r.id for r in client.runs()]
    assert run.id in {h.run_id for h in client.search("quarterly")}
    spent = sum(s.cost_usd for s in steps)
    assert spent > 0 and client.run(run.id).cost_usd == pytest.approx(spent)
    assert client.usage(since=0).by_model[MODEL].cost_usd == pytest.approx(spent)
