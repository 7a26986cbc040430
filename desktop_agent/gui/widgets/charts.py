"""Charts drawn with QPainter: cost and tokens over time, and step durations.

Series are reduced to at most one point (or bar) per pixel column before drawing, so a run
of 10,000 steps draws as fast as a short one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPainterPath, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QCheckBox, QSizePolicy, QVBoxLayout, QWidget

from desktop_agent.client.stepkinds import describe
from desktop_agent.client.views import StepEntry
from desktop_agent.domain import StepKind, StepStatus
from desktop_agent.gui import fmt, theme


@dataclass(frozen=True)
class Series:
    """Cumulative cost and tokens at the end time of each finished step."""

    times: tuple[float, ...]
    cost: tuple[float, ...]
    tokens: tuple[int, ...]


def cumulative(entries: Sequence[StepEntry]) -> Series:
    """The run's spending over time."""
    times: list[float] = []
    cost: list[float] = []
    toks: list[int] = []
    c, t = 0.0, 0
    for e in entries:
        if e.finished_at is None:
            continue
        c += e.cost_usd
        t += sum(e.tokens)
        times.append(e.finished_at)
        cost.append(c)
        toks.append(t)
    return Series(tuple(times), tuple(cost), tuple(toks))


def nice_ceiling(value: float) -> float:
    """A round number at or above ``value`` for an axis maximum."""
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exp:
            return float(step * exp)
    return float(10 * exp)


class _Chart(QWidget):
    """Common frame: margins, title, axes and an empty-state message."""

    title = ""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumHeight(140)

    def sizeHint(self) -> QSize:
        """A comfortable chart size."""
        return QSize(420, 200)

    def _frame(self, painter: QPainter, left: int, right: int) -> QRectF:
        fm = QFontMetrics(self.font())
        pal = self.palette()
        painter.setPen(pal.color(QPalette.ColorRole.WindowText))
        bold = self.font()
        bold.setBold(True)
        painter.setFont(bold)
        painter.drawText(
            QRectF(left, 2, self.width() - left - right, fm.height()),
            Qt.AlignmentFlag.AlignLeft,
            self.title,
        )
        painter.setFont(self.font())
        top = fm.height() + 10
        bottom = self.height() - fm.height() - 8
        return QRectF(left, top, max(10, self.width() - left - right), max(10, bottom - top))

    def _empty(self, painter: QPainter, text: str) -> None:
        painter.setPen(self.palette().color(QPalette.ColorRole.PlaceholderText))
        painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, text)

    def _grid(self, painter: QPainter, plot: QRectF, lines: int = 4) -> None:
        pal = self.palette()
        pen = QPen(pal.color(QPalette.ColorRole.Mid))
        pen.setWidthF(0.6)
        painter.setPen(pen)
        for i in range(lines + 1):
            y = plot.bottom() - plot.height() * i / lines
            painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))


