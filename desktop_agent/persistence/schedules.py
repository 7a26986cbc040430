"""SQL for schedules, batches, folder watches and run alerts.

Every method that changes something is one transaction that checks again whether it still
applies (a schedule's ``version``, a batch item still pending, a file not seen yet), so a
firing handled twice, by two workers or after a crash, has its effect once. Runs started
from a template are inserted in the same transaction as the record that says they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from desktop_agent.domain import Run
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
    Schedule,
    StuckRun,
)
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import dumps, run_params
from desktop_agent.persistence.scheduling_rows import (
    ENDED_OR_STOPPED,
    SYNC_ITEMS,
    TERMINAL,
    RunMaker,
    batch_from_row,
    item_from_row,
    schedule_from_row,
    watch_from_row,
)
from desktop_agent.persistence.store import SqlStore

_STALE = FireResult(FireKind.STALE, message="changed or handled elsewhere")


class ScheduleStore(SqlStore):
    """The scheduling tables, over the same database (and helpers) as :class:`SqlStore`.

    Args:
        db: an opened, migrated database.
        clock: time source for bookkeeping columns.
    """

    def __init__(self, db: Database, clock: Callable[[], float] | None = None) -> None:
        if clock is None:
            super().__init__(db)
        else:
            super().__init__(db, clock)

    def _by_prefix(self, table: str, prefix: str, what: str, hint: str) -> Any:
        def read(c: Connection) -> list[Any]:
            return self._rows(
                c,
                f"SELECT * FROM {table} WHERE id LIKE :p ORDER BY id LIMIT 2",
                p=prefix.replace("%", "").replace("_", r"\_") + "%",
            )

        rows = self._read(read)
        exact = [r for r in rows if r["id"] == prefix]
        if exact:
            return exact[0]
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise NotFoundError(f"no {what} {prefix!r}; {hint}")
        raise NotFoundError(f"{prefix!r} matches several {what}s; give more of the id")

    def _active_run(self, conn: Connection, column: str, value: str) -> str | None:
        rows = self._rows(
            conn,
            f"SELECT id FROM runs WHERE {column} = :v AND status NOT IN {TERMINAL} "
            "ORDER BY created_at LIMIT 1",
            v=value,
        )
        return str(rows[0]["id"]) if rows else None

    def _insert_run(self, conn: Connection, run: Run) -> None:
        params = run_params(run)
        cols = ", ".join(params)
        vals = ", ".join(f":{k}" for k in params)
        self._exec(conn, f"INSERT INTO runs ({cols}) VALUES ({vals})", **params)

    def wake_time(self, run_id: str) -> float | None:
        """The run's wake time if it waits with one."""
        rows = self._read(
            lambda c: self._rows(
                c, "SELECT wake_at FROM runs WHERE id = :id AND status = 'waiting'", id=run_id
            )
        )
        return float(rows[0]["wake_at"]) if rows and rows[0]["wake_at"] is not None else None

    def definitions_token(self) -> str:
        """Changes whenever a schedule or a watch is added, changed or removed."""
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT (SELECT count(*) FROM schedules) AS sn, "
                "(SELECT coalesce(sum(version), 0) FROM schedules) AS sv, "
                "(SELECT coalesce(max(updated_at), 0) FROM schedules) AS su, "
                "(SELECT count(*) FROM watches) AS wn, "
                "(SELECT coalesce(sum(version), 0) FROM watches) AS wv",
            )
        )
        r = rows[0]
        return f"{r['sn']}:{r['sv']}:{r['su']}:{r['wn']}:{r['wv']}"

    # ------------------------------------------------------------------ schedules

    def add_schedule(self, s: Schedule) -> None:
        """Store a new schedule."""
        params = {
            "id": s.id,
            "name": s.name,
            "template": dumps(s.template.to_json()),
            "cron": s.cron,
            "every_s": s.every_s,
            "timezone": s.timezone,
            "overlap": str(s.overlap),
            "paused": s.paused,
            "created_at": s.created_at,
            "updated_at": s.created_at,
        }
        cols = ", ".join(params)
        vals = ", ".join(f":{k}" for k in params)
        self._write(
            lambda c: self._exec(c, f"INSERT INTO schedules ({cols}) VALUES ({vals})", **params)
        )

    def list_schedules(self) -> list[Schedule]:
        """Every schedule, oldest first."""
        rows = self._read(
            lambda c: self._rows(c, "SELECT * FROM schedules ORDER BY created_at, id")
        )
        return [schedule_from_row(r) for r in rows]

    def get_schedule(self, prefix: str) -> Schedule:
        """A schedule by id or unique id prefix; raises NotFoundError."""
        row = self._by_prefix(
            "schedules", prefix, "schedule", "`desktop-agent schedule list` lists them"
        )
        return schedule_from_row(row)

    def set_schedule_paused(self, schedule_id: str, paused: bool) -> Schedule:
        """Pause or resume; a resumed schedule does not catch up what it missed while paused."""

        def txn(conn: Connection) -> None:
            now = self.now()
            extra = "" if paused else ", last_fire_at = :now, queued = 0"
            n = self._exec(
                conn,
                "UPDATE schedules SET paused = :p, updated_at = :now, "
                f"version = version + 1{extra} WHERE id = :id",
                p=paused,
                now=now,
                id=schedule_id,
            )
            if n == 0:
                raise NotFoundError(f"no schedule {schedule_id!r}")

        self._write(txn)
        return self.get_schedule(schedule_id)

    def remove_schedule(self, schedule_id: str) -> None:
        """Delete a schedule (its runs stay, with their ``schedule_id``)."""
        n = self._write(
            lambda c: self._exec(c, "DELETE FROM schedules WHERE id = :id", id=schedule_id)
        )
        if n == 0:
            raise NotFoundError(f"no schedule {schedule_id!r}")

    def fire_schedule(
        self, schedule: Schedule, fire_at: float, missed: int, now: float, make_run: RunMaker
    ) -> FireResult:
        """Handle one (coalesced) firing; see :meth:`SchedulerPort.fire_schedule`."""

        def txn(conn: Connection) -> FireResult:
            rows = self._rows(
                conn, "SELECT version, paused FROM schedules WHERE id = :id", id=schedule.id
            )
            if not rows or rows[0]["version"] != schedule.version or rows[0]["paused"]:
                return _STALE
            when = f"{missed} firings coalesced into one" if missed > 1 else "on time"
            active = self._active_run(conn, "schedule_id", schedule.id)
            sets = "last_fire_at = :at, fire_count = fire_count + 1, version = version + 1"
            sets += ", updated_at = :now, last_result = :msg"
            run = None
            if active is not None and schedule.overlap == OverlapPolicy.SKIP:
                result = FireResult(
                    FireKind.SKIPPED, message=f"skipped ({when}): run {active} is still active"
                )
                sets += ", skipped = skipped + 1"
            elif active is not None:
                result = FireResult(FireKind.QUEUED, message=f"queued ({when}) behind run {active}")
                sets += ", queued = queued + 1"
            else:
                run = make_run(schedule.template, schedule_id=schedule.id)
                result = FireResult(FireKind.STARTED, run.id, f"started run {run.id} ({when})")
                sets += ", last_run_id = :rid"
            # The version guard makes a concurrent firing (another worker, PostgreSQL's
            # read committed) lose here instead of starting a second run.
            n = self._exec(
                conn,
                f"UPDATE schedules SET {sets} WHERE id = :id AND version = :v",
                at=fire_at,
                now=now,
                msg=result.message,
                rid=run.id if run else None,
                id=schedule.id,
                v=schedule.version,
            )
            if n != 1:
                return _STALE
            if run is not None:
                self._insert_run(conn, run)
            return result

        return self._write(txn)

    def _pump_queued(self, conn: Connection, make_run: RunMaker, now: float) -> list[str]:
        started = []
        rows = self._rows(conn, "SELECT * FROM schedules WHERE queued > 0 AND paused = :f", f=False)
        for row in rows:
            schedule = schedule_from_row(row)
            if self._active_run(conn, "schedule_id", schedule.id) is not None:
                continue
            run = make_run(schedule.template, schedule_id=schedule.id)
            n = self._exec(
                conn,
                "UPDATE schedules SET queued = queued - 1, last_run_id = :rid, updated_at = :now, "
                "last_result = :msg, version = version + 1 WHERE id = :id AND queued > 0",
                rid=run.id,
                now=now,
                msg=f"started queued run {run.id}",
                id=schedule.id,
            )
            if n != 1:
                continue
            self._insert_run(conn, run)
            started.append(run.id)
        return started

    # ------------------------------------------------------------------ batches

    def create_batch(self, batch: Batch, items: Sequence[str]) -> None:
        """Store a batch and its items, all pending."""

        def txn(conn: Connection) -> None:
            self._exec(
                conn,
                "INSERT INTO batches (id, template, source, concurrency, total, from_folder, "
                "created_at) VALUES (:id, :t, :s, :c, :n, :ff, :now)",
                id=batch.id,
                t=dumps(batch.template.to_json()),
                s=batch.source,
                c=batch.concurrency,
                n=len(items),
                ff=batch.from_folder,
                now=batch.created_at,
            )
            conn.exec_driver_sql(
                self._q(
                    "INSERT INTO batch_items (batch_id, idx, item, status, attempts, updated_at) "
                    "VALUES (:b, :i, :item, 'pending', 0, :now)"
                ),
                [
                    {"b": batch.id, "i": i, "item": item, "now": batch.created_at}
                    for i, item in enumerate(items)
                ],
            )

        self._write(txn)

    def list_batches(self) -> list[Batch]:
        """Every batch, newest first."""
        rows = self._read(lambda c: self._rows(c, "SELECT * FROM batches ORDER BY created_at DESC"))
        return [batch_from_row(r) for r in rows]

    def get_batch(self, prefix: str) -> Batch:
        """A batch by id or unique id prefix; raises NotFoundError."""
        return batch_from_row(
            self._by_prefix("batches", prefix, "batch", "`desktop-agent batch status` lists them")
        )

    def batch_items(self, batch_id: str) -> list[BatchItem]:
        """The batch's items in order, with the live status of their runs."""
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT bi.*, r.status AS run_status FROM batch_items bi "
                "LEFT JOIN runs r ON r.id = bi.run_id WHERE bi.batch_id = :b ORDER BY bi.idx",
                b=batch_id,
            )
        )
        return [item_from_row(r) for r in rows]

    def batch_progress(self, batch_id: str) -> BatchProgress:
        """Counts of the batch's items by status."""
        counts = {s: 0 for s in ItemStatus}
        items = self.batch_items(batch_id)
        for item in items:
            counts[item.status] += 1
        return BatchProgress(
            total=len(items),
            completed=counts[ItemStatus.COMPLETED],
            failed=counts[ItemStatus.FAILED],
            cancelled=counts[ItemStatus.CANCELLED],
            running=counts[ItemStatus.RUNNING],
            pending=counts[ItemStatus.PENDING],
            stopped=counts[ItemStatus.STOPPED],
        )

    def retry_items(self, batch_id: str, indexes: Iterable[int] | None = None) -> list[int]:
        """Make failed or cancelled items pending again; returns their indexes.

        Raises:
            InvalidStateError: a chosen item has not failed.
            NotFoundError: a chosen item does not exist.
        """
        wanted = None if indexes is None else set(indexes)

        def txn(conn: Connection) -> list[int]:
            self._sync_items(conn, batch_id)
            rows = self._rows(
                conn, "SELECT idx, status FROM batch_items WHERE batch_id = :b", b=batch_id
            )
            status = {int(r["idx"]): ItemStatus(r["status"]) for r in rows}
            retryable = {ItemStatus.FAILED, ItemStatus.CANCELLED}
            if wanted is None:
                chosen = sorted(i for i, s in status.items() if s in retryable)
            else:
                missing = sorted(wanted - status.keys())
                if missing:
                    raise NotFoundError(f"batch {batch_id} has no item {missing[0]}")
                bad = sorted(i for i in wanted if status[i] not in retryable)
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
                chosen = sorted(wanted)
            for idx in chosen:
                self._exec(
                    conn,
                    "UPDATE batch_items SET status = 'pending', run_id = NULL, updated_at = :now "
                    "WHERE batch_id = :b AND idx = :i",
                    now=self.now(),
                    b=batch_id,
                    i=idx,
                )
            return chosen

        return self._write(txn)

    def _sync_items(self, conn: Connection, batch_id: str | None = None) -> None:
        where = "" if batch_id is None else " AND batch_id = :b"
        self._exec(conn, SYNC_ITEMS + where, now=self.now(), b=batch_id)

    def _pump_batches(self, conn: Connection, make_run: RunMaker, now: float) -> list[str]:
        self._sync_items(conn)
        started: list[str] = []
        batches = self._rows(
            conn,
            "SELECT * FROM batches WHERE id IN "
            "(SELECT DISTINCT batch_id FROM batch_items WHERE status = 'pending') "
            "ORDER BY created_at",
        )
        for row in batches:
            batch = batch_from_row(row)
            active = self._rows(
                conn,
                "SELECT count(*) AS n FROM batch_items WHERE batch_id = :b AND status = 'running'",
                b=batch.id,
            )[0]["n"]
            free = batch.concurrency - int(active)
            if free <= 0:
                continue
            pending = self._rows(
                conn,
                "SELECT idx, item FROM batch_items WHERE batch_id = :b AND status = 'pending' "
                f"ORDER BY idx LIMIT {int(free)}",
                b=batch.id,
            )
            for item in pending:
                text = str(item["item"])
                name = text.rsplit("/", 1)[-1] if batch.from_folder else text
                run = make_run(
                    batch.template,
                    goal=batch.template.render_goal(
                        item=name, name=name, path=text if batch.from_folder else ""
                    ),
                    parent_id=batch.id,
                    source_file=text if batch.from_folder else None,
                )
                n = self._exec(
                    conn,
                    "UPDATE batch_items SET status = 'running', run_id = :rid, "
                    "attempts = attempts + 1, updated_at = :now "
                    "WHERE batch_id = :b AND idx = :i AND status = 'pending'",
                    rid=run.id,
                    now=now,
                    b=batch.id,
                    i=item["idx"],
                )
                if n != 1:  # another worker dispatched it first
                    continue
                self._insert_run(conn, run)
                started.append(run.id)
        return started

    def _pump_needed(self) -> bool:
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT EXISTS (SELECT 1 FROM batch_items WHERE status = 'pending') AS p, "
                "EXISTS (SELECT 1 FROM batch_items bi JOIN runs r ON r.id = bi.run_id "
                f"WHERE bi.status = 'running' AND r.status IN {ENDED_OR_STOPPED}) AS s, "
                "EXISTS (SELECT 1 FROM schedules WHERE queued > 0) AS q",
            )
        )
        return any(bool(v) for v in rows[0].values())

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

        def txn(conn: Connection) -> None:
            self._exec(
                conn,
                "INSERT INTO watches (id, folder, pattern, template, scan_s, paused, created_at, "
                "updated_at, version) VALUES (:id, :f, :p, :t, :s, :paused, :now, :now, 0)",
                id=watch.id,
                f=watch.folder,
                p=watch.pattern,
                t=dumps(watch.template.to_json()),
                s=watch.scan_s,
                paused=watch.paused,
                now=watch.created_at,
            )
            for key in baseline:
                self._insert_seen(conn, watch.id, key, None, watch.created_at)

        self._write(txn)

    def _insert_seen(
        self, conn: Connection, watch_id: str, key: FileKey, run_id: str | None, now: float
    ) -> None:
        self._exec(
            conn,
            "INSERT INTO seen_files (watch_id, path, size, mtime_ns, run_id, seen_at) "
            "VALUES (:w, :p, :s, :m, :r, :now)",
            w=watch_id,
            p=key.path,
            s=key.size,
            m=key.mtime_ns,
            r=run_id,
            now=now,
        )

    def list_watches(self) -> list[FolderWatch]:
        """Every folder watch, oldest first."""
        rows = self._read(lambda c: self._rows(c, "SELECT * FROM watches ORDER BY created_at, id"))
        return [watch_from_row(r) for r in rows]

    def get_watch(self, prefix: str) -> FolderWatch:
        """A watch by id or unique id prefix; raises NotFoundError."""
        return watch_from_row(
            self._by_prefix("watches", prefix, "watch", "`desktop-agent watch list` lists them")
        )

    def set_watch_paused(self, watch_id: str, paused: bool) -> FolderWatch:
        """Pause or resume a watch."""
        n = self._write(
            lambda c: self._exec(
                c,
                "UPDATE watches SET paused = :p, updated_at = :now, version = version + 1 "
                "WHERE id = :id",
                p=paused,
                now=self.now(),
                id=watch_id,
            )
        )
        if n == 0:
            raise NotFoundError(f"no watch {watch_id!r}")
        return self.get_watch(watch_id)

    def remove_watch(self, watch_id: str) -> None:
        """Delete a watch and its record of seen files."""

        def txn(conn: Connection) -> int:
            self._exec(conn, "DELETE FROM seen_files WHERE watch_id = :id", id=watch_id)
            return self._exec(conn, "DELETE FROM watches WHERE id = :id", id=watch_id)

        if self._write(txn) == 0:
            raise NotFoundError(f"no watch {watch_id!r}")

    def seen_files(self, watch_id: str) -> set[FileKey]:
        """Every file the watch has seen."""
        rows = self._read(
            lambda c: self._rows(
                c, "SELECT path, size, mtime_ns FROM seen_files WHERE watch_id = :w", w=watch_id
            )
        )
        return {FileKey(r["path"], int(r["size"]), int(r["mtime_ns"])) for r in rows}

    def start_for_file(
        self, watch: FolderWatch, key: FileKey, make_run: RunMaker, now: float
    ) -> str | None:
        """Start the watch's run for a new file, once; None if it was seen already."""

        def txn(conn: Connection) -> str | None:
            seen = self._rows(
                conn,
                "SELECT 1 FROM seen_files WHERE watch_id = :w AND path = :p AND size = :s "
                "AND mtime_ns = :m",
                w=watch.id,
                p=key.path,
                s=key.size,
                m=key.mtime_ns,
            )
            live = self._rows(conn, "SELECT paused FROM watches WHERE id = :id", id=watch.id)
            if seen or not live or live[0]["paused"]:
                return None
            name = key.path.rsplit("/", 1)[-1]
            run = make_run(
                watch.template,
                goal=watch.template.render_goal(item=name, name=name, path=key.path),
                schedule_id=watch.id,
                source_file=key.path,
            )
            self._insert_seen(conn, watch.id, key, run.id, now)
            self._insert_run(conn, run)
            return run.id

        try:
            return self._write(txn)
        except IntegrityError:  # another worker recorded it first
            return None

    # ------------------------------------------------------------------ alerts

    def flag_stuck(self, now: float, after_s: float) -> list[StuckRun]:
        """Flag running runs whose journal has not moved for ``after_s``; the new flags."""

        def txn(conn: Connection) -> list[StuckRun]:
            self._exec(
                conn,
                "UPDATE run_alerts SET cleared_at = :now WHERE kind = 'stuck' "
                "AND cleared_at IS NULL AND run_id IN (SELECT r.id FROM runs r "
                "WHERE r.id = run_alerts.run_id AND (r.status <> 'running' "
                "OR r.updated_at > run_alerts.since))",
                now=now,
            )
            rows = self._rows(
                conn,
                "SELECT id, goal, updated_at FROM runs WHERE status = 'running' "
                "AND updated_at < :cutoff AND NOT EXISTS (SELECT 1 FROM run_alerts a "
                "WHERE a.run_id = runs.id AND a.kind = 'stuck' AND a.cleared_at IS NULL)",
                cutoff=now - after_s,
            )
            flagged = []
            for r in rows:
                idle_min = (now - float(r["updated_at"])) / 60
                message = (
                    f"no progress for {idle_min:.0f} min: a tool or the model may hang; "
                    "cancel it, or wait"
                )
                self._exec(
                    conn,
                    "DELETE FROM run_alerts WHERE run_id = :id AND kind = 'stuck'",
                    id=r["id"],
                )
                self._exec(
                    conn,
                    "INSERT INTO run_alerts (run_id, kind, since, raised_at, message) "
                    "VALUES (:id, 'stuck', :since, :now, :msg)",
                    id=r["id"],
                    since=r["updated_at"],
                    now=now,
                    msg=message,
                )
                flagged.append(StuckRun(r["id"], r["goal"], r["updated_at"], now, message))
            return flagged

        return self._write(txn)

    def stuck_runs(self) -> list[StuckRun]:
        """Runs currently flagged as stuck."""
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT a.run_id, r.goal, a.since, a.raised_at, a.message FROM run_alerts a "
                "JOIN runs r ON r.id = a.run_id WHERE a.kind = 'stuck' AND a.cleared_at IS NULL "
                "ORDER BY a.raised_at",
            )
        )
        return [
            StuckRun(r["run_id"], r["goal"], r["since"], r["raised_at"], r["message"]) for r in rows
        ]
