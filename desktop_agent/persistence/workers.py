"""What workers ask of the database: runnable runs, leases, heartbeats, wake times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    case,
    exists,
    func,
    insert,
    not_,
    or_,
    select,
    true,
    union,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.sql import CompoundSelect, Select
from sqlalchemy.sql.elements import BindParameter

from desktop_agent.domain import CommandKind, Lease, RunStatus, WorkerInfo
from desktop_agent.domain.errors import LeaseLost
from desktop_agent.domain.placement import ANY
from desktop_agent.persistence.mapping import worker_from_row
from desktop_agent.persistence.sqlbase import SqlBase
from desktop_agent.persistence.tables import commands, runs, workers

HELD = and_(
    runs.c.id == bindparam("run"),
    runs.c.lease_owner == bindparam("owner"),
    runs.c.lease_epoch == bindparam("epoch"),
)
"""The fence: the run is still held by this owner at this epoch (no one claimed it since).

Parameters ``run``, ``owner`` and ``epoch`` (see :func:`fence_params`)."""

FENCE = update(runs).where(HELD).values(lease_epoch=bindparam("epoch"))
"""Checks the fence inside a write transaction: one row when it holds, none otherwise.

An UPDATE rather than a SELECT so that on PostgreSQL it also locks the run's row until
the commit: a concurrent claim waits, then finds the new epoch. (On SQLite the writer
already holds the database's write lock.)
"""

_RENEW = (
    update(runs)
    .where(HELD)
    .values(
        lease_expires_at=case(
            (runs.c.lease_expires_at > bindparam("until"), runs.c.lease_expires_at),
            else_=bindparam("until"),
        )
    )
)
"""Lengthen a lease still held (never shorten it: a renewal before a long effect stays)."""

_NOTE_WAITS_FOR = tuple(
    str(s)
    for s in (RunStatus.WAITING, RunStatus.PAUSED, RunStatus.STOPPED, RunStatus.NEEDS_ATTENTION)
)
"""Run statuses in which an unapplied note wakes nothing (see :func:`_has_work`)."""

_AFTER_DECISION = tuple(
    str(k)
    for k in (
        CommandKind.ANSWER,
        CommandKind.APPROVE,
        CommandKind.REJECT,
        CommandKind.EXTEND_BUDGET,
    )
)
"""Commands a run that needs the analyst's decision keeps for after it (see :func:`_has_work`)."""

_ACTIVE = (str(RunStatus.QUEUED), str(RunStatus.RUNNING))
"""Run statuses that give a worker something to do whatever else (see :func:`_has_work`)."""

_STORAGE_PARKABLE = tuple(
    str(s) for s in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING, RunStatus.PAUSED)
)
"""Run statuses :meth:`WorkerQueries.park_for_storage` may pause."""


_STORAGE_DUE = (
    select(runs.c.id)
    .where(
        runs.c.wake_at <= bindparam("now"),
        runs.c.status == str(RunStatus.PAUSED),
        ~exists().where(
            commands.c.run_id == runs.c.id,
            commands.c.applied_at.is_(None),
            commands.c.kind == str(CommandKind.RESUME),
        ),
    )
    .order_by(runs.c.wake_at)
)
"""Runs paused by a storage problem whose retry time ``now`` has come, no resume queued.

Read through ``ix_runs_wake_at`` (a paused run has a wake time only for this), once a
second by every worker: built once."""


_NEXT_DUE = select(
    select(func.min(runs.c.wake_at)).where(runs.c.wake_at > bindparam("now")).scalar_subquery(),
    select(func.min(runs.c.lease_expires_at))
    .where(runs.c.lease_owner > "", runs.c.lease_expires_at >= bindparam("now"))
    .scalar_subquery(),
)
"""The next wake time and the next lease expiry after ``now``, both through indexes.

(``lease_owner > ''`` rather than ``IS NOT NULL``: with the latter SQLite reads every run.)"""


def fence_params(run_id: str, lease: Lease) -> dict[str, object]:
    """The parameters of :data:`HELD` (and :data:`FENCE`) for a run held under ``lease``."""
    return {"run": run_id, "owner": lease.owner, "epoch": lease.epoch}


def lease_lost(run_id: str, lease: Lease) -> LeaseLost:
    """The error of a write that found the run taken by another worker."""
    return LeaseLost(
        f"run {run_id} was taken over by another worker (this worker's claim, "
        f"epoch {lease.epoch}, is gone); nothing more is written for it here"
    )


