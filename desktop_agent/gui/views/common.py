"""Pieces shared by the scheduling views.

Tables with an empty-state hint, a small toolbar, the batch progress bar, and the
"no progress" badge of the run list.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QRectF,
    QSize,
    Qt,
    Slot,
)
from PySide6.QtGui import (
    QAction,
    QColor,
    QFont,
    QFontMetrics,
    QHelpEvent,
    QPainter,
    QPainterPath,
    QPalette,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolBar,
    QToolTip,
    QWidget,
)

from desktop_agent.client.scheduling_views import stuck_badge
from desktop_agent.domain import RunStatus
from desktop_agent.domain.scheduling import StuckRun
from desktop_agent.gui import resources, theme
from desktop_agent.gui.models.runs import RunRole
from desktop_agent.gui.models.scheduling import Role
from desktop_agent.gui.tables import list_table

Index = QModelIndex | QPersistentModelIndex


class TablePane(QStackedWidget):
    """A table of ``model``, or a hint in its place while the model is empty.

    Args:
        model: the rows.
        hint: what to say when there are none (how to make one).
        parent: owner.
    """

    def __init__(self, model: QAbstractItemModel, hint: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.table = list_table(model, self)
        self.hint = QLabel(hint, self)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setWordWrap(True)
        self.hint.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.hint.setContentsMargins(24, 12, 24, 12)
        self.addWidget(self.table)
        self.addWidget(self.hint)
        model.rowsInserted.connect(self._update)
        model.rowsRemoved.connect(self._update)
        model.modelReset.connect(self._update)
        self._update()

    def size_columns(self, samples: Mapping[int, str | int], stretch: int) -> None:
        """Size columns to sample texts (plus room for an icon) or to pixel widths.

        Column ``stretch`` takes the rest of the width.
        """
        header = self.table.horizontalHeader()
        fm = self.fontMetrics()
        for col, sample in samples.items():
            width = sample if isinstance(sample, int) else fm.horizontalAdvance(sample) + 36
            header.resizeSection(col, width)
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)

    @Slot()
    def _update(self) -> None:
        self.setCurrentWidget(self.table if self.model.rowCount() else self.hint)


def icon_action(parent: QWidget, icon: str, text: str) -> QAction:
    """An action whose icon :func:`retint` draws again in a new palette's colors."""
    action = QAction(resources.icon(icon), text, parent)
    action.setProperty("icon_name", icon)
    return action


def retint(widget: QWidget) -> None:
    """Tint the icons of ``widget``'s actions for the palette now in use."""
    for action in widget.findChildren(QAction):
        name = action.property("icon_name")
        if name:
            action.setIcon(resources.icon(str(name)))


def view_bar(parent: QWidget, name: str) -> QToolBar:
    """A compact toolbar for a view's actions (text beside icons)."""
    bar = QToolBar(name, parent)
    bar.setObjectName(name)
    bar.setMovable(False)
    bar.setFloatable(False)
    bar.setIconSize(QSize(18, 18))
    bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    return bar


def spacer(parent: QWidget) -> QWidget:
    """A widget that pushes what follows it in a toolbar to the right."""
    space = QWidget(parent)
    space.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
    return space


def _text_color(option: QStyleOptionViewItem) -> QColor:
    selected = bool(option.state & QStyle.StateFlag.State_Selected)
    role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
    return option.palette.color(role)


def _background(
    delegate: QStyledItemDelegate, option: QStyleOptionViewItem, index: Index
) -> QStyleOptionViewItem:
    """The cell's style option with its text removed (to paint only the background)."""
    opt = QStyleOptionViewItem(option)
    delegate.initStyleOption(opt, index)
    opt.text = ""
    return opt


def _draw_item(painter: QPainter, opt: QStyleOptionViewItem) -> None:
    widget = opt.widget
    style = widget.style() if widget is not None else None
    if style is not None:
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)


