"""The run list is the analyst's home: its height, its place, and what it remembers.

The window is opened in child processes on offscreen screens of 1280×800, 1366×768 and
1920×1080 (the first-time layout), and in this process for what is remembered between
two windows on the same data folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.gui.layout import FILE_NAME, first_geometry, on_a_screen
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models.runs import RunColumn
from tests.gui.conftest import OpenWindow, StartWorker, wait_status

REPO = Path(__file__).resolve().parents[2]


def _needs_first(window: MainWindow) -> bool:
    """Whether the list puts the runs that need the analyst first (read anew each time)."""
    return window.run_list.proxy.needs_first


def _probe(db: Path, width: int, height: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.gui.layout_probe", str(db), str(width), str(height)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize(
    ("width", "height", "rows"), [(1280, 800, 12), (1366, 768, 12), (1920, 1080, 20)]
)
def test_the_run_list_gets_the_height_and_the_window_fits_the_screen(
    client: Client, width: int, height: int, rows: int
) -> None:
    for n in range(30):
        client.start_run(f"Goal {n:02d}")
    shown = _probe(client.db_path, width, height)
    ax, ay, aw, ah = shown["available"]
    x, y, w, h = shown["frame"]
    assert ax <= x and ay <= y and x + w <= ax + aw and y + h <= ay + ah, shown
    assert shown["rows_visible"] >= rows, shown
    assert shown["orientation"] == "Horizontal"  # the detail beside the list
    side, detail = shown["split"]
    assert side >= 360 and detail >= 520, shown
    assert {"Status", "Goal"} <= set(shown["columns_shown"])


def test_a_taskbar_s_strip_is_left_free_and_a_lost_window_comes_back(qtbot: QtBot) -> None:
    # A 40-pixel taskbar at the bottom (or a 48-pixel one on the left): the free area.
    for free in (QRect(0, 0, 1366, 728), QRect(48, 0, 1872, 1080), QRect(0, 0, 1280, 760)):
        rect = first_geometry(free)
        assert free.contains(rect), (free, rect)
        assert rect.width() >= 0.9 * min(free.width(), 1600)
    from PySide6.QtGui import QGuiApplication

    screens = QGuiApplication.screens()
    assert on_a_screen(QRect(10, 10, 900, 600), screens)
    assert not on_a_screen(QRect(5000, 4000, 900, 600), screens)  # a screen since unplugged


def test_needs_you_first_until_the_analyst_sorts_and_the_layout_is_remembered(
    qtbot: QtBot,
    open_window: OpenWindow,
    start_worker: StartWorker,
    client: Client,
    demo_ws: Path,
) -> None:
    # The newest run is queued; the older one waits for the analyst.
    start_worker()
    waiting = client.start_run("Waits for you", workspace=str(demo_ws)).id
    window = open_window()
    wait_status(qtbot, window, waiting, RunStatus.WAITING)
    window.shutdown()
    newer = client.start_run("Newer, nothing needed").id
    client.pause(newer)

    window = open_window()
    table = window.run_list.table
    qtbot.waitUntil(lambda: window.runs_model.get(newer) is not None)
    first = table.model().index(0, RunColumn.GOAL).data()
    assert first == "Waits for you"  # needs you: first, though older

    # The analyst sorts by a column: their order from then on.
    header = table.horizontalHeader()
    x = header.sectionViewportPosition(RunColumn.STATUS) + 5  # always shown
    QTest.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, 5))
    assert not _needs_first(window)
    # They hide the model column, and give the list more room.
    window.run_list.show_column(RunColumn.MODEL, False)
    window.split.setSizes([700, 580])
    sizes = window.split.sizes()
    order = (header.sortIndicatorSection(), header.sortIndicatorOrder())
    window.shutdown()
    assert (client.db_path.parent / FILE_NAME).exists()

    again: MainWindow = open_window()
    qtbot.waitUntil(lambda: again.runs_model.get(newer) is not None)
    assert again.layout_memory.restored
    h2 = again.run_list.table.horizontalHeader()
    assert h2.isSectionHidden(RunColumn.MODEL)
    assert not again.run_list.auto_columns
    assert not _needs_first(again)
    assert (h2.sortIndicatorSection(), h2.sortIndicatorOrder()) == order
    assert abs(again.split.sizes()[0] - sizes[0]) <= 2

    # The header's menu brings back the list's own order.
    menu = again.run_list.header_menu()
    action = next(a for a in menu.actions() if a.text().startswith("Order: runs that need"))
    action.trigger()
    assert _needs_first(again)
    assert again.run_list.table.model().index(0, RunColumn.GOAL).data() == "Waits for you"
    menu.close()
