"""The Batches view: batches with their durable progress, and the selected batch's items."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QItemSelection, QModelIndex, Qt, Signal, Slot
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from desktop_agent.client.scheduling_views import BatchItems, BatchRow
from desktop_agent.gui.models.scheduling import (
    BatchColumn,
    BatchItemModel,
    BatchListModel,
    ItemColumn,
    short_path,
)
from desktop_agent.gui.toolbuttons import add_button
from desktop_agent.gui.views.common import (
    BatchProgressDelegate,
    TablePane,
    icon_action,
    retint,
    spacer,
    view_bar,
)
from desktop_agent.gui.widgets.header import ElidedLabel


class BatchesView(QWidget):
    """Batches on the left, the selected batch's items on the right.

    Args:
        batches: the batch list.
        items: the items of the selected batch.
        parent: owner.

    Signals:
        start_requested: the analyst wants to start a batch.
        retry_requested: retry the failed and cancelled items of a batch (its id).
        batch_selected: the selected batch changed (its id, or "" for none).
        run_requested: the analyst double-clicked an item that has a run (the run id).
    """

    start_requested = Signal()
    retry_requested = Signal(str)
    batch_selected = Signal(str)
    run_requested = Signal(str)

    def __init__(
        self, batches: BatchListModel, items: BatchItemModel, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.model = batches
        self.items = items
        self.bar = view_bar(self, "Batch actions")
        self.start_action = icon_action(self, "batch", "Start batch…")
        self.retry_action = icon_action(self, "retry", "Retry failed items")
        self.retry_action.setToolTip("Start the failed and cancelled items of this batch again")
        add_button(self.bar, self.start_action)
        add_button(self.bar, self.retry_action)
        self.bar.addWidget(spacer(self.bar))
        self.summary = QLabel(self)
        self.summary.setContentsMargins(0, 0, 6, 0)
        self.bar.addWidget(self.summary)
        self.list_pane = TablePane(
            batches,
            "No batches yet. Start batch… runs one goal over every file of a folder or every "
            "line of a file, a few runs at a time, with progress that survives restarts.",
            self,
        )
        self.table = self.list_pane.table
        self.table.setItemDelegateForColumn(BatchColumn.PROGRESS, BatchProgressDelegate(self.table))
        fm = self.fontMetrics()
        self.list_pane.size_columns(
            {
                BatchColumn.PROGRESS: fm.horizontalAdvance("1000 / 1000") + 110,
                BatchColumn.FAILED: fm.horizontalAdvance("Failed") + 20,
                BatchColumn.RUNNING: fm.horizontalAdvance("Running") + 20,
                BatchColumn.STARTED: fm.horizontalAdvance("Wed 00:00") + 20,
            },
            BatchColumn.GOAL,
        )
        self.item_title = ElidedLabel(self)
        self.item_pane = TablePane(items, "Select a batch to see its items.", self)
        self.item_table = self.item_pane.table
        self.item_pane.size_columns(
            {
                ItemColumn.INDEX: fm.horizontalAdvance("9999") + 16,
                ItemColumn.ITEM: "quarterly-report.pdf",
                ItemColumn.STATUS: "Completed",
                ItemColumn.RUN: fm.horizontalAdvance("8a894b1abf") + 20,
                ItemColumn.ATTEMPTS: fm.horizontalAdvance("Tries") + 20,
            },
            ItemColumn.ERROR,
        )
        right = QWidget(self)
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.setSpacing(2)
        rl.addWidget(self.item_title)
        rl.addWidget(self.item_pane, 1)
        self.split = QSplitter(Qt.Orientation.Horizontal, self)
        self.split.addWidget(self.list_pane)
        self.split.addWidget(right)
        self.split.setChildrenCollapsible(False)
        self.split.setSizes([600, 660])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 0)
        layout.setSpacing(2)
        layout.addWidget(self.bar)
        layout.addWidget(self.split, 1)

        self.start_action.triggered.connect(self.start_requested)
        self.retry_action.triggered.connect(self._on_retry_triggered)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.item_table.doubleClicked.connect(self._on_item_table_double_clicked)
        for signal in (batches.dataChanged, batches.rowsInserted, batches.rowsRemoved):
            signal.connect(self._update)
        batches.modelReset.connect(self._update)
        self._update()

    def changeEvent(self, event: QEvent) -> None:
        """Re-tint the toolbar's icons when the palette changes (light and dark)."""
        if event.type() == QEvent.Type.PaletteChange:
            retint(self)
        super().changeEvent(event)

    def current(self) -> BatchRow | None:
        """The selected batch."""
        rows = self.table.selectionModel().selectedRows()
        return self.model.row_at(rows[0].row()) if rows else None

    def select(self, batch_id: str) -> bool:
        """Select a batch."""
        row = self.model.row_of(batch_id)
        if row < 0:
            return False
        self.table.selectRow(row)
        self.table.scrollTo(self.model.index(row, 0))
        return True

    def show_items(self, items: BatchItems) -> None:
        """Show the items read for a batch (ignored unless it is still the selected one)."""
        current = self.current()
        if current is None or current.batch.id != items.batch_id:
            return
        self.items.show_batch(items.batch_id, current.batch.from_folder, items.rows)

    @Slot()
    def _update(self) -> None:
        current = self.current()
        failed = current.progress.failed + current.progress.cancelled if current else 0
        self.retry_action.setEnabled(failed > 0)
        self.retry_action.setText(
            f"Retry {failed} failed item{'s' if failed != 1 else ''}"
            if failed
            else "Retry failed items"
        )
        rows = self.model.rows()
        active = sum(1 for r in rows if not r.progress.finished)
        self.summary.setText(
            f"{len(rows)} batch{'es' if len(rows) != 1 else ''}"
            + (f" · {active} running" if active else "")
        )
        if current is None:
            self.item_title.set_full_text("Items")
            return
        b = current.batch
        source = b.source
        for lead in ("files of ", "lines of "):
            if source.startswith(lead):
                source = lead + short_path(source[len(lead) :], 48)
        self.item_title.set_full_text(
            f"{current.progress.describe()}  ·  {b.total} items from the {source}, "
            f"{b.concurrency} at a time"
        )
        self.item_title.setToolTip(f"Batch {b.id}: {b.template.goal}")

    @Slot(QItemSelection, QItemSelection)
    def _on_selection_changed(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        current = self.current()
        if current is None:
            self.items.show_batch(None, False, ())
        elif current.batch.id != self.items.batch_id:
            self.items.show_batch(current.batch.id, current.batch.from_folder, ())
        self._update()
        self.batch_selected.emit(current.batch.id if current else "")

    @Slot()
    def _on_retry_triggered(self) -> None:
        current = self.current()
        if current is not None:
            self.retry_requested.emit(current.batch.id)

    @Slot(QModelIndex)
    def _on_item_table_double_clicked(self, index: QModelIndex) -> None:
        run_id = self.items.row_at(index.row()).item.run_id
        if run_id:
            self.run_requested.emit(run_id)
