"""An MCP tool in a real run of real processes: the CLI, a worker child, the fake Messages API.

The worker connects to the tests' MCP server (``tests/mcp/server.py``) over stdio, the model
(the fake API, through the real anthropic SDK) asks for the server's unsafe ``post`` tool,
the analyst approves it through the CLI, and the server records the call. The server's
secret lives in the (test) keyring and reaches the server's environment only: it is in no
command line, log, settings file or catalogue.
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, RunStatus
from tests.helpers.fake_anthropic import Stream, Text, ToolUse
from tests.helpers.polling import wait_until
from tests.llm.conftest import KEY, StartFake
from tests.llm.test_processes import SONNET, Procs

pytestmark = pytest.mark.crash


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """Child processes of the test, killed by pid at teardown if still running."""
    p = Procs(tmp_path)
    yield p
    p.kill_all()


def test_an_mcp_tool_runs_in_a_worker_child_and_its_secret_stays_in_the_keyring(
    client: Client, start_fake: StartFake, procs: Procs, tmp_path: Path
) -> None:
    secret = "mcp-secret-" + uuid.uuid4().hex
    log = tmp_path / "posts.jsonl"
    client.settings.mcp_servers = [
        {
            "name": "team",
            "command": sys.executable,
            "args": ["-m", "tests.mcp.server"],
            "env": {"MCP_TEST_TOKEN": "keyring:token", "MCP_TEST_LOG": str(log)},
        }
    ]
    client.settings.save(client.db_path)
    fake = start_fake(
        [
            Stream([Text("Posting the summary."), ToolUse("team__post", {"text": "Q3 is done"})]),
            Stream([Text("Posted.")]),
        ]
    )
    env = procs.env(fake.url, ANTHROPIC_API_KEY=KEY, DESKTOP_AGENT_AUTOSTART_WORKER="0")
    (tmp_path / "keyring.json").write_text(json.dumps({"desktop-agent-mcp\nteam/token": secret}))

    listed = procs.cli(["--db", str(client.db_path), "mcp", "list", "--refresh"], env)
    assert listed.returncode == 0, listed.stderr
    assert "team (stdio) connected" in listed.stdout
    assert "team__post" in listed.stdout and "unsafe" in listed.stdout

    fresh = Client(client.db_path)  # as the app would, after the catalogue was written
    try:
        run_id = fresh.start_run("Tell the team", model=SONNET, tools=["team__post"]).id
    finally:
        fresh.close()

    first = procs.worker(client.db_path, env)
    assert first.wait(timeout=60) == 0
    assert client.run(run_id).wait_reason is not None  # the unsafe call waits for approval
    assert not log.exists()
    (pending,) = client.approvals(ApprovalState.PENDING)
    approved = procs.cli(["--db", str(client.db_path), "approve", pending.id], env)
    assert approved.returncode == 0, approved.stderr

    second = procs.worker(client.db_path, env)

    def command_lines() -> list[list[str]]:
        seen: list[list[str]] = []
        with contextlib.suppress(psutil.Error):  # the worker may have ended meanwhile
            worker = psutil.Process(second.pid)
            for proc in [worker, *worker.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    seen.append(proc.cmdline())
        return seen

    # The worker's MCP server child (it holds the secret in its environment) is running.
    wait_until(
        lambda: (
            second.poll() is not None
            or any("tests.mcp.server" in " ".join(a) for a in command_lines())
        ),
        30,
        "the worker's MCP server",
    )
    argv_seen = command_lines()
    assert any("tests.mcp.server" in " ".join(a) for a in argv_seen)
    assert second.wait(timeout=60) == 0
    assert client.run(run_id).status == RunStatus.COMPLETED
    (posted,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert posted["text"] == "Q3 is done" and posted["token"] == secret  # it reached the server
    assert posted["meta"]["idempotency_key"].startswith(f"{run_id}:")

    for argv in argv_seen:
        assert not any(secret in arg for arg in argv), argv
    data_dir = client.db_path.parent
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"
    assert "keyring:token" in (data_dir / "settings.json").read_text()


def test_a_worker_killed_after_an_unsafe_mcp_call_leaves_it_in_doubt_not_repeated(
    client: Client, start_fake: StartFake, procs: Procs, tmp_path: Path
) -> None:
    log = tmp_path / "posts.jsonl"
    client.settings.ask_unsafe = False  # no approval: the crash is what is tested
    client.settings.mcp_servers = [
        {
            "name": "team",
            "command": sys.executable,
            "args": ["-m", "tests.mcp.server"],
            "env": {"MCP_TEST_LOG": str(log)},
        }
    ]
    client.settings.save(client.db_path)
    fake = start_fake(
        [
            Stream([Text("Posting."), ToolUse("team__post", {"text": "Q3 is done"})]),
            Stream([Text("Posted.")]),
        ]
    )
    env = procs.env(fake.url, ANTHROPIC_API_KEY=KEY, DESKTOP_AGENT_AUTOSTART_WORKER="0")
    assert procs.cli(["--db", str(client.db_path), "mcp", "list", "--refresh"], env).returncode == 0
    fresh = Client(client.db_path)
    try:
        run_id = fresh.start_run("Tell the team", model=SONNET, tools=["team__post"]).id
    finally:
        fresh.close()
    crashed = procs.worker(client.db_path, {**env, "DESKTOP_AGENT_CRASH_AT": "after_effect:2"})
    # Effects counted: the model call (1), then the MCP call (2): killed right after it.
    assert crashed.wait(timeout=60) == -9
    assert len(log.read_text().splitlines()) == 1
    resumed = procs.worker(client.db_path, env)
    assert resumed.wait(timeout=60) == 0
    run = client.run(run_id)
    assert run.status == RunStatus.NEEDS_ATTENTION  # in doubt: the analyst decides
    assert len(log.read_text().splitlines()) == 1  # never sent again on its own
    decided = procs.cli(["--db", str(client.db_path), "resolve", run_id, "mark_done"], env)
    assert decided.returncode == 0, decided.stderr
    assert procs.worker(client.db_path, env).wait(timeout=60) == 0
    assert client.run(run_id).status == RunStatus.COMPLETED
    assert len(log.read_text().splitlines()) == 1
