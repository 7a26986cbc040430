"""A run on a time axis: lanes of spans (model calls, tools, waits, hibernation), zoomable.

The view paints a :class:`~desktop_agent.client.timeaxis.TimeAxis` with QPainter. Only the
visible range is painted, and each lane asks the time axis for its spans already reduced to
about one bar per pixel column, so a repaint costs what the view is wide, whatever the
number of steps. Colours, pens and brushes are made once per palette and reused: a repaint
allocates nothing that grows with the run (a lesson of the timeline's delegate, whose
per-paint pens were what hours of repainting were made of). They, and how bars, ticks and
block labels are painted, are in :mod:`.timeaxis_paint`.

Mouse: the wheel zooms around the pointer, a drag pans, a drag with Shift (or with the right
button) zooms to the range dragged over, a click selects the step under the pointer
(:attr:`TimeAxisView.step_clicked`), and F (or the Fit button) fits the whole run, which then
keeps fitting as a live run grows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QSize, Qt, Signal, Slot
from PySide6.QtGui import (
    QFontMetrics,
    QHelpEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.timeaxis import LANES, Lane, Span, TimeAxis
from desktop_agent.client.views import StepEntry
from desktop_agent.gui import fmt
from desktop_agent.gui.widgets.timeaxis_paint import (
    STATE_TEXT,
    Paints,
    paint_bar,
    paint_groups,
    paint_ticks,
)

ALWAYS_SHOWN = (Lane.MODEL, Lane.TOOLS)
"""Lanes shown even while empty (the others appear once they have a span)."""

_MIN_SPAN_S = 0.002
"""The narrowest range the view zooms to (a couple of milliseconds)."""

_DRAG_PX = 4
"""A press that moves less than this is a click, not a drag."""


class TimeAxisView(QWidget):
    """The spans of a run on lanes under a time axis.

    Args:
        parent: owner.

    Signals:
        step_clicked: the analyst clicked a bar (the step's seq).
        range_changed: the visible range changed (first and last second shown).
    """

    step_clicked = Signal(int)
    range_changed = Signal(float, float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setMouseTracking(False)
        self.axis = TimeAxis()
        self.selected_seq: int | None = None
        self._range: tuple[float, float] | None = None
        """The visible range; None fits the run (and keeps fitting it as it grows)."""
        self._lanes: tuple[Lane, ...] = ALWAYS_SHOWN
        self._paints: Paints | None = None
        self._press: QPoint | None = None
        self._press_range: tuple[float, float] | None = None
        self._band: tuple[int, int] | None = None
        self._banding = False
        self._clock = time.time
        self.drawn_labels: dict[Lane, list[str]] = {}
        """The block labels the last paint drew, per lane ("270 × read_file")."""
        self.tick_labels: list[str] = []
        """The tick labels the last paint drew (time since the run began)."""

    # ------------------------------------------------------------------ data

    def set_entries(
        self, entries: Iterable[StepEntry], *, live: bool, keep_range: bool = False
    ) -> None:
        """Show another run (fitted), or the same one read again (``keep_range``)."""
        self.axis = TimeAxis(entries, live=live)
        if not keep_range:
            self._range = None
            self.selected_seq = None
        self._relayout()

    def update_entries(self, entries: Iterable[StepEntry]) -> None:
        """Take new and changed steps of the shown run."""
        self.axis.update(entries)
        self._relayout()

    def set_live(self, live: bool) -> None:
        """The run started or stopped working."""
        if live != self.axis.live:
            self.axis.set_live(live)
            self.update()

    def set_selected(self, seq: int | None) -> None:
        """Outline step ``seq`` (selected in the list)."""
        if seq != self.selected_seq:
            self.selected_seq = seq
            self.update()

    def tick(self) -> None:
        """Once a second: open spans grow with the clock."""
        if self.axis.has_open() and self.isVisible():
            self.update()

    def _relayout(self) -> None:
        lanes = tuple(x for x in LANES if x in ALWAYS_SHOWN or self.axis.spans(x))
        if lanes != self._lanes:
            self._lanes = lanes
            self.updateGeometry()
        self.update()

    # ------------------------------------------------------------------ range

    def visible_range(self) -> tuple[float, float] | None:
        """The first and last second shown (None before the run has a step)."""
        if self._range is not None:
            return self._range
        extent = self.axis.extent(self._clock())
        if extent is None:
            return None
        t0, t1 = extent
        pad = max(_MIN_SPAN_S, (t1 - t0) * 0.02)
        return t0 - pad / 4, t1 + pad

    @property
    def fitted(self) -> bool:
        """Whether the view fits the whole run (and follows its growth)."""
        return self._range is None

    def fit(self) -> None:
        """Show the whole run (and keep showing all of it while it grows)."""
        self._range = None
        self._emit_range()
        self.update()

    def set_range(self, t0: float, t1: float) -> None:
        """Show [t0, t1] (at least a couple of milliseconds)."""
        if t1 - t0 < _MIN_SPAN_S:
            mid = (t0 + t1) / 2
            t0, t1 = mid - _MIN_SPAN_S / 2, mid + _MIN_SPAN_S / 2
        self._range = (t0, t1)
        self._emit_range()
        self.update()

    def zoom(self, factor: float, x: float | None = None) -> None:
        """Zoom by ``factor`` (above 1 zooms in) around pixel ``x`` (the middle if None)."""
        shown = self.visible_range()
        if shown is None:
            return
        t0, t1 = shown
        plot = self._plot_rect()
        at = self._time_at(x if x is not None else plot.center().x(), shown)
        self.set_range(at - (at - t0) / factor, at + (t1 - at) / factor)

    def _emit_range(self) -> None:
        shown = self.visible_range()
        if shown is not None:
            self.range_changed.emit(*shown)

    # ------------------------------------------------------------------ geometry

    def _base_lane_height(self) -> int:
        return QFontMetrics(self.font()).height() + 8

    def _lane_height(self) -> int:
        """Lanes share the pane's height (up to three times a line each), never less."""
        base = self._base_lane_height()
        axis_h = QFontMetrics(self.font()).height() + 10
        room = (self.height() - axis_h - 4) // max(1, len(self._lanes))
        return max(base, min(room, 3 * base))

    def _label_width(self) -> int:
        fm = QFontMetrics(self.font())
        return max(fm.horizontalAdvance(x.label) for x in LANES) + 14

    def _plot_rect(self) -> QRect:
        axis_h = QFontMetrics(self.font()).height() + 10
        left = self._label_width()
        return QRect(left, axis_h, max(10, self.width() - left - 8), self.height() - axis_h)

    def _time_at(self, x: float, shown: tuple[float, float]) -> float:
        plot = self._plot_rect()
        t0, t1 = shown
        return t0 + (x - plot.left()) * (t1 - t0) / max(1, plot.width())

    def _lane_at(self, y: float) -> Lane | None:
        plot = self._plot_rect()
        i = int((y - plot.top()) // self._lane_height())
        return self._lanes[i] if 0 <= i < len(self._lanes) and y >= plot.top() else None

    def span_at(self, pos: QPoint | QPointF) -> Span | None:
        """The span under a point of the widget, if any (a few pixels of slack)."""
        shown = self.visible_range()
        lane = self._lane_at(pos.y())
        if shown is None or lane is None or pos.x() < self._plot_rect().left():
            return None
        per_px = (shown[1] - shown[0]) / max(1, self._plot_rect().width())
        return self.axis.span_at(lane, self._time_at(pos.x(), shown), 3 * per_px, self._clock())

    def bar_center(self, seq: int, lane: Lane | None = None) -> QPoint | None:
        """Where the bar of step ``seq`` is drawn (for tests and keyboard use), if shown."""
        shown = self.visible_range()
        plot = self._plot_rect()
        for i, shown_lane in enumerate(self._lanes):
            if lane is not None and shown_lane != lane:
                continue
            for span in self.axis.spans(shown_lane):
                if span.seq != seq:
                    continue
                t0, t1 = shown or (0.0, 1.0)
                mid = (span.start + span.end_at(self._clock())) / 2
                x = plot.left() + (mid - t0) * plot.width() / (t1 - t0)
                y = plot.top() + i * self._lane_height() + self._lane_height() // 2
                if plot.left() <= x <= plot.right():
                    return QPoint(int(x), y)
        return None

    def sizeHint(self) -> QSize:
        """Tall enough for every shown lane."""
        return QSize(600, self.minimumSizeHint().height() + self._base_lane_height())

    def minimumSizeHint(self) -> QSize:
        """Every shown lane under the axis."""
        axis_h = QFontMetrics(self.font()).height() + 10
        return QSize(300, axis_h + self._base_lane_height() * len(self._lanes) + 4)

    # ------------------------------------------------------------------ painting

    def changeEvent(self, event: QEvent) -> None:
        """A new palette (light/dark switch) makes new colours."""
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._paints = None
            self.update()
        super().changeEvent(event)

    def refresh_colors(self) -> None:
        """Make the colours again from the current palette."""
        self._paints = None
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        """Lanes, axis and the visible spans, one bar per pixel column at most."""
        if self._paints is None:
            self._paints = Paints(self.palette())
        p = self._paints
        painter = QPainter(self)
        try:
            self._paint(painter, p)
        finally:
            painter.end()

    def _paint(self, painter: QPainter, p: Paints) -> None:
        fm = QFontMetrics(self.font())
        plot = self._plot_rect()
        lane_h = self._lane_height()
        shown = self.visible_range()
        for i, lane in enumerate(self._lanes):
            top = plot.top() + i * lane_h
            if i % 2:
                painter.fillRect(QRect(0, top, self.width(), lane_h), p.alt)
            painter.setPen(p.muted if lane.is_wait or lane == Lane.HIBERNATION else p.text)
            painter.drawText(
                QRect(6, top, plot.left() - 10, lane_h),
                int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                lane.label,
            )
        if shown is None:
            painter.setPen(p.muted)
            painter.drawText(
                plot, Qt.AlignmentFlag.AlignCenter, "The run's steps appear here on a time axis."
            )
            return
        t0, t1 = shown
        # Ticks read as time since the run began, on round steps from its start.
        extent = self.axis.extent(self._clock())
        origin = extent[0] if extent is not None else t0
        self.tick_labels = paint_ticks(
            painter, p, fm, plot, (t0, t1), origin, self.width(), self.height()
        )
        now = self._clock()
        width = plot.width()
        painter.setClipRect(QRect(plot.left(), plot.top(), width + 1, plot.height()))
        self.drawn_labels = {}
        for i, lane in enumerate(self._lanes):
            top = plot.top() + i * lane_h + 3
            bars = self.axis.bars(lane, t0, t1, width, now)
            for bar in bars:
                paint_bar(painter, p, lane, bar, plot.left(), top, lane_h - 6, self.selected_seq)
            if lane in (Lane.MODEL, Lane.TOOLS):
                rect = QRect(plot.left(), top, width, lane_h - 6)
                self.drawn_labels[lane] = paint_groups(
                    painter, p, fm, self.axis, lane, bars, rect, (t0, t1), now
                )
        if self._band is not None:
            a, b = sorted(self._band)
            painter.fillRect(QRect(a, plot.top(), max(1, b - a), plot.height()), p.band)

    # ------------------------------------------------------------------ input

    def wheelEvent(self, event: QWheelEvent) -> None:
        """Zoom around the pointer."""
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom(1.25**steps, event.position().x())
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        """Start a click, a pan or (Shift or right button) a selection to zoom to."""
        self._press = event.position().toPoint()
        self._press_range = self.visible_range()
        self._banding = event.button() == Qt.MouseButton.RightButton or bool(
            event.modifiers() & Qt.KeyboardModifier.ShiftModifier
        )
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        """Pan, or draw the selection."""
        if self._press is None or self._press_range is None:
            return
        pos = event.position().toPoint()
        if self._banding:
            plot = self._plot_rect()
            x = max(plot.left(), min(plot.right(), pos.x()))
            self._band = (max(plot.left(), self._press.x()), x)
            self.update()
            return
        dx = pos.x() - self._press.x()
        if abs(dx) < _DRAG_PX and self._range is None:
            return
        t0, t1 = self._press_range
        dt = dx * (t1 - t0) / max(1, self._plot_rect().width())
        self.set_range(t0 - dt, t1 - dt)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        """End the click (select the step), the pan or the selection (zoom to it)."""
        press, band = self._press, self._band
        self._press, self._band, self._press_range = None, None, None
        if press is None:
            return
        pos = event.position().toPoint()
        moved = (pos - press).manhattanLength() >= _DRAG_PX
        shown = self.visible_range()
        if self._banding and band is not None and moved and shown is not None:
            a, b = sorted(band)
            if b - a >= _DRAG_PX:
                self.set_range(self._time_at(a, shown), self._time_at(b, shown))
            self.update()
            return
        if not moved:
            span = self.span_at(pos)
            if span is not None:
                self.set_selected(span.seq)
                self.step_clicked.emit(span.seq)
        self.update()

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        """Double-click zooms in around the pointer."""
        self.zoom(2.0, event.position().x())

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """F fits the run; + and - zoom."""
        key = event.key()
        if key == Qt.Key.Key_F:
            self.fit()
        elif key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom(1.5)
        elif key == Qt.Key.Key_Minus:
            self.zoom(1 / 1.5)
        else:
            super().keyPressEvent(event)

    def event(self, event: QEvent) -> bool:
        """Tooltips: what the bar under the pointer is."""
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            span = self.span_at(event.pos())
            if span is None:
                QToolTip.hideText()
                event.ignore()
            else:
                QToolTip.showText(event.globalPos(), self.describe(span), self)
            return True
        return super().event(event)

    def describe(self, span: Span) -> str:
        """The tooltip of a span: what, which step, when, how long, how it ended."""
        end = span.end_at(self._clock())
        took = fmt.short_duration(end - span.start)
        lines = [f"{span.label} (step {span.seq})"]
        if span.attempt > 1:
            lines[0] += f", attempt {span.attempt}"
        lines.append(f"{fmt.clock(span.start)}, {'for ' if span.end is None else ''}{took}")
        lines.append(STATE_TEXT[span.state])
        return "\n".join(line for line in lines if line)


class TimeAxisPanel(QWidget):
    """The time-axis view with its title, a hint and the Fit button.

    Args:
        parent: owner.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view = TimeAxisView(self)
        self.title = QLabel("<b>Time axis</b>", self)
        self.hint = QLabel(
            "time since the run began · wheel: zoom · drag: pan · Shift+drag: zoom to a range · "
            "click: inspect",
            self,
        )
        self.hint.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.fit_button = QToolButton(self)
        self.fit_button.setText("Fit")
        self.fit_button.setToolTip("Show the whole run (F)")
        self.fit_button.clicked.connect(self._on_fit_clicked)
        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.title)
        bar.addWidget(self.hint, 1)
        bar.addWidget(self.fit_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.view, 1)

    @Slot()
    def _on_fit_clicked(self) -> None:
        self.view.fit()
