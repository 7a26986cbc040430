"""The compare window: two runs' steps side by side, their totals, and what differs.

Opened from the run list with two runs selected (View ▸ Compare runs, the run list's
context menu, Ctrl+Shift+D). It is a separate, non-modal window so the analyst can keep
it beside the main one. The comparison (:mod:`desktop_agent.client.compare`) and the diff
of a selected row are computed on the task pool, never on the GUI thread: two 10,000-step
runs take a few tenths of a second to align.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Slot,
)
from PySide6.QtGui import QBrush, QCloseEvent, QColor, QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.api import Client
from desktop_agent.client.compare import (
    CompareRow,
    Comparison,
    RowKind,
    RunTotals,
    StepDiff,
    compare_runs,
    step_diff,
)
from desktop_agent.client.messages import plain_error
from desktop_agent.client.stepkinds import clip
from desktop_agent.client.views import StepEntry, step_summary
from desktop_agent.domain import Run, RunStatus
from desktop_agent.domain.units import format_duration, format_usd
from desktop_agent.gui import diffview, theme
from desktop_agent.gui.keyboard import close_on_escape
from desktop_agent.gui.tables import list_table
from desktop_agent.gui.tasks import TaskRunner

Index = QModelIndex | QPersistentModelIndex

COLUMNS = ("A #", "Step in A", "", "B #", "Step in B", "Differs", "Δ cost", "Δ tokens", "Δ time")
MARKS = {RowKind.SAME: "", RowKind.CHANGED: "≠", RowKind.ONLY_A: "A", RowKind.ONLY_B: "B"}
TIPS = {
    RowKind.SAME: "The same in both runs",
    RowKind.CHANGED: "Both runs have this step, but it differs",
    RowKind.ONLY_A: "Only run A has this step",
    RowKind.ONLY_B: "Only run B has this step",
}
SUMMARY_CHARS = 90
"""Characters of a step's summary in a cell."""


def _signed(value: float, text: str) -> str:
    return ("+" if value > 0 else "−") + text


def delta_usd(value: float) -> str:
    """A cost difference, or nothing when there is none worth showing."""
    return "" if abs(value) < 0.00005 else _signed(value, format_usd(abs(value)))


def delta_tokens(value: int) -> str:
    """A token difference, or nothing."""
    return "" if value == 0 else _signed(value, f"{abs(value):,}")


def delta_seconds(value: float) -> str:
    """A duration difference, or nothing below a tenth of a second."""
    if abs(value) < 0.1:
        return ""
    text = f"{abs(value):.1f}s" if abs(value) < 60 else format_duration(abs(value))
    return _signed(value, text)


def row_color(kind: RowKind, palette: QPalette) -> QColor | None:
    """The background of a row of ``kind`` (None: the table's own)."""
    base = {
        RowKind.CHANGED: theme.warning_color(palette),
        RowKind.ONLY_A: theme.status_color(RunStatus.FAILED, palette),
        RowKind.ONLY_B: theme.status_color(RunStatus.COMPLETED, palette),
    }.get(kind)
    if base is None:
        return None
    color = QColor(base)
    color.setAlpha(48)
    return color


class CompareModel(QAbstractTableModel):
    """The aligned rows of a comparison."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: tuple[CompareRow, ...] = ()
        self._summaries: dict[tuple[str, int], str] = {}

    def set_comparison(self, result: Comparison | None) -> None:
        """Show ``result``'s rows (None: none)."""
        self.beginResetModel()
        self.rows = result.rows if result is not None else ()
        self._summaries.clear()
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        """Aligned rows."""
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        """The columns of :data:`COLUMNS`."""
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        """Column titles."""
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def _summary(self, entry: StepEntry | None) -> str:
        if entry is None:
            return ""
        key = (entry.run_id, entry.seq)
        text = self._summaries.get(key)
        if text is None:  # parsed when first shown, not for every row
            text = clip(step_summary(entry, SUMMARY_CHARS), SUMMARY_CHARS)
            self._summaries[key] = text
        return text

    def _display(self, row: CompareRow, column: int) -> str:
        if column == 0:
            return str(row.a.seq) if row.a else ""
        if column == 1:
            return self._summary(row.a)
        if column == 2:
            return MARKS[row.kind]
        if column == 3:
            return str(row.b.seq) if row.b else ""
        if column == 4:
            return self._summary(row.b)
        if column == 5:
            parts = [("arguments", row.arguments_differ), ("result", row.result_differs)]
            return ", ".join(p for p, on in parts if on)
        if column == 6:
            return delta_usd(row.delta_cost)
        if column == 7:
            return delta_tokens(row.delta_tokens)
        return delta_seconds(row.delta_seconds)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """Cells, row colours and the mark's tooltip."""
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(row, index.column())
        if role == Qt.ItemDataRole.BackgroundRole:
            color = row_color(row.kind, QPalette())
            return QBrush(color) if color is not None else None
        if role == Qt.ItemDataRole.ToolTipRole:
            return TIPS[row.kind]
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() in (0, 3, 6, 7, 8):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() == 2:
            return int(Qt.AlignmentFlag.AlignCenter)
        return None