def _has_work(due: ColumnElement[bool]) -> ColumnElement[bool]:
    """When a run gives a worker something to do.

    ``due`` is an extra condition on the wake time, for runs due now.
    """
    c = commands.c
    # A note waits for the run's wait, pause or stop to end, or for the analyst's decision
    # about it (a step in doubt): it wakes nothing.
    note_waits = and_(c.kind == str(CommandKind.STEER), runs.c.status.in_(_NOTE_WAITS_FOR))
    # A run that needs the analyst's decision (a step in doubt, a changed agent definition)
    # cannot use an answer, an approval or more budget before that decision: they stay
    # queued for after it and wake nothing (waking it would only find it still undecided,
    # again and again).
    waits_for_decision = and_(
        c.kind.in_(_AFTER_DECISION), runs.c.status == str(RunStatus.NEEDS_ATTENTION)
    )
    return or_(
        runs.c.status.in_(_ACTIVE),
        and_(runs.c.status == str(RunStatus.WAITING), runs.c.wake_at.is_not(None), due),
        exists().where(
            c.run_id == runs.c.id,
            c.applied_at.is_(None),
            not_(note_waits),
            not_(waits_for_decision),
        ),
    )


def _candidates(now: float | BindParameter[float]) -> CompoundSelect[tuple[str]]:
    """Ids of every run :func:`_has_work` may hold for now, read through indexes only.

    A superset of the runs with work: queued and running runs (``ix_runs_status``), runs
    whose wake time has come (``ix_runs_wake_at``; the status is checked by
    :func:`_has_work`), and runs with an unapplied command (``ix_commands_applied_at``).
    Runs that wait without a due wake time and without a command, however many, are not
    read at all: the worker's poll costs the same with 10 or 10,000 runs hibernated.
    (The wake-time branch leaves the status out on purpose: with it, SQLite would pick
    ``ix_runs_status`` and read every waiting run.)
    """
    return union(
        select(runs.c.id).where(runs.c.status.in_(_ACTIVE)),
        select(runs.c.id).where(runs.c.wake_at <= now),
        select(commands.c.run_id).where(commands.c.applied_at.is_(None)),
    )


def _places(host: str | None, pools: Sequence[str]) -> list[str]:
    """The placements a worker on ``host`` with ``pools`` serves."""
    return [ANY, f"host:{host}", *(f"pool:{p}" for p in pools)]


def _placed_for(host: str | None, pools: Sequence[str]) -> ColumnElement[bool]:
    """Runs a worker on ``host`` with ``pools`` may serve (every run when ``host`` is None)."""
    if host is None:
        return true()
    return runs.c.placement.in_(_places(host, pools))


def _claimable(
    now: float | BindParameter[float], dead_owners: Sequence[str] | BindParameter[list[str]]
) -> ColumnElement[bool]:
    """The run's lease is free, expired, or held by a dead worker."""
    dead = dead_owners if isinstance(dead_owners, BindParameter) else list(dead_owners)
    return or_(
        runs.c.lease_owner.is_(None),
        runs.c.lease_expires_at < now,
        runs.c.lease_owner.in_(dead),
    )


def _runnable(placed: bool) -> Select[tuple[str]]:
    """The runs a worker may claim now, oldest first, as one statement built once.

    Parameters: ``now``, ``dead`` (owners found dead), ``skip`` (runs left out), ``places``
    (the placements served, with ``placed``) and ``limit``. Built once, the worker's poll
    spends no time making it again: an idle worker runs this and nothing else, five times
    a second.
    """
    now: BindParameter[float] = bindparam("now")
    where = [
        runs.c.id.in_(_candidates(now)),
        _claimable(now, bindparam("dead", expanding=True)),
        _has_work(runs.c.wake_at <= now),
        runs.c.id.not_in(bindparam("skip", expanding=True)),
    ]
    if placed:
        where.append(runs.c.placement.in_(bindparam("places", expanding=True)))
    return select(runs.c.id).where(*where).order_by(runs.c.created_at).limit(bindparam("limit"))


_RUNNABLE = {placed: _runnable(placed) for placed in (False, True)}
""":func:`_runnable` for every placement (False) and for a worker's places (True)."""


