"""One app per data folder: a second launch brings the running window to the front and exits.

The in-process tests use real local sockets between two :class:`SingleInstance` objects,
or between one and a listener made here (a thread answering what the test says); the last
ones start the real app, in processes of its own. ``XDG_RUNTIME_DIR`` is unset unless a
test sets it, so the socket is in the data folder's private folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QDir
from PySide6.QtNetwork import QLocalSocket
from PySide6.QtWidgets import QMainWindow
from pytestqt.qtbot import QtBot

from desktop_agent import config
from desktop_agent.config import Settings
from desktop_agent.gui import single_instance
from desktop_agent.gui.single_instance import (
    ACK_TIMEOUT_MS,
    SingleInstance,
    bring_to_front,
    own_uid,
    place,
    server_name,
)
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]
OFFSCREEN_NO_RAISE = pytest.mark.qt_log_ignore("This plugin does not support raise")
"""The offscreen platform cannot stack windows; it says so when asked to raise one."""
QUICK_MS = 500
"""The answer timeout of tests where nobody answers (only a bound on the wait)."""


@pytest.fixture(autouse=True)
def _no_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)


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
    return place(folder).name


def _private_folder(folder: Path) -> Path:
    return folder / f".instance-{own_uid()}"


class _Listener:
    """A listener on ``path`` in a thread, answering ``answer`` to every request.

    Not one of ours: it stands for whatever else may hold the name.
    """

    def __init__(self, path: str, answer: bytes) -> None:
        self.path = path
        self.answer = answer
        self.requests: list[bytes] = []
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._inode = os.stat(path).st_ino
        self._sock.listen(4)
        self._sock.settimeout(0.05)  # how often the thread looks whether to stop
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                request = b""
                with contextlib.suppress(OSError):
                    while not request.endswith(b"\n"):
                        chunk = conn.recv(64)
                        if not chunk:
                            break
                        request += chunk
                self.requests.append(request)
                with contextlib.suppress(OSError):
                    conn.sendall(self.answer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self._inode:  # not if it was taken over
                os.unlink(self.path)


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
    assert launch.notices == [f"removed the stale socket file {path} (nobody listened on it)"]
    assert os.stat(path).st_mode & 0o077 == 0  # the new socket: for this user only
    assert _instance(tmp_path, claims).claim() is False  # and it answers the next one


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's needs root")
def test_a_stale_socket_file_of_another_user_is_left_alone(
    tmp_path: Path, claims: list[SingleInstance]
) -> None:
    path = _socket_path(tmp_path)
    crashed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    crashed.bind(path)
    crashed.close()
    os.chown(path, 4242, 4242)
    launch = _instance(tmp_path, claims)
    assert launch.claim() and not launch.listening  # it starts, alone, and says why
    assert launch.notices == [
        f"{path} belongs to another user (uid 4242) and nobody answers on it; it was left "
        "alone, and a second app on this data folder will not be noticed"
    ]
    assert os.stat(path).st_uid == 4242


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
        assert len(launch.notices) == 1 and "did not answer within" in launch.notices[0]
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


# ------------------------------------------------------------------ who may hold the name


def test_a_listener_on_the_old_temp_name_does_not_stop_a_launch(
    tmp_path: Path, claims: list[SingleInstance]
) -> None:
    """Anyone could listen on the old name in the shared temporary folder and answer "ok"."""
    old = _Listener(os.path.join(QDir.tempPath(), server_name(tmp_path)), b"ok\n")
    try:
        launch = _instance(tmp_path, claims)
        assert launch.claim() and launch.listening
        assert old.requests == []  # never asked
        assert launch.name == str(_private_folder(tmp_path.resolve()) / "app")
    finally:
        old.close()


def test_a_listener_that_answers_something_else_is_not_trusted(
    tmp_path: Path, claims: list[SingleInstance]
) -> None:
    path = _socket_path(tmp_path)
    other = _Listener(path, b"sure\n")
    try:
        launch = _instance(tmp_path, claims)
        assert launch.claim() and launch.listening  # it starts, and took the name over
        assert launch.notices == [
            f"the program that holds {path} answered b'sure\\n', which is not "
            "desktop-agent's answer; starting anyway and taking its place"
        ]
        assert other.requests == [b"activate\n"]
    finally:
        other.close()
    assert _instance(tmp_path, claims).claim() is False  # the name is ours now


def test_an_answer_from_another_user_is_not_trusted(
    qtbot: QtBot, tmp_path: Path, claims: list[SingleInstance], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _instance(tmp_path, claims)
    assert first.claim()
    asked: list[bool] = []
    first.activate_requested.connect(lambda: asked.append(True))
    uids: list[int | None] = []

    real_peer_uid = single_instance.peer_uid

    def other_user(sock: QLocalSocket, path: str) -> int:
        uids.append(real_peer_uid(sock, path))
        return own_uid() + 1

    monkeypatch.setattr(single_instance, "peer_uid", other_user)
    second = _instance(tmp_path, claims)
    assert second.claim() and second.listening  # not sent away by another user's answer
    assert uids == [own_uid()]  # the kernel's answer was this user: only the patch lies
    assert second.notices == [
        f"a program of another user (uid {own_uid() + 1}) listens on {second.name}; it is "
        "not trusted: starting anyway and taking its place"
    ]
    assert asked == []  # nothing was sent to it


def test_the_private_folder_is_made_for_this_user_only(
    tmp_path: Path, claims: list[SingleInstance]
) -> None:
    launch = _instance(tmp_path / "data", claims)
    folder = _private_folder(tmp_path / "data")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert os.path.dirname(launch.name) == str(folder.resolve())
    assert launch.claim() and launch.listening


def test_a_private_folder_others_may_read_is_made_private_again(
    tmp_path: Path, claims: list[SingleInstance]
) -> None:
    folder = _private_folder(tmp_path)
    folder.mkdir()
    folder.chmod(0o750)
    launch = _instance(tmp_path, claims)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert launch.claim() and launch.listening and launch.notices == []


def test_a_private_folder_of_another_user_is_refused(
    tmp_path: Path, claims: list[SingleInstance], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _private_folder(tmp_path)
    folder.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(folder, 4242, 4242)
        owner = 4242
    else:  # the folder is ours; this process pretends to be someone else
        owner = own_uid()
        monkeypatch.setattr(single_instance, "own_uid", lambda: owner + 1)
        folder = folder.with_name(f".instance-{owner + 1}")
        folder.mkdir(mode=0o700)
    launch = _instance(tmp_path, claims)
    assert launch.claim() and not launch.listening  # it starts, alone, and says why
    assert launch.notices == [
        "cannot watch for a second app on this data folder: "
        f"{folder.resolve()} belongs to another user (uid {owner}); starting anyway"
    ]
    assert os.listdir(folder) == []


def test_the_runtime_folder_is_used_when_it_is_private(
    tmp_path: Path, claims: list[SingleInstance], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short folder, as a real runtime directory is (/run/user/UID): a socket's path may
    # not exceed about 107 bytes, and the test's own folder can be nearly that long.
    runtime = Path(tempfile.mkdtemp(prefix="rt-"))
    runtime.chmod(0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    first = _instance(tmp_path / "data", claims)
    assert first.name == str(runtime / server_name(tmp_path / "data"))
    assert first.claim() and first.listening
    assert _instance(tmp_path / "data", claims).claim() is False

    runtime.chmod(0o755)  # not private: the data folder's private folder instead
    other = _instance(tmp_path / "other", claims)
    assert other.name == str(_private_folder(tmp_path / "other").resolve() / "app")
    shutil.rmtree(runtime, ignore_errors=True)


def test_the_listener_is_this_user(tmp_path: Path, claims: list[SingleInstance]) -> None:
    """The kernel tells who listens; without a listener nobody is."""
    first = _instance(tmp_path, claims)
    assert first.claim()
    sock = QLocalSocket()
    sock.connectToServer(first.name)
    assert sock.waitForConnected(10_000)
    try:
        assert single_instance.peer_uid(sock, first.name) == os.geteuid()
    finally:
        sock.abort()


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
        first.communicate(timeout=30)  # waits, and closes its pipe
        with contextlib.suppress(FileNotFoundError):  # SIGTERM left its socket behind
            os.unlink(_socket_path(db_path.parent))


def test_a_launch_that_goes_on_says_why(db_path: Path) -> None:
    """A stale socket file: the app starts, and says on stderr what it removed."""
    Settings(default_max_cost_usd=None, default_max_steps=None).save(db_path)
    path = _socket_path(db_path.parent)
    crashed = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    crashed.bind(path)
    crashed.close()
    probe = subprocess.run(  # the real app: it starts, shows its window, then quits
        [sys.executable, "-m", "tests.gui.app_probe", str(db_path), "probe"],
        cwd=REPO,
        env=_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert '"dialog"' in probe.stdout  # the window was shown: the app started
    assert (
        f"desktop-agent: removed the stale socket file {path} (nobody listened on it)"
        in probe.stderr.splitlines()
    )