class DifferencesOnly(QSortFilterProxyModel):
    """Hides the rows that are the same in both runs, when asked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.only_differences = False

    def set_only_differences(self, on: bool) -> None:
        """Show only changed and one-sided rows (or every row)."""
        self.beginFilterChange()
        self.only_differences = on
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        """Every row, or only those that differ."""
        if not self.only_differences:
            return True
        model = self.sourceModel()
        assert isinstance(model, CompareModel)
        return model.rows[source_row].kind != RowKind.SAME


def _run_line(label: str, run: Run) -> str:
    return (
        f"<b>{label}</b> · {html.escape(theme.status_text(run))} · "
        f"{html.escape(clip(run.goal, 120))} <span style='color:gray'>({run.id})</span>"
    )


def diff_html(diff: StepDiff, row: CompareRow, palette: QPalette) -> str:
    """What differs in ``row``, as HTML: outcomes, arguments by name, the result's diff."""
    if row.kind == RowKind.SAME:
        return "<p>This step is the same in both runs.</p>"
    parts: list[str] = []
    if row.a is None or row.b is None:
        only = "A" if row.b is None else "B"
        entry = row.a or row.b
        assert entry is not None
        parts.append(f"<p>Only run {only} has step #{entry.seq} ({html.escape(entry.name)}).</p>")
    elif diff.status_a != diff.status_b:
        parts.append(
            f"<p><b>Outcome</b>: A {html.escape(diff.status_a)}; B {html.escape(diff.status_b)}</p>"
        )
    side_by_side = [c for c in diff.arguments if not c.lines]
    if side_by_side:
        cells = "".join(
            f"<tr><td><b>{html.escape(c.name or '(all)')}</b></td>"
            f"<td>{html.escape(c.a if c.a is not None else '(not passed)')}</td>"
            f"<td>{html.escape(c.b if c.b is not None else '(not passed)')}</td></tr>"
            for c in side_by_side
        )
        parts.append(
            "<p><b>Arguments</b></p><table cellpadding='3'>"
            "<tr><th align='left'>name</th><th align='left'>A</th><th align='left'>B</th></tr>"
            f"{cells}</table>"
        )
    for change in diff.arguments:
        if change.lines:  # text of several lines: its diff, not two quoted strings
            parts.append(f"<p><b>Argument {html.escape(change.name)}</b></p>")
            parts.append(diffview.lines_html(list(change.lines), palette))
    if diff.result_lines:
        parts.append("<p><b>Result</b></p>" + diffview.lines_html(list(diff.result_lines), palette))
        if diff.cut:
            parts.append(f"<p><i>The diff is cut after {len(diff.result_lines)} lines.</i></p>")
    elif row.a is not None and row.b is not None:
        parts.append("<p>The results are the same.</p>")
    return "".join(parts)


