"""An app that ended abnormally is reported at the next start, with its crash log.

Each test starts the real app (``gui.app.main``) in a child process, ends it as a crash
would (SIGABRT, which is what a fatal error inside Qt or Python raises; or SIGKILL), and
starts it again: the second start must say what happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent import config
from desktop_agent.config import Settings
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def app_db(db_path: Path) -> Path:
    Settings(default_max_cost_usd=None, default_max_steps=None).save(db_path)
    return db_path


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)  # waits, and closes its pipes


def _start_app(db: Path, children: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.gui.app_probe", str(db), "run"],
        cwd=REPO,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    children.append(child)
    marker = config.log_dir(db) / f"app-session-{child.pid}.json"
    wait_until(lambda: marker.exists() or child.poll() is not None, what="the app to start")
    assert child.poll() is None, child.communicate()
    return child


def _next_start(db: Path) -> dict[str, Any] | None:
    """Start the app again and return what its crash dialog showed (None: no dialog)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.gui.app_probe", str(db), "probe"],
        cwd=REPO,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    found: dict[str, Any] | None = json.loads(proc.stdout.strip().splitlines()[-1])["dialog"]
    return found


def test_a_crashed_app_is_reported_with_its_traceback(
    app_db: Path, children: list[subprocess.Popen[str]]
) -> None:
    child = _start_app(app_db, children)
    child.send_signal(signal.SIGABRT)  # what a fatal error in a C extension ends with
    assert child.wait(timeout=30) == -signal.SIGABRT

    shown = _next_start(app_db)
    assert shown is not None
    assert f"crashed last time (pid {child.pid}" in shown["text"]
    assert "Fatal Python error: Aborted" in shown["text"]
    assert "Fatal Python error: Aborted" in shown["log"]
    assert "File " in shown["log"]  # the Python traceback of the moment it died
    assert shown["open_folder"]
    logs = config.log_dir(app_db)
    kept = list(logs.glob(f"crash-*-{child.pid}.log"))
    assert len(kept) == 1 and "Fatal Python error: Aborted" in kept[0].read_text()
    assert str(kept[0]) in shown["text"]
    assert kept[0].stat().st_mode & 0o077 == 0

    # That start ended in order: the one after it has nothing to report.
    assert _next_start(app_db) is None
    assert list(logs.glob("app-session-*.json")) == []


def test_a_killed_app_is_reported_without_a_log(
    app_db: Path, children: list[subprocess.Popen[str]]
) -> None:
    child = _start_app(app_db, children)
    child.kill()
    child.wait(timeout=30)

    shown = _next_start(app_db)
    assert shown is not None
    assert f"did not shut down in order last time (pid {child.pid}" in shown["text"]
    assert shown["log"] is None and not shown["open_folder"]
    assert list(config.log_dir(app_db).glob("crash-*.log")) == []


def test_an_app_still_running_is_not_taken_for_a_crash(
    app_db: Path, children: list[subprocess.Popen[str]]
) -> None:
    running = _start_app(app_db, children)
    logs = config.log_dir(app_db)
    second = (  # a second session on the same folder, in a process of its own
        "import sys; from pathlib import Path; from desktop_agent.crashlog import AppSession\n"
        "s = AppSession(Path(sys.argv[1])); print(s.start()); s.close()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", second, str(logs)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"
    assert (logs / f"app-session-{running.pid}.json").exists()  # left to its owner
    assert len(list(logs.glob("app-session-*.json"))) == 1  # the second removed its own
    running.terminate()
    running.wait(timeout=30)


def test_the_session_marker_appears_only_once_the_fault_log_is_armed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever sees the marker (the next start, a test) may count on a traceback."""
    import faulthandler

    from desktop_agent import crashlog

    armed_at_write: list[bool] = []
    write = crashlog._write_private

    def watched(path: Path, text: str) -> None:
        if path.name.startswith("app-session-"):
            armed_at_write.append(faulthandler.is_enabled())
        write(path, text)

    monkeypatch.setattr(crashlog, "_write_private", watched)
    was_enabled = faulthandler.is_enabled()
    faulthandler.disable()  # pytest's own: the session must arm its own before the marker
    session = crashlog.AppSession(tmp_path / "logs")
    try:
        session.start()
        assert armed_at_write == [True]
    finally:
        session.close()
        if was_enabled:  # pytest's own, given back
            faulthandler.enable()
