"""The approvals inbox: pending approvals across runs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    Qt,
)

from desktop_agent.domain import Approval
from desktop_agent.gui import fmt
from desktop_agent.gui.models.base import FlatTableModel, Index


@dataclass(frozen=True)
class ApprovalRow:
    """An approval with the title of its run."""

    approval: Approval
    run_title: str


class ApprovalColumn(IntEnum):
    """Columns of the inbox."""

    RUN = 0
    TOOL = 1
    ARGUMENTS = 2
    RULE = 3
    WAITING = 4
    DEADLINE = 5


HEADERS = {
    ApprovalColumn.RUN: "Run",
    ApprovalColumn.TOOL: "Tool",
    ApprovalColumn.ARGUMENTS: "Arguments",
    ApprovalColumn.RULE: "Why it asks",
    ApprovalColumn.WAITING: "Waiting",
    ApprovalColumn.DEADLINE: "Time left",
}


class ApprovalRole(IntEnum):
    """Custom data roles of the inbox."""

    APPROVAL = Qt.ItemDataRole.UserRole + 1


def time_left(deadline: float | None, now: float | None = None) -> str:
    """``12m left``, ``expired``, or ``no deadline``."""
    if deadline is None:
        return "no deadline"
    left = deadline - (time.time() if now is None else now)
    if left <= 0:
        return "expired"
    return f"{fmt.format_duration(left)} left"


def arguments_preview(arguments: Any, width: int = 80) -> str:
    """The arguments on one line."""
    if isinstance(arguments, dict):
        parts = []
        for key, value in arguments.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            shown = " ".join(str(shown).split())
            parts.append(f"{key}={shown[:40] + '…' if len(shown) > 40 else shown}")
        text = ", ".join(parts)
    else:
        text = json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


class ApprovalListModel(FlatTableModel[ApprovalRow]):
    """Pending approvals, oldest first.

    Args:
        parent: owner.
    """

    HEADERS = tuple(HEADERS[c] for c in ApprovalColumn)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """What a cell shows."""
        row = self.row_for(index)
        if row is None:
            return None
        a = row.approval
        col = ApprovalColumn(index.column())
        if role == ApprovalRole.APPROVAL:
            return a
        if role == Qt.ItemDataRole.DisplayRole:
            return {
                ApprovalColumn.RUN: row.run_title,
                ApprovalColumn.TOOL: a.tool,
                ApprovalColumn.ARGUMENTS: arguments_preview(a.arguments),
                ApprovalColumn.RULE: a.rule,
                ApprovalColumn.WAITING: fmt.ago(a.created_at),
                ApprovalColumn.DEADLINE: time_left(a.deadline),
            }[col]
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{a.tool} for run {a.run_id}\n{a.rule}\n\n{a.reason}".strip()
        return None

    def approval_at(self, row: int) -> Approval:
        """The approval at ``row``."""
        return self._rows[row].approval

    def approvals(self) -> list[Approval]:
        """Every listed approval."""
        return [r.approval for r in self._rows]

    def set_rows(self, rows: Iterable[ApprovalRow]) -> None:
        """Show these approvals, keeping rows that stay (and the selection on them)."""
        wanted = list(rows)
        ids = {r.approval.id for r in wanted}
        for i in range(len(self._rows) - 1, -1, -1):
            if self._rows[i].approval.id not in ids:
                self.beginRemoveRows(QModelIndex(), i, i)
                del self._rows[i]
                self.endRemoveRows()
        have = {r.approval.id: i for i, r in enumerate(self._rows)}
        new = []
        for row in wanted:
            at = have.get(row.approval.id)
            if at is None:
                new.append(row)
            elif self._rows[at] != row:
                self._rows[at] = row
                self.dataChanged.emit(self.index(at, 0), self.index(at, len(ApprovalColumn) - 1))
        if new:
            start = len(self._rows)
            self.beginInsertRows(QModelIndex(), start, start + len(new) - 1)
            self._rows.extend(new)
            self.endInsertRows()

    def refresh_times(self) -> None:
        """Re-render the ages and time left as the clock moves."""
        if self._rows:
            self.dataChanged.emit(
                self.index(0, ApprovalColumn.WAITING),
                self.index(len(self._rows) - 1, ApprovalColumn.DEADLINE),
                [Qt.ItemDataRole.DisplayRole],
            )
