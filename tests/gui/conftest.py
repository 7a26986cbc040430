"""Fixtures of the GUI tests: a real main window over a real database, a worker in a thread.

The window never starts detached workers here (``spawn_workers=False``); runs are executed
by a :class:`~desktop_agent.worker.worker.Worker` in a thread of the test process, with the
demo model. Qt runs offscreen (set in the top-level conftest) and any Qt warning fails the
test (``qt_log_level_fail``). After each test the window must have stopped every timer and
background task it started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import Run, RunStatus, StepKind, StepStatus
from desktop_agent.engine.loop import RunExecutor
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.llm.demo import DemoModel
from desktop_agent.worker.worker import Worker
from tests.conftest import MakeExecutor
from tests.helpers.polling import DEFAULT_TIMEOUT_S, qt_wait_until

REPO = Path(__file__).resolve().parents[2]

StartWorker = Callable[..., Worker]
OpenWindow = Callable[[], MainWindow]


@pytest.fixture
def demo_ws(tmp_path: Path) -> Path:
    """A workspace with three sources for the demo model."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "alpha.md").write_text("# Alpha\nAlpha says the market grew 4% in 2025.\n")
    (ws / "beta.txt").write_text("Beta reports churn fell. More detail follows.\n")
    (ws / "gamma.md").write_text("Gamma: three vendors lead. Others trail far behind.\n")
    return ws


@pytest.fixture
def start_worker(
    make_executor: MakeExecutor, run_worker_thread: Callable[[RunExecutor], Worker]
) -> StartWorker:
    """Start an in-thread worker running the demo model (``delay`` seconds per call)."""

    def start(delay: float = 0.0) -> Worker:
        model = DemoModel(delay=delay) if delay else None
        return run_worker_thread(make_executor(model))

    return start


@pytest.fixture
def open_window(qtbot: QtBot, client: Client) -> Iterator[OpenWindow]:
    """Open the main window (at most once per test); closed and checked for leaks after."""
    windows: list[MainWindow] = []

    def open_() -> MainWindow:
        window = MainWindow(client, spawn_workers=False, poll_ms=50)
        window.resize(1280, 800)  # the size these tests were written at, whatever the screen
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        windows.append(window)
        return window

    yield open_
    for window in windows:
        window.shutdown()
        running = [t for t in window.findChildren(QTimer) if t.isActive()]
        assert not running, f"timers left running: {[(t.parent(), t.interval()) for t in running]}"
        assert not window.tasks.busy, "background tasks left running"


@pytest.fixture
def window(open_window: OpenWindow) -> MainWindow:
    """The main window, open."""
    return open_window()


def wait_status(
    qtbot: QtBot,
    window: MainWindow,
    run_id: str,
    *statuses: RunStatus,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Run:
    """Wait until the run list shows ``run_id`` in one of ``statuses``.

    Not :func:`tests.helpers.polling.wait_status`: this waits for what the window shows
    (its poll, in the Qt event loop), not for what the database holds.
    """

    def shown() -> bool:
        row = window.runs_model.get(run_id)
        return row is not None and row.run.status in statuses

    def listed() -> str:
        row = window.runs_model.get(run_id)
        return "not listed" if row is None else f"listed as {row.run.status}"

    wanted = " or ".join(str(s) for s in statuses)
    qt_wait_until(qtbot, shown, timeout, f"the run list to show {run_id} {wanted}", last=listed)
    row = window.runs_model.get(run_id)
    assert row is not None
    return row.run


def select(qtbot: QtBot, window: MainWindow, run_id: str) -> None:
    """Select a run in the list once the list shows it, and wait for its steps."""
    qtbot.waitUntil(lambda: window.runs_model.get(run_id) is not None)
    assert window.select_run(run_id)
    assert window.selected is not None and window.selected.run.id == run_id


StartChild = Callable[[], "subprocess.Popen[bytes]"]


@pytest.fixture
def start_child_worker(client: Client) -> Iterator[StartChild]:
    """Start a real worker process whose demo model stays 30 s in each call (for SIGKILL)."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        env = {**os.environ, "DESKTOP_AGENT_DEMO_DELAY": "30"}
        args = [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path), "worker"]
        child = subprocess.Popen(
            args,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append(child)
        return child

    yield start
    for child in started:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)


def in_model_call(client: Client, run_id: str) -> bool:
    """Whether the run has a model call started and not finished."""
    return any(
        s.kind == StepKind.MODEL_CALL and s.status == StepStatus.STARTED
        for s in client.steps(run_id)
    )
