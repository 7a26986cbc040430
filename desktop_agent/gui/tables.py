"""The app's list tables: one look for the run list, the approvals inbox and the tabs."""

from __future__ import annotations

from PySide6.QtCore import QAbstractItemModel
from PySide6.QtWidgets import QAbstractItemView, QTableView, QWidget


def list_table(model: QAbstractItemModel, parent: QWidget) -> QTableView:
    """A table of ``model`` whose rows are items: whole rows selected one at a time.

    Alternating rows, no grid, no row numbers, one line of text per row (as tall as the
    parent's font plus some air), headers that do not light up with the selection.
    """
    table = QTableView(parent)
    table.setModel(model)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setAlternatingRowColors(True)
    table.setShowGrid(False)
    table.setWordWrap(False)
    table.setTabKeyNavigation(False)
    table.verticalHeader().hide()
    table.verticalHeader().setDefaultSectionSize(parent.fontMetrics().height() + 12)
    header = table.horizontalHeader()
    header.setHighlightSections(False)
    header.setStretchLastSection(False)
    return table
