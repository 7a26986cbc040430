"""The run list panel: search, status filter and the sortable table of runs."""

from __future__ import annotations

from PySide6.QtCore import (
    QEvent,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QRectF,
    Qt,
    Signal,
    Slot,
)
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.views import RunRow
from desktop_agent.domain import RunStatus
from desktop_agent.gui import resources, theme
from desktop_agent.gui.models.runs import (
    RunColumn,
    RunFilterProxy,
    RunListModel,
    RunRole,
    StatusFilter,
)
from desktop_agent.gui.tables import list_table
from desktop_agent.gui.widgets.empty_state import EmptyMode, EmptyState

Index = QModelIndex | QPersistentModelIndex

HIDE_FIRST = (
    RunColumn.STARTED,
    RunColumn.MODEL,
    RunColumn.PROGRESS,
    RunColumn.ACTIVITY,
    RunColumn.COST,
)
"""The columns a narrow list drops, first to last (status and goal always stay)."""

GOAL_MIN = 180
"""The goal column's width at least, before a column is dropped to make room."""


class ProgressDelegate(QStyledItemDelegate):
    """Paints the plan's progress as a thin bar under the progress text."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        """Text as usual, plus a bar when the fraction is known."""
        super().paint(painter, option, index)
        fraction = index.data(RunRole.PROGRESS)
        if not isinstance(fraction, float) or fraction < 0:
            return
        rect = option.rect
        pal: QPalette = option.palette
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        bar = QRectF(rect.left() + 4, rect.bottom() - 5, rect.width() - 8, 3)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(pal.color(QPalette.ColorRole.Mid))
        painter.drawRoundedRect(bar, 1.5, 1.5)
        done = theme.status_color(RunStatus.COMPLETED, pal)
        painter.setBrush(pal.color(QPalette.ColorRole.HighlightedText) if selected else done)
        painter.drawRoundedRect(QRectF(bar.left(), bar.top(), bar.width() * fraction, 3), 1.5, 1.5)
        painter.restore()


class GoalDelegate(QStyledItemDelegate):
    """The goal as usual, the run's tags in small text at the cell's end (``#q3 #urgent``)."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        """The goal in what the tags leave (at most half the cell), then the tags."""
        tags = index.data(RunRole.TAGS)
        if not isinstance(tags, str) or not tags:
            super().paint(painter, option, index)
            return
        small = QFont(option.font)
        small.setPointSizeF(max(6.0, option.font.pointSizeF() * 0.85))
        fm = QFontMetrics(small)
        rect = option.rect
        width = min(fm.horizontalAdvance(tags) + 12, rect.width() // 2)
        goal = QStyleOptionViewItem(option)
        goal.rect = rect.adjusted(0, 0, -width, 0)
        super().paint(painter, goal, index)
        rest = QStyleOptionViewItem(option)
        rest.rect = QRect(goal.rect.right() + 1, rect.top(), width, rect.height())
        widget = option.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, rest, painter, widget)
        pal: QPalette = option.palette
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        role = (
            QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.PlaceholderText
        )
        painter.save()
        painter.setFont(small)
        painter.setPen(pal.color(role))
        shown = fm.elidedText(tags, Qt.TextElideMode.ElideRight, width - 8)
        align = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft
        painter.drawText(rest.rect.adjusted(6, 0, -2, 0), align, shown)
        painter.restore()


FILTERS: list[tuple[str, StatusFilter | RunStatus]] = [
    ("All runs", StatusFilter.ALL),
    ("Active", StatusFilter.ACTIVE),
    ("Needs me", StatusFilter.NEEDS_ME),
    *[(theme.STATUS_LABELS[s], s) for s in RunStatus],
    ("Archived", StatusFilter.ARCHIVED),
    ("Imported", StatusFilter.IMPORTED),
]


class RunListPanel(QWidget):
    """Search box, status filter and the table of runs.

    Args:
        model: the run list model.
        parent: owner.

    Signals:
        run_selected: the current run changed (its id, or "" for none).
        demo_requested: the empty list's "Try the offline demo" was pressed.
        new_run_requested: the empty list's "New run" was pressed.
    """

    run_selected = Signal(str)
    archived_wanted = Signal()
    """The "Archived" or "Imported" filter was chosen: read the archived runs (show_archived)."""
    demo_requested = Signal()
    new_run_requested = Signal()

    def __init__(self, model: RunListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.proxy = RunFilterProxy(self)
        self.proxy.setSourceModel(model)
        self.archived_model = RunListModel(self)
        """Archived and imported runs, read from the archive files when their filter is chosen."""
        self.archived_loaded = False
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search goal, run id or tag:NAME  (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._on_search_text_changed)
        self.filter = QComboBox(self)
        for label, value in FILTERS:
            if isinstance(value, RunStatus):
                self.filter.addItem(resources.icon(theme.status_icon_name(value)), label)
            else:
                self.filter.addItem(label)
        self.filter.currentIndexChanged.connect(self._on_filter_current_index_changed)
        self.count = QLabel(self)
        self.table = list_table(self.proxy, self)
        # Several runs may be selected (Shift/Ctrl+click): two of them can be compared.
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(RunColumn.STARTED, Qt.SortOrder.DescendingOrder)
        self.table.setItemDelegateForColumn(RunColumn.PROGRESS, ProgressDelegate(self.table))
        self.table.setItemDelegateForColumn(RunColumn.GOAL, GoalDelegate(self.table))
        header = self.table.horizontalHeader()
        fm = self.fontMetrics()
        widths = {
            RunColumn.STATUS: fm.horizontalAdvance("Waiting for approval") + 40,
            RunColumn.MODEL: fm.horizontalAdvance("Claude Sonnet 4.5") + 32,
            RunColumn.PROGRESS: fm.horizontalAdvance("3/5 plan · 120 steps") + 20,
            RunColumn.COST: fm.horizontalAdvance("$0.0000 sim.") + 20,
            RunColumn.STARTED: fm.horizontalAdvance("Wed 00:00") + 24,
            RunColumn.ACTIVITY: fm.horizontalAdvance("Last activity") + 28,
        }
        for col, width in widths.items():
            header.resizeSection(col, width)
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(RunColumn.GOAL, QHeaderView.ResizeMode.Stretch)
        self._widths: dict[int, int] = {int(c): w for c, w in widths.items()}
        """Each column's width when shown (the analyst's, once dragged)."""
        self.auto_columns = True
        """Columns are dropped and brought back with the list's width, until the analyst
        chooses them in the header's menu."""
        header.sectionResized.connect(self._on_header_section_resized)
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(self._on_header_context_menu_requested)
        self.table.installEventFilter(self)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.proxy.rowsInserted.connect(self._update_count)
        self.proxy.rowsRemoved.connect(self._update_count)
        self.proxy.modelReset.connect(self._update_count)
        self.proxy.layoutChanged.connect(self._update_count)
        # The source too: a run arriving hidden by the filters changes what the empty
        # list says (no runs at all, or none matching), not what the proxy shows.
        self.model.rowsInserted.connect(self._on_model_loaded)
        self.model.modelReset.connect(self._on_model_loaded)
        self.model.rowsRemoved.connect(self._update_count)
        self.loaded = False
        """A first poll has filled the model: before it, an empty list means nothing yet."""
        self.empty = EmptyState(self)
        self.empty.demo_requested.connect(self.demo_requested)
        self.empty.new_run_requested.connect(self.new_run_requested)
        self.empty.clear_filters_requested.connect(self.clear_filters)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.table)
        self.stack.addWidget(self.empty)

        bar = QHBoxLayout()
        bar.addWidget(self.search, 1)
        bar.addWidget(self.filter)
        bar.addWidget(self.count)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 0)
        layout.addLayout(bar)
        layout.addWidget(self.stack, 1)
        self._update_count()

    default_order_requested = Signal()
    """The header's menu asked for the list's own order (runs that need you first)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """A resized table drops or brings back columns (see :meth:`fit_columns`)."""
        if (
            watched is self.table
            and event.type() == QEvent.Type.Resize
            and isinstance(event, QResizeEvent)
        ):
            # Seen before the table lays its viewport out: the new width is the event's.
            self.fit_columns(event.size().width() - 2 * self.table.frameWidth())
        return super().eventFilter(watched, event)

    def fit_columns(self, width: int | None = None) -> None:
        """Show the columns ``width`` holds (the table's), dropping :data:`HIDE_FIRST` in order.

        Does nothing once the analyst chose the columns (:attr:`auto_columns` False).
        """
        if not self.auto_columns:
            return
        header = self.table.horizontalHeader()
        room = width if width is not None else self.table.viewport().width()
        room -= self.table.verticalScrollBar().sizeHint().width()
        need = GOAL_MIN + sum(self._widths.values())
        hidden: set[int] = set()
        for dropped in HIDE_FIRST:
            if need <= room:
                break
            hidden.add(int(dropped))
            need -= self._widths[int(dropped)]
        for col in self._widths:
            if header.isSectionHidden(col) != (col in hidden):
                header.setSectionHidden(col, col in hidden)

    def show_column(self, column: int, shown: bool) -> None:
        """Show or hide ``column`` as the analyst chose (columns stop following the width)."""
        self.auto_columns = False
        self.table.horizontalHeader().setSectionHidden(column, not shown)
        if shown and self.table.horizontalHeader().sectionSize(column) < 20:
            self.table.horizontalHeader().resizeSection(column, self._widths[column])

    def fit_to_width(self) -> None:
        """Columns follow the list's width again."""
        self.auto_columns = True
        self.fit_columns()

    @Slot(int, int, int)
    def _on_header_section_resized(self, column: int, _old: int, new: int) -> None:
        if column in self._widths and new > 0:
            self._widths[column] = new

    @Slot(QPoint)
    def _on_header_context_menu_requested(self, pos: QPoint) -> None:
        header = self.table.horizontalHeader()
        self.header_menu().popup(header.mapToGlobal(pos))

    def header_menu(self) -> QMenu:
        """The header's menu: the columns shown, fitting them to the width, the order."""
        header = self.table.horizontalHeader()
        model = self.table.model()
        menu = QMenu(self)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        for col in sorted(self._widths):
            title = str(model.headerData(col, Qt.Orientation.Horizontal))
            action = menu.addAction(title)
            action.setCheckable(True)
            action.setChecked(not header.isSectionHidden(col))
            action.toggled.connect(lambda on, c=col: self.show_column(c, on))
        menu.addSeparator()
        fit = menu.addAction("Columns follow the list's width")
        fit.setCheckable(True)
        fit.setChecked(self.auto_columns)
        fit.triggered.connect(self.fit_to_width)
        order = menu.addAction("Order: runs that need you first, then newest")
        order.triggered.connect(self.default_order_requested)
        return menu

    def current_run_id(self) -> str | None:
        """The selected run's id (of several selected, the one last clicked)."""
        selection = self.table.selectionModel()
        rows = selection.selectedRows()
        if not rows:
            return None
        current = self.table.currentIndex()
        chosen = (
            current if current.isValid() and selection.isRowSelected(current.row()) else rows[0]
        )
        value = chosen.siblingAtColumn(0).data(RunRole.RUN_ID)
        return str(value) if value else None

    def selected_run_ids(self) -> list[str]:
        """The ids of every selected run, top to bottom."""
        rows = sorted(self.table.selectionModel().selectedRows(), key=lambda i: i.row())
        return [str(i.data(RunRole.RUN_ID)) for i in rows if i.data(RunRole.RUN_ID)]

    def select_runs(self, run_ids: list[str]) -> None:
        """Select exactly ``run_ids`` (those listed), the last one current."""
        self.table.clearSelection()
        flags = QItemSelectionModel.SelectionFlag
        for run_id in run_ids:
            row = self.model.row_of(run_id)
            index = self.proxy.mapFromSource(self.model.index(row, 0)) if row >= 0 else None
            if index is not None and index.isValid():
                self.table.selectionModel().setCurrentIndex(index, flags.Select | flags.Rows)

    def select_run(self, run_id: str) -> bool:
        """Select ``run_id`` if it is listed (clearing filters that hide it)."""
        row = self.model.row_of(run_id)
        if row < 0:
            return False
        if self.proxy.sourceModel() is not self.model:  # an archived filter: back to the runs
            self.filter.setCurrentIndex(0)
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if not index.isValid():
            self.search.clear()
            self.filter.setCurrentIndex(0)
            index = self.proxy.mapFromSource(self.model.index(row, 0))
        self.table.selectRow(index.row())
        self.table.scrollTo(index)
        return True

    @Slot()
    def clear_filters(self) -> None:
        """Show every run again: no search text, the "All runs" filter."""
        self.search.clear()
        self.filter.setCurrentIndex(0)

    @Slot(str)
    def _on_search_text_changed(self, text: str) -> None:
        self.proxy.set_text(text)

    @Slot(int)
    def _on_filter_current_index_changed(self, index: int) -> None:
        value = FILTERS[index][1] if 0 <= index < len(FILTERS) else StatusFilter.ALL
        archived = value in (StatusFilter.ARCHIVED, StatusFilter.IMPORTED)
        source = self.archived_model if archived else self.model
        if self.proxy.sourceModel() is not source:  # archived runs are not in the live list
            if not archived:  # a run listed archived may be live again by now
                self.proxy.set_archived({})
            self.proxy.setSourceModel(source)
            self.run_selected.emit(self.current_run_id() or "")
        if archived:
            self.archived_wanted.emit()  # read anew each time: a run may have come back
        if isinstance(value, RunStatus):
            self.proxy.set_status(value)
        else:
            self.proxy.set_preset(value)

    @Slot(QItemSelection, QItemSelection)
    def _on_selection_changed(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        self.run_selected.emit(self.current_run_id() or "")

    @Slot()
    def show_archived(self, rows: list[RunRow], imported: set[str]) -> None:
        """List archived ``rows`` (those in ``imported`` marked so) under the archived filters."""
        self.proxy.set_archived({r.run.id: r.run.id in imported for r in rows})
        self.archived_model.apply(rows, full=True)
        self.archived_loaded = True
        self._update_count()

    def archived_row(self, run_id: str) -> tuple[RunRow, bool] | None:
        """The archived run ``run_id`` as listed, and whether it was imported."""
        row = self.archived_model.get(run_id)
        return None if row is None else (row, self.proxy.is_imported(run_id))

    def _update_count(self) -> None:
        source = self.proxy.sourceModel()
        shown, total = self.proxy.rowCount(), source.rowCount() if source else 0
        if source is self.archived_model:  # what the archived filter chosen shows
            noun = "archived run" if shown == 1 else "archived runs"
            self.count.setText(f"{shown} {noun}")
            self.stack.setCurrentWidget(
                self.table if shown or not self.archived_loaded else self.empty
            )
            if not shown and self.archived_loaded:
                self.empty.set_mode(EmptyMode.NO_MATCH)
            return
        noun = "run" if total == 1 else "runs"
        self.count.setText(f"{total} {noun}" if shown == total else f"{shown} of {total} {noun}")
        if shown or not self.loaded:
            self.stack.setCurrentWidget(self.table)
            return
        self.empty.set_mode(EmptyMode.NO_MATCH if total else EmptyMode.NO_RUNS)
        self.stack.setCurrentWidget(self.empty)

    @Slot()
    def _on_model_loaded(self) -> None:
        self.loaded = True
        self._update_count()
