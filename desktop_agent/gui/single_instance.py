"""One app per data folder: a second launch brings the running window to the front.

Two apps on one data folder would show the same runs twice and each supervise a worker.
So the first app listens on a local socket named after the data folder: on Unix a socket
file in a folder only this user may enter (``$XDG_RUNTIME_DIR`` when it is this user's and
private, else a ``.instance-<uid>`` folder of mode 0700 inside the data folder), a named
pipe on Windows (per session). A later launch connects, checks that the listener is this
user's, asks it to come to the front, waits for its answer and exits.

Whatever else holds the name (a socket file nobody listens on, a listener that never
answers or answers something else, another user's program) is not trusted: the launch
says so in :attr:`SingleInstance.notices` and starts, taking the name over, so a crash
never locks the analyst out of the folder and no one else can make the app quit.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
import socket
import stat
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QDir, QEventLoop, QLockFile, QObject, Qt, QTimer, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QWidget

log = logging.getLogger(__name__)

ACTIVATE = b"activate\n"
ACK = b"ok\n"
ACK_TIMEOUT_MS = 2000
"""How long a second launch waits for the running app's answer before taking over."""
MAX_REQUEST = 64
"""A request longer than this is not ours: the connection is dropped."""
RUNTIME_DIR_ENV = "XDG_RUNTIME_DIR"


class UnsafeFolderError(Exception):
    """The folder meant for the socket cannot be trusted (the message says why)."""


@dataclass(frozen=True)
class Place:
    """Where the instance of a data folder listens.

    Attributes:
        name: what QLocalServer and QLocalSocket take: the socket file's full path on
            Unix, the pipe's name on Windows.
        lock: the lock file taken while a launch checks and listens.
        folder: the private folder holding both (None on Windows).
    """

    name: str
    lock: str
    folder: str | None


def server_name(data_dir: Path) -> str:
    """The local server's base name for ``data_dir``.

    The same for every launch of this user on this folder (however the path was spelled),
    different for another user or folder, and short (a socket path must stay under about
    a hundred bytes).
    """
    if sys.platform == "win32":
        user = getpass.getuser()
    else:
        user = str(os.getuid())
    key = f"{user}\0{data_dir.expanduser().resolve()}"
    return "desktop-agent-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def own_uid() -> int:
    """This process's user id (-1 on Windows, where it is not used)."""
    if sys.platform == "win32":
        return -1
    else:  # one branch per platform, for the type checker
        return os.geteuid()


def place(data_dir: Path) -> Place:
    """Where the instance for ``data_dir`` listens; creates its private folder if needed.

    Raises:
        UnsafeFolderError: the folder inside the data folder exists but belongs to another
            user, is not a folder, or cannot be made.
    """
    name = server_name(data_dir)
    if sys.platform == "win32":  # named pipes are per session; as before
        return Place(name, os.path.join(QDir.tempPath(), f"{name}.lock"), None)
    else:  # one branch per platform, for the type checker
        runtime = os.environ.get(RUNTIME_DIR_ENV, "")
        if runtime and os.path.isabs(runtime) and _is_private(runtime):
            lock = os.path.join(runtime, f"{name}.lock")
            return Place(os.path.join(runtime, name), lock, runtime)
        folder = str(data_dir.expanduser().resolve() / f".instance-{own_uid()}")
        _make_private(folder)
        return Place(os.path.join(folder, "app"), os.path.join(folder, "app.lock"), folder)


def _is_private(folder: str) -> bool:
    """Whether ``folder`` is a folder of this user that nobody else may enter."""
    try:
        st = os.stat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == own_uid() and st.st_mode & 0o077 == 0


def _make_private(folder: str) -> None:
    """Create ``folder`` with mode 0700, or check it is ours and make it private again."""
    if sys.platform != "win32":
        try:
            os.makedirs(os.path.dirname(folder), exist_ok=True)
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UnsafeFolderError(f"cannot create {folder}: {exc.strerror or exc}") from exc
        try:  # opened without following a link, so the checks and the chmod are on one folder
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            raise UnsafeFolderError(
                f"{folder} is not a folder of its own ({exc.strerror or exc})"
            ) from exc
        try:
            st = os.fstat(fd)
            if st.st_uid != own_uid():
                raise UnsafeFolderError(f"{folder} belongs to another user (uid {st.st_uid})")
            if st.st_mode & 0o077:
                os.fchmod(fd, 0o700)
                log.info("made %s private again (its mode was %o)", folder, st.st_mode & 0o777)
        finally:
            os.close(fd)


