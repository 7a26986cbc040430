"""The timeline view: one painted row per step, following the newest step.

Rows are painted by :class:`StepDelegate` (no widget per step) with uniform heights, so a
run of 10,000 steps scrolls as smoothly as one of ten.
"""

from __future__ import annotations

import time

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

from desktop_agent.client.views import StepEntry
from desktop_agent.domain import StepKind, StepStatus
from desktop_agent.gui import fmt, theme
from desktop_agent.gui.models.steps import StepRole

Index = QModelIndex | QPersistentModelIndex

WAIT_KINDS = frozenset({StepKind.APPROVAL, StepKind.SLEEP, StepKind.QUESTION, StepKind.BUDGET})


def _mix(a: QColor, b: QColor, amount: float) -> QColor:
    """``a`` moved ``amount`` (0..1) towards ``b``."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * amount),
        round(a.green() + (b.green() - a.green()) * amount),
        round(a.blue() + (b.blue() - a.blue()) * amount),
    )


class StepDelegate(QStyledItemDelegate):
    """Paints a step: kind strip, status mark, number, kind, summary, badges, time, cost."""

    def _metrics(self, option: QStyleOptionViewItem) -> QFontMetrics:
        return QFontMetrics(option.font)

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        """Every row has the same height: one line of text plus padding."""
        return QSize(200, self._metrics(option).height() + 10)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        """Draw one step."""
        entry = index.data(StepRole.ENTRY)
        if not isinstance(entry, StepEntry):
            return
        rect: QRect = option.rect
        palette: QPalette = option.palette
        state = option.state
        selected = bool(state & QStyle.StateFlag.State_Selected)
        painter.save()
        base = palette.color(QPalette.ColorRole.Base)
        background = base
        if entry.status == StepStatus.FAILED:
            background = _mix(base, theme.step_status_color(StepStatus.FAILED, palette), 0.12)
        elif entry.is_open:
            tint = theme.kind_color(entry.kind, palette)
            background = _mix(base, tint, 0.12)
        if selected:
            background = palette.color(QPalette.ColorRole.Highlight)
        painter.fillRect(rect, background)
        text_color = palette.color(
            QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        )
        muted = _mix(text_color, background, 0.4)
        kind_color = theme.kind_color(entry.kind, palette)
        painter.fillRect(QRect(rect.left(), rect.top() + 1, 4, rect.height() - 2), kind_color)

        fm = self._metrics(option)
        x = rect.left() + 10
        mid = rect.center().y()
        # Status mark: a dot (done), a ring (open), a cross (failed).
        mark = theme.step_status_color(entry.status, palette)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = 4
        if entry.status == StepStatus.COMPLETED:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(mark)
            painter.drawEllipse(x, mid - r, 2 * r, 2 * r)
        elif entry.status == StepStatus.STARTED:
            pen = painter.pen()
            pen.setColor(kind_color if entry.kind in WAIT_KINDS else mark)
            pen.setWidth(2)
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawEllipse(x, mid - r, 2 * r, 2 * r)
        else:
            pen = painter.pen()
            pen.setColor(mark)
            pen.setWidth(2)
            painter.setPen(pen)
            painter.drawLine(x, mid - r, x + 2 * r, mid + r)
            painter.drawLine(x, mid + r, x + 2 * r, mid - r)
        x += 2 * r + 8

        painter.setPen(muted)
        seq_w = fm.horizontalAdvance("#00000")
        seq_rect = QRect(x, rect.top(), seq_w, rect.height())
        painter.drawText(
            seq_rect, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, f"#{entry.seq}"
        )
        x += seq_w + 10

        bold = QFont(option.font)
        bold.setBold(True)
        kind_w = QFontMetrics(bold).horizontalAdvance("approval") + 4
        painter.setFont(bold)
        painter.setPen(text_color if selected else kind_color)
        painter.drawText(
            QRect(x, rect.top(), kind_w, rect.height()),
            Qt.AlignmentFlag.AlignVCenter,
            theme.KIND_LABELS[entry.kind],
        )
        painter.setFont(option.font)
        x += kind_w + 8

        # Right side, from the right edge: cost, duration, badges.
        right = rect.right() - 8
        cost = fmt.format_usd(entry.cost_usd) if entry.cost_usd else ""
        cost_w = fm.horizontalAdvance("$0.0000") + 4
        painter.setPen(muted)
        painter.drawText(
            QRect(right - cost_w, rect.top(), cost_w, rect.height()),
            Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
            cost,
        )
        right -= cost_w + 8
        if entry.is_open:
            took = fmt.short_duration(max(0.0, time.time() - entry.started_at)) + "…"
        else:
            took = fmt.short_duration(entry.duration_s)
        dur_w = fm.horizontalAdvance("00m00s…") + 4
        painter.drawText(
            QRect(right - dur_w, rect.top(), dur_w, rect.height()),
            Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
            took,
        )
        right -= dur_w + 8
        for badge, color in self._badges(entry, index, palette):
            w = fm.horizontalAdvance(badge) + 12
            box = QRect(right - w, mid - fm.height() // 2, w, fm.height())
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(_mix(background, color, 0.25))
            painter.drawRoundedRect(box, 4, 4)
            painter.setPen(text_color if selected else color)
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, badge)
            right -= w + 6

        summary = index.data(StepRole.SUMMARY) or ""
        painter.setPen(text_color)
        avail = max(0, right - x - 4)
        painter.drawText(
            QRect(x, rect.top(), avail, rect.height()),
            Qt.AlignmentFlag.AlignVCenter,
            fm.elidedText(str(summary), Qt.TextElideMode.ElideRight, avail),
        )
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
        if entry.is_open and entry.kind in WAIT_KINDS:
            out.append(("waiting", theme.kind_color(entry.kind, palette)))
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
