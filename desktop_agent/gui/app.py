"""Start the desktop app: ``desktop-agent`` with no arguments calls :func:`main`."""

from __future__ import annotations

import gc
import logging
import sys
import traceback
from functools import partial
from pathlib import Path
from types import TracebackType

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox, QSystemTrayIcon

from desktop_agent import config
from desktop_agent.client.api import Client
from desktop_agent.crashlog import AppSession
from desktop_agent.domain.errors import DesktopAgentError, KnownError, plain_error
from desktop_agent.gui import resources
from desktop_agent.gui.os_signals import quit_on_termination
from desktop_agent.gui.palette import apply_palette
from desktop_agent.gui.single_instance import SingleInstance, bring_to_front

log = logging.getLogger(__name__)


def _install_excepthook(app: QApplication) -> None:
    """Show unexpected errors in a dialog instead of losing them (or crashing)."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            previous(kind, exc, tb)
            return
        log.error("unexpected error", exc_info=(kind, exc, tb))
        if isinstance(exc, KnownError):
            text, details = str(exc), ""
        else:
            text = (
                "Something went wrong inside desktop-agent: "
                f"{plain_error(exc, 'an unexpected error')} "
                "(the details below are for a bug report)"
            )
            details = "".join(traceback.format_exception(kind, exc, tb))
        box = QMessageBox(QMessageBox.Icon.Critical, "desktop-agent", text)
        if details:
            box.setDetailedText(details)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    sys.excepthook = hook


def create_app(argv: list[str] | None = None) -> QApplication:
    """The QApplication (the existing one, if any)."""
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    # Database reads run in Python worker threads. Each time the GUI thread calls back into
    # Python (a model's data(), a delegate's paint) it must win the GIL back from them;
    # the default 5 ms switch interval makes a busy reader stall painting in steps of
    # 5 ms. 1 ms keeps the window responsive at a negligible cost in throughput.
    sys.setswitchinterval(0.001)
    app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("desktop-agent")
    app.setApplicationDisplayName("desktop-agent")
    # The desktop entry's id: Wayland compositors match the window to its launcher by it.
    app.setDesktopFileName("io.desktopagent.DesktopAgent")
    app.setWindowIcon(resources.app_icon())
    return app


def settle_memory() -> None:
    """Exempt the objects made at start-up from garbage collection passes.

    A full collection walks every tracked object; with the hundred thousand made by
    imports and the window it took 60-100 ms here, on whichever thread allocated at the
    wrong time, and the GUI stalled with it. Long-lived start-up objects never become
    garbage, so they are frozen out of the walk (as the ``gc.freeze`` docs describe).
    """
    gc.collect()
    gc.freeze()


def main(db_path: Path, *, spawn_workers: bool = True) -> int:
    """Open the database at ``db_path`` and run the app until it quits; returns the exit code.

    When an app already runs on the same data folder, it is brought to the front instead
    and this one exits with 0 after saying so on stderr.
    """
    app = create_app()
    folder = db_path.expanduser().absolute().parent
    instance = SingleInstance(folder)
    # Before the session marker: a launch that only brings the running app to the front
    # must neither write a marker nor consume the markers its crash report is made of.
    claimed = instance.claim()
    for notice in instance.notices:  # what was wrong with the name; this launch goes on
        print(f"desktop-agent: {notice}", file=sys.stderr, flush=True)
    if not claimed:  # only when this user's app on this folder answered
        print(
            f"desktop-agent is already running for {folder}; brought its window to the front",
            file=sys.stderr,
            flush=True,
        )
        return 0
    try:
        with quit_on_termination(app):  # a logout or `kill` ends the session, not a crash
            return _run(app, db_path, instance, spawn_workers=spawn_workers)
    finally:
        instance.close()


def _run(app: QApplication, db_path: Path, instance: SingleInstance, *, spawn_workers: bool) -> int:
    """The app's session: the window over the database, until the app quits."""
    from desktop_agent.gui.mainwindow import MainWindow

    # First of all, so that a fatal error anywhere after this leaves its traceback.
    session = AppSession(config.log_dir(db_path))
    previous = session.start()
    try:
        _install_excepthook(app)
        try:
            client = Client(db_path)
        except DesktopAgentError as exc:
            QMessageBox.critical(None, "desktop-agent", f"Cannot open the data folder: {exc}")
            return 2
        # With a tray icon the app lives on after the window closes; "Quit everything" ends it.
        app.setQuitOnLastWindowClosed(not QSystemTrayIcon.isSystemTrayAvailable())
        if client.settings.palette != "system":  # the system's is what Qt starts with
            apply_palette(client.settings.palette)
        window = MainWindow(client, spawn_workers=spawn_workers)
        instance.activate_requested.connect(partial(bring_to_front, window))
        window.show()
        if previous is not None:
            window.show_previous_crash(previous)
        settle_memory()
        try:
            return app.exec()
        finally:
            window.shutdown()
            client.close()
    finally:
        session.close()
