"""The command line and the worker start without the heavy libraries: structural checks.

Building the parser, printing help and reporting a usage error need names, help texts and
functions only. SQLAlchemy, Alembic, the Anthropic SDK, httpx, MCP and Qt cost about a
second to import, so the CLI's modules import them (through the client) inside the
commands that use them. The worker needs SQLAlchemy; the Anthropic SDK (a Claude model
call), httpx (a web tool, a webhook), MCP (a declared server), the OS keyring (a key or a
password looked up) and APScheduler (the scheduler, started after the first poll) are
imported where they are used. Each check runs in a fresh interpreter, where nothing else
has imported them first; no timing. ``bench/startup.py`` and ``bench/resume.py`` measure
the time itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus

HEAVY = ("sqlalchemy", "alembic", "anthropic", "httpx", "httpx2", "mcp", "PySide6")
LAZY_IN_WORKER = ("alembic", "anthropic", "httpx", "httpx2", "mcp", "PySide6")
"""Libraries a worker executing a demo run never imports (no key, no web tool, no MCP)."""
LATER_IN_WORKER = ("keyring", "apscheduler")
"""Libraries a worker imports after its first poll (a key looked up, the scheduler)."""

PROBE = """
import json, sys
{body}
heavy = set({heavy!r})
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def heavy_modules_after(body: str, tmp_path: Path, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The heavy modules loaded once ``body`` has run in a fresh interpreter."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("DESKTOP_AGENT_") and k != "ANTHROPIC_API_KEY"
    }
    env["DESKTOP_AGENT_DB"] = str(tmp_path / "desktop-agent.db")
    env["DESKTOP_AGENT_AUTOSTART_WORKER"] = "0"
    env["DESKTOP_AGENT_DEMO_DELAY"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=body, heavy=heavy)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_building_the_parser_imports_no_heavy_library(tmp_path: Path) -> None:
    body = (
        "from desktop_agent.cli.commands import COMMANDS, build_parser\n"
        "parser = build_parser()\n"
        "parser.format_help()\n"
        "assert COMMANDS\n"
    )
    assert heavy_modules_after(body, tmp_path) == []


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["runs", "--help"], 0),
        (["schedule", "--help"], 0),
        (["nosuch"], 2),
        (["runs", "--limit", "0"], 2),
    ],
)
def test_help_and_usage_errors_import_no_heavy_library(
    tmp_path: Path, argv: list[str], code: int
) -> None:
    body = (
        "import contextlib, io\n"
        "from desktop_agent.cli import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        "    try:\n"
        f"        code = main({argv!r})\n"
        "    except SystemExit as stop:\n"
        "        code = stop.code or 0\n"
        f"assert code == {code}, (code, out.getvalue(), err.getvalue())\n"
        "assert out.getvalue() or err.getvalue()\n"
    )
    # Nor the settings' model (pydantic): only ``config --help`` lists the settings.
    assert heavy_modules_after(body, tmp_path, (*HEAVY, "pydantic")) == []


def test_the_client_package_still_offers_its_names(tmp_path: Path) -> None:
    """``import desktop_agent.client`` is light; ``Client`` is there when asked for."""
    assert heavy_modules_after("import desktop_agent.client.stepkinds\n", tmp_path) == []
    body = (
        "from desktop_agent.client import Client, WorkerStatus\n"
        "from desktop_agent.client.api import Client as C, WorkerStatus as W\n"
        "assert (Client, WorkerStatus) == (C, W)\n"
    )
    assert "sqlalchemy" in heavy_modules_after(body, tmp_path)


def _tops(modules: list[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_the_worker_starts_without_the_libraries_it_imports_when_used(tmp_path: Path) -> None:
    """``desktop-agent worker`` imports the CLI and ``worker.main``: SQLAlchemy only."""
    body = "import desktop_agent.cli.commands, desktop_agent.worker.main\n"
    loaded = _tops(heavy_modules_after(body, tmp_path, (*HEAVY, *LATER_IN_WORKER, "pydantic")))
    assert loaded == {"sqlalchemy", "pydantic"}  # the store; the tools' arguments


def test_a_worker_executing_a_demo_run_never_imports_them(tmp_path: Path) -> None:
    """A worker that took a demo run to its approval loaded none of them."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "source.md").write_text("# Source\n\nA sentence worth a note.\n")
    db = tmp_path / "desktop-agent.db"
    with contextlib.closing(Client(db)) as client:
        run = client.start_run("Summarise", model="demo", workspace=str(workspace))
    body = (
        "from desktop_agent.cli import main\n"
        f"assert main(['--db', {str(db)!r}, 'worker', '--until-idle']) == 0\n"
    )
    loaded = _tops(heavy_modules_after(body, tmp_path, LAZY_IN_WORKER))
    assert loaded == set()
    with contextlib.closing(Client(db)) as client:
        done = client.run(run.id)
    assert done.status == RunStatus.WAITING and done.last_seq > 3, "the run was executed"


def test_a_worker_claims_before_it_imports_the_scheduler(tmp_path: Path) -> None:
    """A worker that keeps running starts APScheduler after its first poll, not before."""
    with contextlib.closing(Client(tmp_path / "desktop-agent.db")):
        pass  # made and migrated
    body = (
        "from pathlib import Path\n"
        "from desktop_agent.worker.main import serve\n"
        "from desktop_agent.worker.worker import Worker\n"
        "tick, first = Worker.tick, []\n"
        "def watched(self):\n"
        "    if self.polls == 0:\n"
        "        first.append(sorted(m for m in sys.modules if m.startswith('apscheduler')))\n"
        "    if self.polls >= 2:\n"
        "        self.stop()\n"
        "    return tick(self)\n"
        "Worker.tick = watched\n"
        f"serve(Path({str(tmp_path / 'desktop-agent.db')!r}))\n"
        "assert first == [[]], first\n"
    )
    assert "apscheduler" in _tops(heavy_modules_after(body, tmp_path, ("apscheduler",)))