def peer_uid(sock: QLocalSocket, path: str) -> int | None:
    """The user id of the process listening on ``path``, which ``sock`` is connected to.

    On Linux the kernel's answer (``SO_PEERCRED``); elsewhere on Unix (Python has no
    ``getpeereid``) the socket file's owner, which only this user can have put in the
    private folder. None when it cannot be told.
    """
    if sys.platform == "win32":
        return own_uid()
    else:  # one branch per platform, for the type checker
        try:
            if sys.platform == "linux":
                fd = int(sock.socketDescriptor())
                if fd < 0:
                    return None
                with socket.fromfd(fd, socket.AF_UNIX, socket.SOCK_STREAM) as dup:
                    creds = dup.getsockopt(
                        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
                    )
                _pid, uid, _gid = struct.unpack("3i", creds)
                return int(uid)
            else:  # one branch per platform, for the type checker
                return os.stat(path).st_uid
        except OSError:
            return None


def bring_to_front(window: QWidget) -> None:
    """Show ``window`` (also from the tray), un-minimize it and ask for the focus.

    Un-minimizing keeps a maximized window maximized (``showNormal`` would not).
    """
    state = window.windowState() & ~Qt.WindowState.WindowMinimized
    window.setWindowState(state | Qt.WindowState.WindowActive)
    window.show()
    window.raise_()
    window.activateWindow()


