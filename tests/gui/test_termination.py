"""A logout, ``kill`` or Ctrl+C ends the app the way closing it does, not as a crash.

The real app runs in a child process (``tests/gui/app_probe.py``, offscreen, no worker) and
gets a real signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_agent import config
from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.crashlog import AppSession
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_quits_the_app_cleanly_and_the_next_start_reports_no_crash(
    db_path: Path, signum: signal.Signals
) -> None:
    settings = Settings(default_max_cost_usd=None, default_max_steps=None)
    settings.save(db_path)
    client = Client(db_path, settings)  # a run that goes on, as at a real logout
    try:
        client.start_run("Waits for a worker", model="demo", workspace=db_path.parent / "ws")
    finally:
        client.close()
    logs = config.log_dir(db_path)
    app = subprocess.Popen(
        [sys.executable, "-m", "tests.gui.app_probe", str(db_path), "run"],
        cwd=REPO,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        marker = logs / f"app-session-{app.pid}.json"
        wait_until(lambda: marker.exists() or app.poll() is not None, what="the app to start")
        assert app.poll() is None, app.communicate()
        app.send_signal(signum)
        _, err = app.communicate(timeout=60)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait(timeout=30)
    assert app.returncode == 0, err  # quit, not killed by the signal (-15) or interrupted
    assert "Traceback" not in err
    assert not marker.exists()  # the session ended: nothing for a crash report to find
    session = AppSession(logs)
    try:
        assert session.start() is None  # the next start has no previous crash to report
    finally:
        session.close()
