"""The inbox holding a call from each of the other Claude agents: ``docs/screenshot-agents.png``.

Each call comes the way it comes to an analyst, through the code paths the tests cover:

* a **Claude Agent SDK** run started with ``agent="agent-sdk"``, its bundled Claude Code
  talking to the contract fake of the Messages API; the hook defers its ``Bash`` call;
* a **Managed Agents** session on the fake sessions API, followed by a worker in this
  process; the session stops on a tool confirmation;
* a **Claude Code** session (a real-shaped transcript folder) imported, whose PreToolUse
  hook, ``desktop-agent hook claude-code`` started as Claude Code starts it, asks.

Run it with the repository on ``PYTHONPATH``, under a display (``xvfb-run``), as
``python docs/agents_shots.py [OUT]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QStyleFactory

from desktop_agent.agents.managed import AGENT, ManagedAgents
from desktop_agent.client.api import Client
from desktop_agent.client.claude_code import import_claude_code
from desktop_agent.client.managed import ManagedSessions
from desktop_agent.config import Settings
from desktop_agent.gui.app import create_app
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.managed import ManagedDriver
from desktop_agent.worker.worker import Worker, WorkerConfig
from docs.screenshots import settle, shoot, wait_until
from tests.helpers.claude_code_sessions import ClaudeCodeFolder, research_session
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text, ToolUse
from tests.helpers.fake_managed_agents import KEY, FakeManagedAgents

REPO = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-5-5"


def _sdk_script(body: dict[str, Any], _index: int) -> Stream:
    """The Agent SDK run's model: append the figures to the board notes with Bash."""
    command = {
        "command": "cat q3.csv >> board-notes.md",
        "description": "Append the Q3 figures to the board notes",
    }
    return Stream(
        [Text("I will append the Q3 figures to the board notes."), ToolUse("Bash", command)]
    )


def _drain(client: Client, settings: Settings, driver: ManagedDriver | None = None) -> None:
    foreign = {AGENT: driver} if driver is not None else None
    Worker(
        client.store,
        build_executor(client.store, settings, foreign=foreign),
        WorkerConfig(max_runs=2, until_idle=True, poll_s=0.01),
    ).run()


def _pending(client: Client, run_id: str) -> bool:
    return any(a.run_id == run_id for a in client.approvals())


def _until(check: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def main(out: Path) -> int:
    """Make the three calls wait, open the window on the inbox and shoot it."""
    out.mkdir(parents=True, exist_ok=True)
    app = create_app()
    app.setStyle(QStyleFactory.create("Fusion"))
    with (
        tempfile.TemporaryDirectory(prefix="desktop-agent-shots-") as tmp,
        FakeAnthropic(_sdk_script) as messages,
        FakeManagedAgents() as managed,
    ):
        root = Path(tmp)
        os.environ["HOME"] = tmp
        os.environ["ANTHROPIC_BASE_URL"] = messages.url
        os.environ["ANTHROPIC_API_KEY"] = "sk-ant-test-key"
        db = root / "data" / "desktop-agent.db"
        settings = Settings(durability="NORMAL")
        settings.save(db)
        client = Client(db, settings)

        # 1. A run on the Claude Agent SDK: its Bash call is deferred to the inbox.
        ws = root / "research" / "board"
        ws.mkdir(parents=True)
        (ws / "q3.csv").write_text("region,revenue\nnorth,120\nsouth,80\n")
        sdk = client.start_run(
            "Append the Q3 figures to the board notes", model=MODEL, workspace=ws, agent="agent-sdk"
        )
        _drain(client, settings)
        _until(lambda: _pending(client, sdk.id), "the Agent SDK run's approval")

        # 2. A Managed Agents session followed as a run, stopped on a tool confirmation.
        session = managed.add_session("Q3 board pack")
        session.user_message("Summarise Q3 for the board from the shared drive")
        session.running()
        ids = session.model_request(
            "Reading the quarter's figures first.",
            [("bash", {"command": "cat /mnt/shared/q3-figures.csv"})],
        )
        session.ask(ids, {ids[0]: "region,revenue\nnorth,120"})
        api = ManagedAgents(lambda: KEY, base_url=managed.url)
        followed = ManagedSessions(client, api).follow(session.id)
        driver = ManagedDriver(client.store, api, settings, poll_s=0.2, idle_poll_s=0.5)
        deadline = time.monotonic() + 120
        while not _pending(client, followed.id) and time.monotonic() < deadline:
            _drain(client, settings, driver)
            time.sleep(0.2)

        # 3. A Claude Code session, imported; its PreToolUse hook asks about a Bash call.
        home = ClaudeCodeFolder(root / "claude-config")
        home.projects.mkdir(parents=True)
        os.environ["CLAUDE_CONFIG_DIR"] = str(home.root)
        transcript = research_session(home, root / "code" / "sync-service", start=time.time() - 900)
        import_claude_code(client)
        call = {
            "session_id": transcript.session_id,
            "transcript_path": str(transcript.path),
            "cwd": str(transcript.cwd),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {
                "command": "git push origin fix/flaky-sync",
                "description": "Push the fix for the flaky sync tests",
            },
            "tool_use_id": "toolu_push01",
        }
        hook = subprocess.Popen(
            [sys.executable, "-m", "desktop_agent", "--db", str(db), "hook", "claude-code"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        assert hook.stdin is not None
        hook.stdin.write(json.dumps(call))
        hook.stdin.close()
        hook.stdin = None
        try:
            _until(lambda: len(client.approvals()) >= 3, "the Claude Code hook's approval")
            window = MainWindow(client, spawn_workers=False, poll_ms=100)
            window.resize(1280, 800)
            window.show()
            wait_until(app, lambda: window.runs_model.rowCount() == 3)
            first = client.approvals()[0]
            window.select_run(first.run_id)
            window.side.setCurrentWidget(window.inbox)
            wait_until(app, lambda: window.inbox.model.rowCount() == 3)
            settle(app, 1.0)
            shoot(window, out / "screenshot-agents.png")
            window.shutdown()
            window.close()
        finally:
            hook.terminate()  # our own child: its approval expires
            hook.communicate(timeout=60)
            api.close()
            client.close()
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    raise SystemExit(main(Path(args[0]) if args else Path(__file__).resolve().parent))
