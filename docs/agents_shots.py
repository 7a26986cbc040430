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

import os
import sys
import tempfile
from pathlib import Path

from PySide6.QtWidgets import QStyleFactory

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.gui.app import create_app
from desktop_agent.gui.mainwindow import MainWindow
from docs.screenshots import settle, shoot, wait_until
from tests.helpers.claude_code_sessions import ClaudeCodeFolder
from tests.helpers.fake_anthropic import FakeAnthropic
from tests.helpers.fake_managed_agents import FakeManagedAgents
from tests.helpers.other_agents import sdk_script, waiting_calls


def main(out: Path) -> int:
    """Make the three calls wait, open the window on the inbox and shoot it."""
    out.mkdir(parents=True, exist_ok=True)
    app = create_app()
    app.setStyle(QStyleFactory.create("Fusion"))
    with (
        tempfile.TemporaryDirectory(prefix="desktop-agent-shots-") as tmp,
        FakeAnthropic(sdk_script) as messages,
        FakeManagedAgents() as managed,
    ):
        root = Path(tmp)
        home = ClaudeCodeFolder(root / "claude-config")
        home.projects.mkdir(parents=True)
        os.environ.update(
            HOME=tmp,
            ANTHROPIC_BASE_URL=messages.url,
            ANTHROPIC_API_KEY="sk-ant-test-key",
            CLAUDE_CONFIG_DIR=str(home.root),
        )
        db = root / "data" / "desktop-agent.db"
        settings = Settings(durability="NORMAL")
        settings.save(db)
        client = Client(db, settings)
        with waiting_calls(client, settings, root, managed, home) as calls:
            window = MainWindow(client, spawn_workers=False, poll_ms=100)
            window.resize(1280, 800)
            window.show()
            wait_until(app, lambda: window.runs_model.rowCount() == 3)
            window.select_run(calls.sdk_run)
            window.side.setCurrentWidget(window.inbox)
            wait_until(app, lambda: window.inbox.model.rowCount() == 3)
            settle(app, 1.0)
            shoot(window, out / "screenshot-agents.png")
            window.shutdown()
            window.close()
        client.close()
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    raise SystemExit(main(Path(args[0]) if args else Path(__file__).resolve().parent))
