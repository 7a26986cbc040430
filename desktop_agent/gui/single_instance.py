"""One app per data folder: a second launch brings the running window to the front.

Two apps on one data folder would show the same runs twice and each supervise a worker.
So the first app listens on a local socket (a Unix socket, a named pipe on Windows) named
after the data folder and the user. A later launch connects, asks the running app to come
to the front, waits for its answer and exits. A name left behind by an app that crashed
(a socket file nobody listens on, or a listener that never answers) is taken over, so a
crash never locks the analyst out of the folder.
"""

from __future__ import annotations

import getpass
import hashlib
import logging
import os
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


def server_name(data_dir: Path) -> str:
    """The local server's name for ``data_dir``.

    The same for every launch of this user on this folder (however the path was spelled),
    different for another user or folder, and short: on Unix it becomes a socket file in
    the temporary folder, whose path must stay under about a hundred bytes.
    """
    user = str(os.getuid()) if hasattr(os, "getuid") else getpass.getuser()
    key = f"{user}\0{data_dir.expanduser().resolve()}"
    return "desktop-agent-" + hashlib.sha256(key.encode()).hexdigest()[:16]


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

    Signals:
        activate_requested: another launch on this folder asked this app to come to the
            front (emitted before it is answered).
    """

    activate_requested = Signal()

    def __init__(
        self, data_dir: Path, *, ack_timeout_ms: int = ACK_TIMEOUT_MS, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.name = server_name(data_dir)
        self.ack_timeout_ms = ack_timeout_ms
        self._server: QLocalServer | None = None

    @property
    def listening(self) -> bool:
        """Whether this process is the folder's instance and answers later launches."""
        return self._server is not None and self._server.isListening()

    def claim(self) -> bool:
        """Become the folder's instance, or have the running one come to the front.

        Needs a Q(Core)Application; runs a short event loop while it waits for an answer.

        Returns:
            True: this process is the instance (it listens now; or, when the name cannot
            be taken, it runs alone and the log says why). False: an app already running
            on this folder answered; this process should exit.
        """
        # Two launches at once (a double click twice) must not both find nobody and both
        # listen: the check and the listen happen under a lock file.
        lock = QLockFile(os.path.join(QDir.tempPath(), f"{self.name}.lock"))
        locked = lock.tryLock(self.ack_timeout_ms * 2)
        try:
            if self._ask_running():
                return False
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

    # ------------------------------------------------------------------ second launch

    def _ask_running(self) -> bool:
        """Ask the app listening on the name to come to the front; True when it answered."""
        sock = QLocalSocket()
        sock.connectToServer(self.name)
        if not sock.waitForConnected(self.ack_timeout_ms):
            return False  # nobody listens: no app runs, or a crashed one left its file
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
        answered = sock.canReadLine() and bytes(sock.readLine().data()) == ACK
        timer.stop()
        sock.abort()
        if not answered:
            log.warning(
                "the app that holds %s did not answer within %d ms; taking its place",
                self.name,
                self.ack_timeout_ms,
            )
        return answered

    # ------------------------------------------------------------------ the instance

    def _listen(self) -> None:
        server = QLocalServer(self)
        # Only this user may connect. (With an access option, Qt also creates the socket
        # aside and renames it into place, replacing a stale file by itself.)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        # A name nobody answered on is stale (a crashed app's socket file): remove it.
        QLocalServer.removeServer(self.name)
        if not server.listen(self.name):
            log.warning(
                "cannot listen as %s (%s); a second launch on this data folder will start "
                "a second app",
                self.name,
                server.errorString(),
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
