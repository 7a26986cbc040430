"""The base of the scheduling tables: frozen rows, keyed, merged in place.

:class:`RowTableModel` holds rows read off the GUI thread and merges a new list into itself
(moves, changes, inserts, removals; never a reset), so that views keep their selection and
scroll position while polls come in. :class:`Role` names the data roles the scheduling
models share.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from enum import IntEnum
from typing import Any, ClassVar, TypeVar

from PySide6.QtCore import (
    QObject,
    Qt,
)
from PySide6.QtGui import QIcon

from desktop_agent.domain import RunStatus
from desktop_agent.gui import resources, theme
from desktop_agent.gui.models.base import ROOT, FlatTableModel, Index

R = TypeVar("R")


class Role(IntEnum):
    """Custom data roles shared by the scheduling models."""

    ROW = Qt.ItemDataRole.UserRole + 1
    """The row value itself."""
    KEY = Qt.ItemDataRole.UserRole + 2
    """Its id (schedule, batch or watch id; an item's index)."""
    FRACTION = Qt.ItemDataRole.UserRole + 3
    """Batches: (completed, failed, running, total) for the progress bar."""


class RowTableModel(FlatTableModel[R]):
    """A flat table of frozen rows, keyed, merged in place.

    Subclasses give the headers, the key of a row and what its cells show.

    Args:
        parent: owner.
    """

    TIME_COLUMNS: ClassVar[tuple[int, ...]] = ()
    """Columns that show times relative to now (re-rendered by :meth:`refresh_times`)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.now = time.time()

    # ------------------------------------------------------------------ to override

    def key(self, row: R) -> str:
        """The row's identity."""
        raise NotImplementedError

    def display(self, row: R, column: int) -> str:
        """The text of a cell."""
        raise NotImplementedError

    def cell(self, row: R, column: int, role: int) -> Any:
        """Any other role of a cell (icons, colors, tooltips); None by default."""
        return None

    # ------------------------------------------------------------------ Qt API

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """What a cell shows for ``role``."""
        row = self.row_for(index)
        if row is None:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.display(row, index.column())
        if role == Role.ROW:
            return row
        if role == Role.KEY:
            return self.key(row)
        return self.cell(row, index.column(), role)

    # ------------------------------------------------------------------ rows

    def row_of(self, key: str) -> int:
        """The position of the row with ``key``, or -1."""
        return next((i for i, r in enumerate(self._rows) if self.key(r) == key), -1)

    def get(self, key: str) -> R | None:
        """The row with ``key``, if listed."""
        at = self.row_of(key)
        return self._rows[at] if at >= 0 else None

    def set_rows(self, rows: Iterable[R]) -> None:
        """Show ``rows`` in this order, keeping rows that stay (and the selection on them)."""
        self.now = time.time()
        wanted = list(rows)
        if not self._rows or not wanted:  # first fill, or emptied: no per-row signals
            if self._rows or wanted:
                self.beginResetModel()
                self._rows = wanted
                self.endResetModel()
            return
        keys = {self.key(r) for r in wanted}
        for i in range(len(self._rows) - 1, -1, -1):
            if self.key(self._rows[i]) not in keys:
                self.beginRemoveRows(ROOT, i, i)
                del self._rows[i]
                self.endRemoveRows()
        changed: list[int] = []
        for i, row in enumerate(wanted):
            k = self.key(row)
            if i < len(self._rows) and self.key(self._rows[i]) == k:
                if self._rows[i] != row:
                    self._rows[i] = row
                    changed.append(i)
                continue
            at = next(
                (j for j in range(i + 1, len(self._rows)) if self.key(self._rows[j]) == k), -1
            )
            if at >= 0:
                self.beginMoveRows(ROOT, at, at, ROOT, i)
                del self._rows[at]
                self._rows.insert(i, row)
                self.endMoveRows()
                changed.append(i)
            else:
                self.beginInsertRows(ROOT, i, i)
                self._rows.insert(i, row)
                self.endInsertRows()
        if changed:
            last = len(self.HEADERS) - 1
            self.dataChanged.emit(self.index(min(changed), 0), self.index(max(changed), last))

    def refresh_times(self) -> None:
        """Re-render the relative times as the clock moves."""
        self.now = time.time()
        if self._rows and self.TIME_COLUMNS:
            self.dataChanged.emit(
                self.index(0, min(self.TIME_COLUMNS)),
                self.index(len(self._rows) - 1, max(self.TIME_COLUMNS)),
                [Qt.ItemDataRole.DisplayRole],
            )


def status_icon(status: RunStatus) -> QIcon:
    """The icon of a run status (an item's or a schedule's state borrows one)."""
    return resources.icon(theme.status_icon_name(status))
