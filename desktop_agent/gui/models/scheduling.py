"""Thin table models of the scheduling views: schedules, batches, batch items, watches.

Each holds frozen rows read off the GUI thread (:mod:`desktop_agent.client.scheduling_views`)
and merges a new list into itself in place (moves, changes, inserts, removals; never a
reset), so that views keep their selection and scroll position while polls come in.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from enum import IntEnum
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from PySide6.QtCore import (
    QObject,
    Qt,
)
from PySide6.QtGui import QColor, QIcon

from desktop_agent.client.scheduling_views import (
    BatchRow,
    ItemRow,
    ScheduleRow,
    WatchRow,
    interval_words,
    when_words,
)
from desktop_agent.client.views import model_label
from desktop_agent.domain import RunStatus
from desktop_agent.domain.scheduling import ItemStatus, OverlapPolicy
from desktop_agent.gui import fmt, resources, theme
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


def next_text(ts: float | None, now: float | None = None, *, paused: bool = False) -> str:
    """A coming time: ``in 12m (14:05)``, ``today 18:00``, ``tomorrow 09:00``, ``Mon 09:00``."""
    if paused:
        return "paused"
    if ts is None:
        return "never"
    now = time.time() if now is None else now
    left = ts - now
    if left <= 0:
        return "due now"
    local, today = time.localtime(ts), time.localtime(now)
    at = time.strftime("%H:%M", local)
    if left < 3600:
        return f"in {fmt.format_duration(max(1, round(left / 60)) * 60.0)} ({at})"
    day = time.localtime(now + 86400)
    if (local.tm_year, local.tm_yday) == (today.tm_year, today.tm_yday):
        return f"today {at}"
    if (local.tm_year, local.tm_yday) == (day.tm_year, day.tm_yday):
        return f"tomorrow {at}"
    if left < 6 * 86400:
        return time.strftime("%a %H:%M", local)
    return time.strftime("%Y-%m-%d %H:%M", local)


def item_name(item: str, from_folder: bool) -> str:
    """A batch item as listed: a file's name, or the line itself."""
    return Path(item).name if from_folder else item


def goal_line(goal: str) -> str:
    """The first non-empty line of a goal."""
    return next((line.strip() for line in goal.splitlines() if line.strip()), goal)


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


def _status_icon(status: RunStatus) -> QIcon:
    return resources.icon(theme.status_icon_name(status))


# --------------------------------------------------------------------------- schedules


class ScheduleColumn(IntEnum):
    """Columns of the schedules view."""

    NAME = 0
    WHEN = 1
    NEXT = 2
    OVERLAP = 3
    STATE = 4
    LAST = 5


OVERLAP_LABELS = {OverlapPolicy.SKIP: "Skip", OverlapPolicy.QUEUE: "Queue"}
OVERLAP_HELP = {
    OverlapPolicy.SKIP: "A firing while the previous run is still active is skipped.",
    OverlapPolicy.QUEUE: "A firing while the previous run is still active waits for it to end.",
}