class WorkerQueries(SqlBase):
    """Leases, heartbeats and the queries of the worker's poll."""

    # ------------------------------------------------------------------ worker side

    def runnable_runs(
        self, now: float, dead_owners: Sequence[str] = (), limit: int = 100
    ) -> list[str]:
        """Ids of runs a worker may claim now, oldest first."""
        stmt = (
            select(runs.c.id)
            .where(
                runs.c.id.in_(_candidates(now)),
                _claimable(now, dead_owners),
                _has_work(runs.c.wake_at <= now),
            )
            .order_by(runs.c.created_at)
            .limit(int(limit))
        )
        return [str(i) for i in self._read(lambda c: c.execute(stmt).scalars().all())]

    def wants_worker(self, run_id: str) -> bool:
        """Whether the run gives a worker something to do, now or at a wake time.

        True when it is queued or running, has a command to apply (a note to a run that
        waits, is paused, stopped or needs attention wakes nothing), or waits with a wake
        time someone must keep. Leases aside, the condition of :meth:`runnable_runs`.
        """
        stmt = select(runs.c.id).where(runs.c.id == run_id, _has_work(true()))
        return self._read(lambda c: c.execute(stmt).first()) is not None

    def claim_run(
        self, run_id: str, owner: str, now: float, lease_s: float, dead_owners: Sequence[str] = ()
    ) -> Lease | None:
        """Take the run's lease if it is free, expired, or held by a dead worker.

        Every claim increments the run's lease epoch. The lease returned carries it: the
        fencing token that every write of the activation that follows must present
        (None: the run was not free).
        """
        claim = (
            update(runs)
            .where(runs.c.id == run_id, _claimable(now, dead_owners))
            .values(
                lease_owner=owner,
                lease_expires_at=now + lease_s,
                lease_epoch=runs.c.lease_epoch + 1,
            )
        )
        epoch = select(runs.c.lease_epoch).where(runs.c.id == run_id)

        def txn(conn: Connection) -> Lease | None:
            if conn.execute(claim).rowcount != 1:
                return None
            return Lease(owner, int(conn.execute(epoch).scalar_one()))

        return self._write(txn)

    def claim_runnable(
        self,
        owner: str,
        now: float,
        lease_s: float,
        dead_owners: Sequence[str] = (),
        limit: int = 1,
        skip: Sequence[str] = (),
        host: str | None = None,
        pools: Sequence[str] = (),
    ) -> list[tuple[str, Lease]]:
        """Claim up to ``limit`` runs a worker may take now, oldest first, in one statement.

        Many workers poll the same table: each picks runnable rows with ``FOR UPDATE SKIP
        LOCKED`` (PostgreSQL), so a row another worker is claiming at this moment is passed
        over instead of waited for, and two workers never pick the same run; the update
        then takes their leases at a new epoch (the fencing token). On SQLite, where a
        write transaction holds the whole database, the lock clause renders as nothing and
        the statement is just as exclusive. ``skip`` leaves out runs this worker holds or
        rests; ``host`` and ``pools`` (the worker's machine and pools) leave out runs
        placed elsewhere (see :mod:`desktop_agent.domain.placement`).

        The poll of an idle worker costs a read, not a write transaction: the runs are
        looked for first (through indexes only, see :func:`_candidates`), and the claim's
        transaction is opened only when some were found; the claim decides again.
        """
        if limit <= 0:
            return []
        params = {
            "now": now,
            "dead": list(dead_owners),
            "skip": list(skip),
            "limit": int(limit),
            "places": _places(host, pools),
        }
        found = _RUNNABLE[host is not None]
        if not self._read(lambda c: c.execute(found, params).first()):
            return []
        picked = (
            select(runs.c.id)
            .where(
                runs.c.id.in_(_candidates(now)),
                _claimable(now, dead_owners),
                _has_work(runs.c.wake_at <= now),
                runs.c.id.not_in(list(skip)),
                _placed_for(host, pools),
            )
            .order_by(runs.c.created_at)
            .limit(int(limit))
            .with_for_update(skip_locked=True, of=runs)
        )
        claim = (
            update(runs)
            .where(runs.c.id.in_(picked.scalar_subquery()), _claimable(now, dead_owners))
            .values(
                lease_owner=owner,
                lease_expires_at=now + lease_s,
                lease_epoch=runs.c.lease_epoch + 1,
            )
            .returning(runs.c.id, runs.c.lease_epoch, runs.c.created_at)
        )

        def txn(conn: Connection) -> list[tuple[str, Lease]]:
            rows = sorted(conn.execute(claim).all(), key=lambda r: (r[2], r[0]))
            return [(str(r[0]), Lease(owner, int(r[1]))) for r in rows]

        return self._write(txn)

    def next_due(self, now: float) -> float | None:
        """When time alone next makes a run claimable: a wake time or a lease's end.

        Until then, a worker that found nothing to claim finds nothing again unless the
        database changed (see :class:`desktop_agent.worker.quiet.ChangeProbe`). None: no
        wake time and no lease lies ahead.
        """
        wake, lease = self._read(lambda c: c.execute(_NEXT_DUE, {"now": now}).one())
        times = [float(t) for t in (wake, lease) if t is not None]
        return min(times) if times else None

    def renew_lease(self, run_id: str, lease: Lease, until: float) -> bool:
        """Make the lease last at least until ``until``, if it is still held at its epoch.

        Returns False when another worker claimed the run since (or it was released): the
        lease is lost, and nothing was changed.
        """
        params = {**fence_params(run_id, lease), "until": until}
        return self._write(lambda c: c.execute(_RENEW, params).rowcount) == 1

    def release_run(self, run_id: str, owner: str) -> None:
        """Give the lease back."""
        stmt = (
            update(runs)
            .where(runs.c.id == run_id, runs.c.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=None)
        )
        self._write(lambda c: c.execute(stmt))

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
        beat = update(workers).where(workers.c.id == worker_id).values(heartbeat_at=now)

        def txn(conn: Connection) -> set[str]:
            conn.execute(beat)
            lost = set()
            for run_id, epoch in sorted((held or {}).items()):
                params = {**fence_params(run_id, Lease(worker_id, epoch)), "until": now + lease_s}
                if conn.execute(_RENEW, params).rowcount != 1:
                    lost.add(run_id)
            return lost

        return self._write(txn)

    def register_worker(self, info: WorkerInfo, proc_started_at: float) -> None:
        """Record a starting worker."""
        stmt = insert(workers).values(
            id=info.id,
            host=info.host,
            pid=info.pid,
            proc_started_at=proc_started_at,
            started_at=info.started_at,
            heartbeat_at=info.heartbeat_at,
        )
        self._write(lambda c: c.execute(stmt))

    def stop_worker(self, worker_id: str, now: float) -> None:
        """Record a worker's clean exit and free its leases."""
        stopped = update(workers).where(workers.c.id == worker_id).values(stopped_at=now)
        freed = (
            update(runs)
            .where(runs.c.lease_owner == worker_id)
            .values(lease_owner=None, lease_expires_at=None)
        )

        def txn(conn: Connection) -> None:
            conn.execute(stopped)
            conn.execute(freed)

        self._write(txn)

    def list_workers(self, include_stopped: bool = False) -> list[tuple[WorkerInfo, float]]:
        """Workers with their process start time, newest first."""
        stmt = select(workers).order_by(workers.c.started_at.desc())
        if not include_stopped:
            stmt = stmt.where(workers.c.stopped_at.is_(None))
        rows = self._read(lambda c: c.execute(stmt).mappings().all())
        return [(worker_from_row(r), float(r[workers.c.proc_started_at])) for r in rows]

    def mark_worker_dead(self, worker_id: str, now: float) -> None:
        """Record that a worker's process is gone (found by another worker)."""
        stmt = (
            update(workers)
            .where(workers.c.id == worker_id, workers.c.stopped_at.is_(None))
            .values(stopped_at=now)
        )
        self._write(lambda c: c.execute(stmt))

    def lease_owners(self) -> set[str]:
        """Workers currently holding a lease on some run."""
        stmt = select(runs.c.lease_owner).distinct().where(runs.c.lease_owner.is_not(None))
        return {str(o) for o in self._read(lambda c: c.execute(stmt).scalars().all())}

    def pending_cancels(self) -> set[str]:
        """Runs with an unapplied cancel command."""
        return {r for r, kinds in self.pending_command_kinds().items() if "cancel" in kinds}

    def pending_command_kinds(self) -> dict[str, set[str]]:
        """Kinds of the unapplied commands, by run."""
        stmt = (
            select(commands.c.run_id, commands.c.kind)
            .distinct()
            .where(commands.c.applied_at.is_(None))
        )
        out: dict[str, set[str]] = {}
        for run_id, kind in self._read(lambda c: c.execute(stmt).all()):
            out.setdefault(str(run_id), set()).add(str(kind))
        return out

    def waiting_wake_times(self) -> list[tuple[str, float]]:
        """(run id, wake time) of every waiting run that has one."""
        stmt = select(runs.c.id, runs.c.wake_at).where(
            runs.c.status == str(RunStatus.WAITING), runs.c.wake_at.is_not(None)
        )
        return [(str(i), float(t)) for i, t in self._read(lambda c: c.execute(stmt).all())]

    def park_for_storage(
        self, run_id: str, message: str, retry_at: float, lease: Lease | None = None
    ) -> bool:
        """Pause a run that storage stopped, to be retried at ``retry_at`` by the worker.

        A paused run never has a wake time otherwise: ``wake_at`` on a paused run marks
        this kind of pause (see :meth:`storage_paused_due`). With ``lease``, only while the
        worker still holds the run at its epoch. Returns whether it was parked.
        """
        stmt = (
            update(runs)
            .where(runs.c.id == run_id, runs.c.status.in_(_STORAGE_PARKABLE))
            .values(
                status=str(RunStatus.PAUSED),
                wait_reason=None,
                wake_at=retry_at,
                status_message=message,
                updated_at=self.now(),
            )
        )
        if lease is not None:
            stmt = stmt.where(runs.c.lease_owner == lease.owner, runs.c.lease_epoch == lease.epoch)
        return self._write(lambda c: c.execute(stmt).rowcount) == 1

    def storage_paused_due(self, now: float) -> list[str]:
        """Runs paused by a storage problem whose retry time has come (no resume queued)."""
        params = {"now": now}
        rows = self._read(lambda conn: conn.execute(_STORAGE_DUE, params).scalars().all())
        return [str(i) for i in rows]
