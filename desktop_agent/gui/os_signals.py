"""SIGTERM and SIGINT end the app the way closing it does, not as a crash.

A logout, a shutdown, ``kill`` or Ctrl+C in the terminal sends the app a signal. Python's
default for SIGTERM ends the process on the spot: the window never shut down, the session
marker stayed, and the next launch reported a crash that never happened. Python runs a
signal handler only between bytecodes, and Qt's event loop waits in C++, so the handler
cannot simply call ``quit()``: the signal is written to a socket (``signal.set_wakeup_fd``)
that a ``QSocketNotifier`` watches, and the event loop quits when it turns readable. The
worker keeps running, as it does when the window is closed.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from types import FrameType

from PySide6.QtCore import QSocketNotifier
from PySide6.QtWidgets import QApplication

log = logging.getLogger(__name__)

HANDLED = (signal.SIGTERM, signal.SIGINT)


def _note(_signum: int, _frame: FrameType | None) -> None:
    """The Python-level handler: nothing to do here, the wake-up socket carries the signal."""


@contextlib.contextmanager
def quit_on_termination(app: QApplication) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT quit ``app``'s event loop (``exec`` returns 0).

    Outside the main thread (where Python allows no signal handlers) it does nothing. The
    previous handlers and wake-up descriptor are restored on the way out.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read)

    def on_readable() -> None:
        with contextlib.suppress(OSError):
            got = reader.recv(64)
            names = ", ".join(signal.Signals(b).name for b in got if b in set(HANDLED))
            log.info("%s received: quitting", names or "a signal")
        # exit(), not quit(): quit() first asks every window to close, and the main window
        # asks the analyst before closing while runs go on; nobody answers at a logout.
        app.exit(0)

    notifier.activated.connect(on_readable)
    previous_fd = signal.set_wakeup_fd(writer.fileno())
    previous = {s: signal.signal(s, _note) for s in HANDLED}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        signal.set_wakeup_fd(previous_fd)
        notifier.setEnabled(False)
        notifier.deleteLater()
        reader.close()
        writer.close()
