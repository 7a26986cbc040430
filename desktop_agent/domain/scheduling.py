"""Durable definitions behind runs that nobody starts by hand: schedules, batches, watches.

Plain values, like the rest of :mod:`desktop_agent.domain`: the database stores them, the
scheduler reads them, the client and CLI show them. Every time a run is started from one of
them, the run is built from a :class:`RunTemplate`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from desktop_agent.domain.enums import RunStatus
from desktop_agent.domain.models import JSON, AgentSpec, Budget, Run

PLACEHOLDERS = ("{item}", "{name}", "{path}")
"""Replaced in a template's goal: the batch item, and the file's name and full path."""


class OverlapPolicy(StrEnum):
    """What a schedule does when it fires while its previous run is still active."""

    SKIP = "skip"
    QUEUE = "queue"


class ItemStatus(StrEnum):
    """Where one item of a batch is."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"

    @property
    def is_final(self) -> bool:
        """Whether the item's run has ended (a stopped run has not: it may be resumed)."""
        return self in (ItemStatus.COMPLETED, ItemStatus.FAILED, ItemStatus.CANCELLED)

    @classmethod
    def of_run(cls, status: RunStatus) -> ItemStatus:
        """The item status that a run status means (a waiting run is still running)."""
        if status == RunStatus.COMPLETED:
            return cls.COMPLETED
        if status == RunStatus.FAILED:
            return cls.FAILED
        if status == RunStatus.CANCELLED:
            return cls.CANCELLED
        if status == RunStatus.STOPPED:
            return cls.STOPPED
        return cls.RUNNING


