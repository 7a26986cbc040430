"""SQL for schedules, batches, folder watches and run alerts.

Every method that changes something is one transaction that checks again whether it still
applies (a schedule's ``version``, a batch item still pending, a file not seen yet), so a
firing handled twice, by two workers or after a crash, has its effect once. Runs started
from a template are inserted in the same transaction as the record that says they were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import delete, exists, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from desktop_agent.domain import Run, RunStatus
from desktop_agent.domain.errors import InvalidStateError, NotFoundError
from desktop_agent.domain.scheduling import (
    Batch,
    BatchItem,
    BatchProgress,
    FileKey,
    FireKind,
    FireResult,
    FolderWatch,
    ItemStatus,
    OverlapPolicy,
    RunTemplate,
    Schedule,
    StuckRun,
)
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.forecasts import keep_forecast
from desktop_agent.persistence.mapping import dumps, run_values
from desktop_agent.persistence.scheduling_rows import (
    ENDED_OR_STOPPED,
    TERMINAL,
    RunMaker,
    batch_from_row,
    item_from_row,
    items_with_runs,
    progress_of,
    schedule_from_row,
    sync_items,
    watch_from_row,
)
from desktop_agent.persistence.sqlbase import SqlBase
from desktop_agent.persistence.tables import (
    batch_items,
    batches,
    run_alerts,
    runs,
    schedules,
    seen_files,
    watches,
)
from desktop_agent.persistence.tagging import insert_tags

_STALE = FireResult(FireKind.STALE, message="changed or handled elsewhere")

_STUCK = "stuck"
"""The kind of alert :meth:`ScheduleStore.flag_stuck` raises."""

_RETRYABLE = {ItemStatus.FAILED, ItemStatus.CANCELLED}


def _definitions_token() -> Any:
    """Counts and versions of schedules and watches (see ``definitions_token``)."""
    return select(
        select(func.count()).select_from(schedules).scalar_subquery(),
        select(func.coalesce(func.sum(schedules.c.version), 0)).scalar_subquery(),
        select(func.coalesce(func.max(schedules.c.updated_at), 0)).scalar_subquery(),
        select(func.count()).select_from(watches).scalar_subquery(),
        select(func.coalesce(func.sum(watches.c.version), 0)).scalar_subquery(),
    )


_DEFINITIONS_TOKEN = _definitions_token()


def _pump_needed() -> Any:
    """Whether a batch item or a queued firing may be waiting for room to start."""
    item = batch_items.c
    return select(
        exists().where(item.status == str(ItemStatus.PENDING)),
        exists()
        .select_from(batch_items.join(runs, runs.c.id == item.run_id))
        .where(item.status == str(ItemStatus.RUNNING), runs.c.status.in_(ENDED_OR_STOPPED)),
        exists().where(schedules.c.queued > 0),
    )


_PUMP_NEEDED = _pump_needed()


def _choose_retries(
    batch_id: str, status: dict[int, ItemStatus], wanted: set[int] | None
) -> list[int]:
    """The items to retry: every failed or cancelled one, or those wanted (checked).

    Raises:
        InvalidStateError: a chosen item has not failed.
        NotFoundError: a chosen item does not exist.
    """
    if wanted is None:
        return sorted(i for i, s in status.items() if s in _RETRYABLE)
    missing = sorted(wanted - status.keys())
    if missing:
        raise NotFoundError(f"batch {batch_id} has no item {missing[0]}")
    bad = sorted(i for i in wanted if status[i] not in _RETRYABLE)
    if bad and status[bad[0]] == ItemStatus.STOPPED:
        raise InvalidStateError(
            f"item {bad[0]} of batch {batch_id} is stopped: resume its run "
            "(`desktop-agent resume RUN`) to continue it, or cancel the run first"
        )
    if bad:
        raise InvalidStateError(
            f"item {bad[0]} of batch {batch_id} is {status[bad[0]]}: only failed "
            "or cancelled items can be retried"
        )
    return sorted(wanted)


class ScheduleStore(SqlBase):
    """The scheduling tables, over the same database and helpers as the journal's store.

    Args:
        db: an opened, migrated database.
        clock: time source for bookkeeping columns.
    """

    def __init__(self, db: Database, clock: Callable[[], float] | None = None) -> None:
        if clock is None:
            super().__init__(db)
        else:
            super().__init__(db, clock)

    @staticmethod
    def _active_run(conn: Connection, column: Any, value: str) -> str | None:
        stmt = (
            select(runs.c.id)
            .where(column == value, runs.c.status.not_in(TERMINAL))
            .order_by(runs.c.created_at)
            .limit(1)
        )
        found = conn.execute(stmt).scalar()
        return str(found) if found is not None else None

    @staticmethod
    def _insert_run(conn: Connection, run: Run, template: RunTemplate) -> None:
        """Insert a run a template started, with the forecast the template keeps."""
        conn.execute(insert(runs).values(run_values(run)))
        insert_tags(conn, run.id, template.tags)
        if isinstance(template.forecast, dict):
            keep_forecast(conn, run.id, template.forecast, run.created_at)

    def wake_time(self, run_id: str) -> float | None:
        """The run's wake time if it waits with one."""
        stmt = select(runs.c.wake_at).where(
            runs.c.id == run_id, runs.c.status == str(RunStatus.WAITING)
        )
        at = self._read(lambda c: c.execute(stmt).scalar())
        return float(at) if at is not None else None

    def definitions_token(self) -> str:
        """Changes whenever a schedule or a watch is added, changed or removed."""
        row = self._read(lambda c: c.execute(_DEFINITIONS_TOKEN).one())
        return ":".join(str(v) for v in row)

    # ------------------------------------------------------------------ schedules

    def add_schedule(self, s: Schedule) -> None:
        """Store a new schedule."""
        stmt = insert(schedules).values(
            id=s.id,
            name=s.name,
            template=dumps(s.template.to_json()),
            cron=s.cron,
            every_s=s.every_s,
            timezone=s.timezone,
            overlap=str(s.overlap),
            paused=s.paused,
            created_at=s.created_at,
            updated_at=s.created_at,
        )
        self._write(lambda c: c.execute(stmt))

    def list_schedules(self) -> list[Schedule]:
        """Every schedule, oldest first."""
        stmt = select(schedules).order_by(schedules.c.created_at, schedules.c.id)
        rows = self._read(lambda c: c.execute(stmt).mappings().all())
        return [schedule_from_row(r) for r in rows]

    def get_schedule(self, prefix: str) -> Schedule:
        """A schedule by id or unique id prefix; raises NotFoundError."""
        row = self._by_prefix(
            schedules, prefix, "schedule", "`desktop-agent schedule list` lists them"
        )
        return schedule_from_row(row)

    def set_schedule_paused(self, schedule_id: str, paused: bool) -> Schedule:
        """Pause or resume; a resumed schedule does not catch up what it missed while paused."""
        c = schedules.c
        now = self.now()
        values: dict[str, Any] = {"paused": paused, "updated_at": now, "version": c.version + 1}
        if not paused:
            values.update(last_fire_at=now, queued=0)
        stmt = update(schedules).where(c.id == schedule_id).values(values)
        if self._write(lambda conn: conn.execute(stmt).rowcount) == 0:
            raise NotFoundError(f"no schedule {schedule_id!r}")
        return self.get_schedule(schedule_id)

    def remove_schedule(self, schedule_id: str) -> None:
        """Delete a schedule (its runs stay, with their ``schedule_id``)."""
        stmt = delete(schedules).where(schedules.c.id == schedule_id)
        if self._write(lambda c: c.execute(stmt).rowcount) == 0:
            raise NotFoundError(f"no schedule {schedule_id!r}")

    def fire_schedule(
        self, schedule: Schedule, fire_at: float, missed: int, now: float, make_run: RunMaker
    ) -> FireResult:
        """Handle one (coalesced) firing; see :meth:`SchedulerPort.fire_schedule`."""
        c = schedules.c
        current = select(c.version, c.paused).where(c.id == schedule.id)

        def txn(conn: Connection) -> FireResult:
            row = conn.execute(current).first()
            if row is None or row.version != schedule.version or row.paused:
                return _STALE
            result, run, values = self._firing(conn, schedule, missed, make_run)
            values.update(
                last_fire_at=fire_at,
                fire_count=c.fire_count + 1,
                version=c.version + 1,
                updated_at=now,
                last_result=result.message,
            )
            # The version guard makes a concurrent firing (another worker, PostgreSQL's
            # read committed) lose here instead of starting a second run.
            stmt = (
                update(schedules)
                .where(c.id == schedule.id, c.version == schedule.version)
                .values(values)
            )
            if conn.execute(stmt).rowcount != 1:
                return _STALE
            if run is not None:
                self._insert_run(conn, run, schedule.template)
            return result

        return self._write(txn)

    def _firing(
        self, conn: Connection, schedule: Schedule, missed: int, make_run: RunMaker
    ) -> tuple[FireResult, Run | None, dict[str, Any]]:
        """What a firing does (skip, queue or start a run), and the schedule's columns for it."""
        c = schedules.c
        when = f"{missed} firings coalesced into one" if missed > 1 else "on time"
        active = self._active_run(conn, runs.c.schedule_id, schedule.id)
        if active is not None and schedule.overlap == OverlapPolicy.SKIP:
            message = f"skipped ({when}): run {active} is still active"
            return FireResult(FireKind.SKIPPED, message=message), None, {"skipped": c.skipped + 1}
        if active is not None:
            message = f"queued ({when}) behind run {active}"
            return FireResult(FireKind.QUEUED, message=message), None, {"queued": c.queued + 1}
        run = make_run(schedule.template, schedule_id=schedule.id)
        result = FireResult(FireKind.STARTED, run.id, f"started run {run.id} ({when})")
        return result, run, {"last_run_id": run.id}

    def _pump_queued(self, conn: Connection, make_run: RunMaker, now: float) -> list[str]:
        c = schedules.c
        started = []
        queued = select(schedules).where(c.queued > 0, c.paused.is_(False))
        for row in conn.execute(queued).mappings().all():
            schedule = schedule_from_row(row)
            if self._active_run(conn, runs.c.schedule_id, schedule.id) is not None:
                continue
            run = make_run(schedule.template, schedule_id=schedule.id)
            take = (
                update(schedules)
                .where(c.id == schedule.id, c.queued > 0)
                .values(
                    queued=c.queued - 1,
                    last_run_id=run.id,
                    updated_at=now,
                    last_result=f"started queued run {run.id}",
                    version=c.version + 1,
                )
            )
            if conn.execute(take).rowcount != 1:
                continue
            self._insert_run(conn, run, schedule.template)
            started.append(run.id)
        return started

    # ------------------------------------------------------------------ batches

    def create_batch(self, batch: Batch, items: Sequence[str]) -> None:
        """Store a batch and its items, all pending."""
        header = insert(batches).values(
            id=batch.id,
            template=dumps(batch.template.to_json()),
            source=batch.source,
            concurrency=batch.concurrency,
            total=len(items),
            from_folder=batch.from_folder,
            created_at=batch.created_at,
        )
        rows = [
            {
                "batch_id": batch.id,
                "idx": i,
                "item": item,
                "status": str(ItemStatus.PENDING),
                "attempts": 0,
                "updated_at": batch.created_at,
            }
            for i, item in enumerate(items)
        ]

        def txn(conn: Connection) -> None:
            conn.execute(header)
            if rows:
                conn.execute(insert(batch_items), rows)

        self._write(txn)

    def list_batches(self) -> list[Batch]:
        """Every batch, newest first."""
        stmt = select(batches).order_by(batches.c.created_at.desc())
        return [batch_from_row(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    def get_batch(self, prefix: str) -> Batch:
        """A batch by id or unique id prefix; raises NotFoundError."""
        return batch_from_row(
            self._by_prefix(batches, prefix, "batch", "`desktop-agent batch status` lists them")
        )

    def batch_items(self, batch_id: str) -> list[BatchItem]:
        """The batch's items in order, with the live status of their runs."""
        stmt = (
            items_with_runs().where(batch_items.c.batch_id == batch_id).order_by(batch_items.c.idx)
        )
        return [item_from_row(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    def batch_progress(self, batch_id: str) -> BatchProgress:
        """Counts of the batch's items by status."""
        return progress_of(Counter(item.status for item in self.batch_items(batch_id)))

    def retry_items(self, batch_id: str, indexes: Iterable[int] | None = None) -> list[int]:
        """Make failed or cancelled items pending again; returns their indexes.

        Raises:
            InvalidStateError: a chosen item has not failed.
            NotFoundError: a chosen item does not exist.
        """
        wanted = None if indexes is None else set(indexes)
        item = batch_items.c
        read = select(item.idx, item.status).where(item.batch_id == batch_id)

        def txn(conn: Connection) -> list[int]:
            conn.execute(sync_items(self.now(), batch_id))
            status = {int(i): ItemStatus(s) for i, s in conn.execute(read).all()}
            chosen = _choose_retries(batch_id, status, wanted)
            for idx in chosen:
                conn.execute(
                    update(batch_items)
                    .where(item.batch_id == batch_id, item.idx == idx)
                    .values(status=str(ItemStatus.PENDING), run_id=None, updated_at=self.now())
                )
            return chosen

        return self._write(txn)

    def _pump_batches(self, conn: Connection, make_run: RunMaker, now: float) -> list[str]:
        item = batch_items.c
        conn.execute(sync_items(self.now()))
        started: list[str] = []
        with_pending = (
            select(batches)
            .where(
                batches.c.id.in_(
                    select(item.batch_id).where(item.status == str(ItemStatus.PENDING))
                )
            )
            .order_by(batches.c.created_at)
        )
        for row in conn.execute(with_pending).mappings().all():
            batch = batch_from_row(row)
            active = conn.execute(
                select(func.count())
                .select_from(batch_items)
                .where(item.batch_id == batch.id, item.status == str(ItemStatus.RUNNING))
            ).scalar_one()
            free = batch.concurrency - int(active)
            if free > 0:
                started += self._dispatch(conn, batch, free, make_run, now)
        return started

    def _dispatch(
        self, conn: Connection, batch: Batch, free: int, make_run: RunMaker, now: float
    ) -> list[str]:
        """Start runs for up to ``free`` pending items of the batch."""
        item = batch_items.c
        pending = (
            select(item.idx, item.item)
            .where(item.batch_id == batch.id, item.status == str(ItemStatus.PENDING))
            .order_by(item.idx)
            .limit(int(free))
        )
        started: list[str] = []
        for idx, value in conn.execute(pending).all():
            text = str(value)
            name = text.rsplit("/", 1)[-1] if batch.from_folder else text
            run = make_run(
                batch.template,
                goal=batch.template.render_goal(
                    item=name, name=name, path=text if batch.from_folder else ""
                ),
                parent_id=batch.id,
                source_file=text if batch.from_folder else None,
            )
            take = (
                update(batch_items)
                .where(
                    item.batch_id == batch.id,
                    item.idx == idx,
                    item.status == str(ItemStatus.PENDING),
                )
                .values(
                    status=str(ItemStatus.RUNNING),
                    run_id=run.id,
                    attempts=item.attempts + 1,
                    updated_at=now,
                )
            )
            if conn.execute(take).rowcount != 1:  # another worker dispatched it first
                continue
            self._insert_run(conn, run, batch.template)
            started.append(run.id)
        return started

    def _pump_needed(self) -> bool:
        return any(bool(v) for v in self._read(lambda c: c.execute(_PUMP_NEEDED).one()))

    def pump(self, make_run: RunMaker, now: float) -> list[str]:
        """Start the next batch items and queued schedule firings that have room."""
        if not self._pump_needed():
            return []
        return self._write(
            lambda c: self._pump_batches(c, make_run, now) + self._pump_queued(c, make_run, now)
        )

    # ------------------------------------------------------------------ folder watches

    def add_watch(self, watch: FolderWatch, baseline: Iterable[FileKey] = ()) -> None:
        """Store a watch; files in ``baseline`` count as seen (they start no run)."""
        stmt = insert(watches).values(
            id=watch.id,
            folder=watch.folder,
            pattern=watch.pattern,
            template=dumps(watch.template.to_json()),
            scan_s=watch.scan_s,
            paused=watch.paused,
            created_at=watch.created_at,
            updated_at=watch.created_at,
            version=0,
        )

        def txn(conn: Connection) -> None:
            conn.execute(stmt)
            for key in baseline:
                self._insert_seen(conn, watch.id, key, None, watch.created_at)

        self._write(txn)

    @staticmethod
    def _insert_seen(
        conn: Connection, watch_id: str, key: FileKey, run_id: str | None, now: float
    ) -> None:
        conn.execute(
            insert(seen_files).values(
                watch_id=watch_id,
                path=key.path,
                size=key.size,
                mtime_ns=key.mtime_ns,
                run_id=run_id,
                seen_at=now,
            )
        )

    def list_watches(self) -> list[FolderWatch]:
        """Every folder watch, oldest first."""
        stmt = select(watches).order_by(watches.c.created_at, watches.c.id)
        return [watch_from_row(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    def get_watch(self, prefix: str) -> FolderWatch:
        """A watch by id or unique id prefix; raises NotFoundError."""
        return watch_from_row(
            self._by_prefix(watches, prefix, "watch", "`desktop-agent watch list` lists them")
        )

    def set_watch_paused(self, watch_id: str, paused: bool) -> FolderWatch:
        """Pause or resume a watch."""
        stmt = (
            update(watches)
            .where(watches.c.id == watch_id)
            .values(paused=paused, updated_at=self.now(), version=watches.c.version + 1)
        )
        if self._write(lambda c: c.execute(stmt).rowcount) == 0:
            raise NotFoundError(f"no watch {watch_id!r}")
        return self.get_watch(watch_id)

    def remove_watch(self, watch_id: str) -> None:
        """Delete a watch and its record of seen files."""

        def txn(conn: Connection) -> int:
            conn.execute(delete(seen_files).where(seen_files.c.watch_id == watch_id))
            return conn.execute(delete(watches).where(watches.c.id == watch_id)).rowcount

        if self._write(txn) == 0:
            raise NotFoundError(f"no watch {watch_id!r}")

    def seen_files(self, watch_id: str) -> set[FileKey]:
        """Every file the watch has seen."""
        f = seen_files.c
        stmt = select(f.path, f.size, f.mtime_ns).where(f.watch_id == watch_id)
        rows = self._read(lambda c: c.execute(stmt).all())
        return {FileKey(str(p), int(s), int(m)) for p, s, m in rows}

    def start_for_file(
        self, watch: FolderWatch, key: FileKey, make_run: RunMaker, now: float
    ) -> str | None:
        """Start the watch's run for a new file, once; None if it was seen already."""
        f = seen_files.c
        seen = select(f.watch_id).where(
            f.watch_id == watch.id,
            f.path == key.path,
            f.size == key.size,
            f.mtime_ns == key.mtime_ns,
        )
        live = select(watches.c.paused).where(watches.c.id == watch.id)

        def txn(conn: Connection) -> str | None:
            paused = conn.execute(live).first()
            if conn.execute(seen).first() is not None or paused is None or paused.paused:
                return None
            name = key.path.rsplit("/", 1)[-1]
            run = make_run(
                watch.template,
                goal=watch.template.render_goal(item=name, name=name, path=key.path),
                schedule_id=watch.id,
                source_file=key.path,
            )
            self._insert_seen(conn, watch.id, key, run.id, now)
            self._insert_run(conn, run, watch.template)
            return run.id

        try:
            return self._write(txn)
        except IntegrityError:  # another worker recorded it first
            return None

    # ------------------------------------------------------------------ alerts

    def flag_stuck(self, now: float, after_s: float) -> list[StuckRun]:
        """Flag running runs whose journal has not moved for ``after_s``; the new flags."""
        a = run_alerts.c
        open_stuck = (a.kind == _STUCK) & a.cleared_at.is_(None)
        moved_on = select(runs.c.id).where(
            runs.c.id == a.run_id,
            (runs.c.status != str(RunStatus.RUNNING)) | (runs.c.updated_at > a.since),
        )
        clear = update(run_alerts).where(open_stuck, a.run_id.in_(moved_on)).values(cleared_at=now)
        idle = select(runs.c.id, runs.c.goal, runs.c.updated_at).where(
            runs.c.status == str(RunStatus.RUNNING),
            runs.c.updated_at < now - after_s,
            ~exists().where(a.run_id == runs.c.id, open_stuck),
        )

        def txn(conn: Connection) -> list[StuckRun]:
            conn.execute(clear)
            flagged = []
            for run_id, goal, since in conn.execute(idle).all():
                idle_min = (now - float(since)) / 60
                message = (
                    f"no progress for {idle_min:.0f} min: a tool or the model may hang; "
                    "cancel it, or wait"
                )
                conn.execute(delete(run_alerts).where(a.run_id == run_id, a.kind == _STUCK))
                conn.execute(
                    insert(run_alerts).values(
                        run_id=run_id, kind=_STUCK, since=since, raised_at=now, message=message
                    )
                )
                flagged.append(StuckRun(run_id, goal, since, now, message))
            return flagged

        return self._write(txn)

    def stuck_runs(self) -> list[StuckRun]:
        """Runs currently flagged as stuck."""
        a = run_alerts.c
        stmt = (
            select(a.run_id, runs.c.goal, a.since, a.raised_at, a.message)
            .join_from(run_alerts, runs, runs.c.id == a.run_id)
            .where(a.kind == _STUCK, a.cleared_at.is_(None))
            .order_by(a.raised_at)
        )
        return [StuckRun(*r) for r in self._read(lambda c: c.execute(stmt).all())]
