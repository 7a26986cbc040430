"""The part every flat table model of the app shares: rows, counts and column titles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt

Index = QModelIndex | QPersistentModelIndex
ROOT = QModelIndex()

R = TypeVar("R")


class FlatTableModel(QAbstractTableModel, Generic[R]):
    """A flat table over a list of rows, with one title per column.

    Subclasses set ``HEADERS`` and implement ``data``; :meth:`row_for` gives the row of a
    cell index, or None when the index is not one of ours.

    Args:
        parent: owner.
    """

    HEADERS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[R] = []

    def rowCount(self, parent: Index = ROOT) -> int:
        """Rows under ``parent`` (a flat table)."""
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = ROOT) -> int:
        """Columns under ``parent``."""
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        """Column titles."""
        if (
            orientation == Qt.Orientation.Horizontal
            and role == Qt.ItemDataRole.DisplayRole
            and 0 <= section < len(self.HEADERS)
        ):
            return self.HEADERS[section]
        return None

    def row_for(self, index: Index) -> R | None:
        """The row behind ``index``, or None for an invalid or stale index."""
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        return self._rows[index.row()]

    def row_at(self, row: int) -> R:
        """The row at position ``row``."""
        return self._rows[row]

    def rows(self) -> Sequence[R]:
        """Every row, in order."""
        return tuple(self._rows)