class ScheduleListModel(RowTableModel[ScheduleRow]):
    """Schedules, oldest first."""

    HEADERS = ("Schedule", "When", "Next run", "If still running", "State", "Last run")
    TIME_COLUMNS = (ScheduleColumn.NEXT,)

    def key(self, row: ScheduleRow) -> str:
        """The schedule id."""
        return row.schedule.id

    def display(self, row: ScheduleRow, column: int) -> str:
        """The text of a cell."""
        s = row.schedule
        col = ScheduleColumn(column)
        if col == ScheduleColumn.NAME:
            return s.name
        if col == ScheduleColumn.WHEN:
            return when_words(s)
        if col == ScheduleColumn.NEXT:
            return next_text(row.next_at, self.now, paused=s.paused)
        if col == ScheduleColumn.OVERLAP:
            return OVERLAP_LABELS[s.overlap]
        if col == ScheduleColumn.STATE:
            return "Paused" if s.paused else "Active"
        if not s.last_run_id:
            return "skipped" if s.skipped else "not yet"
        status = theme.STATUS_LABELS[row.last_status] if row.last_status else "removed"
        return f"{status} · {fmt.clock(s.last_fire_at, self.now)}"

    def cell(self, row: ScheduleRow, column: int, role: int) -> Any:
        """Icons, colors and tooltips."""
        s = row.schedule
        col = ScheduleColumn(column)
        if role == Qt.ItemDataRole.DecorationRole:
            if col == ScheduleColumn.STATE:
                return _status_icon(RunStatus.PAUSED if s.paused else RunStatus.RUNNING)
            if col == ScheduleColumn.LAST and row.last_status is not None:
                return _status_icon(row.last_status)
            return None
        if role == Qt.ItemDataRole.ForegroundRole:
            if col == ScheduleColumn.STATE and s.paused:
                return theme.status_color(RunStatus.PAUSED)
            if col == ScheduleColumn.LAST and row.last_status is not None:
                return theme.status_color(row.last_status)
            if col == ScheduleColumn.NEXT and s.paused:
                return QColor(theme.status_color(RunStatus.QUEUED))
            return None
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(row, col)
        return None

    def _tooltip(self, row: ScheduleRow, col: ScheduleColumn) -> str:
        s = row.schedule
        if col == ScheduleColumn.WHEN:
            raw = f"cron '{s.cron}'" if s.cron is not None else interval_words(s.every_s or 0)
            zone = s.timezone or "local time"
            return f"{raw} ({zone})" if s.cron is not None else raw
        if col == ScheduleColumn.OVERLAP:
            return OVERLAP_HELP[s.overlap]
        if col == ScheduleColumn.NEXT and row.next_at is not None and not s.paused:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.next_at))
        if col == ScheduleColumn.LAST:
            counts = f"Fired {s.fire_count} time(s): {s.skipped} skipped, {s.queued} queued now"
            lines = [s.last_result or "Has not fired yet.", counts]
            if s.last_run_id:
                lines.append("Double-click to open its newest run.")
            return "\n".join(lines)
        t = s.template
        return (
            f"{t.goal}\n\nSchedule {s.id} · {model_label(t.spec.model)}\n"
            f"Workspace: {t.workspace or 'a new folder per run'}"
        )


# --------------------------------------------------------------------------- batches


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
            return _status_icon(status)
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


# --------------------------------------------------------------------------- watches


class WatchColumn(IntEnum):
    """Columns of the watched folders view."""

    FOLDER = 0
    PATTERN = 1
    SCAN = 2
    STATE = 3
    SEEN = 4
    RUNS = 5
    LAST = 6


class WatchListModel(RowTableModel[WatchRow]):
    """Watched folders, oldest first."""

    HEADERS = ("Folder", "Files", "Scans", "State", "Files seen", "Runs started", "Last file")
    TIME_COLUMNS = (WatchColumn.LAST,)

    def key(self, row: WatchRow) -> str:
        """The watch id."""
        return row.watch.id

    def display(self, row: WatchRow, column: int) -> str:
        """The text of a cell."""
        w = row.watch
        col = WatchColumn(column)
        if col == WatchColumn.FOLDER:
            return short_path(w.folder)
        if col == WatchColumn.PATTERN:
            return w.pattern
        if col == WatchColumn.SCAN:
            return interval_words(w.scan_s)
        if col == WatchColumn.STATE:
            return "Paused" if w.paused else "Watching"
        if col == WatchColumn.SEEN:
            return str(row.files_seen)
        if col == WatchColumn.RUNS:
            return str(row.runs_started)
        return fmt.ago(row.last_seen_at, self.now) if row.runs_started else "—"

    def cell(self, row: WatchRow, column: int, role: int) -> Any:
        """Icons, colors, alignment and tooltips."""
        w = row.watch
        col = WatchColumn(column)
        if role == Qt.ItemDataRole.DecorationRole:
            if col == WatchColumn.FOLDER:
                return resources.icon("folder")
            if col == WatchColumn.STATE:
                return _status_icon(RunStatus.PAUSED if w.paused else RunStatus.RUNNING)
            return None
        if role == Qt.ItemDataRole.ForegroundRole and col == WatchColumn.STATE and w.paused:
            return theme.status_color(RunStatus.PAUSED)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (
            WatchColumn.SEEN,
            WatchColumn.RUNS,
        ):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            return (
                f"{w.folder}\n\nNew files matching {w.pattern} start a run:\n{w.template.goal}\n\n"
                f"Watch {w.id} · {model_label(w.template.spec.model)}"
            )
        return None


def short_path(path: str, keep: int = 60) -> str:
    """A path with the home folder as ``~`` and its start elided when long."""
    home = str(Path.home()).rstrip("/")
    if path == home or path.startswith(home + "/"):
        path = "~" + path[len(home) :]
    return path if len(path) <= keep else "…" + path[-(keep - 1) :]
