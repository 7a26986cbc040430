"""One app per data folder: a second launch brings the running window to the front and exits.

The in-process tests use real local sockets between two :class:`SingleInstance` objects;
the last one starts the real app twice, in processes of its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QDir
from PySide6.QtWidgets import QMainWindow
from pytestqt.qtbot import QtBot

from desktop_agent import config
from desktop_agent.config import Settings
from desktop_agent.gui.single_instance import (
    ACK_TIMEOUT_MS,
    SingleInstance,
    bring_to_front,
    server_name,
)
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
OFFSCREEN_NO_RAISE = pytest.mark.qt_log_ignore("This plugin does not support raise")
"""The offscreen platform cannot stack windows; it says so when asked to raise one."""
QUICK_MS = 500
"""The answer timeout of tests where nobody answers (only a bound on the wait)."""


@pytest.fixture
def claims(qapp: object) -> Iterator[list[SingleInstance]]:
    """Instances made by a test, closed after it (their socket files removed)."""
    made: list[SingleInstance] = []
    yield made
    for instance in made:
        instance.close()


def _instance(
    folder: Path, claims: list[SingleInstance], ack_timeout_ms: int = ACK_TIMEOUT_MS
) -> SingleInstance:
    instance = SingleInstance(folder, ack_timeout_ms=ack_timeout_ms)
    claims.append(instance)
    return instance


def _socket_path(folder: Path) -> str:
    return os.path.join(QDir.tempPath(), server_name(folder))


@OFFSCREEN_NO_RAISE
def test_a_second_launch_brings_the_first_window_to_the_front(
    qtbot: QtBot, tmp_path: Path, claims: list[SingleInstance]
) -> None:
    folder = tmp_path / "data"
    first = _instance(folder, claims)
    assert first.claim() and first.listening
    window = QMainWindow()
    qtbot.addWidget(window)
    window.showMinimized()
    first.activate_requested.connect(lambda: bring_to_front(window))

    second = _instance(tmp_path / "data" / ".." / "data", claims)  # the same folder
    with qtbot.waitSignal(first.activate_requested, timeout=10_000):
        assert second.claim() is False  # already running: this launch should exit
    assert not second.listening
    assert window.isVisible() and not window.isMinimized()

    other = _instance(tmp_path / "other", claims)  # another folder is another instance
    assert other.claim() and other.listening
    assert other.name != first.name
    assert first.listening


@OFFSCREEN_NO_RAISE
def test_a_window_in_the_tray_comes_back(
    qtbot: QtBot, tmp_path: Path, claims: list[SingleInstance]
) -> None:
    first = _instance(tmp_path, claims)
    assert first.claim()
    window = QMainWindow()
    qtbot.addWidget(window)
    window.showMaximized()
    window.hide()  # closed to the tray
    first.activate_requested.connect(lambda: bring_to_front(window))
    assert _instance(tmp_path, claims).claim() is False
    assert window.isVisible() and window.isMaximized()


def test_after_the_first_quits_the_next_launch_is_the_instance(
    tmp_path: Path, claims: list[SingleInstance]
) -> None:
    first = _instance(tmp_path, claims)
    assert first.claim()
    first.close()
    assert not os.path.exists(_socket_path(tmp_path))
    assert _instance(tmp_path, claims).claim()


def test_a_socket_file_left_by_a_crash_does_not_block_a_launch(
    tmp_path: Path, claims: list[SingleInstance]
) -> None:
    path = _socket_path(tmp_path)
    crashed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    crashed.bind(path)
    crashed.listen(1)
    crashed.close()  # what a killed app leaves: the file, and nobody listening on it
    assert os.path.exists(path)

    launch = _instance(tmp_path, claims)
    assert launch.claim() and launch.listening
    assert os.stat(path).st_mode & 0o077 == 0  # the new socket: for this user only
    assert _instance(tmp_path, claims).claim() is False  # and it answers the next one


def test_a_listener_that_never_answers_is_taken_over(
    tmp_path: Path, claims: list[SingleInstance]
) -> None:
    """An app that hangs holds the name in vain: connections are accepted, never answered."""
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hung.bind(_socket_path(tmp_path))
    hung.listen(4)
    try:
        launch = _instance(tmp_path, claims, ack_timeout_ms=QUICK_MS)
        assert launch.claim() and launch.listening
        assert _instance(tmp_path, claims).claim() is False
    finally:
        hung.close()


def test_a_request_that_is_not_ours_is_not_answered(
    qtbot: QtBot, tmp_path: Path, claims: list[SingleInstance]
) -> None:
    first = _instance(tmp_path, claims)
    assert first.claim()
    asked: list[bool] = []
    first.activate_requested.connect(lambda: asked.append(True))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stranger:
        stranger.connect(_socket_path(tmp_path))
        stranger.sendall(b"hello\n")
        # The connection is dropped (end of stream), without an answer or an activation.
        qtbot.waitUntil(lambda: _ended(stranger), timeout=10_000)
    assert asked == []
    assert _instance(tmp_path, claims).claim() is False
    assert asked == [True]


def _ended(sock: socket.socket) -> bool:
    """Whether the peer closed ``sock`` (without waiting: the server runs in this thread)."""
    try:
        return sock.recv(16, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False


# ---------------------------------------------------------------------- real processes


def _env() -> dict[str, str]:
    return {**os.environ, "QT_QPA_PLATFORM": "offscreen"}


def test_a_second_app_on_the_same_folder_exits_and_the_first_runs_on(db_path: Path) -> None:
    Settings(default_max_cost_usd=None, default_max_steps=None).save(db_path)
    logs = config.log_dir(db_path)
    first = subprocess.Popen(  # the real app, without a worker
        [sys.executable, "-m", "tests.gui.app_probe", str(db_path), "run"],
        cwd=REPO,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    second: subprocess.Popen[str] | None = None
    try:
        marker = logs / f"app-session-{first.pid}.json"  # written once it listens
        wait_until(lambda: marker.exists() or first.poll() is not None, what="the app to start")
        assert first.poll() is None, first.communicate()

        second = subprocess.Popen(  # the way the analyst launches it
            [sys.executable, "-m", "desktop_agent", "--db", str(db_path)],
            cwd=REPO,
            env=_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: second.poll() is not None, what="the second launch to exit")
        out, err = second.communicate()
        assert second.returncode == 0, err
        assert err.splitlines() == [
            f"desktop-agent is already running for {db_path.parent}; "
            "brought its window to the front"
        ]
        assert out == ""
        assert first.poll() is None  # the first app runs on, its marker untouched
        assert [m.name for m in logs.glob("app-session-*.json")] == [marker.name]
    finally:
        if second is not None and second.poll() is None:
            second.kill()
            second.wait(timeout=30)
        if first.poll() is None:
            os.kill(first.pid, signal.SIGTERM)
        first.wait(timeout=30)
        with contextlib.suppress(FileNotFoundError):  # SIGTERM left its socket behind
            os.unlink(_socket_path(db_path.parent))
