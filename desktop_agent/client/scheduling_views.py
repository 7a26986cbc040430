"""Read helpers for the desktop app's schedules, batches and watched-folders views.

Plain Python like :mod:`desktop_agent.client.views`: the GUI calls the readers from a worker
thread, never from the GUI thread, and gets frozen dataclasses back. Also here: schedule
timings in words, and the checks the create dialogs run as the analyst types (pure
computations, cheap enough for the GUI thread).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import MAX_BATCH_ITEMS, MIN_INTERVAL_S, Scheduling
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.scheduling import (
    Batch,
    BatchItem,
    BatchProgress,
    FolderWatch,
    ItemStatus,
    Schedule,
    StuckRun,
    cron_weekdays,
)
from desktop_agent.domain.units import format_duration
from desktop_agent.persistence import scheduling_readmodels
from desktop_agent.scheduler.folders import folder_files
from desktop_agent.scheduler.timing import check_timezone, next_due, parse_crontab

# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class ScheduleRow:
    """A schedule with what the schedules view shows beside it.

    Attributes:
        schedule: the schedule.
        next_at: its next firing (may lie in the past while no worker handles it), or None
            when paused or when the expression never fires again.
        last_status: the status of the newest run it started (None: none, or removed).
    """

    schedule: Schedule
    next_at: float | None
    last_status: RunStatus | None = None


@dataclass(frozen=True)
class BatchRow:
    """A batch and its durable progress."""

    batch: Batch
    progress: BatchProgress


@dataclass(frozen=True)
class ItemRow:
    """One item of a batch, with its run's title and error.

    Attributes:
        item: the item (its status follows its run's).
        error: why its run failed, was cancelled or stopped (empty otherwise).
    """

    item: BatchItem
    error: str = ""


@dataclass(frozen=True)
class WatchRow:
    """A watched folder with what it has seen.

    Attributes:
        watch: the watch.
        files_seen: files it knows (those there when it was added included).
        runs_started: files that started a run.
        last_seen_at: when the newest file was seen (None: none yet).
    """

    watch: FolderWatch
    files_seen: int = 0
    runs_started: int = 0
    last_seen_at: float | None = None


@dataclass(frozen=True)
class BatchItems:
    """The items of one batch, read for the batches view."""

    batch_id: str
    rows: tuple[ItemRow, ...]


@dataclass(frozen=True)
class SchedulingState:
    """Everything the scheduling views show, read at once.

    Attributes:
        schedules: every schedule, oldest first.
        batches: every batch, newest first.
        watches: every watched folder, oldest first.
        stuck: runs flagged as making no progress.
        storage_warning: the low-disk warning, if any.
        items: the items of the batch asked for (None when none was asked for).
    """

    schedules: tuple[ScheduleRow, ...]
    batches: tuple[BatchRow, ...]
    watches: tuple[WatchRow, ...]
    stuck: tuple[StuckRun, ...]
    storage_warning: str | None
    items: BatchItems | None = None


# --------------------------------------------------------------------------- reads


def scheduling_token(client: Client) -> tuple[Any, ...]:
    """A cheap value that changes whenever anything the scheduling views show changes.

    Covers what :meth:`SqlStore.change_token` does not: schedules, watches and what they
    have seen, batches and retried items, and stuck flags (runs are in it too: batch
    progress and a schedule's last run follow their runs).
    """
    return scheduling_readmodels.scheduling_token(client._store.db)


def batch_progress_all(client: Client) -> dict[str, BatchProgress]:
    """The progress of every batch, in one query."""
    return scheduling_readmodels.batch_progress_all(client._store.db)


def batch_item_rows(client: Client, batch_id: str) -> list[ItemRow]:
    """The batch's items in order, each with its run's message if it failed or stopped."""
    out = []
    for item, message in scheduling_readmodels.items_with_messages(client._store.db, batch_id):
        error = ""
        if item.status in (ItemStatus.FAILED, ItemStatus.CANCELLED, ItemStatus.STOPPED):
            error = message
        out.append(ItemRow(item, error))
    return out


def _run_statuses(client: Client, run_ids: Iterable[str]) -> dict[str, RunStatus]:
    return scheduling_readmodels.run_statuses(client._store.db, run_ids)


def _watch_counts(client: Client) -> dict[str, tuple[int, int, float | None]]:
    return scheduling_readmodels.watch_counts(client._store.db)


def next_firing(schedule: Schedule) -> float | None:
    """When the schedule fires next (None while paused, or when it never fires again)."""
    if schedule.paused:
        return None
    try:
        return next_due(schedule)
    except InvalidInputError:
        return None


def read_state(
    client: Client, sched: Scheduling | None = None, batch_id: str | None = None
) -> SchedulingState:
    """Schedules, batches, watches, stuck flags and the storage warning, read at once.

    The items of ``batch_id`` are read too when it is given.
    """
    sched = sched or Scheduling(client)
    schedules = sched.schedules()
    last = _run_statuses(client, (s.last_run_id for s in schedules if s.last_run_id))
    progress = batch_progress_all(client)
    seen = _watch_counts(client)
    items = None
    if batch_id is not None:
        items = BatchItems(batch_id, tuple(batch_item_rows(client, batch_id)))
    return SchedulingState(
        schedules=tuple(
            ScheduleRow(s, next_firing(s), last.get(s.last_run_id or "")) for s in schedules
        ),
        batches=tuple(
            BatchRow(b, progress.get(b.id, BatchProgress(total=b.total))) for b in sched.batches()
        ),
        watches=tuple(WatchRow(w, *seen.get(w.id, (0, 0, None))) for w in sched.watches()),
        stuck=tuple(sched.stuck_runs()),
        storage_warning=client.storage_warning(),
        items=items,
    )


class SchedulingTracker:
    """Reads the scheduling views' state when it changed, at most every ``min_interval_s``.

    The token (:func:`scheduling_token`) moves with every step of every run, because batch
    progress follows the runs; the views are read again at most every ``min_interval_s``
    unless forced. Meant to be polled from one worker thread at a time (a lock serializes
    calls).

    Args:
        client: the client whose database is read.
        min_interval_s: least time between two reads that were not forced.
        storage_every_s: how often the free disk space is looked at.
    """

    def __init__(
        self, client: Client, min_interval_s: float = 0.5, storage_every_s: float = 5.0
    ) -> None:
        self.client = client
        self.sched = Scheduling(client)
        self.min_interval_s = min_interval_s
        self.storage_every_s = storage_every_s
        self._lock = threading.Lock()
        self._token: tuple[Any, ...] | None = None
        self._read_at = 0.0
        self._storage: str | None = None
        self._storage_at = -1e9

    def poll(
        self, *, force: bool = False, batch_id: str | None = None, items_due: bool = False
    ) -> SchedulingState | None:
        """The state, or None when nothing changed (or it was read a moment ago).

        Args:
            force: read even if the token did not move.
            batch_id: also read this batch's items.
            items_due: read (now) even if nothing changed, because the items of another
                batch are wanted.
        """
        with self._lock:
            now = time.monotonic()
            if now - self._storage_at >= self.storage_every_s:
                self._storage = self.client.storage_warning()
                self._storage_at = now
            token = (*scheduling_token(self.client), self._storage)
            moved = token != self._token
            if not (force or items_due or moved):
                return None
            if not (force or items_due) and now - self._read_at < self.min_interval_s:
                return None  # the token stays old: a later poll reads it
            state = read_state(self.client, self.sched, batch_id)
            self._token = token
            self._read_at = now
            return state


# --------------------------------------------------------------------------- words


_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _plural(n: float, unit: str) -> str:
    return f"every {unit}" if n == 1 else f"every {n:g} {unit}s"


def interval_words(seconds: float) -> str:
    """``every 30 minutes``, ``every day``, ``every 90 s``."""
    for size, unit in ((604800, "week"), (86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size and seconds % size == 0:
            return _plural(seconds / size, unit)
    if seconds < 3600:
        return _plural(seconds, "second")
    return f"every {format_duration(seconds)}"


def _days_words(field: str) -> str | None:
    if field == "*":
        return "every day"
    if "/" in field:
        return None  # steps are shown as written
    try:
        days = cron_weekdays(field)
    except ValueError:
        return None
    chosen = sorted(set(days), key=lambda d: (d + 6) % 7)  # Monday first
    if chosen == [1, 2, 3, 4, 5]:
        return "on weekdays"
    if chosen == [6, 0]:
        return "on weekends"
    if len(chosen) == 7:
        return "every day"
    names = [_DAYS[d] + "s" for d in chosen]
    if len(names) == 1:
        return f"on {names[0]}"
    return "on " + ", ".join(n[:3] for n in names[:-1]) + " and " + names[-1][:3]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def cron_words(expr: str) -> str | None:
    """A classic crontab expression in words (``On weekdays at 09:00``), or None.

    None when it is not one of the common shapes (the list then shows the expression).
    """
    fields = expr.split()
    if len(fields) != 5:
        return None
    minute, hour, dom, month, dow = fields
    if month != "*":
        return None
    if dom == "*":
        days = _days_words(dow)
    elif dom.isdigit() and dow == "*" and 1 <= int(dom) <= 31:
        days = f"on the {_ordinal(int(dom))} of every month"
    else:
        return None
    if days is None:
        return None
    if minute.isdigit() and int(minute) < 60:
        hours = hour.split(",")
        if all(h.isdigit() and int(h) < 24 for h in hours):
            times = [f"{int(h):02d}:{int(minute):02d}" for h in hours]
            at = times[0] if len(times) == 1 else ", ".join(times[:-1]) + " and " + times[-1]
            return _cap(f"{days} at {at}")
        if hour == "*":
            each = "every hour" if int(minute) == 0 else f"every hour at :{int(minute):02d}"
            return _cap(each if days == "every day" else f"{each}, {days}")
        return None
    if hour == "*" and (minute == "*" or minute.startswith("*/")):
        step = minute[2:] if minute != "*" else "1"
        if not step.isdigit() or int(step) == 0:
            return None
        each = "every minute" if int(step) == 1 else f"every {int(step)} minutes"
        return _cap(each if days == "every day" else f"{each}, {days}")
    return None


def when_words(schedule: Schedule) -> str:
    """When a schedule fires, in words: ``Every 6 hours``, ``On weekdays at 09:00``."""
    if schedule.cron is None:
        return _cap(interval_words(schedule.every_s or 0))
    words = cron_words(schedule.cron) or f"Cron {schedule.cron}"
    return f"{words} ({schedule.timezone})" if schedule.timezone else words


# --------------------------------------------------------------------------- dialog checks


def upcoming_firings(
    *,
    cron: str | None = None,
    every_s: float | None = None,
    timezone: str = "",
    count: int = 3,
    now: float | None = None,
) -> list[float]:
    """The next ``count`` firings of a schedule being made (checks it on the way).

    Raises:
        InvalidInputError: the cron expression, time zone or interval is not valid (the
            same message :meth:`Scheduling.add_schedule` would give).
    """
    now = time.time() if now is None else now
    if (cron is None) == (every_s is None):
        raise InvalidInputError("give either a cron expression or an interval, not both")
    if every_s is not None:
        if every_s < MIN_INTERVAL_S:
            raise InvalidInputError(f"the interval must be at least {MIN_INTERVAL_S:g} second")
        return [now + every_s * (i + 1) for i in range(count)]
    assert cron is not None
    check_timezone(timezone)
    trigger = parse_crontab(cron, timezone)
    out: list[float] = []
    previous = None
    at = datetime.fromtimestamp(now, tz=trigger.timezone)
    for _ in range(count):
        nxt = trigger.get_next_fire_time(previous, at)
        if nxt is None:
            break
        out.append(nxt.timestamp())
        previous = at = nxt
    return out


def count_items(
    *, folder: str | Path | None = None, pattern: str = "*", lines: str | Path | None = None
) -> int:
    """How many items a batch over these files or lines would have.

    Slow on a big folder or a slow disk: call it off the GUI thread.

    Raises:
        InvalidInputError: the folder or file cannot be read, or holds no item.
    """
    if folder is not None:
        where = Path(folder).expanduser()
        if not where.is_dir():
            raise InvalidInputError(f"{where} is not a folder")
        n = len(folder_files(where, pattern or "*"))
        if n == 0:
            raise InvalidInputError(f"no file in {where} matches {pattern or '*'}")
    elif lines is not None:
        path = Path(lines).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read {path}: {exc}") from None
        n = sum(1 for line in text.splitlines() if line.strip())
        if n == 0:
            raise InvalidInputError(f"{path} has no non-empty line")
    else:
        raise InvalidInputError("choose a folder or a file of lines")
    if n > MAX_BATCH_ITEMS:
        raise InvalidInputError(f"{n} items: at most {MAX_BATCH_ITEMS} per batch")
    return n


def stuck_by_run(stuck: Sequence[StuckRun]) -> dict[str, StuckRun]:
    """Index stuck flags by run id."""
    return {s.run_id: s for s in stuck}


def stuck_badge(stuck: StuckRun, now: float | None = None) -> str:
    """``no progress for 35 min``, counted from the run's last progress up to now."""
    now = time.time() if now is None else now
    minutes = max(0.0, now - stuck.last_progress_at) / 60
    if minutes >= 120:
        return f"no progress for {minutes / 60:.0f} h"
    return f"no progress for {minutes:.0f} min"
