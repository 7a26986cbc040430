"""The worker's command line, from a Python and from a bundle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from desktop_agent import procs


def test_from_python_the_worker_is_the_package_run_as_a_module(tmp_path: Path) -> None:
    argv = procs.worker_argv(tmp_path / "x.db", until_idle=True, nice=10)
    assert argv == [
        sys.executable,
        *("-m", "desktop_agent", "--db", str(tmp_path / "x.db"), "worker"),
        *("--until-idle", "--nice", "10"),
    ]
    # and that command line is one the CLI understands
    help_text = subprocess.run(
        [*argv[:3], "worker", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--until-idle" in help_text and "--nice" in help_text


def test_in_a_bundle_the_executable_is_the_command_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frozen executable is desktop-agent: it takes no ``-m`` (it would read it as an option)."""
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/desktop-agent/desktop-agent")
    argv = procs.worker_argv(tmp_path / "x.db")
    assert argv == ["/opt/desktop-agent/desktop-agent", "--db", str(tmp_path / "x.db"), "worker"]
