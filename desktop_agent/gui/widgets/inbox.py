"""The approvals inbox: pending approvals across runs, with review, approve and reject.

Nothing here decides blind: Approve and Reject act on the selected rows only (off while none
is), one selected call opens for review, several are decided after one confirmation that
lists them. Return, Enter and a double-click open the selected call.
"""

from __future__ import annotations

from PySide6.QtCore import (
    QEvent,
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    Qt,
    Signal,
    Slot,
)
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.domain import Approval
from desktop_agent.gui import resources
from desktop_agent.gui.models.approvals import ApprovalColumn, ApprovalListModel
from desktop_agent.gui.tables import list_table


class ApprovalInbox(QWidget):
    """Pending approvals, oldest first.

    Args:
        model: the approvals model.
        parent: owner.

    Signals:
        review_requested: open the approval dialog (the :class:`Approval`).
        approve_requested: approve the selected calls, after showing them (a list of
            :class:`Approval`, never empty).
        reject_requested: reject the selected calls, asking for a reason (a list, never
            empty).
        approval_selected: the current approval changed (its run id, or "").
    """

    review_requested = Signal(object)
    approve_requested = Signal(object)
    reject_requested = Signal(object)
    approval_selected = Signal(str)

    def __init__(self, model: ApprovalListModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.table = list_table(model, self)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.installEventFilter(self)
        fm = self.fontMetrics()
        header = self.table.horizontalHeader()
        widths = {
            ApprovalColumn.RUN: 240,
            ApprovalColumn.TOOL: fm.horizontalAdvance("search_files") + 24,
            ApprovalColumn.RULE: 260,
            ApprovalColumn.WAITING: fm.horizontalAdvance("59m ago") + 24,
            ApprovalColumn.DEADLINE: fm.horizontalAdvance("no deadline") + 24,
        }
        for col, width in widths.items():
            header.resizeSection(col, width)
        header.setSectionResizeMode(ApprovalColumn.ARGUMENTS, QHeaderView.ResizeMode.Stretch)
        self.table.doubleClicked.connect(self._on_table_double_clicked)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.empty = QLabel("No approvals are waiting. Runs that need one show up here.", self)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.review = QPushButton(resources.icon("edit"), "Review…", self)
        self.approve = QPushButton(resources.icon("approve"), "Approve…", self)
        self.reject = QPushButton(resources.icon("reject"), "Reject…", self)
        self.review.clicked.connect(self._on_review_clicked)
        self.approve.clicked.connect(self._on_approve_clicked)
        self.reject.clicked.connect(self._on_reject_clicked)
        buttons = QHBoxLayout()
        hint = (
            "Return or double-click reviews the selected approval; Ctrl+click or "
            "Shift+arrows select several to approve or reject together."
        )
        buttons.addWidget(QLabel(hint, self), 1)
        for button in (self.review, self.approve, self.reject):
            buttons.addWidget(button)
        self.only: set[str] | None = None
        """The runs whose calls are listed (a notice's), None for all."""
        self.filter_note = QLabel(self)
        show_all = QPushButton("Show all", self)
        show_all.clicked.connect(self._on_show_all_clicked)
        self.filter_bar = QWidget(self)
        bar = QHBoxLayout(self.filter_bar)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.filter_note, 1)
        bar.addWidget(show_all)
        self.filter_bar.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 0)
        layout.addWidget(self.filter_bar)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.empty, 1)
        layout.addLayout(buttons)
        for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset):
            signal.connect(self._update)
            signal.connect(self._apply_filter)
        self._update()

    def selected(self) -> list[Approval]:
        """The selected approvals, top to bottom (never an unselected row)."""
        rows = sorted(index.row() for index in self.table.selectionModel().selectedRows())
        return [self.model.approval_at(row) for row in rows]

    def current(self) -> Approval | None:
        """The first selected approval, or None."""
        chosen = self.selected()
        return chosen[0] if chosen else None

    def show_only(self, run_ids: set[str] | None) -> None:
        """List only the calls of ``run_ids`` (a notice's runs); None: every call again."""
        self.only = run_ids
        self._apply_filter()

    def _apply_filter(self) -> None:
        shown = 0
        selection = self.table.selectionModel()
        for row in range(self.model.rowCount()):
            hide = self.only is not None and self.model.approval_at(row).run_id not in self.only
            self.table.setRowHidden(row, hide)
            if hide and selection.isRowSelected(row):  # nothing hidden stays chosen
                selection.select(
                    self.model.index(row, 0),
                    QItemSelectionModel.SelectionFlag.Deselect
                    | QItemSelectionModel.SelectionFlag.Rows,
                )
            shown += not hide
        if self.only is None:
            self.filter_bar.hide()
            return
        runs = len(self.only)
        self.filter_note.setText(
            f"Showing the {shown} call(s) of the {runs} run(s) in the notice."
            if runs > 1
            else f"Showing the {shown} call(s) of the run in the notice."
        )
        self.filter_bar.show()

    def take_focus(self) -> None:
        """Put the keyboard on the table, on the oldest call shown if none is selected.

        Return then reviews it at once, as the hint under the table says.
        """
        shown = [r for r in range(self.model.rowCount()) if not self.table.isRowHidden(r)]
        if shown and not self.selected():
            self.table.selectRow(shown[0])
        self.table.setFocus(Qt.FocusReason.OtherFocusReason)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Return or Enter on the table opens the selected call."""
        if (
            watched is self.table
            and event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
            and event.modifiers()
            in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier)
        ):
            self._on_review_clicked()
            return True
        return super().eventFilter(watched, event)

    @Slot()
    def _update(self) -> None:
        has = self.model.rowCount() > 0
        self.table.setVisible(has)
        self.empty.setVisible(not has)
        n = len(self.selected())
        for button in (self.review, self.approve, self.reject):
            button.setEnabled(n > 0)
        self.review.setEnabled(n == 1)
        self.approve.setText(f"Approve {n}…" if n > 1 else "Approve…")
        self.reject.setText(f"Reject {n}…" if n > 1 else "Reject…")

    @Slot(QModelIndex)
    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        self.review_requested.emit(self.model.approval_at(index.row()))

    @Slot(QItemSelection, QItemSelection)
    def _on_selection_changed(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        self._update()
        current = self.current()
        self.approval_selected.emit(current.run_id if current else "")

    @Slot()
    def _on_show_all_clicked(self) -> None:
        self.show_only(None)

    @Slot()
    def _on_review_clicked(self) -> None:
        if (a := self.current()) is not None:
            self.review_requested.emit(a)

    @Slot()
    def _on_approve_clicked(self) -> None:
        if chosen := self.selected():
            self.approve_requested.emit(chosen)

    @Slot()
    def _on_reject_clicked(self) -> None:
        if chosen := self.selected():
            self.reject_requested.emit(chosen)
