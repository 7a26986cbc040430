"""A run waiting for the approval of one e-mail, a local SMTP server, and the CLI.

The e-mail goes to ``boss@example.test`` as proposed; tests decide it from the command line
(in-process ``main(argv)`` for the many refusals, real processes where processes matter) and
then let an in-thread worker apply what was recorded, to see which e-mail, if any, went out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from desktop_agent.cli import main
from desktop_agent.client.api import Client
from desktop_agent.domain import Approval, RunStatus
from desktop_agent.engine.loop import RunExecutor
from tests.conftest import MakeExecutor, drain
from tests.gui.conftest import demo_ws, open_window, window
from tests.helpers.fakes import Reply, ScriptedModel
from tests.tools.servers import SmtpServer

__all__ = ["demo_ws", "open_window", "window"]

REPO = Path(__file__).resolve().parents[2]

PROPOSED = {"to": ["boss@example.test"], "subject": "Q3 numbers", "body": "Revenue rose 12%.\n"}
EDITED = {"to": ["team@example.test"], "subject": "Q3 numbers", "body": "Revenue rose 12%.\n"}


@dataclass
class Waiting:
    """A run whose e-mail waits for approval."""

    client: Client
    executor: RunExecutor
    run_id: str
    approval: Approval
    smtp: SmtpServer

    def drain(self) -> None:
        """Let a worker apply what was recorded, until nothing is runnable."""
        drain(self.client.store, self.executor)

    def recipients(self) -> list[list[str]]:
        """The recipients of every e-mail the SMTP server received."""
        return [m.recipients for m in self.smtp.mails]

    def queued(self) -> list[dict[str, object]]:
        """Payloads of the decisions waiting for the worker."""
        return [dict(c.payload or {}) for c in self.client.store.pending_commands(self.run_id)]


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer()
    yield server
    server.close()


@pytest.fixture
def waiting(client: Client, make_executor: MakeExecutor, smtp: SmtpServer) -> Waiting:
    client.settings.smtp_host = "127.0.0.1"
    client.settings.smtp_port = smtp.port
    client.settings.smtp_security = "none"
    client.settings.smtp_from = "analyst@example.test"
    client.settings.save(client.db_path)
    model = ScriptedModel(
        [Reply("Sending the numbers.", [("send_email", PROPOSED)]), Reply("Sent.")]
    )
    run = client.start_run("Mail the Q3 numbers", model="claude-haiku-4-5", tools=["send_email"])
    executor = make_executor(model)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.WAITING
    (approval,) = client.approvals()
    return Waiting(client, executor, run.id, approval, smtp)


def cli_main(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, str, str]:
    """Run the CLI in this process; returns (exit code, stdout, stderr)."""
    code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    return code, out, err


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user does: a separate process on the same database."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ANTHROPIC_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def edit(args: object) -> str:
    """``--edit`` text for ``args``."""
    return json.dumps(args)
