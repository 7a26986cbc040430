"""Schedules, batches, folder watches and database upkeep, for the GUI and the CLI.

Like the rest of the client, this only writes rows: a running worker's scheduler notices
new or changed schedules and watches within seconds, and starts batch items as room frees.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from desktop_agent.client.api import Client, prepare_workspace
from desktop_agent.client.forecast import forecast, forecast_json
from desktop_agent.domain import JSON, AgentSpec, Run
from desktop_agent.domain.errors import InvalidInputError, NotFoundError
from desktop_agent.domain.scheduling import (
    Batch,
    BatchItem,
    BatchProgress,
    FolderWatch,
    OverlapPolicy,
    RunTemplate,
    Schedule,
    StuckRun,
)
from desktop_agent.domain.tags import normalize_tags
from desktop_agent.domain.text import check_text
from desktop_agent.persistence.archive import (
    ArchivedRun,
    Archiver,
    ArchiveResult,
    DbInfo,
    db_info,
    find_archived,
    unarchive,
    vacuum,
)
from desktop_agent.persistence.schedules import ScheduleStore
from desktop_agent.scheduler.folders import folder_files
from desktop_agent.scheduler.timing import check_timezone, parse_crontab

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 1.0
MAX_BATCH_ITEMS = 100_000


@dataclass(frozen=True)
class RunOptions:
    """Options of the runs a template starts (the same as ``Client.start_run``'s).

    Attributes:
        model: model id (default: the settings' default model).
        workspace: folder every run works in (None: a fresh folder per run).
        max_cost_usd: cost budget of each run.
        max_steps: step budget of each run.
        max_time_s: time budget of each run.
        max_tokens_budget: token budget of each run (tokens of every kind, all its calls).
        tools: enabled tools (None: the defaults).
        approval_overrides: per-tool approval policy.
        effort: ``low`` … ``max``, or "" for the model's documented default.
        thinking_budget: thinking on (above 0) or off (0).
        economy: each model turn goes to a Message Batch (half price, slower).
        tags: the tags of every run started (see :mod:`desktop_agent.domain.tags`).
    """

    model: str | None = None
    workspace: str | Path | None = None
    max_cost_usd: float | None = None
    max_steps: int | None = None
    max_time_s: float | None = None
    max_tokens_budget: int | None = None
    tools: Sequence[str] | None = None
    approval_overrides: dict[str, str] = field(default_factory=dict)
    effort: str = ""
    thinking_budget: int = 0
    economy: bool = False
    tags: Sequence[str] = ()


def _forecast(sched: Scheduling, spec: AgentSpec) -> JSON:
    """The forecast of one run of ``spec`` now, kept with each run the template starts.

    None when it cannot be made: a template is made with or without one.
    """
    try:
        return forecast_json(forecast(sched.client, spec))
    except Exception:
        log.warning("no forecast for the template's runs", exc_info=True)
        return None


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _folder(path: str | Path, what: str) -> Path:
    folder = Path(path).expanduser().absolute()
    if not folder.is_dir():
        raise InvalidInputError(f"{what} {folder} is not a folder")
    return folder


def batch_source(
    folder: str | Path | None, pattern: str, lines: str | Path | None
) -> tuple[list[str], str]:
    """A batch's items, and where they come from (for display).

    The items are the files of ``folder`` matching ``pattern``, or the non-empty lines
    of the file ``lines``.

    Raises:
        InvalidInputError: neither or both given, nothing to read, no items, too many.
    """
    if (folder is None) == (lines is None):
        raise InvalidInputError("give either a folder or a file of lines")
    if folder is not None:
        where = _folder(folder, "folder")
        items = [k.path for k in folder_files(where, pattern)]
        source = f"files of {where}" + (f" matching {pattern}" if pattern != "*" else "")
    else:
        path = Path(str(lines)).expanduser().absolute()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read {path}: {exc}") from None
        items = [line.strip() for line in text.splitlines() if line.strip()]
        source = f"lines of {path}"
    if not items:
        raise InvalidInputError(f"no items: the {source} are empty")
    if len(items) > MAX_BATCH_ITEMS:
        raise InvalidInputError(f"{len(items)} items: at most {MAX_BATCH_ITEMS} per batch")
    return items, source


class Scheduling:
    """Schedules, batches, folder watches and upkeep of one client's database.

    Args:
        client: the client (its database, settings and tools).
        clock: time source for the rows written (tests pass a fake one).
    """

    def __init__(self, client: Client, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.now = clock
        self._store = ScheduleStore(client._db, clock)

    @property
    def store(self) -> ScheduleStore:
        """The schedules' store: the seam for tests and benchmarks (see ``Client.store``)."""
        return self._store

    # ------------------------------------------------------------------ templates

    def template(self, goal: str, options: RunOptions | None = None) -> RunTemplate:
        """Validate a goal and run options into a template."""
        opts = options or RunOptions()
        goal = check_text(goal, "the goal").strip()
        if not goal:
            raise InvalidInputError("the goal is empty: say what the agent should do")
        spec, budget = self.client.prepare_run(
            model=opts.model,
            max_cost_usd=opts.max_cost_usd,
            max_steps=opts.max_steps,
            max_time_s=opts.max_time_s,
            max_tokens_budget=opts.max_tokens_budget,
            tools=opts.tools,
            approval_overrides=opts.approval_overrides,
            effort=opts.effort,
            thinking_budget=opts.thinking_budget,
            economy=opts.economy,
        )
        workspace = None
        if opts.workspace is not None:
            workspace = str(prepare_workspace(opts.workspace))
        return RunTemplate(
            goal=goal,
            spec=spec,
            budget=budget,
            workspace=workspace,
            forecast=_forecast(self, spec),
            tags=normalize_tags(opts.tags),
        )

    # ------------------------------------------------------------------ schedules

    def add_schedule(
        self,
        goal: str,
        *,
        cron: str | None = None,
        every_s: float | None = None,
        name: str = "",
        overlap: str = "skip",
        timezone: str = "",
        options: RunOptions | None = None,
    ) -> Schedule:
        """Create a schedule; a running worker picks it up within seconds.

        Args:
            goal: the goal of each run.
            cron: crontab expression ``minute hour day-of-month month day-of-week``.
            every_s: or an interval in seconds (the first run one interval from now).
            name: a label (default: the goal's first line).
            overlap: ``skip`` or ``queue`` a firing while the previous run is active.
            timezone: IANA zone of the cron expression (default: local).
            options: options of each run.
        """
        if (cron is None) == (every_s is None):
            raise InvalidInputError("give either a cron expression or an interval, not both")
        if cron is not None:
            check_timezone(timezone)
            parse_crontab(cron, timezone)
        elif every_s is not None and (not math.isfinite(every_s) or every_s < MIN_INTERVAL_S):
            raise InvalidInputError(f"the interval must be at least {MIN_INTERVAL_S:g} second")
        try:
            policy = OverlapPolicy(overlap)
        except ValueError:
            raise InvalidInputError("overlap must be skip or queue") from None
        template = self.template(goal, options)
        now = self.now()
        schedule = Schedule(
            id=_new_id("sch"),
            name=name.strip() or template.goal.splitlines()[0][:80],
            template=template,
            cron=" ".join(cron.split()) if cron is not None else None,
            every_s=every_s,
            timezone=timezone,
            overlap=policy,
            created_at=now,
            updated_at=now,
        )
        self._store.add_schedule(schedule)
        return self._store.get_schedule(schedule.id)

    def schedules(self) -> list[Schedule]:
        """Every schedule, oldest first."""
        return self._store.list_schedules()

    def schedule(self, schedule_id: str) -> Schedule:
        """A schedule by id or unique prefix."""
        return self._store.get_schedule(schedule_id)

    def trigger(self, schedule_id: str, item: str | None = None) -> Run:
        """Start a run from a schedule's template now (a webhook, a script), out of turn.

        ``item`` fills ``{item}`` in the template's goal. The schedule's own firings are
        not moved.

        Raises:
            NotFoundError: no such schedule.
            InvalidInputError: the goal needs an item and none was given.
        """
        template = self.schedule(schedule_id).template
        goal = template.goal
        if "{item}" in goal:
            if not item:
                raise InvalidInputError("this schedule's goal takes an item: give one")
            goal = goal.replace("{item}", item)
        spec, budget = template.spec, template.budget
        return self.client.start_run(
            goal,
            workspace=template.workspace,
            model=spec.model,
            tools=[name for name, _version in spec.tools],
            system_prompt=spec.system_prompt,
            approval_overrides=dict(spec.approval_overrides),
            max_tokens=spec.max_tokens,
            thinking_budget=spec.thinking_budget,
            effort=spec.effort,
            max_cost_usd=budget.max_cost_usd,
            max_steps=budget.max_steps,
            max_time_s=budget.max_time_s,
            max_tokens_budget=budget.max_tokens,
            use_defaults=False,
            tags=template.tags,
        )

    def pause_schedule(self, schedule_id: str) -> Schedule:
        """Stop firing until resumed."""
        return self._store.set_schedule_paused(self.schedule(schedule_id).id, True)

    def resume_schedule(self, schedule_id: str) -> Schedule:
        """Fire again from now on (what was missed while paused is not caught up)."""
        return self._store.set_schedule_paused(self.schedule(schedule_id).id, False)

    def remove_schedule(self, schedule_id: str) -> Schedule:
        """Delete a schedule; its runs stay."""
        schedule = self.schedule(schedule_id)
        self._store.remove_schedule(schedule.id)
        return schedule

    # ------------------------------------------------------------------ batches

    def start_batch(
        self,
        goal: str,
        *,
        folder: str | Path | None = None,
        pattern: str = "*",
        lines: str | Path | None = None,
        concurrency: int = 4,
        options: RunOptions | None = None,
    ) -> Batch:
        """Create a batch: one run per file of ``folder`` or per line of ``lines``.

        ``{item}`` in the goal is replaced by the line or the file's name (``{path}``:
        the file's full path); without a placeholder, the item is added to the goal.
        Each file is copied into its run's fresh workspace unless a workspace is given.
        """
        if concurrency < 1:
            raise InvalidInputError("concurrency must be at least 1")
        items, source = batch_source(folder, pattern, lines)
        if not any(p in goal for p in ("{item}", "{name}", "{path}")):
            goal = goal.rstrip() + (
                "\n\nFile: {name}" if folder is not None else "\n\nItem: {item}"
            )
        batch = Batch(
            id=_new_id("bat"),
            template=self.template(goal, options),
            source=source,
            concurrency=concurrency,
            total=len(items),
            created_at=self.now(),
            from_folder=folder is not None,
        )
        self._store.create_batch(batch, items)
        return self._store.get_batch(batch.id)

    def batches(self) -> list[Batch]:
        """Every batch, newest first."""
        return self._store.list_batches()

    def batch(self, batch_id: str) -> Batch:
        """A batch by id or unique prefix."""
        return self._store.get_batch(batch_id)

    def batch_items(self, batch_id: str) -> list[BatchItem]:
        """The batch's items in order, with their runs' live status."""
        return self._store.batch_items(self.batch(batch_id).id)

    def batch_progress(self, batch_id: str) -> BatchProgress:
        """Counts of the batch's items by status ("312 / 1000 done")."""
        return self._store.batch_progress(self.batch(batch_id).id)

    def retry_batch(self, batch_id: str, items: Sequence[int] | None = None) -> list[int]:
        """Start failed or cancelled items again (all of them, or the given indexes)."""
        retried = self._store.retry_items(self.batch(batch_id).id, items)
        if not retried:
            raise InvalidInputError(f"batch {batch_id} has no failed or cancelled item to retry")
        return retried

    # ------------------------------------------------------------------ folder watches

    def add_watch(
        self,
        folder: str | Path,
        goal: str,
        *,
        pattern: str = "*",
        every_s: float = 10.0,
        include_existing: bool = False,
        options: RunOptions | None = None,
    ) -> FolderWatch:
        """Watch a folder: each new file starts a run (once per path, size and time).

        Files already there start nothing unless ``include_existing``. ``{name}`` and
        ``{path}`` in the goal name the file; without them, the file is added to the goal.
        Each file is copied into its run's fresh workspace unless a workspace is given.
        """
        where = _folder(folder, "watched folder")
        if not math.isfinite(every_s) or every_s < 0.5:
            raise InvalidInputError("scan at most every half second")
        if not any(p in goal for p in ("{item}", "{name}", "{path}")):
            goal = goal.rstrip() + "\n\nNew file: {name}"
        now = self.now()
        watch = FolderWatch(
            id=_new_id("wat"),
            folder=str(where),
            pattern=pattern,
            template=self.template(goal, options),
            scan_s=every_s,
            created_at=now,
            updated_at=now,
        )
        baseline = [] if include_existing else folder_files(where, pattern)
        self._store.add_watch(watch, baseline)
        return self._store.get_watch(watch.id)

    def watches(self) -> list[FolderWatch]:
        """Every folder watch."""
        return self._store.list_watches()

    def pause_watch(self, watch_id: str) -> FolderWatch:
        """Stop scanning until resumed (files that land meanwhile start runs on resume)."""
        return self._store.set_watch_paused(self._store.get_watch(watch_id).id, True)

    def resume_watch(self, watch_id: str) -> FolderWatch:
        """Scan again."""
        return self._store.set_watch_paused(self._store.get_watch(watch_id).id, False)

    def remove_watch(self, watch_id: str) -> FolderWatch:
        """Stop watching; runs already started stay."""
        watch = self._store.get_watch(watch_id)
        self._store.remove_watch(watch.id)
        return watch

    # ------------------------------------------------------------------ health and upkeep

    def stuck_runs(self) -> list[StuckRun]:
        """Runs flagged by a worker as making no progress."""
        return self._store.stuck_runs()

    def db_info(self) -> DbInfo:
        """Size, schema revision and row counts of the database."""
        return db_info(self.client._db)

    def vacuum(self) -> DbInfo:
        """Compact the database file; returns its new size."""
        vacuum(self.client._db)
        return db_info(self.client._db)

    def archive(self, older_than_s: float, out: str | Path | None = None) -> ArchiveResult:
        """Archive runs finished more than ``older_than_s`` ago, and remove them."""
        if not math.isfinite(older_than_s) or older_than_s < 0:
            raise InvalidInputError("the age must be a positive duration, e.g. 30d")
        folder = self.client.db_path.parent / "archives"
        target = Path(out).expanduser().absolute() if out is not None else None
        archiver = Archiver(self.client._db, folder, self.now)
        return archiver.archive(self.now() - older_than_s, out=target)

    def archived(self, run_id: str) -> ArchivedRun | None:
        """The archived record of a run (by id or unique prefix), or None."""
        return find_archived(self.client.db_path.parent / "archives", run_id)

    def unarchive(self, run_id: str) -> Run:
        """Bring an archived run back into the database, as it was when archived.

        Raises:
            NotFoundError: no archive holds such a run.
            InvalidInputError: it is in the database already.
        """
        found = self.archived(run_id)
        if found is None:
            raise NotFoundError(
                f"no archived run {run_id!r} in {self.client.db_path.parent / 'archives'}"
            )
        unarchive(self.client._db, found)
        return self.client.run(found.run_id)
