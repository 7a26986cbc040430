"""The command line starts without the heavy libraries: a structural check, not a timing.

Building the parser, printing help and reporting a usage error need names, help texts and
functions only. SQLAlchemy, Alembic, the Anthropic SDK, httpx, MCP and Qt cost about a
second to import, so the CLI's modules import them (through the client) inside the
commands that use them. Each check runs in a fresh interpreter, where nothing else has
imported them first. ``bench/startup.py`` measures the time itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("sqlalchemy", "alembic", "anthropic", "httpx", "httpx2", "mcp", "PySide6")

PROBE = """
import json, sys
{body}
heavy = set({heavy!r})
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def heavy_modules_after(body: str, tmp_path: Path) -> list[str]:
    """The heavy modules loaded once ``body`` has run in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESKTOP_AGENT_")}
    env["DESKTOP_AGENT_DB"] = str(tmp_path / "desktop-agent.db")
    env["DESKTOP_AGENT_AUTOSTART_WORKER"] = "0"
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=body, heavy=HEAVY)],
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
    assert heavy_modules_after(body, tmp_path) == []


def test_the_client_package_still_offers_its_names(tmp_path: Path) -> None:
    """``import desktop_agent.client`` is light; ``Client`` is there when asked for."""
    assert heavy_modules_after("import desktop_agent.client.stepkinds\n", tmp_path) == []
    body = (
        "from desktop_agent.client import Client, WorkerStatus\n"
        "from desktop_agent.client.api import Client as C, WorkerStatus as W\n"
        "assert (Client, WorkerStatus) == (C, W)\n"
    )
    assert "sqlalchemy" in heavy_modules_after(body, tmp_path)
