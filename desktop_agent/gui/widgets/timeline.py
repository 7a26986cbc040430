"""The timeline view: one painted row per step, following the newest step.

Rows are painted by :class:`StepDelegate` (no widget per step) with uniform heights, so a
run of 10,000 steps scrolls as smoothly as one of ten.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt, Signal, Slot
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QListView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from desktop_agent.client.stepkinds import describe
from desktop_agent.client.timeaxis import in_batch
from desktop_agent.client.views import StepEntry
from desktop_agent.domain import StepStatus
from desktop_agent.gui import fmt, theme
from desktop_agent.gui.models.steps import StepRole
from desktop_agent.gui.widgets.header import span

Index = QModelIndex | QPersistentModelIndex

KIND_SAMPLE = "approval"
"""The label the kind column is measured for (the column's width, so the look, hangs on it)."""


def _mix(a: QColor, b: QColor, amount: float) -> QColor:
    """``a`` moved ``amount`` (0..1) towards ``b``."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )


@dataclass(frozen=True, slots=True)
class _Row:
    """What the parts of one painted row share: its place, font metrics and colours."""

    rect: QRect
    fm: QFontMetrics
    selected: bool
    background: QColor
    text: QColor
    muted: QColor
    kind: QColor

    @property
    def mid(self) -> int:
        """The row's vertical centre."""
        return self.rect.center().y()

    def cell(self, x: int, width: int) -> QRect:
        """A cell of the row, ``width`` wide from ``x``."""
        return QRect(x, self.rect.top(), width, self.rect.height())


def _row_style(entry: StepEntry, option: QStyleOptionViewItem) -> _Row:
    """The row's colours: tinted when failed or open, highlighted when selected."""
    palette: QPalette = option.palette
    selected = bool(option.state & QStyle.StateFlag.State_Selected)
    kind = theme.kind_color(entry.kind, palette)
    base = palette.color(QPalette.ColorRole.Base)
    background = base
    if entry.status == StepStatus.FAILED:
        background = _mix(base, theme.step_status_color(StepStatus.FAILED, palette), 0.12)
    elif entry.is_open:
        background = _mix(base, kind, 0.12)
    if selected:
        background = palette.color(QPalette.ColorRole.Highlight)
    text = palette.color(
        QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
    )
    muted = _mix(text, background, 0.4)
    return _Row(option.rect, QFontMetrics(option.font), selected, background, text, muted, kind)


def _draw_status_mark(painter: QPainter, entry: StepEntry, row: _Row, palette: QPalette) -> int:
    """A dot (done), a ring (open; in the kind's colour when it waits), a cross (failed).

    Returns the x where the next part starts.
    """
    x, mid, r = row.rect.left() + 10, row.mid, 4
    mark = theme.step_status_color(entry.status, palette)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    if entry.status == StepStatus.COMPLETED:
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(mark)
        painter.drawEllipse(x, mid - r, 2 * r, 2 * r)
        return x + 2 * r + 8
    pen = painter.pen()
    pen.setWidth(2)
    if entry.status == StepStatus.STARTED:
        pen.setColor(row.kind if describe(entry.kind).waits else mark)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawEllipse(x, mid - r, 2 * r, 2 * r)
    else:
        pen.setColor(mark)
        painter.setPen(pen)
        painter.drawLine(x, mid - r, x + 2 * r, mid + r)
        painter.drawLine(x, mid + r, x + 2 * r, mid - r)
    return x + 2 * r + 8


def _draw_seq(painter: QPainter, entry: StepEntry, row: _Row, x: int) -> int:
    """The step's number, right-aligned in a column wide enough for five digits."""
    painter.setPen(row.muted)
    width = row.fm.horizontalAdvance("#00000")
    right = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight
    painter.drawText(row.cell(x, width), right, f"#{entry.seq}")
    return x + width + 10


def _draw_kind(painter: QPainter, entry: StepEntry, row: _Row, font: QFont, x: int) -> int:
    """The kind's label, bold, in the kind's colour."""
    bold = QFont(font)
    bold.setBold(True)
    width = QFontMetrics(bold).horizontalAdvance(KIND_SAMPLE) + 4
    painter.setFont(bold)
    painter.setPen(row.text if row.selected else row.kind)
    painter.drawText(row.cell(x, width), Qt.AlignmentFlag.AlignVCenter, describe(entry.kind).label)
    painter.setFont(font)
    return x + width + 8


def _draw_cost_and_time(painter: QPainter, entry: StepEntry, row: _Row) -> int:
    """Cost and duration, from the right edge; returns where the next part must end."""
    fm, right = row.fm, row.rect.right() - 8
    align = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight
    cost = fmt.format_usd(entry.cost_usd) if entry.cost_usd else ""
    cost_w = fm.horizontalAdvance("$0.0000") + 4
    painter.setPen(row.muted)
    painter.drawText(row.cell(right - cost_w, cost_w), align, cost)
    right -= cost_w + 8
    took = duration_text(entry, time.time())
    # Finished steps share a narrow column; an open step's words take what they need
    # (a fixed width cut "running 1m 05s" into something that read as clipped).
    dur_w = max(fm.horizontalAdvance("00m00s") + 4, fm.horizontalAdvance(took) + 4)
    painter.drawText(row.cell(right - dur_w, dur_w), align, took)
    return right - dur_w - 8


def duration_text(entry: StepEntry, now: float) -> str:
    """How long the step took; for an open one, how long so far, in words that say so.

    A step that waits carries the "waiting" badge just before, so its time reads "for
    3m 12s"; any other open step "running 12s". Whole seconds: a counter that moves once
    a second, with no tenths flickering.
    """
    if not entry.is_open:
        return fmt.short_duration(entry.duration_s)
    so_far = span(max(0.0, now - entry.started_at))
    if describe(entry.kind).waits:
        return f"for {so_far}"
    return f"in a batch {so_far}" if in_batch(entry) else f"running {so_far}"


def _draw_badges(painter: QPainter, badges: list[tuple[str, QColor]], row: _Row, right: int) -> int:
    """Rounded badges, right to left, ending at ``right``; returns where they begin."""
    fm = row.fm
    for badge, color in badges:
        w = fm.horizontalAdvance(badge) + 12
        box = QRect(right - w, row.mid - fm.height() // 2, w, fm.height())
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(_mix(row.background, color, 0.25))
        painter.drawRoundedRect(box, 4, 4)
        painter.setPen(row.text if row.selected else color)
        painter.drawText(box, Qt.AlignmentFlag.AlignCenter, badge)
        right -= w + 6
    return right


def sources_badge(count: int) -> str:
    """The badge of a model call whose answer cites ``count`` sources: ``2 sources``."""
    return f"{count} source{'' if count == 1 else 's'}"


def _draw_summary(painter: QPainter, summary: str, row: _Row, x: int, right: int) -> None:
    """The summary line in what is left between ``x`` and ``right``, elided."""
    painter.setPen(row.text)
    avail = max(0, right - x - 4)
    shown = row.fm.elidedText(summary, Qt.TextElideMode.ElideRight, avail)
    painter.drawText(row.cell(x, avail), Qt.AlignmentFlag.AlignVCenter, shown)


class StepDelegate(QStyledItemDelegate):
    """Paints a step: kind strip, status mark, number, kind, summary, badges, time, cost.

    A model call whose answer cites documents carries a badge counting its sources.

    The kind's colour, label and whether it waits come from its description
    (:mod:`desktop_agent.client.stepkinds`), as do the summary lines the model hands over.
    """

    def _metrics(self, option: QStyleOptionViewItem) -> QFontMetrics:
        return QFontMetrics(option.font)

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        """Every row has the same height: one line of text plus padding."""
        return QSize(200, self._metrics(option).height() + 10)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        """Draw one step, left to right, then right to left, the summary in between."""
        entry = index.data(StepRole.ENTRY)
        if not isinstance(entry, StepEntry):
            return
        row = _row_style(entry, option)
        rect = row.rect
        painter.save()
        painter.fillRect(rect, row.background)
        painter.fillRect(QRect(rect.left(), rect.top() + 1, 4, rect.height() - 2), row.kind)
        x = _draw_status_mark(painter, entry, row, option.palette)
        x = _draw_seq(painter, entry, row, x)
        x = _draw_kind(painter, entry, row, option.font, x)
        right = _draw_cost_and_time(painter, entry, row)
        right = _draw_badges(painter, self._badges(entry, index, option.palette), row, right)
        _draw_summary(painter, str(index.data(StepRole.SUMMARY) or ""), row, x, right)
        painter.restore()

    def _badges(
        self, entry: StepEntry, index: Index, palette: QPalette
    ) -> list[tuple[str, QColor]]:
        out = []
        warn = theme.warning_color(palette)
        if entry.attempt > 1:
            out.append((f"attempt {entry.attempt}", warn))
        if index.data(StepRole.RETRIED):
            out.append(("retried", warn))
        elif entry.status == StepStatus.FAILED:
            out.append(("failed", theme.step_status_color(StepStatus.FAILED, palette)))
        if entry.salvaged_json:
            out.append(("salvaged", warn))
        if entry.is_open and describe(entry.kind).waits:
            out.append(("waiting", theme.kind_color(entry.kind, palette)))
        sources = index.data(StepRole.SOURCES)
        if sources:  # counted once per step by the model, not per paint
            out.append((sources_badge(sources), palette.color(QPalette.ColorRole.Link)))
        return out


class TimelineView(QListView):
    """A list of steps that keeps the newest in view unless the analyst scrolls away.

    Args:
        parent: owner.

    Signals:
        follow_changed: following the newest step was turned on or off (bool).
    """

    follow_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setUniformItemSizes(True)
        self.setItemDelegate(StepDelegate(self))
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setLayoutMode(QListView.LayoutMode.Batched)
        self.setBatchSize(500)
        self.setMouseTracking(True)
        self._follow = True
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._on_scrollbar_range_changed)
        bar.valueChanged.connect(self._on_scrollbar_value_changed)

    @property
    def following(self) -> bool:
        """Whether the view sticks to the newest step."""
        return self._follow

    @Slot(bool)
    def set_following(self, follow: bool) -> None:
        """Stick to the newest step (scrolling there now), or stop."""
        if follow != self._follow:
            self._follow = follow
            self.follow_changed.emit(follow)
        if follow:
            bar = self.verticalScrollBar()
            bar.setValue(bar.maximum())

    @Slot(int, int)
    def _on_scrollbar_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)

    @Slot(int)
    def _on_scrollbar_value_changed(self, value: int) -> None:
        at_end = value >= self.verticalScrollBar().maximum() - 2
        if at_end != self._follow:
            self._follow = at_end
            self.follow_changed.emit(at_end)
