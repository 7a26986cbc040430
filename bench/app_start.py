"""Child process of ``bench/startup.py --app``: the app's cold start, up to its filled run list.

Usage (by ``startup.py``, in a fresh process per sample)::

    python bench/app_start.py DB EXPECTED_RUNS

Starts the desktop app the way ``desktop-agent`` does (the CLI's parser, then
``desktop_agent.gui.app.main``), without starting a worker (``spawn_workers=False``:
the app would otherwise start one when none is alive). A timer of this driver (every 2 ms
of the app's event loop) watches for the main window: shown, its first poll delivered
(``LivePoller.polls``), and its run list holding ``min(EXPECTED_RUNS, rows)`` rows. Then it
prints one line, ``filled ROWS IMPORTS_S SHOWN_S FILLED_S HEAVY`` (seconds since this
script started: the imports done, the window first seen visible, the list filled; the heavy
libraries loaded by then), and ends the event loop (``exit``, which asks nothing: the
window would ask about waiting runs on a close), after which the app shuts down as usual.
Nothing of the app is changed for this.
"""

from __future__ import annotations

import sys
import time

START = time.perf_counter()

from pathlib import Path  # noqa: E402

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QWidget  # noqa: E402

from desktop_agent.cli.commands import build_parser  # noqa: E402
from desktop_agent.gui import app as gui_app  # noqa: E402

HEAVY = ("sqlalchemy", "alembic", "anthropic", "httpx2", "mcp", "keyring", "apscheduler")


def main() -> int:
    """Start the app on ``argv[1]``; quit it once its run list is filled."""
    db, expected = Path(sys.argv[1]), int(sys.argv[2])
    build_parser().parse_args(["--db", str(db)])  # as `desktop-agent --db DB` does first
    imported = time.perf_counter() - START
    app = gui_app.create_app()
    marks: dict[str, float] = {}

    def window() -> QWidget | None:
        for widget in app.topLevelWidgets():
            if type(widget).__name__ == "MainWindow" and widget.isVisible():
                return widget
        return None

    def check() -> None:
        win = window()
        if win is None:
            return
        marks.setdefault("shown", time.perf_counter() - START)
        poller = getattr(win, "poller", None)
        model = getattr(win, "runs_model", None)
        if poller is None or model is None or poller.polls < 1:
            return
        rows = model.rowCount()
        if rows < expected:
            return
        filled = time.perf_counter() - START
        heavy = ",".join(h for h in HEAVY if h in sys.modules) or "-"
        print(
            f"filled {rows} {imported:.4f} {marks['shown']:.4f} {filled:.4f} {heavy}",
            flush=True,
        )
        timer.stop()
        app.exit(0)  # not quit(): no close event, so no question about waiting runs

    timer = QTimer()
    timer.setInterval(2)
    timer.timeout.connect(check)
    timer.start()
    return gui_app.main(db, spawn_workers=False)


if __name__ == "__main__":
    sys.exit(main())