class CostTokensChart(_Chart):
    """Cumulative cost (left axis) and tokens (right axis) over the run's time."""

    title = "Cost and tokens over time"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.series = Series((), (), ())
        self.simulated = False

    def set_entries(self, entries: Sequence[StepEntry], *, simulated: bool = False) -> None:
        """Plot these steps."""
        self.series = cumulative(entries)
        self.simulated = simulated
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        """Draw axes and both lines."""
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        s = self.series
        if len(s.times) < 2:
            self._empty(painter, "Cost and tokens appear here once the run has taken steps.")
            painter.end()
            return
        fm = QFontMetrics(self.font())
        max_cost = nice_ceiling(s.cost[-1])
        max_tok = nice_ceiling(float(s.tokens[-1]))
        left = fm.horizontalAdvance(fmt.format_usd(max_cost)) + 10
        right = fm.horizontalAdvance(fmt.tokens(int(max_tok))) + 10
        plot = self._frame(painter, left, right)
        self._grid(painter, plot)
        t0, t1 = s.times[0], max(s.times[-1], s.times[0] + 1e-6)
        pal = self.palette()
        cost_color = theme.kind_color(StepKind.MODEL_CALL, pal)
        tok_color = theme.kind_color(StepKind.TOOL_CALL, pal)
        for values, top, color in ((s.cost, max_cost, cost_color), (s.tokens, max_tok, tok_color)):
            path = QPainterPath()
            last_x = -1.0
            for i, t in enumerate(s.times):
                x = plot.left() + plot.width() * (t - t0) / (t1 - t0)
                y = plot.bottom() - plot.height() * float(values[i]) / top
                if i == 0:
                    path.moveTo(x, y)
                elif x - last_x >= 1.0 or i == len(s.times) - 1:
                    path.lineTo(x, y)
                else:
                    continue
                last_x = x
            pen = QPen(color)
            pen.setWidthF(2.0)
            painter.setPen(pen)
            painter.drawPath(path)
        painter.setPen(cost_color)
        painter.drawText(
            QRectF(0, plot.top() - fm.height() / 2, left - 6, fm.height()),
            Qt.AlignmentFlag.AlignRight,
            fmt.format_usd(max_cost),
        )
        painter.drawText(
            QRectF(0, plot.bottom() - fm.height() / 2, left - 6, fm.height()),
            Qt.AlignmentFlag.AlignRight,
            "$0",
        )
        painter.setPen(tok_color)
        painter.drawText(
            QRectF(plot.right() + 6, plot.top() - fm.height() / 2, right, fm.height()),
            Qt.AlignmentFlag.AlignLeft,
            fmt.tokens(int(max_tok)),
        )
        painter.drawText(
            QRectF(plot.right() + 6, plot.bottom() - fm.height() / 2, right, fm.height()),
            Qt.AlignmentFlag.AlignLeft,
            "0",
        )
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        painter.setPen(muted)
        span = fmt.format_duration(t1 - t0)
        base_y = plot.bottom() + 4
        painter.drawText(
            QRectF(plot.left(), base_y, plot.width(), fm.height()),
            Qt.AlignmentFlag.AlignLeft,
            time.strftime("%H:%M:%S", time.localtime(t0)),
        )
        painter.drawText(
            QRectF(plot.left(), base_y, plot.width(), fm.height()),
            Qt.AlignmentFlag.AlignRight,
            f"+{span}",
        )
        sim = " (simulated)" if self.simulated else ""
        legend = [
            (cost_color, f"cost {fmt.format_usd(s.cost[-1])}{sim}"),
            (tok_color, f"tokens {fmt.tokens(s.tokens[-1])}"),
        ]
        x = plot.left() + 8
        for color, text in legend:
            painter.fillRect(QRectF(x, plot.top() + 6, 10, 10), color)
            painter.setPen(pal.color(QPalette.ColorRole.WindowText))
            painter.drawText(QPointF(x + 14, plot.top() + 6 + fm.ascent() - 2), text)
            x += fm.horizontalAdvance(text) + 30
        painter.end()


@dataclass(frozen=True)
class Bar:
    """One bar: the longest step of a pixel column."""

    seq: int
    seconds: float
    kind: StepKind
    failed: bool
    open: bool


def bars(entries: Sequence[StepEntry], columns: int, now: float) -> list[Bar]:
    """Step durations reduced to at most ``columns`` bars (the longest step of each)."""
    n = len(entries)
    if n == 0 or columns <= 0:
        return []
    per = max(1, math.ceil(n / columns))
    out = []
    for start in range(0, n, per):
        best: Bar | None = None
        for e in entries[start : start + per]:
            secs = e.duration_s if e.duration_s is not None else max(0.0, now - e.started_at)
            if best is None or secs > best.seconds:
                best = Bar(e.seq, secs, e.kind, e.status == StepStatus.FAILED, e.is_open)
        if best is not None:
            out.append(best)
    return out