class BatchProgressDelegate(QStyledItemDelegate):
    """Paints ``312 / 1000`` and a bar: completed, failed and running items in their colors."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        """The count right-aligned in a fixed width, the bar in the rest of the cell."""
        counts = index.data(Role.FRACTION)
        if not isinstance(counts, tuple) or len(counts) != 4:
            super().paint(painter, option, index)
            return
        done, failed, running, total = (int(c) for c in counts)
        _draw_item(painter, _background(self, option, index))
        pal: QPalette = option.palette
        fm = QFontMetrics(option.font)
        rect = option.rect.adjusted(6, 0, -8, 0)
        text = f"{done} / {total}"
        text_w = max(fm.horizontalAdvance(text), fm.horizontalAdvance(f"{total} / {total}"))
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(_text_color(option))
        text_rect = QRect(rect.left(), rect.top(), text_w, rect.height())
        painter.drawText(
            text_rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, text
        )
        left = rect.left() + text_w + 10
        width = rect.right() - left
        if width > 12 and total > 0:
            bar = QRectF(left, rect.center().y() - 3, width, 7)
            track = QPainterPath()
            track.addRoundedRect(bar, 3.5, 3.5)
            painter.setClipPath(track)
            painter.fillRect(bar, pal.color(QPalette.ColorRole.Mid))
            x = bar.left()
            for n, status in (
                (done, RunStatus.COMPLETED),
                (failed, RunStatus.FAILED),
                (running, RunStatus.RUNNING),
            ):
                if n <= 0:
                    continue
                w = max(2.0, bar.width() * n / total)  # a few among many stay visible
                painter.fillRect(
                    QRectF(x, bar.top(), w, bar.height()), theme.status_color(status, pal)
                )
                x += w
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        """Room for the count and a short bar."""
        size = super().sizeHint(option, index)
        return QSize(
            max(size.width(), QFontMetrics(option.font).horizontalAdvance("0") * 24), size.height()
        )


class StuckBadgeDelegate(QStyledItemDelegate):
    """Paints a "no progress for 35 min" badge at the right of a stuck run's goal.

    Args:
        parent: the run list's table.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.stuck: dict[str, StuckRun] = {}
        self.now = time.time()

    def set_stuck(self, stuck: Mapping[str, StuckRun]) -> None:
        """The flagged runs, by id."""
        self.stuck = dict(stuck)
        self.now = time.time()

    def badge_of(self, index: Index) -> StuckRun | None:
        """The flag of the run in this row, if any."""
        run_id = index.data(RunRole.RUN_ID)
        return self.stuck.get(str(run_id)) if run_id else None

    def _badge_rect(self, option: QStyleOptionViewItem, text: str) -> QRect:
        fm = QFontMetrics(self._badge_font(option))
        w = fm.horizontalAdvance(text) + 14
        h = fm.height() + 4
        r = option.rect
        return QRect(r.right() - w - 4, r.center().y() - h // 2, w, h)

    def _badge_font(self, option: QStyleOptionViewItem) -> QFont:
        font = QFont(option.font)
        font.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
        font.setBold(True)
        return font

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        """The goal, elided before the badge, then the badge."""
        flag = self.badge_of(index)
        if flag is None:
            super().paint(painter, option, index)
            return
        text = stuck_badge(flag, self.now)
        badge = self._badge_rect(option, text)
        _draw_item(painter, _background(self, option, index))
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.rect = QRect(
            option.rect.left(),
            option.rect.top(),
            badge.left() - option.rect.left() - 4,
            option.rect.height(),
        )
        _draw_item(painter, opt)
        color = theme.warning_color(option.palette)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        fill = QColor(color)
        fill.setAlpha(40 if not selected else 90)
        painter.setBrush(fill)
        painter.setPen(
            option.palette.color(QPalette.ColorRole.HighlightedText) if selected else color
        )
        painter.drawRoundedRect(QRectF(badge).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        painter.setFont(self._badge_font(option))
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()

    def helpEvent(
        self, event: QHelpEvent, view: QAbstractItemView, option: QStyleOptionViewItem, index: Index
    ) -> bool:
        """The worker's message as the badge's tooltip."""
        flag = self.badge_of(index) if index.isValid() else None
        if event.type() == QEvent.Type.ToolTip and flag is not None:
            QToolTip.showText(event.globalPos(), f"Run {flag.run_id}: {flag.message}", view)
            return True
        return super().helpEvent(event, view, option, index)
