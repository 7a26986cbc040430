"""The time-axis view in the run pane: spans on lanes, click to inspect, fit, zoom, growth."""

from __future__ import annotations

import gc
import os
import sys
import threading
import tracemalloc

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.timeaxis import Lane, SpanState
from desktop_agent.domain import RunStatus, StepKind
from desktop_agent.engine.ports import RunPatch
from desktop_agent.gui import theme
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.widgets.timeaxis import TimeAxisView
from tests.gui.conftest import select
from tests.helpers.timed_journal import (
    Clock,
    model_call,
    timed_store,
    tool_call,
    write_afternoon,
)

START = 1_790_000_000.0


def _open(qtbot: QtBot, window: MainWindow, client: Client, *, finish: bool = True) -> str:
    run = client.start_run("An afternoon's research", model="demo")
    last = write_afternoon(client, run.id, Clock(START), finish=finish)
    window.resize(1400, 900)
    select(qtbot, window, run.id)
    view = window.detail.timeaxis.view
    qtbot.waitUntil(lambda: len(view.axis) == last)
    return run.id


def _view(window: MainWindow) -> TimeAxisView:
    return window.detail.timeaxis.view


def test_the_view_shows_the_runs_spans_on_lanes(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    _open(qtbot, window, client)
    view = _view(window)
    assert window.detail.timeaxis.isVisible()
    shown = view._lanes
    for lane in (Lane.MODEL, Lane.TOOLS, Lane.APPROVAL, Lane.TIMER, Lane.RATE_LIMIT):
        assert lane in shown
    assert Lane.HIBERNATION in shown and Lane.BUDGET not in shown
    assert [s.seq for s in view.axis.spans(Lane.APPROVAL)] == [7]
    assert view.axis.spans(Lane.RATE_LIMIT)[0].end == view.axis.spans(Lane.MODEL)[4].start
    states = {s.seq: s.state for s in view.axis.spans(Lane.MODEL)}
    assert states[9] == SpanState.RETRIED and states[12] == SpanState.SALVAGED
    # The approval's bar is painted in the approval colour (pale: it is a wait).
    image = view.grab().toImage()
    at = view.bar_center(7, Lane.APPROVAL)
    assert at is not None
    painted = QColor(image.pixel(at))
    expected = theme.kind_color(StepKind.APPROVAL, view.palette())
    assert painted.hue() == expected.hue() or abs(painted.hue() - expected.hue()) < 12


def test_clicking_a_bar_selects_its_step_in_the_list_and_inspector(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    _open(qtbot, window, client)
    view = _view(window)
    step = view.axis.entry(8)  # write_file, right after the approval
    assert step is not None and step.finished_at is not None
    view.set_range(step.started_at - 5, step.finished_at + 5)
    at = view.bar_center(8, Lane.TOOLS)
    assert at is not None
    with qtbot.waitSignal(view.step_clicked) as clicked:
        QTest.mouseClick(view, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
    assert clicked.args == [8]
    current = window.detail.current_entry()
    assert current is not None and current.seq == 8
    assert window.detail.inspector.entry is not None
    assert window.detail.inspector.entry.seq == 8
    # ... and a row selected in the list is outlined on the axis.
    window.detail.select_step(3)
    assert view.selected_seq == 3


def test_fit_zoom_and_a_selection_change_the_visible_range(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    _open(qtbot, window, client)
    view = _view(window)
    whole = view.visible_range()
    assert whole is not None and view.fitted
    assert whole[0] <= START and whole[1] >= START + 2900
    view.setFocus()
    QTest.keyClick(view, Qt.Key.Key_Plus)
    zoomed = view.visible_range()
    assert zoomed is not None and zoomed[1] - zoomed[0] < whole[1] - whole[0]
    # The wheel zooms around the pointer: the time under it stays where it was.
    plot = view._plot_rect()
    x = plot.left() + plot.width() // 4
    before = view._time_at(x, zoomed)
    wheel = QWheelEvent(
        QPointF(x, plot.center().y()),
        QPointF(view.mapToGlobal(QPoint(x, plot.center().y()))),
        QPoint(0, 0),
        QPoint(0, 240),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(view, wheel)
    wheeled = view.visible_range()
    assert wheeled is not None and wheeled[1] - wheeled[0] < zoomed[1] - zoomed[0]
    assert abs(view._time_at(x, wheeled) - before) < (wheeled[1] - wheeled[0]) / 100
    # Shift+drag zooms to the range dragged over.
    view.fit()
    y = plot.center().y()
    left, right = plot.left() + 100, plot.left() + 300
    expect = (view._time_at(left, whole), view._time_at(right, whole))
    QTest.mousePress(
        view, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier, QPoint(left, y)
    )
    QTest.mouseMove(view, QPoint(right, y))
    QTest.mouseRelease(
        view, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ShiftModifier, QPoint(right, y)
    )
    selected = view.visible_range()
    assert selected is not None and not _fitted(view)
    assert abs(selected[0] - expect[0]) < 1 and abs(selected[1] - expect[1]) < 1
    # A plain drag pans: the range moves, its length stays.
    none = Qt.KeyboardModifier.NoModifier
    QTest.mousePress(view, Qt.MouseButton.LeftButton, none, QPoint(right, y))
    QTest.mouseMove(view, QPoint(left, y))
    QTest.mouseRelease(view, Qt.MouseButton.LeftButton, none, QPoint(left, y))
    panned = view.visible_range()
    assert panned is not None and panned[0] > selected[0]
    assert abs((panned[1] - panned[0]) - (selected[1] - selected[0])) < 1e-6
    # Fit (the button, or F) shows the whole run again.
    QTest.mouseClick(window.detail.timeaxis.fit_button, Qt.MouseButton.LeftButton)
    assert view.fitted and view.visible_range() == whole
    view.set_range(START, START + 10)
    QTest.keyClick(view, Qt.Key.Key_F)
    assert view.fitted


def test_a_growing_run_extends_the_view(qtbot: QtBot, window: MainWindow, client: Client) -> None:
    run_id = _open(qtbot, window, client, finish=False)
    view = _view(window)
    first = view.visible_range()
    assert first is not None
    clock = Clock(START + 4000)
    store = timed_store(client, clock)
    store.commit(run_id, patch=RunPatch(status=RunStatus.RUNNING))
    model_call(store, clock, run_id, 18, 30.0)
    tool_call(store, clock, run_id, 19, "read_file", 5.0)
    qtbot.waitUntil(lambda: len(view.axis) == 19)
    grown = view.visible_range()
    assert grown is not None and grown[1] >= START + 4035 > first[1]
    assert view.axis.spans(Lane.TOOLS)[-1].seq == 19


def test_the_duration_chart_leaves_waits_out_unless_asked(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    _open(qtbot, window, client)
    charts = window.detail.charts
    window.detail.inspector.setCurrentWidget(charts)
    qtbot.waitUntil(lambda: len(charts.durations.all_entries) == 18)
    kinds = {e.kind for e in charts.durations.entries}
    assert StepKind.APPROVAL not in kinds and StepKind.SLEEP not in kinds
    assert StepKind.MODEL_CALL in kinds
    assert not charts.include_waits.isChecked()
    charts.include_waits.setChecked(True)
    kinds = {e.kind for e in charts.durations.entries}
    assert {StepKind.APPROVAL, StepKind.SLEEP, StepKind.QUESTION} <= kinds


def _fitted(view: TimeAxisView) -> bool:
    return view.fitted


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_thousands_of_repaints_of_a_growing_run_hold_nothing(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    run_id = _open(qtbot, window, client, finish=False)
    view = _view(window)
    clock = Clock(START + 4000)
    store = timed_store(client, clock)
    seq = 18

    def grow(n: int) -> None:
        nonlocal seq
        for _ in range(n):
            model_call(store, clock, run_id, seq, 2.0)
            seq += 1
        target = seq - 1
        qtbot.waitUntil(lambda: len(view.axis) == target)

    for _ in range(20):  # warm up font, glyph and style caches
        view.grab()
    grow(5)
    gc.collect()
    tracemalloc.start()
    mem_before = tracemalloc.get_traced_memory()[0]
    none_before = sys.getrefcount(None)
    axis_before = sys.getrefcount(view.axis)
    axis_id = id(view.axis)
    threads_before, fds_before = threading.active_count(), _fds()
    for i in range(2000):
        if i % 200 == 0:
            grow(2)
        if i % 100 == 0:
            view.zoom(1.1 if (i // 100) % 2 else 1 / 1.1)
        view.repaint()
    gc.collect()
    none_after, axis_after = sys.getrefcount(None), sys.getrefcount(view.axis)
    grew = tracemalloc.get_traced_memory()[0] - mem_before
    tracemalloc.stop()
    assert none_after >= none_before - 400
    # Counted before any assert: pytest's rewritten asserts hold their operands.
    assert id(view.axis) == axis_id  # the same data, still referenced only by the view
    assert axis_after == axis_before
    assert threading.active_count() == threads_before
    assert _fds() <= fds_before + 2
    # 20 new steps and their spans are a few kilobytes each; repaints must add nothing.
    assert grew < 400_000, f"{grew} bytes held after 2,000 repaints"


def test_at_fit_repeated_calls_read_as_one_block_and_ticks_as_time_since_the_start(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    """270 reads in a row, then one long model call: at Fit, "270 × read_file", "+1h"."""
    run = client.start_run("Read the whole archive", model="demo")
    clock = Clock(START)
    store = timed_store(client, clock)
    seq = 1
    model_call(store, clock, run.id, seq, 5.0)
    for _ in range(270):
        seq += 1
        tool_call(store, clock, run.id, seq, "read_file", 2.0)
        clock.advance(1.0)
    seq += 1
    model_call(store, clock, run.id, seq, 45 * 60.0)  # a long final turn
    window.resize(1400, 900)
    select(qtbot, window, run.id)
    view = _view(window)
    qtbot.waitUntil(lambda: len(view.axis) == seq)
    view.fit()
    view.grab()  # paint once, as the screen would
    assert "270 × read_file" in view.drawn_labels.get(Lane.TOOLS, [])
    model_labels = view.drawn_labels.get(Lane.MODEL, [])
    assert any(label.endswith("· 45m") for label in model_labels), model_labels
    assert view.tick_labels and view.tick_labels[0] == "0"
    assert all(label == "0" or label.startswith("+") for label in view.tick_labels)
    assert "+1h" in view.tick_labels or "+30m" in view.tick_labels, view.tick_labels


def test_the_lanes_share_the_pane_s_height(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    _open(qtbot, window, client)
    view = _view(window)
    base = view._base_lane_height()
    view.resize(view.width(), view.minimumSizeHint().height())
    assert view._lane_height() == base
    view.resize(view.width(), view.minimumSizeHint().height() + 40 * len(view._lanes))
    assert view._lane_height() > base  # more room: taller lanes, not empty space below