def without_waits(entries: Sequence[StepEntry]) -> list[StepEntry]:
    """The steps that work (model calls, tools…), not those that wait (approvals, timers…)."""
    return [e for e in entries if not describe(e.kind).waits]


class StepDurationChart(_Chart):
    """How long each step took, colored by kind (failed steps outlined in red).

    Waits (approvals, timers, budgets, questions) are left out unless asked for: one
    overnight approval made every working step a flat line at the bottom.
    """

    title = "Step durations"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.all_entries: Sequence[StepEntry] = ()
        self.entries: Sequence[StepEntry] = ()
        self.include_waits = False

    def set_entries(self, entries: Sequence[StepEntry]) -> None:
        """Plot these steps (their waits only if :attr:`include_waits`)."""
        self.all_entries = entries
        self.entries = entries if self.include_waits else without_waits(entries)
        self.update()

    def set_include_waits(self, include: bool) -> None:
        """Plot waits too, or leave them out."""
        self.include_waits = include
        self.set_entries(self.all_entries)

    def paintEvent(self, event: QPaintEvent) -> None:
        """Draw the bars."""
        painter = QPainter(self)
        if not self.entries:
            self._empty(painter, "Step durations appear here once the run has taken steps.")
            painter.end()
            return
        fm = QFontMetrics(self.font())
        left = fm.horizontalAdvance("00m00s") + 10
        plot = self._frame(painter, left, 12)
        width = int(plot.width())
        data = bars(self.entries, max(1, width // 3), time.time())
        top = nice_ceiling(max((b.seconds for b in data), default=1.0))
        self._grid(painter, plot)
        pal = self.palette()
        slot = plot.width() / max(1, len(data))
        bar_w = max(1.0, slot * 0.8)
        failed = theme.step_status_color(StepStatus.FAILED, pal)
        for i, b in enumerate(data):
            h = plot.height() * min(1.0, b.seconds / top)
            rect = QRectF(plot.left() + i * slot, plot.bottom() - h, bar_w, max(1.0, h))
            color = QColor(theme.kind_color(b.kind, pal))
            if b.open:
                color.setAlpha(120)
            painter.fillRect(rect, color)
            if b.failed:
                painter.setPen(QPen(failed, 1.5))
                painter.drawRect(rect)
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        painter.setPen(muted)
        painter.drawText(
            QRectF(0, plot.top() - fm.height() / 2, left - 6, fm.height()),
            Qt.AlignmentFlag.AlignRight,
            fmt.short_duration(top),
        )
        painter.drawText(
            QRectF(0, plot.bottom() - fm.height() / 2, left - 6, fm.height()),
            Qt.AlignmentFlag.AlignRight,
            "0",
        )
        first, last = self.entries[0].seq, self.entries[-1].seq
        base_y = plot.bottom() + 4
        painter.drawText(
            QRectF(plot.left(), base_y, plot.width(), fm.height()),
            Qt.AlignmentFlag.AlignLeft,
            f"step {first}",
        )
        painter.drawText(
            QRectF(plot.left(), base_y, plot.width(), fm.height()),
            Qt.AlignmentFlag.AlignRight,
            f"step {last}",
        )
        painter.end()


class ChartsPanel(QWidget):
    """Both charts, stacked.

    Args:
        parent: owner.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cost = CostTokensChart(self)
        self.durations = StepDurationChart(self)
        self.include_waits = QCheckBox("Include waits in step durations", self)
        self.include_waits.setToolTip(
            "Approvals, timers, budgets and questions: they can last hours and flatten the rest"
        )
        self.include_waits.toggled.connect(self.durations.set_include_waits)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addWidget(self.cost, 1)
        layout.addWidget(self.durations, 1)
        layout.addWidget(self.include_waits)

    def set_entries(self, entries: Sequence[StepEntry], *, simulated: bool = False) -> None:
        """Plot the steps of the selected run."""
        self.cost.set_entries(entries, simulated=simulated)
        self.durations.set_entries(entries)
