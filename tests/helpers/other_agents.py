"""A tool call of each of the other Claude agents, waiting in the analyst's inbox.

Each call comes the way it comes to an analyst, through the paths the agents tests cover:

* a **Claude Agent SDK** run (``agent="agent-sdk"``), its bundled Claude Code talking to
  the contract fake of the Messages API; the hook desktop-agent registers defers its
  ``Bash`` call;
* a **Managed Agents** session on the fake sessions API, followed by a worker of this
  process; the session stops on a tool confirmation;
* a **Claude Code** session (a real-shaped transcript folder) imported, whose PreToolUse
  hook, ``desktop-agent hook claude-code`` started as Claude Code starts it, asks.

The caller starts both fakes and points ``ANTHROPIC_BASE_URL`` (the Messages API fake),
``ANTHROPIC_API_KEY`` and ``CLAUDE_CONFIG_DIR`` at them. Used by the inbox journey test and
by ``docs/agents_shots.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop_agent.agents.managed import AGENT, ManagedAgents
from desktop_agent.client.api import Client
from desktop_agent.client.claude_code import import_claude_code
from desktop_agent.client.managed import ManagedSessions
from desktop_agent.config import Settings
from desktop_agent.worker.agents import foreign_agents
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.managed import ManagedDriver
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.helpers.claude_code_sessions import ClaudeCodeFolder, Transcript, research_session
from tests.helpers.fake_anthropic import Stream, Text, ToolUse
from tests.helpers.fake_managed_agents import KEY, FakeManagedAgents, FakeSession

REPO = Path(__file__).resolve().parents[2]
MODEL = "claude-sonnet-5-5"
SDK_COMMAND = {
    "command": "cat q3.csv >> board-notes.md",
    "description": "Append the Q3 figures to the board notes",
}
SDK_DONE = "The figures are in the board notes."
MANAGED_FOUND = "North brought in 120 of the quarter's revenue."
PUSH = {"command": "git push origin fix/flaky-sync", "description": "Push the fix"}


def sdk_script(body: dict[str, Any], _index: int) -> Stream:
    """The Agent SDK run's model: append the figures with Bash, then say it is done."""
    answered = any(
        block.get("type") == "tool_result"
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
    )
    if answered:
        return Stream([Text(SDK_DONE)])
    said = Text("I will append the Q3 figures to the board notes.")
    return Stream([said, ToolUse("Bash", SDK_COMMAND)])


def _report(session: FakeSession) -> None:
    session.model_request(MANAGED_FOUND)
    session.idle()


@dataclass
class WaitingCalls:
    """The three runs, each waiting on one approval, and what moves them on.

    Attributes:
        sdk_run: the Agent SDK run (its workspace holds ``q3.csv``).
        sdk_workspace: that run's workspace.
        managed_run: the run following ``session``.
        session: the Managed Agents session (on the fake).
        code_run: the imported Claude Code session's run.
        hook: the waiting ``hook claude-code`` process (it prints its answer and ends).
    """

    sdk_run: str
    sdk_workspace: Path
    managed_run: str
    session: FakeSession
    code_run: str
    hook: subprocess.Popen[str]
    drain: Callable[[], None]


def _until(check: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _pending(client: Client, run_id: str) -> bool:
    return any(a.run_id == run_id for a in client.approvals())


def _hook_call(transcript: Transcript) -> str:
    return json.dumps(
        {
            "session_id": transcript.session_id,
            "transcript_path": str(transcript.path),
            "cwd": str(transcript.cwd),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": PUSH,
            "tool_use_id": "toolu_push01",
        }
    )


@contextmanager
def waiting_calls(
    client: Client,
    settings: Settings,
    root: Path,
    managed: FakeManagedAgents,
    claude_home: ClaudeCodeFolder,
) -> Iterator[WaitingCalls]:
    """Make a call of each agent wait in the inbox; end the hook and close at the end."""
    api = ManagedAgents(lambda: KEY, base_url=managed.url)
    driver = ManagedDriver(client.store, api, settings, poll_s=0.1, idle_poll_s=0.2)
    drivers = {**foreign_agents(client.store, settings), AGENT: driver}

    def drain() -> None:
        Worker(
            client.store,
            build_executor(client.store, settings, foreign=drivers),
            WorkerConfig(max_runs=3, until_idle=True, poll_s=0.01),
        ).run()

    ws = root / "research" / "board"
    ws.mkdir(parents=True)
    (ws / "q3.csv").write_text("region,revenue\nnorth,120\nsouth,80\n")
    sdk = client.start_run(
        "Append the Q3 figures to the board notes", model=MODEL, workspace=ws, agent="agent-sdk"
    )
    session = managed.add_session("Q3 board pack")
    session.user_message("Summarise Q3 for the board from the shared drive")
    session.running()
    ids = session.model_request(
        "Reading the quarter's figures first.",
        [("bash", {"command": "cat /mnt/shared/q3-figures.csv"})],
    )
    session.ask(ids, {ids[0]: "region,revenue\nnorth,120"}, then=_report)
    followed = ManagedSessions(client, api).follow(session.id)

    def both_wait() -> bool:
        drain()
        return _pending(client, sdk.id) and _pending(client, followed.id)

    _until(both_wait, "the Agent SDK run's and the Managed Agents session's approvals")

    transcript = research_session(claude_home, root / "code" / "sync-service", time.time() - 900)
    import_claude_code(client)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESKTOP_AGENT_DB")}
    hook = subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path), "hook", "claude-code"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert hook.stdin is not None
    hook.stdin.write(_hook_call(transcript))
    hook.stdin.close()
    hook.stdin = None
    try:
        _until(lambda: len(client.approvals()) == 3, "the Claude Code hook's approval")
        code_run = next(
            a.run_id for a in client.approvals() if a.run_id not in (sdk.id, followed.id)
        )
        yield WaitingCalls(sdk.id, ws, followed.id, session, code_run, hook, drain)
    finally:
        if hook.poll() is None:
            hook.terminate()  # our own child: its approval expires
        hook.communicate(timeout=60)
        api.close()
