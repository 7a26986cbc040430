"""Thin table models of the Batches view: the batches, and the items of the one selected."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt

from desktop_agent.client.scheduling_views import BatchRow, ItemRow
from desktop_agent.domain import RunStatus
from desktop_agent.domain.scheduling import ItemStatus
from desktop_agent.gui import fmt, theme
from desktop_agent.gui.models.row_table import Role, RowTableModel, status_icon

ITEM_RUN_STATUS = {
    ItemStatus.PENDING: RunStatus.QUEUED,
    ItemStatus.RUNNING: RunStatus.RUNNING,
    ItemStatus.COMPLETED: RunStatus.COMPLETED,
    ItemStatus.FAILED: RunStatus.FAILED,
    ItemStatus.CANCELLED: RunStatus.CANCELLED,
    ItemStatus.STOPPED: RunStatus.STOPPED,
}
"""The run status whose icon and color an item status borrows."""

ITEM_LABELS = {
    ItemStatus.PENDING: "Pending",
    ItemStatus.RUNNING: "Running",
    ItemStatus.COMPLETED: "Completed",
    ItemStatus.FAILED: "Failed",
    ItemStatus.CANCELLED: "Cancelled",
    ItemStatus.STOPPED: "Stopped",
}


def item_name(item: str, from_folder: bool) -> str:
    """A batch item as listed: a file's name, or the line itself."""
    return Path(item).name if from_folder else item


def goal_line(goal: str) -> str:
    """The first non-empty line of a goal."""
    return next((line.strip() for line in goal.splitlines() if line.strip()), goal)


class BatchColumn(IntEnum):
    """Columns of the batch list."""

    GOAL = 0
    PROGRESS = 1
    FAILED = 2
    RUNNING = 3
    STARTED = 4


class BatchListModel(RowTableModel[BatchRow]):
    """Batches, newest first."""

    HEADERS = ("Batch", "Progress", "Failed", "Running", "Started")

    def key(self, row: BatchRow) -> str:
        """The batch id."""
        return row.batch.id

    def display(self, row: BatchRow, column: int) -> str:
        """The text of a cell."""
        p = row.progress
        col = BatchColumn(column)
        if col == BatchColumn.GOAL:
            return goal_line(row.batch.template.goal)
        if col == BatchColumn.PROGRESS:
            return f"{p.completed} / {p.total}"
        if col == BatchColumn.FAILED:
            failed = p.failed + p.cancelled
            return str(failed) if failed else "—"
        if col == BatchColumn.RUNNING:
            if p.running:
                return str(p.running)
            if p.stopped:
                return f"{p.stopped} stopped"
            return "done" if p.finished else "—"
        return fmt.clock(row.batch.created_at, self.now)

    def cell(self, row: BatchRow, column: int, role: int) -> Any:
        """Progress fractions, colors, alignment and tooltips."""
        p = row.progress
        col = BatchColumn(column)
        if role == Role.FRACTION and col == BatchColumn.PROGRESS:
            return (p.completed, p.failed + p.cancelled, p.running, p.total)
        if role == Qt.ItemDataRole.ForegroundRole and col == BatchColumn.FAILED and p.failed:
            return theme.status_color(RunStatus.FAILED)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (
            BatchColumn.FAILED,
            BatchColumn.RUNNING,
        ):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            b = row.batch
            return (
                f"{b.template.goal}\n\nBatch {b.id}: {p.describe()}\n"
                f"{b.total} items from the {b.source}, {b.concurrency} at a time"
            )
        return None


class ItemColumn(IntEnum):
    """Columns of a batch's item table."""

    INDEX = 0
    ITEM = 1
    STATUS = 2
    RUN = 3
    ATTEMPTS = 4
    ERROR = 5


class BatchItemModel(RowTableModel[ItemRow]):
    """The items of one batch, in order."""

    HEADERS = ("#", "Item", "Status", "Run", "Tries", "Error")

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.batch_id: str | None = None
        self.from_folder = False

    def show_batch(self, batch_id: str | None, from_folder: bool, rows: Iterable[ItemRow]) -> None:
        """Show the items of ``batch_id`` (another batch's rows are replaced)."""
        if batch_id != self.batch_id:
            self.set_rows(())
            self.batch_id, self.from_folder = batch_id, from_folder
        self.set_rows(rows)

    def key(self, row: ItemRow) -> str:
        """The item's index in its batch."""
        return str(row.item.idx)

    def display(self, row: ItemRow, column: int) -> str:
        """The text of a cell."""
        item = row.item
        col = ItemColumn(column)
        if col == ItemColumn.INDEX:
            return str(item.idx + 1)
        if col == ItemColumn.ITEM:
            return item_name(item.item, self.from_folder)
        if col == ItemColumn.STATUS:
            return ITEM_LABELS[item.status]
        if col == ItemColumn.RUN:
            return item.run_id or "—"
        if col == ItemColumn.ATTEMPTS:
            return str(item.attempts) if item.attempts else "—"
        return row.error

    def cell(self, row: ItemRow, column: int, role: int) -> Any:
        """Status icons and colors, tooltips."""
        item = row.item
        col = ItemColumn(column)
        status = ITEM_RUN_STATUS[item.status]
        if role == Qt.ItemDataRole.DecorationRole and col == ItemColumn.STATUS:
            return status_icon(status)
        if role == Qt.ItemDataRole.ForegroundRole and col in (ItemColumn.STATUS, ItemColumn.ERROR):
            return theme.status_color(status)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (
            ItemColumn.INDEX,
            ItemColumn.ATTEMPTS,
        ):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            lines = [item.item]
            if row.error:
                lines.append(row.error)
            if item.run_id:
                lines.append(f"Run {item.run_id}: double-click to open it.")
            return "\n".join(lines)
        return None
