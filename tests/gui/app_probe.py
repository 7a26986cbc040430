"""Start the real desktop app (``gui.app.main``) in a child process, for crash-log tests.

    python -m tests.gui.app_probe DB run     the app, until killed
    python -m tests.gui.app_probe DB probe   the app; print what its start showed as JSON
                                             (the crash dialog's text and log), then quit

No worker is started (``spawn_workers=False``); Qt runs offscreen.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from desktop_agent.gui.app import create_app, main
from desktop_agent.gui.dialogs.crash import CrashReportDialog


def _report() -> None:
    dialogs = [w for w in QApplication.topLevelWidgets() if isinstance(w, CrashReportDialog)]
    shown = [d for d in dialogs if d.isVisible()]
    found = None
    if shown:
        d = shown[0]
        found = {
            "text": d.text.text(),
            "log": d.log_view.toPlainText() if d.log_view is not None else None,
            "open_folder": d.open_folder is not None,
        }
    print(json.dumps({"dialog": found}), flush=True)
    QApplication.quit()


if __name__ == "__main__":
    db, mode = Path(sys.argv[1]), sys.argv[2]
    app = create_app()
    if mode == "probe":
        QTimer.singleShot(0, _report)  # runs once the event loop starts, after the window
    else:
        print("started", flush=True)
    sys.exit(main(db, spawn_workers=False))
