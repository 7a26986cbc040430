"""What workers ask of the database: runnable runs, leases, heartbeats, wake times."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from desktop_agent.domain import (
    WorkerInfo,
)
from desktop_agent.persistence.mapping import (
    worker_from_row,
)
from desktop_agent.persistence.sqlbase import SqlBase

"""Runs one statement (named ``:param`` style) in the current transaction; returns rowcount."""


_HAS_WORK = """(
    r.status IN ('queued', 'running')
    OR (r.status = 'waiting' AND r.wake_at IS NOT NULL {due})
    OR EXISTS (
        SELECT 1 FROM commands c WHERE c.run_id = r.id AND c.applied_at IS NULL
        -- a note waits for the run's wait, pause or stop to end; it wakes nothing
        AND NOT (c.kind = 'steer' AND r.status IN ('waiting', 'paused', 'stopped'))
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
        waits, is paused or stopped wakes nothing), or waits with a wake time someone
        must keep. Leases aside, the condition of :meth:`runnable_runs`.
        """
        sql = f"SELECT 1 FROM runs r WHERE r.id = :id AND {_HAS_WORK.format(due='')}"
        return bool(self._read(lambda c: self._rows(c, sql, id=run_id)))

    def claim_run(
        self, run_id: str, owner: str, now: float, lease_s: float, dead_owners: Sequence[str] = ()
    ) -> bool:
        """Take the run's lease if it is free, expired, or held by a dead worker."""
        dead = ", ".join(f":d{i}" for i in range(len(dead_owners))) or "NULL"
        params: dict[str, Any] = {f"d{i}": o for i, o in enumerate(dead_owners)}
        sql = f"""
        UPDATE runs SET lease_owner = :owner, lease_expires_at = :exp
        WHERE id = :id AND (lease_owner IS NULL OR lease_expires_at < :now
                            OR lease_owner IN ({dead}))
        """
        n = self._write(
            lambda c: self._exec(
                c, sql, owner=owner, exp=now + lease_s, id=run_id, now=now, **params
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

    def heartbeat(self, worker_id: str, now: float, lease_s: float) -> None:
        """Renew the worker's heartbeat and the leases of the runs it holds."""

        def txn(conn: Connection) -> None:
            self._exec(
                conn, "UPDATE workers SET heartbeat_at = :now WHERE id = :id", now=now, id=worker_id
            )
            self._exec(
                conn,
                "UPDATE runs SET lease_expires_at = :exp WHERE lease_owner = :id",
                exp=now + lease_s,
                id=worker_id,
            )

        self._write(txn)

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

    def park_for_storage(self, run_id: str, message: str, retry_at: float) -> bool:
        """Pause a run that storage stopped, to be retried at ``retry_at`` by the worker.

        A paused run never has a wake time otherwise: ``wake_at`` on a paused run marks
        this kind of pause (see :meth:`storage_paused_due`). Returns whether it was parked.
        """
        n = self._write(
            lambda c: self._exec(
                c,
                "UPDATE runs SET status = 'paused', wait_reason = NULL, wake_at = :at, "
                "status_message = :m, updated_at = :now "
                "WHERE id = :id AND status IN ('queued', 'running', 'waiting', 'paused')",
                at=retry_at,
                m=message,
                now=self.now(),
                id=run_id,
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
