"""Open the main window on an offscreen screen of a given size; print its layout as JSON.

    python -m tests.gui.layout_probe DB WIDTH HEIGHT

The screen is the offscreen platform's, configured to ``WIDTH``×``HEIGHT``; the window
opens as the app opens it the first time (or as ``layout.ini`` beside ``DB`` says).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path


def _screen(width: int, height: int) -> None:
    """Configure the offscreen platform's one screen (before any QApplication)."""
    config = Path(tempfile.mkdtemp(prefix="offscreen-")) / "screen.json"
    screen = {"name": "probe", "x": 0, "y": 0, "width": width, "height": height}
    config.write_text(json.dumps({"screens": [{**screen, "logicalDpi": 96, "dpr": 1}]}))
    os.environ["QT_QPA_PLATFORM"] = f"offscreen:configfile={config}"


def main(db: Path, width: int, height: int) -> None:
    """Open the window, let it settle, print what it shows, close it."""
    _screen(width, height)
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from desktop_agent.client.api import Client
    from desktop_agent.gui.mainwindow import MainWindow

    app = QApplication([])
    client = Client(db)
    window = MainWindow(client, spawn_workers=False, poll_ms=50)
    window.show()
    loop = QEventLoop()
    QTimer.singleShot(1500, loop.quit)  # the first polls fill the list
    loop.exec()
    table = window.run_list.table
    header = table.horizontalHeader()
    row_height = table.verticalHeader().defaultSectionSize()
    frame = window.frameGeometry()
    avail = app.primaryScreen().availableGeometry()
    print(
        json.dumps(
            {
                "available": [avail.x(), avail.y(), avail.width(), avail.height()],
                "frame": [frame.x(), frame.y(), frame.width(), frame.height()],
                "rows_visible": table.viewport().height() // row_height,
                "rows": table.model().rowCount(),
                "split": window.split.sizes(),
                "orientation": window.split.orientation().name,
                "columns_shown": [
                    str(table.model().headerData(c, header.orientation()))
                    for c in range(header.count())
                    if not header.isSectionHidden(c)
                ],
                "first_goal": str(table.model().index(0, 1).data()),
            }
        ),
        flush=True,
    )
    window.shutdown()
    window.close()
    client.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
