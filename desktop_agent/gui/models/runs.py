"""The run list: a table model over :class:`RunRow` values and a filtering proxy."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QObject,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor, QFont

from desktop_agent.client.views import RunRow, model_label
from desktop_agent.domain import RunStatus
from desktop_agent.gui import fmt, resources, theme
from desktop_agent.gui.models.base import FlatTableModel, Index
from desktop_agent.gui.widgets.header_text import agent_label, agent_words


class RunColumn(IntEnum):
    """Columns of the run list."""

    STATUS = 0
    GOAL = 1
    MODEL = 2
    PROGRESS = 3
    COST = 4
    STARTED = 5
    ACTIVITY = 6


HEADERS = {
    RunColumn.STATUS: "Status",
    RunColumn.GOAL: "Goal",
    RunColumn.MODEL: "Model",
    RunColumn.PROGRESS: "Progress",
    RunColumn.COST: "Cost",
    RunColumn.STARTED: "Started",
    RunColumn.ACTIVITY: "Last activity",
}


class RunRole(IntEnum):
    """Custom data roles of the run list."""

    ROW = Qt.ItemDataRole.UserRole + 1
    """The :class:`RunRow` itself."""
    RUN_ID = Qt.ItemDataRole.UserRole + 2
    SORT = Qt.ItemDataRole.UserRole + 3
    """A value that sorts the column sensibly (numbers for times and money)."""
    PROGRESS = Qt.ItemDataRole.UserRole + 4
    """Fraction done, 0..1, or -1 when unknown."""
    TAGS = Qt.ItemDataRole.UserRole + 5
    """The run's tags, as the goal cell shows them after the goal ("" when none)."""


_URGENCY = {
    RunStatus.NEEDS_ATTENTION: 0,
    RunStatus.WAITING: 1,
    RunStatus.RUNNING: 2,
    RunStatus.QUEUED: 3,
    RunStatus.PAUSED: 4,
    RunStatus.STOPPED: 5,
    RunStatus.FAILED: 6,
    RunStatus.COMPLETED: 7,
    RunStatus.CANCELLED: 8,
}


def progress_of(row: RunRow) -> float:
    """Fraction of the plan done (1 when completed), or -1 when there is no plan."""
    if row.run.status == RunStatus.COMPLETED:
        return 1.0
    if row.plan:
        return row.plan_done / len(row.plan)
    return -1.0


def progress_text(row: RunRow) -> str:
    """``3/5 plan · 42 steps`` or ``42 steps``."""
    steps = f"{row.run.last_seq} step{'s' if row.run.last_seq != 1 else ''}"
    if row.plan:
        return f"{row.plan_done}/{len(row.plan)} plan · {steps}"
    return steps


def tags_text(tags: tuple[str, ...]) -> str:
    """``#q3 #urgent``: a run's tags as the run list shows them ("" when none)."""
    return " ".join(f"#{t}" for t in tags)


def cost_text(row: RunRow) -> str:
    """The run's cost; a demo run's cost is simulated and says so."""
    if not row.run.cost_usd:
        return "—"
    text = fmt.format_usd(row.run.cost_usd)
    return f"{text} sim." if row.run.is_demo else text


@dataclass(frozen=True, slots=True)
class _Cells:
    """What one version of a row shows (all but the clock-relative times)."""

    display: tuple[str, ...]
    sort: tuple[Any, ...]
    progress: float
    icon: str
    color: QColor
    bold: bool


