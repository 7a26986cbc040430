"""What workers ask of the database: runnable runs, leases, heartbeats, wake times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection

from desktop_agent.domain import (
    Lease,
    WorkerInfo,
)
from desktop_agent.domain.errors import LeaseLost
from desktop_agent.persistence.mapping import (
    worker_from_row,
)
from desktop_agent.persistence.sqlbase import SqlBase

HELD = "id = :id AND lease_owner = :owner AND lease_epoch = :epoch"
"""The fence: the run is still held by this owner at this epoch (no one claimed it since)."""

FENCE = f"UPDATE runs SET lease_epoch = :epoch WHERE {HELD}"
"""Checks the fence inside a write transaction: one row when it holds, none otherwise.

An UPDATE rather than a SELECT so that on PostgreSQL it also locks the run's row until
the commit: a concurrent claim waits, then finds the new epoch. (On SQLite the writer
already holds the database's write lock.)
"""

_RENEW = f"""
UPDATE runs SET lease_expires_at =
    CASE WHEN lease_expires_at > :until THEN lease_expires_at ELSE :until END
WHERE {HELD}
"""
"""Lengthen a lease still held (never shorten it: a renewal before a long effect stays)."""


def lease_lost(run_id: str, lease: Lease) -> LeaseLost:
    """The error of a write that found the run taken by another worker."""
    return LeaseLost(
        f"run {run_id} was taken over by another worker (this worker's claim, "
        f"epoch {lease.epoch}, is gone); nothing more is written for it here"
    )


_HAS_WORK = """(
    r.status IN ('queued', 'running')
    OR (r.status = 'waiting' AND r.wake_at IS NOT NULL {due})
    OR EXISTS (
        SELECT 1 FROM commands c WHERE c.run_id = r.id AND c.applied_at IS NULL
        -- a note waits for the run's wait, pause or stop to end, or for the analyst's
        -- decision about it (a step in doubt): it wakes nothing
        AND NOT (c.kind = 'steer'
                 AND r.status IN ('waiting', 'paused', 'stopped', 'needs_attention'))
    )
)"""
"""When a run gives a worker something to do (``{due}``: an extra condition on the wake
time, for runs due now)."""


class WorkerQueries(SqlBase):
    """Leases, heartbeats and the queries of the worker's poll."""

    # ------------------------------------------------------------------ worker side

    def runnable_runs(
        self, now: float, dead_owners: Sequence[str] = (), limit: int = 100
    ) -> list[str]:
        """Ids of runs a worker may claim now, oldest first."""
        dead = ", ".join(f":d{i}" for i in range(len(dead_owners))) or "NULL"
        params: dict[str, Any] = {f"d{i}": o for i, o in enumerate(dead_owners)}
        sql = f"""
        SELECT r.id FROM runs r
        WHERE (r.lease_owner IS NULL OR r.lease_expires_at < :now OR r.lease_owner IN ({dead}))
          AND {_HAS_WORK.format(due="AND r.wake_at <= :now")}
        ORDER BY r.created_at LIMIT {int(limit)}
        """
        rows = self._read(lambda c: self._rows(c, sql, now=now, **params))
        return [r["id"] for r in rows]

    def wants_worker(self, run_id: str) -> bool:
        """Whether the run gives a worker something to do, now or at a wake time.

        True when it is queued or running, has a command to apply (a note to a run that
        waits, is paused, stopped or needs attention wakes nothing), or waits with a wake
        time someone must keep. Leases aside, the condition of :meth:`runnable_runs`.
        """
        sql = f"SELECT 1 FROM runs r WHERE r.id = :id AND {_HAS_WORK.format(due='')}"
        return bool(self._read(lambda c: self._rows(c, sql, id=run_id)))

    def claim_run(
        self, run_id: str, owner: str, now: float, lease_s: float, dead_owners: Sequence[str] = ()
    ) -> Lease | None:
        """Take the run's lease if it is free, expired, or held by a dead worker.

        Every claim increments the run's lease epoch. The lease returned carries it: the
        fencing token that every write of the activation that follows must present
        (None: the run was not free).
        """
        dead = ", ".join(f":d{i}" for i in range(len(dead_owners))) or "NULL"
        params: dict[str, Any] = {f"d{i}": o for i, o in enumerate(dead_owners)}
        sql = f"""
        UPDATE runs SET lease_owner = :owner, lease_expires_at = :exp,
               lease_epoch = lease_epoch + 1
        WHERE id = :id AND (lease_owner IS NULL OR lease_expires_at < :now
                            OR lease_owner IN ({dead}))
        """

        def txn(conn: Connection) -> Lease | None:
            n = self._exec(conn, sql, owner=owner, exp=now + lease_s, id=run_id, now=now, **params)
            if n != 1:
                return None
            rows = self._rows(conn, "SELECT lease_epoch FROM runs WHERE id = :id", id=run_id)
            return Lease(owner, int(rows[0]["lease_epoch"]))

        return self._write(txn)

    def renew_lease(self, run_id: str, lease: Lease, until: float) -> bool:
        """Make the lease last at least until ``until``, if it is still held at its epoch.

        Returns False when another worker claimed the run since (or it was released): the
        lease is lost, and nothing was changed.
        """
        n = self._write(
            lambda c: self._exec(
                c, _RENEW, until=until, id=run_id, owner=lease.owner, epoch=lease.epoch
            )
        )
        return n == 1

    def release_run(self, run_id: str, owner: str) -> None:
        """Give the lease back."""
        self._write(
            lambda c: self._exec(
                c,
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE id = :id AND lease_owner = :owner",
                id=run_id,
                owner=owner,
            )
        )

    def heartbeat(
        self, worker_id: str, now: float, lease_s: float, held: Mapping[str, int] | None = None
    ) -> set[str]:
        """Renew the worker's heartbeat and the leases it still holds; return those it lost.

        ``held`` maps the runs the worker is executing to the epochs of its claims. Each
        lease is extended to ``now + lease_s`` only where the worker still holds the run
        at that epoch: a lease another worker claimed since is never extended, and neither
        is one the worker released or keeps for no activation. Runs whose lease is gone
        are returned: their activations must stop.
        """

        def txn(conn: Connection) -> set[str]:
            self._exec(
                conn, "UPDATE workers SET heartbeat_at = :now WHERE id = :id", now=now, id=worker_id
            )
            lost = set()
            for run_id, epoch in sorted((held or {}).items()):
                n = self._exec(
                    conn, _RENEW, until=now + lease_s, id=run_id, owner=worker_id, epoch=epoch
                )
                if n != 1:
                    lost.add(run_id)
            return lost

        return self._write(txn)

    def register_worker(self, info: WorkerInfo, proc_started_at: float) -> None:
        """Record a starting worker."""
        self._write(
            lambda c: self._exec(
                c,
                "INSERT INTO workers (id, host, pid, proc_started_at, started_at, heartbeat_at) "
                "VALUES (:id, :host, :pid, :ps, :st, :hb)",
                id=info.id,
                host=info.host,
                pid=info.pid,
                ps=proc_started_at,
                st=info.started_at,
                hb=info.heartbeat_at,
            )
        )

    def stop_worker(self, worker_id: str, now: float) -> None:
        """Record a worker's clean exit and free its leases."""

        def txn(conn: Connection) -> None:
            self._exec(
                conn, "UPDATE workers SET stopped_at = :now WHERE id = :id", now=now, id=worker_id
            )
            self._exec(
                conn,
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE lease_owner = :id",
                id=worker_id,
            )

        self._write(txn)

    def list_workers(self, include_stopped: bool = False) -> list[tuple[WorkerInfo, float]]:
        """Workers with their process start time, newest first."""
        sql = "SELECT * FROM workers"
        if not include_stopped:
            sql += " WHERE stopped_at IS NULL"
        sql += " ORDER BY started_at DESC"
        rows = self._read(lambda c: self._rows(c, sql))
        return [(worker_from_row(r), float(r["proc_started_at"])) for r in rows]

    def mark_worker_dead(self, worker_id: str, now: float) -> None:
        """Record that a worker's process is gone (found by another worker)."""
        self._write(
            lambda c: self._exec(
                c,
                "UPDATE workers SET stopped_at = :now WHERE id = :id AND stopped_at IS NULL",
                now=now,
                id=worker_id,
            )
        )

    def lease_owners(self) -> set[str]:
        """Workers currently holding a lease on some run."""
        rows = self._read(
            lambda c: self._rows(
                c, "SELECT DISTINCT lease_owner FROM runs WHERE lease_owner IS NOT NULL"
            )
        )
        return {str(r["lease_owner"]) for r in rows}

    def pending_cancels(self) -> set[str]:
        """Runs with an unapplied cancel command."""
        return {r for r, kinds in self.pending_command_kinds().items() if "cancel" in kinds}

    def pending_command_kinds(self) -> dict[str, set[str]]:
        """Kinds of the unapplied commands, by run."""
        rows = self._read(
            lambda c: self._rows(
                c, "SELECT DISTINCT run_id, kind FROM commands WHERE applied_at IS NULL"
            )
        )
        out: dict[str, set[str]] = {}
        for r in rows:
            out.setdefault(str(r["run_id"]), set()).add(str(r["kind"]))
        return out

    def waiting_wake_times(self) -> list[tuple[str, float]]:
        """(run id, wake time) of every waiting run that has one."""
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT id, wake_at FROM runs WHERE status = 'waiting' AND wake_at IS NOT NULL",
            )
        )
        return [(r["id"], float(r["wake_at"])) for r in rows]

    def park_for_storage(
        self, run_id: str, message: str, retry_at: float, lease: Lease | None = None
    ) -> bool:
        """Pause a run that storage stopped, to be retried at ``retry_at`` by the worker.

        A paused run never has a wake time otherwise: ``wake_at`` on a paused run marks
        this kind of pause (see :meth:`storage_paused_due`). With ``lease``, only while the
        worker still holds the run at its epoch. Returns whether it was parked.
        """
        fence = ""
        held: dict[str, Any] = {}
        if lease is not None:
            fence = " AND lease_owner = :owner AND lease_epoch = :epoch"
            held = {"owner": lease.owner, "epoch": lease.epoch}
        n = self._write(
            lambda c: self._exec(
                c,
                "UPDATE runs SET status = 'paused', wait_reason = NULL, wake_at = :at, "
                "status_message = :m, updated_at = :now "
                "WHERE id = :id AND status IN ('queued', 'running', 'waiting', 'paused')" + fence,
                at=retry_at,
                m=message,
                now=self.now(),
                id=run_id,
                **held,
            )
        )
        return n == 1

    def storage_paused_due(self, now: float) -> list[str]:
        """Runs paused by a storage problem whose retry time has come (no resume queued)."""
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT r.id FROM runs r WHERE r.status = 'paused' AND r.wake_at IS NOT NULL "
                "AND r.wake_at <= :now AND NOT EXISTS (SELECT 1 FROM commands c "
                "WHERE c.run_id = r.id AND c.applied_at IS NULL AND c.kind = 'resume') "
                "ORDER BY r.wake_at",
                now=now,
            )
        )
        return [str(r["id"]) for r in rows]