class SingleInstance(QObject):
    """This process's claim on a data folder; :meth:`claim` once, :meth:`close` at exit.

    Args:
        data_dir: the data folder (the database's folder).
        ack_timeout_ms: how long to wait for a running app to connect and to answer.
        parent: owner.

    Attributes:
        name: the socket's path (the pipe's name on Windows).
        notices: what :meth:`claim` found wrong, in plain sentences, for the analyst (the
            launch went on regardless).

    Signals:
        activate_requested: another launch on this folder asked this app to come to the
            front (emitted before it is answered).
    """

    activate_requested = Signal()

    def __init__(
        self, data_dir: Path, *, ack_timeout_ms: int = ACK_TIMEOUT_MS, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.ack_timeout_ms = ack_timeout_ms
        self.notices: list[str] = []
        self._server: QLocalServer | None = None
        self._refusal = ""
        self._may_listen = True
        try:
            self.place: Place | None = place(data_dir)
        except UnsafeFolderError as exc:
            self.place = None
            self._refusal = str(exc)
        self.name = self.place.name if self.place is not None else server_name(data_dir)

    @property
    def listening(self) -> bool:
        """Whether this process is the folder's instance and answers later launches."""
        return self._server is not None and self._server.isListening()

    def claim(self) -> bool:
        """Become the folder's instance, or have the running one come to the front.

        Needs a Q(Core)Application; runs a short event loop while it waits for an answer.

        Returns:
            True: this process is the instance (it listens now; or, when the name cannot
            be taken, it runs alone and :attr:`notices` says why). False: this user's app
            already running on this folder answered; this process should exit.
        """
        if self.place is None:
            self._notice(
                f"cannot watch for a second app on this data folder: {self._refusal}; "
                "starting anyway"
            )
            return True
        # Two launches at once (a double click twice) must not both find nobody and both
        # listen: the check and the listen happen under a lock file.
        lock = QLockFile(self.place.lock)
        locked = lock.tryLock(self.ack_timeout_ms * 2)
        try:
            if self._ask_running():
                return False
            if self._may_listen:
                self._listen()
            return True
        finally:
            if locked:
                lock.unlock()

    def close(self) -> None:
        """Stop answering (removes the socket file); the next launch becomes the instance."""
        if self._server is not None:
            self._server.close()
            self._server.deleteLater()
            self._server = None

    def _notice(self, text: str) -> None:
        log.info("%s", text)
        self.notices.append(text)

    # ------------------------------------------------------------------ second launch

    def _ask_running(self) -> bool:
        """Ask this user's app listening on the name to come to the front; True if it did."""
        sock = QLocalSocket()
        sock.connectToServer(self.name)
        if not sock.waitForConnected(self.ack_timeout_ms):
            if sys.platform != "win32":
                self._clear_stale()  # nobody listens: no app runs, or a crashed one left its file
            return False
        uid = peer_uid(sock, self.name)
        if uid != own_uid():
            sock.abort()
            who = "an unknown user" if uid is None else f"another user (uid {uid})"
            self._notice(
                f"a program of {who} listens on {self.name}; it is not trusted: starting "
                "anyway and taking its place"
            )
            return False
        sock.write(ACTIVATE)
        sock.flush()
        loop = QEventLoop()
        timer = QTimer()
        timer.setSingleShot(True)
        timer.timeout.connect(loop.quit)
        sock.readyRead.connect(loop.quit)
        sock.disconnected.connect(loop.quit)
        timer.start(self.ack_timeout_ms)
        while (
            not sock.canReadLine()
            and timer.isActive()
            and sock.state() == QLocalSocket.LocalSocketState.ConnectedState
        ):
            loop.exec()
        answer = bytes(sock.readLine(MAX_REQUEST).data()) if sock.canReadLine() else None
        timer.stop()
        sock.abort()
        if answer == ACK:
            return True
        if answer is None:
            self._notice(
                f"the program that holds {self.name} did not answer within "
                f"{self.ack_timeout_ms} ms; starting anyway and taking its place"
            )
        else:
            self._notice(
                f"the program that holds {self.name} answered {answer!r}, which is not "
                "desktop-agent's answer; starting anyway and taking its place"
            )
        return False

    def _clear_stale(self) -> None:
        """Remove a socket file nobody listens on, if it is ours."""
        try:
            st = os.lstat(self.name)
        except FileNotFoundError:
            return
        except OSError as exc:
            self._notice(f"cannot check {self.name}: {exc.strerror or exc}")
            return
        if st.st_uid != own_uid():
            self._may_listen = False
            self._notice(
                f"{self.name} belongs to another user (uid {st.st_uid}) and nobody answers "
                "on it; it was left alone, and a second app on this data folder will not "
                "be noticed"
            )
            return
        try:
            os.unlink(self.name)
        except OSError as exc:
            self._notice(f"cannot remove the stale socket file {self.name}: {exc.strerror}")
            return
        self._notice(f"removed the stale socket file {self.name} (nobody listened on it)")

    # ------------------------------------------------------------------ the instance

    def _listen(self) -> None:
        server = QLocalServer(self)
        # Only this user may connect. (With an access option, Qt also creates the socket
        # aside and renames it into place, replacing a stale file by itself.)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        # A name nobody trusted answered on: remove it (a pipe on Windows, a file on Unix).
        QLocalServer.removeServer(self.name)
        if not server.listen(self.name):
            self._notice(
                f"cannot listen as {self.name} ({server.errorString()}); a second launch on "
                "this data folder will start a second app"
            )
            server.deleteLater()
            return
        server.newConnection.connect(self._on_server_new_connection)
        self._server = server

    @Slot()
    def _on_server_new_connection(self) -> None:
        server = self._server
        while server is not None and server.hasPendingConnections():
            conn = server.nextPendingConnection()
            conn.disconnected.connect(conn.deleteLater)
            conn.readyRead.connect(self._on_connection_ready_read)
            if conn.bytesAvailable():
                self._answer(conn)

    @Slot()
    def _on_connection_ready_read(self) -> None:
        conn = self.sender()
        if isinstance(conn, QLocalSocket):
            self._answer(conn)

    def _answer(self, conn: QLocalSocket) -> None:
        """Bring the window to the front for an ``activate`` request, then say so."""
        if not conn.canReadLine():
            if conn.bytesAvailable() > MAX_REQUEST:
                conn.abort()
            return
        request = bytes(conn.readLine(MAX_REQUEST).data())
        if request != ACTIVATE:
            log.warning("ignored a request on %s: %r", self.name, request[:MAX_REQUEST])
            conn.abort()
            return
        self.activate_requested.emit()
        conn.write(ACK)
        conn.flush()
        conn.disconnectFromServer()