_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_FONT = int(Qt.ItemDataRole.FontRole)
_DECORATION = int(Qt.ItemDataRole.DecorationRole)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole)
_ALIGNMENT = int(Qt.ItemDataRole.TextAlignmentRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
_SERVED = frozenset(
    {_FONT, _DECORATION, _FOREGROUND, _ALIGNMENT, _TOOLTIP, *(int(r) for r in RunRole)}
)
_STATUS = int(RunColumn.STATUS)
_COST = int(RunColumn.COST)
_LIVE = frozenset({int(RunColumn.STARTED), int(RunColumn.ACTIVITY)})
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def _bold() -> QFont:
    font = QFont()
    font.setBold(True)
    return font


class RunListModel(FlatTableModel[RunRow]):
    """Runs as table rows; updated in place from polling deltas.

    Args:
        parent: owner.
    """

    HEADERS = tuple(HEADERS[c] for c in RunColumn)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._index: dict[str, int] = {}
        self._rendered: dict[str, tuple[RunRow, _Cells]] = {}
        self._forks: dict[str, int] = {}
        """Run id → how many listed runs are forks of it (shown after its goal)."""
        self._bold = _bold()
        self._now = time.time()

    # ------------------------------------------------------------------ Qt API

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """What a cell shows for ``role``.

        Views ask for a dozen roles per cell at every repaint, from the GUI thread and
        through Python, so what a row shows is rendered once per version of the row
        (:meth:`_cells`) and this only looks it up.
        """
        r = index.row()
        if not 0 <= r < len(self._rows) or not index.isValid():
            return None
        row = self._rows[r]
        col = index.column()
        if role == _DISPLAY:
            if col in _LIVE:  # relative to the clock: rendered at each call
                return self._display(row, RunColumn(col))
            return self._cells(row).display[col]
        if role not in _SERVED:
            return None
        if role == _TOOLTIP:
            return self._tooltip(row)  # built only when asked for
        cells = self._cells(row)
        if role == RunRole.SORT:
            return cells.sort[col]
        if role == RunRole.ROW:
            return row
        if role == RunRole.RUN_ID:
            return row.run.id
        if role == RunRole.PROGRESS:
            return cells.progress
        if role == RunRole.TAGS:
            return tags_text(row.run.tags)
        return self._look(cells, col, role)

    def _look(self, cells: _Cells, col: int, role: int) -> Any:
        """How a cell looks (font, icon, colour, alignment), from its row's rendered cells."""
        if role == _FONT:
            return self._bold if cells.bold else None
        if role == _DECORATION:
            return resources.icon(cells.icon) if col == _STATUS else None
        if role == _FOREGROUND:
            return cells.color if col == _STATUS else None
        if role == _ALIGNMENT:
            return _RIGHT if col == _COST else None
        return None

    def _cells(self, row: RunRow) -> _Cells:
        """What ``row`` shows, rendered when this version of the row is first seen."""
        cached = self._rendered.get(row.run.id)
        if cached is not None and cached[0] is row:
            return cached[1]
        run = row.run
        display = tuple("" if c in _LIVE else self._display(row, c) for c in RunColumn)
        sort = tuple(self._sort_key(row, c) for c in RunColumn)
        cells = _Cells(
            display,
            sort,
            progress_of(row),
            theme.status_icon_name(run.status),
            theme.status_color(run.status),
            theme.needs_user(run),
        )
        self._rendered[run.id] = (row, cells)
        return cells

    def _display(self, row: RunRow, col: RunColumn) -> str:
        run = row.run
        if col == RunColumn.STATUS:
            text = theme.status_text(run)
            return f"{text} ({row.pending_approvals})" if row.pending_approvals > 1 else text
        if col == RunColumn.GOAL:
            goal = run.title or run.goal.splitlines()[0] if run.goal else run.id
            if run.forked_from and run.forked_at_seq:
                goal = f"⑂ {goal}"  # a fork: the tooltip and header say of what
            forks = self._forks.get(run.id, 0)
            return f"{goal}  · {forks} fork{'s' if forks != 1 else ''}" if forks else goal
        if col == RunColumn.MODEL:
            # The short name; notes such as a retirement date are in the tooltip and header.
            name = "Demo (offline)" if run.is_demo else model_label(run.model).split(" (")[0]
            agent = agent_label(run)  # another Claude agent drives it: say which
            return f"{agent} · {name}" if agent else name
        if col == RunColumn.PROGRESS:
            return progress_text(row)
        if col == RunColumn.COST:
            return cost_text(row)
        if col == RunColumn.STARTED:
            return fmt.clock(run.started_at or run.created_at, self._now)
        return fmt.ago(run.updated_at, self._now)

    def _sort_key(self, row: RunRow, col: RunColumn) -> Any:
        run = row.run
        keys: dict[RunColumn, Any] = {
            RunColumn.STATUS: _URGENCY[run.status],
            RunColumn.GOAL: (run.title or run.goal).lower(),
            RunColumn.MODEL: run.model,
            RunColumn.PROGRESS: progress_of(row),
            RunColumn.COST: run.cost_usd,
            RunColumn.STARTED: run.started_at or run.created_at,
            RunColumn.ACTIVITY: run.updated_at,
        }
        return keys[col]

    def _tooltip(self, row: RunRow) -> str:
        run = row.run
        lines = [run.goal, "", f"Run {run.id} · {model_label(run.model)}"]
        lines.append(theme.status_text(run))
        if run.status_message:
            lines.append(run.status_message)
        if run.is_demo:
            lines.append("Demo model: offline, costs are simulated.")
        if agent := agent_words(run):
            lines.append(agent)
        if run.tags:
            lines.append(f"Tags: {', '.join(run.tags)}")
        if run.forked_from and run.forked_at_seq:
            lines.append(f"⑂ Fork of run {run.forked_from} at step {run.forked_at_seq}")
        if forks := self._forks.get(run.id, 0):
            lines.append(f"{forks} fork{'s' if forks != 1 else ''} of this run are listed")
        return "\n".join(lines)

    # ------------------------------------------------------------------ updates

    def row_of(self, run_id: str) -> int:
        """Source row of a run, or -1."""
        return self._index.get(run_id, -1)

    def get(self, run_id: str) -> RunRow | None:
        """The row of a run, if listed."""
        i = self._index.get(run_id)
        return self._rows[i] if i is not None else None

    def apply(self, rows: Iterable[RunRow], *, full: bool = False) -> None:
        """Merge changed rows; with ``full``, rows not given are removed.

        Rows are removed, changed and inserted one by one (never a model reset), so that
        views keep their selection when runs are archived away.
        """
        self._now = time.time()
        rows = list(rows)
        if full and not self._rows:
            self.beginResetModel()
            self._rows = rows
            self._index = {r.run.id: i for i, r in enumerate(self._rows)}
            self._forks = _fork_counts(self._rows)
            self.endResetModel()
            return
        if full:
            self._remove_missing({r.run.id for r in rows})
        new: list[RunRow] = []
        changed: list[int] = []
        for row in rows:
            at = self._index.get(row.run.id)
            if at is None:
                new.append(row)
            elif self._rows[at] != row:
                self._rows[at] = row
                changed.append(at)
        if changed:
            # One signal for the whole span: a sorting proxy re-sorts once, not per row.
            last = len(RunColumn) - 1
            self.dataChanged.emit(self.index(min(changed), 0), self.index(max(changed), last))
        if new:
            start = len(self._rows)
            self.beginInsertRows(QModelIndex(), start, start + len(new) - 1)
            for offset, row in enumerate(new):
                self._rows.append(row)
                self._index[row.run.id] = start + offset
            self.endInsertRows()
        if new or full:
            self._count_forks()

    def _count_forks(self) -> None:
        """Recount the forks listed of each run; a parent whose count moved is shown anew."""
        counts = _fork_counts(self._rows)
        moved = {p for p in set(counts) | set(self._forks) if counts.get(p) != self._forks.get(p)}
        self._forks = counts
        for parent in moved:
            at = self._index.get(parent)
            if at is not None:
                self._rendered.pop(parent, None)
                cell = self.index(at, RunColumn.GOAL)
                self.dataChanged.emit(cell, cell)

    def _remove_missing(self, keep: set[str]) -> None:
        """Remove the rows whose run is not in ``keep``, one signal per contiguous span.

        Retention archives runs a hundred at a time; removing them row by row made the
        sorting proxy and the view redo their bookkeeping a hundred times in one go.
        """
        gone = [i for i, r in enumerate(self._rows) if r.run.id not in keep]
        spans: list[tuple[int, int]] = []
        for i in gone:
            if spans and spans[-1][1] == i - 1:
                spans[-1] = (spans[-1][0], i)
            else:
                spans.append((i, i))
        for first, last in reversed(spans):  # from the end: earlier indexes stay valid
            self.beginRemoveRows(QModelIndex(), first, last)
            for row in self._rows[first : last + 1]:
                self._rendered.pop(row.run.id, None)
            del self._rows[first : last + 1]
            self.endRemoveRows()
        self._index = {r.run.id: i for i, r in enumerate(self._rows)}

    def refresh_times(self) -> None:
        """Re-render the relative times (``5m ago``) as the clock moves."""
        self._now = time.time()
        if self._rows:
            col = RunColumn.ACTIVITY
            self.dataChanged.emit(
                self.index(0, col),
                self.index(len(self._rows) - 1, col),
                [Qt.ItemDataRole.DisplayRole],
            )


def _fork_counts(rows: Iterable[RunRow]) -> dict[str, int]:
    """How many of ``rows`` are forks (not "run again"s) of each run."""
    counts: dict[str, int] = {}
    for row in rows:
        run = row.run
        if run.forked_from and run.forked_at_seq:
            counts[run.forked_from] = counts.get(run.forked_from, 0) + 1
    return counts


class StatusFilter(IntEnum):
    """Preset filters of the run list (specific statuses come after these)."""

    ALL = 0
    ACTIVE = 1
    NEEDS_ME = 2
    ARCHIVED = 3
    """Runs moved out of the database into archive files (imported ones too), read-only."""
    IMPORTED = 4
    """Runs brought in from another installation (``import``): archived, never run here."""


class RunFilterProxy(QSortFilterProxyModel):
    """Filters runs by status (or a preset) and by text in the goal or id.

    Args:
        parent: owner.
    """

    default_sort_column = RunColumn.STARTED
    """The order the list opens in (newest first), under :attr:`needs_first`."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._preset = StatusFilter.ALL
        self._status: RunStatus | None = None
        self._text = ""
        self._tags: set[str] = set()
        self._archived: dict[str, bool] = {}
        """The archived runs the list holds: imported (True) or not."""
        self.needs_first = False
        """Runs that need the analyst sort before the others, whatever the column's order."""
        self.setSortRole(RunRole.SORT)
        self.setDynamicSortFilter(True)

    def set_needs_first(self, on: bool) -> None:
        """Put the runs that need the analyst first (the list's order until one is chosen)."""
        if on != self.needs_first:
            self.needs_first = on
            self.invalidate()

    def lessThan(self, source_left: Index, source_right: Index) -> bool:
        """The column's order, after whether the analyst is needed (:attr:`needs_first`)."""
        model = self.sourceModel()
        if self.needs_first and isinstance(model, RunListModel):
            left = theme.needs_user(model.row_at(source_left.row()).run)
            right = theme.needs_user(model.row_at(source_right.row()).run)
            if left != right:
                # Needed is the greater, and the list is sorted descending: it comes first.
                return right if self.sortOrder() == Qt.SortOrder.DescendingOrder else left
        return super().lessThan(source_left, source_right)

    def set_preset(self, preset: StatusFilter) -> None:
        """Show all, active, or needing-the-analyst runs."""
        self.beginFilterChange()
        self._preset, self._status = preset, None
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_status(self, status: RunStatus | None) -> None:
        """Show only runs in ``status`` (None: no status filter)."""
        self.beginFilterChange()
        self._preset, self._status = StatusFilter.ALL, status
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def set_archived(self, kinds: dict[str, bool]) -> None:
        """The archived runs listed (id: imported or not): only the archived presets show them."""
        self.beginFilterChange()
        self._archived = dict(kinds)
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def is_imported(self, run_id: str) -> bool:
        """Whether ``run_id`` is listed as an imported run."""
        return self._archived.get(run_id) is True

    def set_text(self, text: str) -> None:
        """Show only runs whose goal or id contains ``text`` (case-insensitive).

        Words ``tag:T`` ask for runs tagged ``T`` (every one given); the rest of the text
        is looked for in the goal or id.
        """
        self.beginFilterChange()
        words = text.strip().lower().split()
        self._tags = {w.removeprefix("tag:") for w in words if w.startswith("tag:")} - {""}
        self._text = " ".join(w for w in words if not w.startswith("tag:"))
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: Index) -> bool:
        """Whether a run passes the filters."""
        model = self.sourceModel()
        if not isinstance(model, RunListModel):
            return True
        run = model.row_at(source_row).run
        imported = self._archived.get(run.id)
        if self._preset in (StatusFilter.ARCHIVED, StatusFilter.IMPORTED):
            if imported is None or (self._preset == StatusFilter.IMPORTED and not imported):
                return False
        elif imported is not None:
            return False
        if self._status is not None and run.status != self._status:
            return False
        if self._preset == StatusFilter.ACTIVE and run.status.is_terminal:
            return False
        if self._preset == StatusFilter.NEEDS_ME and not theme.needs_user(run):
            return False
        if self._tags and not self._tags.issubset(run.tags):
            return False
        if self._text:
            return self._text in run.goal.lower() or self._text in run.id.lower()
        return True