class CompareWindow(QWidget):
    """Two runs side by side (see the module's docstring).

    Args:
        client: the app's client.
        tasks: the app's task pool (the comparison is computed there).
        run_a: the first run's id.
        run_b: the second run's id.
    """

    def __init__(
        self,
        client: Client,
        tasks: TaskRunner,
        run_a: str,
        run_b: str,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        close_on_escape(self)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setWindowTitle("Compare runs")
        self.client, self.tasks = client, tasks
        self.run_ids = (run_a, run_b)
        self.comparison: Comparison | None = None
        self.closed = False
        """Closed by the analyst: answers from the task pool arriving later are dropped."""
        self.model = CompareModel(self)
        self.proxy = DifferencesOnly(self)
        self.proxy.setSourceModel(self.model)
        self._build()
        # A fixed minimum keeps the totals appearing from changing the window's limits
        # (which the offscreen platform warns about on every change).
        self.setMinimumSize(800, 500)
        self.resize(1280, 800)
        self.reload()

    def _build(self) -> None:
        self.runs_label = QLabel("Comparing…", self)
        self.runs_label.setTextFormat(Qt.TextFormat.RichText)
        self.runs_label.setWordWrap(True)
        self.totals = QGridLayout()
        self.total_rows: list[str] = []
        """The totals' row labels, top to bottom (the first is the header)."""
        self.totals.setHorizontalSpacing(24)
        self.only_differences = QCheckBox("Only differences", self)
        self.only_differences.toggled.connect(self._on_only_differences_toggled)
        self.counts_label = QLabel(self)
        self.table = list_table(self.proxy, self)
        header = self.table.horizontalHeader()
        fm = self.fontMetrics()
        for col, sample in {0: "9999", 2: "≠", 3: "9999", 5: "arguments, result"}.items():
            header.resizeSection(col, fm.horizontalAdvance(sample) + 24)
        for col in (6, 7, 8):
            header.resizeSection(col, fm.horizontalAdvance("+$0.0000") + 24)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Stretch)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row_changed)
        self.diff = QTextBrowser(self)
        self.diff.setPlaceholderText("Select a row to see what differs.")
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.table)
        split.addWidget(self.diff)
        split.setSizes([520, 220])
        split.setChildrenCollapsible(False)
        bar = QHBoxLayout()
        bar.addWidget(self.counts_label, 1)
        bar.addWidget(self.only_differences)
        layout = QVBoxLayout(self)
        layout.addWidget(self.runs_label)
        layout.addLayout(self.totals)
        layout.addLayout(bar)
        layout.addWidget(split, 1)

    def reload(self) -> None:
        """Read both runs again and align them (on the task pool)."""
        client, (a, b) = self.client, self.run_ids
        self.tasks.submit(lambda: compare_runs(client, a, b), self._on_compared, self._on_failed)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Drop answers still on their way (the window is deleted once closed)."""
        self.closed = True
        super().closeEvent(event)

    def _on_compared(self, result: Comparison) -> None:
        if self.closed:
            return
        self.comparison = result
        self.setWindowTitle(f"Compare runs {result.run_a.id} and {result.run_b.id}")
        self.runs_label.setText(
            _run_line("A", result.run_a) + "<br>" + _run_line("B", result.run_b)
        )
        if result.shared is not None and result.own_a is not None and result.own_b is not None:
            # A fork and its parent: the steps they share, then each one's own work.
            self._show_totals(result.own_a, result.own_b, result.shared)
        else:
            self._show_totals(result.totals_a, result.totals_b)
        counts = {k: result.count(k) for k in RowKind}
        self.counts_label.setText(
            f"{counts[RowKind.SAME]} same, {counts[RowKind.CHANGED]} changed, "
            f"{counts[RowKind.ONLY_A]} only in A, {counts[RowKind.ONLY_B]} only in B"
        )
        self.model.set_comparison(result)

    def _on_failed(self, exc: Exception) -> None:
        if self.closed:
            return
        self.runs_label.setText(html.escape(f"Cannot compare the runs: {plain_error(exc)}"))

    def _show_totals(self, a: RunTotals, b: RunTotals, shared: RunTotals | None = None) -> None:
        while self.totals.count():
            item = self.totals.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        own = " (own)" if shared is not None else ""
        rows = [
            ("", "Steps", "Cost", "Tokens", "Step time", "Worked"),
        ]
        if shared is not None:
            rows.append(
                (
                    "Shared",
                    f"{shared.steps:,}",
                    format_usd(shared.cost_usd),
                    f"{shared.tokens:,}",
                    format_duration(shared.step_seconds),
                    "",
                )
            )
        rows += [
            (
                "A" + own,
                f"{a.steps:,}",
                format_usd(a.cost_usd),
                f"{a.tokens:,}",
                format_duration(a.step_seconds),
                format_duration(a.worked_seconds),
            ),
            (
                "B" + own,
                f"{b.steps:,}",
                format_usd(b.cost_usd),
                f"{b.tokens:,}",
                format_duration(b.step_seconds),
                format_duration(b.worked_seconds),
            ),
            (
                "B − A" + own,
                delta_tokens(b.steps - a.steps) or "=",
                delta_usd(b.cost_usd - a.cost_usd) or "=",
                delta_tokens(b.tokens - a.tokens) or "=",
                delta_seconds(b.step_seconds - a.step_seconds) or "=",
                delta_seconds(b.worked_seconds - a.worked_seconds) or "=",
            ),
        ]
        self.total_rows = [cells[0] for cells in rows]
        for r, cells in enumerate(rows):
            for c, text in enumerate(cells):
                label = QLabel(f"<b>{text}</b>" if r == 0 or c == 0 else text, self)
                label.setObjectName(f"total_{r}_{c}")
                align = Qt.AlignmentFlag.AlignLeft if c == 0 else Qt.AlignmentFlag.AlignRight
                label.setAlignment(align | Qt.AlignmentFlag.AlignVCenter)
                self.totals.addWidget(label, r, c)
        self.totals.setColumnStretch(len(rows[0]), 1)

    def total(self, row: str, column: str) -> str:
        """The text of a totals cell: ``row`` as labelled, ``column`` e.g. ``Cost``.

        Rows: ``A``, ``B``, ``B − A``; for a fork and its parent ``Shared``, ``A (own)``,
        ``B (own)``, ``B − A (own)``.
        """
        columns = ["", "Steps", "Cost", "Tokens", "Step time", "Worked"]
        if row not in self.total_rows:
            return ""
        item = self.totals.itemAtPosition(self.total_rows.index(row), columns.index(column))
        widget = item.widget() if item is not None else None
        return widget.text() if isinstance(widget, QLabel) else ""

    @Slot(bool)
    def _on_only_differences_toggled(self, on: bool) -> None:
        self.proxy.set_only_differences(on)

    @Slot(QModelIndex, QModelIndex)
    def _on_current_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            self.diff.clear()
            return
        row = self.model.rows[self.proxy.mapToSource(current).row()]
        self.diff.setHtml("<p><i>Comparing the step…</i></p>")
        palette = self.palette()

        def shown(diff: StepDiff) -> None:
            if not self.closed and self.table.currentIndex() == current:
                self.diff.setHtml(diff_html(diff, row, palette))

        self.tasks.submit(lambda: step_diff(row), shown, self._on_failed)
