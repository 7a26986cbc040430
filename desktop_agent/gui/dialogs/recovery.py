"""The recovery summary shown at start after a crash: what was interrupted, what needs you."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QObject,
    Qt,
    Signal,
    Slot,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.checks import RecoveryItem, RecoveryReport
from desktop_agent.client.views import RunRow
from desktop_agent.domain import Run, RunStatus
from desktop_agent.gui import resources, theme
from desktop_agent.gui.models.base import FlatTableModel, Index
from desktop_agent.gui.sizing import keep_minimum_size


class RecoveryColumn(IntEnum):
    """Columns of the summary."""

    RUN = 0
    BEFORE = 1
    NOW = 2
    WHY = 3


HEADERS = {
    RecoveryColumn.RUN: "Run",
    RecoveryColumn.BEFORE: "At start",
    RecoveryColumn.NOW: "Now",
    RecoveryColumn.WHY: "What happened",
}


def outcome(item: RecoveryItem, now: Run | None) -> str:
    """What became of an interrupted run since the app started."""
    if now is None:
        return "—"
    if item.interrupted and now.status == RunStatus.NEEDS_ATTENTION:
        return "needs you"
    if item.interrupted and (
        now.lease_owner != item.run.lease_owner or now.status != item.run.status
    ):
        return "resumed"
    if item.interrupted:
        return "waiting for a worker"
    return "needs you" if now.status == RunStatus.NEEDS_ATTENTION else theme.status_text(now)


class RecoveryModel(FlatTableModel[RecoveryItem]):
    """Items of a recovery report, with each run's current status.

    Args:
        report: what was found at start.
        parent: owner.
    """

    HEADERS = tuple(HEADERS[c] for c in RecoveryColumn)

    def __init__(self, report: RecoveryReport, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows = list(report.items)
        self.current: dict[str, Run] = {i.run.id: i.run for i in self._rows}

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """What a cell shows."""
        item = self.row_for(index)
        if item is None:
            return None
        now = self.current.get(item.run.id)
        col = RecoveryColumn(index.column())
        if role == Qt.ItemDataRole.DisplayRole:
            if col == RecoveryColumn.RUN:
                return item.run.title or item.run.goal
            if col == RecoveryColumn.BEFORE:
                return theme.status_text(item.run) + (" (interrupted)" if item.interrupted else "")
            if col == RecoveryColumn.NOW:
                return outcome(item, now)
            why = item.why
            if (
                now is not None
                and now.status == RunStatus.NEEDS_ATTENTION
                and now.status_message
                and now.status_message not in why
            ):
                why = f"{why}. Now: {now.status_message}"
            return why
        if role == Qt.ItemDataRole.DecorationRole and col == RecoveryColumn.NOW and now:
            return resources.icon(theme.status_icon_name(now.status))
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.data(self.index(index.row(), RecoveryColumn.WHY))
        return None

    def update_runs(self, rows: list[RunRow]) -> None:
        """Take the current status of the listed runs."""
        changed = False
        for row in rows:
            if row.run.id in self.current and self.current[row.run.id] != row.run:
                self.current[row.run.id] = row.run
                changed = True
        if changed and self._rows:
            self.dataChanged.emit(
                self.index(0, RecoveryColumn.NOW),
                self.index(len(self._rows) - 1, RecoveryColumn.WHY),
            )


class RecoveryDialog(QDialog):
    """Non-modal summary: which runs were interrupted and resumed, which need attention.

    Args:
        report: what was found at start.
        parent: owner.

    Signals:
        run_activated: the analyst double-clicked a run (its id).
    """

    run_activated = Signal(str)

    def __init__(self, report: RecoveryReport, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowIcon(resources.icon("status-needs-attention"))
        self.report = report
        self.model = RecoveryModel(report, self)
        interrupted = sum(1 for i in report.items if i.interrupted)
        attention = sum(1 for i in report.items if i.run.status == RunStatus.NEEDS_ATTENTION)
        crashed = bool(report.dead_workers or interrupted)
        self.setWindowTitle(
            "After a crash: what was interrupted" if crashed else "Runs that need your decision"
        )
        parts = []
        if report.dead_workers:
            pids = ", ".join(str(w.pid) for w in report.dead_workers)
            parts.append(f"A worker stopped without shutting down (pid {pids}).")
        if interrupted:
            parts.append(
                f"{interrupted} run(s) were interrupted; a new worker resumes them from their "
                "journals (completed steps are not repeated)."
            )
        if attention:
            parts.append(f"{attention} run(s) need your decision; the reasons are below.")
        self.summary = QLabel(" ".join(parts) or "Nothing was interrupted.", self)
        self.summary.setWordWrap(True)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(True)
        header = self.table.horizontalHeader()
        fm = self.fontMetrics()
        header.resizeSection(RecoveryColumn.RUN, 240)
        header.resizeSection(
            RecoveryColumn.BEFORE, fm.horizontalAdvance("Waiting for approval (interrupted)") + 16
        )
        header.resizeSection(RecoveryColumn.NOW, fm.horizontalAdvance("waiting for a worker") + 40)
        header.setSectionResizeMode(RecoveryColumn.WHY, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.doubleClicked.connect(self._on_table_double_clicked)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        buttons.accepted.connect(self.accept)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        layout.addWidget(QLabel("Double-click a run to open it.", self))
        layout.addWidget(buttons)
        self.resize(980, 380)
        keep_minimum_size(self)

    def update_runs(self, rows: list[RunRow]) -> None:
        """Refresh the current status column."""
        self.model.update_runs(rows)

    @Slot(QModelIndex)
    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        self.run_activated.emit(self.model.row_at(index.row()).run.id)
