"""Thin table models of the scheduling views: schedules, batches, batch items, watches.

Each holds frozen rows read off the GUI thread (:mod:`desktop_agent.client.scheduling_views`)
and merges a new list into itself in place (moves, changes, inserts, removals; never a
reset), so that views keep their selection and scroll position while polls come in.

Schedules and watched folders are here; batches and their items in :mod:`.batches`, the
rows' base (:class:`RowTableModel`, :class:`Role`) in :mod:`.row_table`. Their names are
imported from here as before.
"""

from __future__ import annotations

import time
from enum import IntEnum
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from desktop_agent.client.scheduling_views import (
    ScheduleRow,
    WatchRow,
    interval_words,
    when_words,
)
from desktop_agent.client.views import model_label
from desktop_agent.domain import RunStatus
from desktop_agent.domain.scheduling import OverlapPolicy
from desktop_agent.gui import fmt, resources, theme
from desktop_agent.gui.models.batches import (
    ITEM_LABELS,
    ITEM_RUN_STATUS,
    BatchColumn,
    BatchItemModel,
    BatchListModel,
    ItemColumn,
    goal_line,
    item_name,
)
from desktop_agent.gui.models.row_table import Role, RowTableModel, status_icon

__all__ = [
    "ITEM_LABELS",
    "ITEM_RUN_STATUS",
    "OVERLAP_HELP",
    "OVERLAP_LABELS",
    "BatchColumn",
    "BatchItemModel",
    "BatchListModel",
    "ItemColumn",
    "Role",
    "RowTableModel",
    "ScheduleColumn",
    "ScheduleListModel",
    "WatchColumn",
    "WatchListModel",
    "goal_line",
    "item_name",
    "next_text",
    "short_path",
]


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
                return status_icon(RunStatus.PAUSED if s.paused else RunStatus.RUNNING)
            if col == ScheduleColumn.LAST and row.last_status is not None:
                return status_icon(row.last_status)
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
                return status_icon(RunStatus.PAUSED if w.paused else RunStatus.RUNNING)
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