@dataclass(frozen=True, slots=True)
class RunTemplate:
    """Everything needed to start a run later, validated when the template was made.

    Attributes:
        goal: the goal; may contain the :data:`PLACEHOLDERS`.
        spec: model, system prompt and tools.
        budget: limits of each run.
        workspace: folder every run works in, or None for a fresh folder per run.
        forecast: the forecast of one run made when the template was (its JSON, see
            ``client/forecast.py``): kept with each run the template starts (None: none).
        tags: the tags each run it starts carries.
    """

    goal: str
    spec: AgentSpec
    budget: Budget = field(default_factory=Budget)
    workspace: str | None = None
    forecast: JSON = None
    tags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, JSON]:
        """Plain dict for storage."""
        return {
            "goal": self.goal,
            "spec": self.spec.to_json(),
            "budget": self.budget.to_json(),
            "workspace": self.workspace,
            **({"forecast": self.forecast} if self.forecast is not None else {}),
            **({"tags": list(self.tags)} if self.tags else {}),
        }

    @classmethod
    def from_json(cls, data: JSON) -> RunTemplate:
        """Inverse of :meth:`to_json`."""
        return cls(
            goal=str(data["goal"]),
            spec=AgentSpec.from_json(data["spec"]),
            budget=Budget.from_json(data.get("budget")),
            workspace=data.get("workspace"),
            forecast=data.get("forecast"),
            tags=tuple(str(t) for t in data.get("tags") or ()),
        )

    def render_goal(self, *, item: str = "", name: str = "", path: str = "") -> str:
        """The goal with its placeholders filled in."""
        return self.goal.replace("{item}", item).replace("{name}", name).replace("{path}", path)

    def make_run(
        self,
        run_id: str,
        now: float,
        workspace: str,
        *,
        goal: str | None = None,
        parent_id: str | None = None,
        schedule_id: str | None = None,
    ) -> Run:
        """A queued run built from this template."""
        text = goal if goal is not None else self.goal
        return Run(
            id=run_id,
            goal=text,
            status=RunStatus.QUEUED,
            spec=self.spec,
            workspace=workspace,
            budget=self.budget,
            created_at=now,
            updated_at=now,
            title=text.splitlines()[0][:120] if text else "",
            definition_hash=self.spec.definition_hash,
            parent_id=parent_id,
            schedule_id=schedule_id,
            tags=self.tags,
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    """A run template started on a cron expression or at a fixed interval.

    Attributes:
        id: ``sch-`` followed by a short random id.
        name: what the analyst calls it.
        template: the run each firing starts.
        cron: a crontab expression (minute hour day-of-month month day-of-week), or None.
        every_s: the interval in seconds, or None (exactly one of cron and every_s is set).
        timezone: IANA name the cron expression is read in; empty for the local zone.
        overlap: what a firing does while the previous run is still active.
        paused: paused schedules do not fire, and do not catch up when resumed.
        created_at: when it was made (the first interval counts from here).
        updated_at: when anything about it last changed.
        last_fire_at: the scheduled time handled by the last firing (None: never fired).
        fire_count: firings handled so far, started, skipped or queued.
        skipped: firings skipped by the overlap policy.
        queued: firings waiting for the previous run to end (overlap ``queue``).
        last_run_id: the newest run it started.
        last_result: one line about the last firing.
        version: bumped by every change; a firing only counts if nothing changed meanwhile.
    """

    id: str
    name: str
    template: RunTemplate
    cron: str | None = None
    every_s: float | None = None
    timezone: str = ""
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    paused: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0
    last_fire_at: float | None = None
    fire_count: int = 0
    skipped: int = 0
    queued: int = 0
    last_run_id: str | None = None
    last_result: str = ""
    version: int = 0

    def describe_when(self) -> str:
        """``cron '0 9 * * 1-5'`` or ``every 3600s``, for lists."""
        if self.cron is not None:
            tz = f" ({self.timezone})" if self.timezone else ""
            return f"cron '{self.cron}'{tz}"
        return f"every {self.every_s:g}s"


class FireKind(StrEnum):
    """What handling one firing of a schedule did."""

    STARTED = "started"
    SKIPPED = "skipped"
    QUEUED = "queued"
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class FireResult:
    """The outcome of one firing.

    Attributes:
        kind: started a run, skipped, queued, or stale (the schedule changed or another
            worker handled this firing first).
        run_id: the run started, if any.
        message: one line for logs and lists.
    """

    kind: FireKind
    run_id: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class Batch:
    """One goal template run over a list of items, a bounded number at a time.

    Attributes:
        id: ``bat-`` followed by a short random id.
        template: the run started for each item (``{item}`` in its goal is the item).
        source: where the items came from, for display.
        concurrency: items whose runs may be active at once.
        total: number of items.
        created_at: when it was made.
        from_folder: items are files of a folder (absolute paths), not lines of text.
    """

    id: str
    template: RunTemplate
    source: str
    concurrency: int
    total: int
    created_at: float = 0.0
    from_folder: bool = False


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One item of a batch and the run that handles it.

    Attributes:
        batch_id: the batch.
        idx: position in the batch, from 0.
        item: the line, or the file's absolute path.
        status: where it is.
        run_id: its current run (None while pending).
        attempts: runs started for it (a retry starts another).
        updated_at: last change.
    """

    batch_id: str
    idx: int
    item: str
    status: ItemStatus = ItemStatus.PENDING
    run_id: str | None = None
    attempts: int = 0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """Counts of a batch's items by status.

    A stopped item is neither done nor running: its run was stopped by the analyst with a
    partial report (it frees its slot for the next item) and waits to be resumed or
    cancelled, so a batch with one is not finished.
    """

    total: int
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    running: int = 0
    pending: int = 0
    stopped: int = 0

    @property
    def finished(self) -> bool:
        """Whether every item's run has ended."""
        return self.running == 0 and self.pending == 0 and self.stopped == 0

    def describe(self) -> str:
        """``312 / 1000 done · 2 failed · 1 stopped · 4 running``."""
        parts = [f"{self.completed} / {self.total} done"]
        for label, n in (
            ("failed", self.failed),
            ("cancelled", self.cancelled),
            ("stopped", self.stopped),
            ("running", self.running),
        ):
            if n:
                parts.append(f"{n} {label}")
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class FolderWatch:
    """A folder whose new files each start a run.

    Attributes:
        id: ``wat-`` followed by a short random id.
        folder: the watched folder (absolute).
        pattern: glob the file names must match.
        template: the run started per file (``{name}`` and ``{path}`` name the file).
        scan_s: seconds between scans.
        paused: paused watches are not scanned; files that land meanwhile start runs
            when the watch is resumed.
        created_at: when it was made.
        updated_at: last change.
        version: bumped by every change.
    """

    id: str
    folder: str
    pattern: str
    template: RunTemplate
    scan_s: float = 10.0
    paused: bool = False
    created_at: float = 0.0
    updated_at: float = 0.0
    version: int = 0


@dataclass(frozen=True, slots=True)
class FileKey:
    """A file as a watch recognises it: the same path with another size or time is new."""

    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class StuckRun:
    """A running run whose journal has not moved for too long.

    Attributes:
        run_id: the run.
        goal: its goal, for the notification.
        last_progress_at: when its journal last changed.
        flagged_at: when it was flagged.
        message: one line for the analyst.
    """

    run_id: str
    goal: str
    last_progress_at: float
    flagged_at: float
    message: str


# --------------------------------------------------------------------------- crontab days

DAY_ABBREVIATIONS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
"""Crontab's day names, in its numbering: 0 (or 7) is Sunday."""

_DOW_TOKEN = re.compile(r"^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(\d+))?$")


def _day_number(text: str) -> int:
    if text.isdigit():
        n = int(text)
        if not 0 <= n <= 7:
            raise ValueError(f"day of week {n} is not between 0 and 7")
        return n % 7
    if text[:3] in DAY_ABBREVIATIONS and len(text) >= 3:
        return DAY_ABBREVIATIONS.index(text[:3])
    raise ValueError(f"unknown day of week {text!r}")


def cron_weekdays(field: str) -> set[int]:
    """The days a classic crontab day-of-week field names (0 is Sunday, 6 Saturday).

    One reading for the scheduler, which hands the days to APScheduler, and for the views,
    which put them in words.

    Args:
        field: e.g. ``*``, ``1-5``, ``0,6``, ``*/2``, ``mon-fri``, ``5-7`` (Friday to Sunday).

    Raises:
        ValueError: the field is not a valid day-of-week field.
    """
    days: set[int] = set()
    for token in field.lower().split(","):
        match = _DOW_TOKEN.match(token.strip())
        if not match:
            raise ValueError(f"invalid day-of-week field {field!r}")
        span, step_text = match.groups()
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError("a step must be at least 1")
        if span == "*":
            first, last = 0, 6
        elif "-" in span:
            a, b = span.split("-", 1)
            first, last = _day_number(a), _day_number(b)
            if b.isdigit() and int(b) == 7:
                last = 7  # ``5-7`` is Friday to Sunday
        else:
            first = last = _day_number(span)
        if last < first:
            raise ValueError(f"day-of-week range {span!r} runs backwards")
        days.update(d % 7 for d in range(first, last + 1, step))
    return days
