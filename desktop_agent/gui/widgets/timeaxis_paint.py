"""How the time axis paints: colours made once per palette, bars, ticks and block labels.

:class:`~desktop_agent.gui.widgets.timeaxis.TimeAxisView` calls these from its paint event;
nothing here keeps state between repaints apart from :class:`Paints`, made once per palette.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetrics, QPainter, QPalette, QPen

from desktop_agent.client.timeaxis import (
    Bar,
    Lane,
    SpanState,
    TimeAxis,
    elapsed_label,
    group_bars,
    group_label,
    tick_step,
)
from desktop_agent.domain import StepKind, StepStatus
from desktop_agent.gui import fmt, theme


class Paints:
    """Colours, pens and brushes of one palette, made once and reused by every repaint."""

    def __init__(self, palette: QPalette) -> None:
        self.text = palette.color(QPalette.ColorRole.WindowText)
        self.muted = palette.color(QPalette.ColorRole.PlaceholderText)
        self.base = palette.color(QPalette.ColorRole.Base)
        self.alt = palette.color(QPalette.ColorRole.AlternateBase)
        self.grid = QPen(palette.color(QPalette.ColorRole.Mid), 0.6)
        self.warn = theme.warning_color(palette)
        self.failed = theme.step_status_color(StepStatus.FAILED, palette)
        self.highlight = palette.color(QPalette.ColorRole.Highlight)
        self.failed_pen = QPen(self.failed, 1.5)
        self.warn_pen = QPen(self.warn, 1.5)
        self.doubt_pen = QPen(self.warn, 1.5, Qt.PenStyle.DashLine)
        self.selected_pen = QPen(self.highlight, 2.0)
        self.band = QColor(self.highlight)
        self.band.setAlpha(60)
        dark = theme.is_dark(palette)
        self.solid: dict[StepKind, QBrush] = {}
        self.pale: dict[StepKind, QBrush] = {}
        for kind in StepKind:
            color = theme.kind_color(kind, palette)
            self.solid[kind] = QBrush(color)
            pale = QColor(color)
            pale.setAlpha(170 if dark else 110)  # over a dark base, pale reads as muddy
            self.pale[kind] = QBrush(pale)
        rate = QColor(self.warn)
        rate.setAlpha(120)
        self.rate_limit = QBrush(rate)
        sleep = QColor(self.muted)
        sleep.setAlpha(45)
        self.hibernation_fill = QBrush(sleep)
        self.hibernation_hatch = QBrush(self.muted, Qt.BrushStyle.BDiagPattern)
        self.doubt_hatch = QBrush(self.warn, Qt.BrushStyle.BDiagPattern)
        self.on_bar = QColor("#ffffff")  # a block's label, over its solid colour


STATE_TEXT = {
    SpanState.OK: "",
    SpanState.FAILED: "failed",
    SpanState.RETRIED: "failed or interrupted, then tried again",
    SpanState.SALVAGED: "interrupted, then tried again; the interrupted output was kept",
    SpanState.OPEN: "still going",
    SpanState.IN_DOUBT: "started, never finished: in doubt",
}
"""How a span ended, in its tooltip (nothing for one that ended well)."""


def paint_groups(
    painter: QPainter,
    p: Paints,
    fm: QFontMetrics,
    axis: TimeAxis,
    lane: Lane,
    bars: list[Bar],
    rect: QRect,
    shown: tuple[float, float],
    now: float,
) -> list[str]:
    """Label the blocks wide enough: "270 × read_file", or one step's name and time.

    Returns the labels drawn.
    """
    t0, t1 = shown
    per_px = (t1 - t0) / max(1, rect.width())
    labels: list[str] = []
    for group in group_bars(bars):
        room = group.x1 - group.x0 + 1
        if room < fm.horizontalAdvance("00 × x") + 8:
            continue
        start = t0 + group.x0 * per_px
        counts = axis.labels_between(lane, start, t0 + (group.x1 + 1) * per_px)
        text = group_label(counts) if counts else ""
        if sum(counts.values()) == 1:
            span = next((b.span for b in bars if b.x0 == group.x0), None)
            if span is not None:
                text += " · " + fmt.short_duration(span.end_at(now) - span.start)
        if not text or fm.horizontalAdvance(text) + 8 > room:
            continue
        box = QRect(rect.left() + group.x0, rect.top(), room, rect.height())
        painter.setPen(p.on_bar)
        painter.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)
        labels.append(text)
    return labels


def paint_ticks(
    painter: QPainter,
    p: Paints,
    fm: QFontMetrics,
    plot: QRect,
    shown: tuple[float, float],
    origin: float,
    width: int,
    height: int,
) -> list[str]:
    """Tick lines over the lanes, labelled as time since ``origin`` (the run's start).

    ``width`` and ``height`` are the widget's. Returns every tick's label, drawn or not.
    """
    t0, t1 = shown
    step = tick_step(t1 - t0, max(2, plot.width() // (fm.horizontalAdvance("00:00:00.000") + 24)))
    first = origin + math.ceil((t0 - origin) / step) * step
    count = int((t1 - first) / step) + 1
    labels: list[str] = []
    for k in range(max(0, min(count, 200))):
        t = first + k * step
        x = plot.left() + int((t - t0) * plot.width() / (t1 - t0))
        painter.setPen(p.grid)
        painter.drawLine(x, plot.top() - 3, x, height)
        label = elapsed_label(t - origin, step)
        labels.append(label)
        if x + 3 + fm.horizontalAdvance(label) <= width:
            painter.setPen(p.muted)
            painter.drawText(QPoint(x + 3, fm.ascent() + 3), label)
    return labels


def paint_bar(
    painter: QPainter,
    p: Paints,
    lane: Lane,
    bar: Bar,
    left: int,
    top: int,
    h: int,
    selected_seq: int | None,
) -> None:
    """One bar of ``lane`` at ``left`` + its pixel columns; outlined if step ``selected_seq``."""
    span = bar.span
    rect = QRect(left + bar.x0, top, bar.x1 - bar.x0 + 1, h)
    state = span.state
    if lane == Lane.HIBERNATION:
        painter.fillRect(rect, p.hibernation_fill)
        painter.fillRect(rect, p.hibernation_hatch)
    elif lane == Lane.RATE_LIMIT:
        painter.fillRect(rect, p.rate_limit)
    elif lane.is_wait or state == SpanState.OPEN:
        painter.fillRect(rect, p.pale[span.kind])
    else:
        painter.fillRect(rect, p.solid[span.kind])
    if state == SpanState.IN_DOUBT:
        painter.fillRect(rect, p.doubt_hatch)
        painter.setPen(p.doubt_pen)
        painter.drawRect(rect.adjusted(0, 0, -1, -1))
    elif state == SpanState.FAILED:
        painter.setPen(p.failed_pen)
        painter.drawRect(rect.adjusted(0, 0, -1, -1))
    elif state in (SpanState.RETRIED, SpanState.SALVAGED):
        # A mark above the bar: visible even when the bar is one pixel wide.
        painter.setPen(p.warn_pen)
        painter.drawLine(rect.left(), top - 2, rect.right() + 1, top - 2)
        if state == SpanState.SALVAGED:
            painter.drawRect(rect.adjusted(0, 0, -1, -1))
    if span.seq == selected_seq and bar.merged == 1:
        painter.setPen(p.selected_pen)
        painter.drawRect(rect.adjusted(-1, -1, 0, 0))
