"""The SQL store: the engine's journal port, plus what the worker and the client need.

:class:`SqlStore` is what both databases share: every read, the client's writes, and the
journal's writes other than the commit (a restarted step, a partial save, an event), each
one transaction through SQLAlchemy Core on the statements of
:mod:`~desktop_agent.persistence.journal_sql`. The commit, the journal's hot path, is
prepared here and written by the store's :class:`JournalWriter`, one class per database:

* :class:`~desktop_agent.persistence.store_sqlite.SqliteJournalWriter` runs the statements
  on the pooled DB-API connection itself, rendered once, since the ORM, and even Core's
  per-statement execution, cost more per row than an fsync; it keeps the effect ledger
  beside the file, moves a run's ``updated_at`` at most once a second while the run only
  adds steps, and its change token carries the newest step's rowid;
* :class:`~desktop_agent.persistence.store_postgres.PostgresJournalWriter` sends the whole
  commit as one statement (:mod:`~desktop_agent.persistence.pgcommit`), fenced by the
  run's ``UPDATE``.

:func:`journal_writer_for` chooses between them from the database's URL when a store is
made (``SqlStore(db)``, or :func:`open_store`). The writers know nothing of the store, so
this module imports theirs and not the other way round. Every public method owns its
transaction; one call is one commit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from sqlalchemy import Select, func, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from desktop_agent.domain import (
    Approval,
    ApprovalState,
    Command,
    CommandKind,
    EffectClass,
    Lease,
    Run,
    RunEvent,
    RunEventKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.domain.errors import NotFoundError, StorageError
from desktop_agent.engine.ports import RunPatch, Snapshot, StepIntent, StepOutcome
from desktop_agent.persistence import journal_sql, tagging
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.forks import Segment, journal_where, lineage
from desktop_agent.persistence.journal_sql import (
    ADD_SPENT,
    JournalWrite,
    intent_values,
    patch_values,
    salvage,
    spent_params,
    usage_values,
)
from desktop_agent.persistence.mapping import (
    approval_from_row,
    approval_values,
    command_from_row,
    dumps,
    event_from_row,
    loads,
    run_from_row,
    run_values,
    step_from_row,
)
from desktop_agent.persistence.sqlbase import _now, queue_command
from desktop_agent.persistence.store_sqlite import SqliteJournalWriter
from desktop_agent.persistence.tables import approvals as approvals_table
from desktop_agent.persistence.tables import commands, runs, snapshots, steps
from desktop_agent.persistence.tables import run_events as events_table
from desktop_agent.persistence.workers import FENCE, WorkerQueries, fence_params, lease_lost

LINEAGES_KEPT = 1024
"""Runs whose journal segments a store keeps (the ones read last)."""

# The journal's statements under the names they had here (tests render them for both drivers).
_INSERT_STEP = journal_sql.INSERT_STEP
_FINISH_STEP = journal_sql.FINISH_STEP
_RUN_TOTALS = journal_sql.RUN_TOTALS
_PATCH_RUN = journal_sql.PATCH_RUN
_APPLY_COMMAND = journal_sql.APPLY_COMMAND


class JournalWriter(Protocol):
    """What one database does its own way for :class:`SqlStore`: the commit, and around it.

    :func:`journal_writer_for` makes the one for a database's URL.
    """

    @property
    def change_token_statement(self) -> Select[Any]:
        """The statement of :meth:`SqlStore.change_token` (its fourth part is the database's)."""
        ...

    def write_commit(self, w: JournalWrite) -> None:
        """Write one commit in one transaction.

        Raises:
            LeaseLost: ``w.lease`` no longer holds the run (nothing was written).
        """
        ...

    def touch_due(
        self,
        run_id: str,
        now: float,
        intents: Sequence[StepIntent],
        applied_commands: Sequence[tuple[int, str]],
        approvals: Sequence[Approval],
    ) -> bool:
        """Whether a commit that changes nothing else of the run moves its ``updated_at``."""
        ...

    def remember_touch(self, run_id: str, patch: RunPatch | None, touch: bool, now: float) -> None:
        """Called after each commit, with whether it moved the run's ``updated_at``."""
        ...

    def ledger(self, run_id: str, intents: Sequence[StepIntent]) -> None:
        """Record the effects among ``intents``, which a commit just started, where it must.

        Called right after the transaction that started them committed (one that failed or
        was refused writes nothing) and before returning, so before the engine can start
        them.

        Raises:
            StorageError: they cannot be recorded (the effect must then not start).
        """
        ...


def journal_writer_for(db: Database) -> JournalWriter:
    """The journal's writer for ``db``, chosen from its URL: the one place that tells them apart.

    A SQLite file (``sqlite:///PATH``) gets a
    :class:`~desktop_agent.persistence.store_sqlite.SqliteJournalWriter`; a server database
    (``postgresql+psycopg://...``) a
    :class:`~desktop_agent.persistence.store_postgres.PostgresJournalWriter`.
    """
    if db.settings.sqlite_path is not None:
        return SqliteJournalWriter(db)
    # Imported here, not above: SQLAlchemy's PostgreSQL dialect, which it loads, costs some
    # 40 ms that a store over a SQLite file never needs.
    from desktop_agent.persistence.store_postgres import PostgresJournalWriter

    return PostgresJournalWriter(db)


class SqlStore(WorkerQueries):
    """Runs, journals, approvals, commands and workers in one SQL database.

    What both databases share; what each does its own way (the commit, when a run's
    ``updated_at`` moves, the effect ledger, the change token) is its
    :attr:`journal_writer`'s, chosen from ``db``'s URL (:func:`journal_writer_for`).

    Args:
        db: an opened, migrated database.
        clock: time source for bookkeeping columns (``updated_at``, ``created_at``).

    Attributes:
        journal_writer: how this database writes the commit.
    """

    def __init__(self, db: Database, clock: Callable[[], float] = _now) -> None:
        super().__init__(db, clock)
        self.journal_writer = journal_writer_for(db)
        self._lineage_lock = threading.Lock()
        self._lineages: OrderedDict[str, list[Segment]] = OrderedDict()
        """Where each run's journal is stored (see :meth:`journal_segments`): fixed once the
        run exists, so kept for the :data:`LINEAGES_KEPT` runs read last (a worker or an app
        that lives for weeks sees tens of thousands of runs)."""

    # ------------------------------------------------------------------ journal port

    def get_run(self, run_id: str) -> Run:
        """The run; raises NotFoundError."""
        stmt = select(runs).where(runs.c.id == run_id)
        row = self._read(lambda c: c.execute(stmt).mappings().first())
        if row is None:
            raise NotFoundError(f"no run {run_id!r}")
        return run_from_row(row)

    def load_snapshot(self, run_id: str) -> Snapshot | None:
        """The newest snapshot of the run, if any."""
        stmt = select(snapshots.c.seq, snapshots.c.state).where(snapshots.c.run_id == run_id)
        row = self._read(lambda c: c.execute(stmt).first())
        if row is None:
            return None
        return Snapshot(seq=row.seq, state=loads(row.state))

    def journal_segments(self, run_id: str) -> list[Segment]:
        """Where the run's journal is stored: for a fork, its parents' prefixes first.

        See :mod:`desktop_agent.persistence.forks`.
        """
        with self._lineage_lock:  # activations read from several threads
            known = self._lineages.get(run_id)
            if known is not None:
                self._lineages.move_to_end(run_id)
                return known
        segments, found = self._read(lambda c: lineage(c, run_id))
        if found:
            with self._lineage_lock:
                self._lineages[run_id] = segments
                while len(self._lineages) > LINEAGES_KEPT:
                    self._lineages.popitem(last=False)
        return segments

    def load_steps(self, run_id: str, from_seq: int = 1, limit: int | None = None) -> list[Step]:
        """Steps with ``seq >= from_seq`` in order.

        A fork's journal starts with its parent's steps (their rows, with the parent's run
        id), then its own: see :mod:`desktop_agent.persistence.forks`.
        """
        segments = self.journal_segments(run_id)
        where = (
            steps.c.run_id == run_id
            if len(segments) == 1 and segments[0].run_id == run_id
            else journal_where(segments)
        )
        stmt = select(steps).where(where, steps.c.seq >= from_seq).order_by(steps.c.seq)
        if limit is not None:
            stmt = stmt.limit(int(limit))
        rows = self._read(lambda c: c.execute(stmt).mappings().all())
        return [step_from_row(r) for r in rows]

    def get_step(self, run_id: str, seq: int) -> Step:
        """One step; raises NotFoundError."""
        found = self.load_steps(run_id, seq, limit=1)
        if not found or found[0].seq != seq:
            raise NotFoundError(f"run {run_id} has no step {seq}")
        return found[0]

    def commit(
        self,
        run_id: str,
        *,
        outcome: StepOutcome | None = None,
        intents: Sequence[StepIntent] = (),
        patch: RunPatch | None = None,
        snapshot: Snapshot | None = None,
        applied_commands: Sequence[tuple[int, str]] = (),
        approvals: Sequence[Approval] = (),
        lease: Lease | None = None,
    ) -> None:
        """Write all of it in one transaction (one fsync).

        With ``lease`` (a worker's write), only while the worker still holds the run at
        the lease's epoch, checked first in the same transaction: else nothing is written
        and :class:`~desktop_agent.domain.errors.LeaseLost` is raised. The analyst's side
        writes without a lease.
        """
        now = self.now()
        changes = patch_values(patch) if patch is not None else {}
        # A patch that changes the run's row (status, wait, budget, ...) moves updated_at.
        writer = self.journal_writer
        touch = bool(changes) or writer.touch_due(run_id, now, intents, applied_commands, approvals)
        progress = {
            "run": run_id,
            "seq": max([i.seq for i in intents] + ([outcome.seq] if outcome else []), default=0),
            "active": patch.add_active_seconds if patch else 0.0,
            **spent_params(outcome.usage if outcome else None, outcome.cost_usd if outcome else 0),
            **({"now": now} if touch else {}),
        }
        writer.write_commit(
            JournalWrite(
                run_id=run_id,
                now=now,
                lease=lease,
                changes=changes,
                progress=progress,
                touch=touch,
                outcome=outcome,
                intents=intents,
                snapshot=snapshot,
                applied_commands=applied_commands,
                approvals=approvals,
            )
        )
        writer.remember_touch(run_id, patch, touch, now)
        writer.ledger(run_id, intents)

    def restart_step(
        self, run_id: str, seq: int, *, salvaged: str | None, lease: Lease | None = None
    ) -> int:
        """Count another attempt of an in-flight step; keep its partial text and cost.

        What the interrupted attempt streamed and spent (saved while it streamed) moves to
        the step's salvage, and its cost is added to the run's totals: it was paid for.
        Fenced by ``lease`` as :meth:`commit` is. An effect started again gets its line in
        the effect ledger, as a new one does in :meth:`commit`: a restore from a backup
        older than this attempt must know it may have happened.
        """
        c = steps.c
        read = select(
            c.kind, c.name, c.effect, c.input, c.attempt, c.salvaged, c.input_tokens,
            c.output_tokens, c.cache_write_tokens, c.cache_read_tokens, c.cost_usd,
        ).where(c.run_id == run_id, c.seq == seq)  # fmt: skip

        def txn(conn: Connection) -> StepIntent:
            self._check_fence(conn, run_id, lease)
            r = conn.execute(read).mappings().first()
            if r is None:
                raise NotFoundError(f"run {run_id} has no step {seq}")
            again = StepIntent(
                seq=seq,
                kind=StepKind(r[c.kind]),
                name=str(r[c.name]),
                input=loads(r[c.input]),
                effect=EffectClass(r[c.effect]) if r[c.effect] else None,
                attempt=int(r[c.attempt]) + 1,
            )
            usage = Usage(
                int(r[c.input_tokens]),
                int(r[c.output_tokens]),
                int(r[c.cache_write_tokens]),
                int(r[c.cache_read_tokens]),
            )
            cost = float(r[c.cost_usd])
            kept = salvage(loads(r[c.salvaged]), salvaged, again.attempt - 1, usage, cost)
            conn.execute(
                update(steps)
                .where(c.run_id == run_id, c.seq == seq)
                .values(
                    attempt=again.attempt,
                    salvaged=dumps(kept) if kept else None,
                    partial_text="",
                    **usage_values(None, 0.0),
                )
            )
            conn.execute(ADD_SPENT, {"run": run_id, "now": self.now(), **spent_params(usage, cost)})
            return again

        again = self._write(txn)
        self.journal_writer.ledger(run_id, [again])
        return again.attempt

    def save_partial(
        self,
        run_id: str,
        seq: int,
        text: str,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
        lease: Lease | None = None,
    ) -> None:
        """Persist what an in-flight model call streamed and spent so far.

        Fenced by ``lease`` as :meth:`commit` is: a worker that lost the run learns it here,
        while it streams.
        """
        c = steps.c
        partial = (
            update(steps)
            .where(c.run_id == run_id, c.seq == seq, c.status == str(StepStatus.STARTED))
            .values(partial_text=text, **usage_values(usage, cost_usd))
        )

        def txn(conn: Connection) -> None:
            self._check_fence(conn, run_id, lease)
            conn.execute(partial)
            conn.execute(update(runs).where(runs.c.id == run_id).values(updated_at=self.now()))

        self._write(txn)

    def _check_fence(self, conn: Connection, run_id: str, lease: Lease | None) -> None:
        """Raise LeaseLost (rolling back) unless ``lease`` still holds the run (None: no check)."""
        if lease is not None and conn.execute(FENCE, fence_params(run_id, lease)).rowcount != 1:
            raise lease_lost(run_id, lease)

    def record_event(
        self,
        run_id: str,
        kind: RunEventKind,
        message: str,
        *,
        seq: int | None = None,
        data: Any = None,
        add_usage: Usage | None = None,
        add_cost_usd: float = 0.0,
    ) -> None:
        """Add an event to the run, for the analyst (never fenced: it changes no journal).

        The run's ``updated_at`` moves so that the views read the run again and show it.
        ``add_usage`` and ``add_cost_usd`` go to the run's totals in the same transaction:
        what a worker that lost the run spent on it after its last fenced save (nothing
        else would count it). The journal, its steps and the run's status are not touched.
        """

        def txn(conn: Connection) -> None:
            now = self.now()
            conn.execute(
                insert(events_table).values(
                    run_id=run_id,
                    seq=seq,
                    kind=str(kind),
                    message=message,
                    data=dumps(data),
                    created_at=now,
                )
            )
            spent = spent_params(add_usage, add_cost_usd)
            conn.execute(ADD_SPENT, {"run": run_id, "now": now, **spent})

        self._write(txn)

    def run_events(self, run_id: str) -> list[RunEvent]:
        """The run's events, oldest first (its forecast and import cursor are kept as events)."""
        stmt = (
            select(events_table)
            .where(
                events_table.c.run_id == run_id,
                events_table.c.kind.not_in(
                    [str(RunEventKind.FORECAST), str(RunEventKind.IMPORTED)]
                ),
            )
            .order_by(events_table.c.id)
        )
        return [event_from_row(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    def pending_commands(self, run_id: str) -> list[Command]:
        """Commands not yet applied, oldest first."""
        stmt = (
            select(commands)
            .where(commands.c.run_id == run_id, commands.c.applied_at.is_(None))
            .order_by(commands.c.id)
        )
        return [command_from_row(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    def get_approvals(self, run_id: str, seq: int) -> list[Approval]:
        """Approval records created by step ``seq``."""
        stmt = (
            select(approvals_table)
            .where(approvals_table.c.run_id == run_id, approvals_table.c.seq == seq)
            .order_by(approvals_table.c.id)
        )
        rows = self._read(lambda c: c.execute(stmt).mappings().all())
        return [approval_from_row(r) for r in rows]

    def list_run_approvals(self, run_id: str) -> list[Approval]:
        """Every approval record of the run."""
        return self.list_approvals(None, run_id=run_id)

    # ------------------------------------------------------------------ client side

    def create_run(self, run: Run) -> None:
        """Insert a new run (normally ``queued``)."""
        stmt = insert(runs).values(run_values(run))

        def txn(conn: Connection) -> None:
            conn.execute(stmt)
            tagging.insert_tags(conn, run.id, run.tags)

        try:
            self._write(txn)
        except IntegrityError:
            raise StorageError(f"a run with id {run.id} already exists") from None

    def create_fork(
        self, run: Run, first: StepIntent | None = None, approval: Approval | None = None
    ) -> None:
        """Insert a fork (``run.forked_from`` set) and its first own step, in one transaction.

        ``first`` is a finished step at ``run.forked_at_seq + 1`` (the analyst's note, or
        the edited decision for the parent's next tool call, with its ``approval`` record);
        the run's ``last_seq`` is the last step of its journal, shared ones included.
        """
        stmt = insert(runs).values(
            {**run_values(run), "last_seq": first.seq if first else (run.forked_at_seq or 0)}
        )
        now = self.now()

        def txn(conn: Connection) -> None:
            conn.execute(stmt)
            if first is not None:
                conn.execute(insert(steps).values(intent_values(run.id, first, now)))
            if approval is not None:
                conn.execute(insert(approvals_table).values(approval_values(approval)))

        try:
            self._write(txn)
        except IntegrityError:
            raise StorageError(f"a run with id {run.id} already exists") from None

    def forks_of(self, run_id: str) -> list[Run]:
        """The runs made from ``run_id`` (forks, and "run again"s at step 0), oldest first."""
        stmt = (
            select(runs).where(runs.c.forked_from == run_id).order_by(runs.c.created_at, runs.c.id)
        )
        return [run_from_row(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    def list_runs(
        self,
        statuses: Iterable[RunStatus] | None = None,
        limit: int = 500,
        search: str | None = None,
        tags: Iterable[str] = (),
    ) -> list[Run]:
        """Runs, newest first; with ``tags``, only runs carrying every one of them."""
        stmt = select(runs).order_by(runs.c.created_at.desc()).limit(int(limit))
        wanted = tuple(tags)
        if wanted:
            stmt = stmt.where(tagging.having_tags(wanted))
        if statuses is not None:
            stmt = stmt.where(runs.c.status.in_([str(s) for s in statuses]))
        if search:
            q = f"%{search.lower()}%"
            stmt = stmt.where(or_(func.lower(runs.c.goal).like(q), func.lower(runs.c.id).like(q)))
        return [run_from_row(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    def find_run(self, prefix: str) -> Run:
        """A run by id or unique id prefix; raises NotFoundError."""
        return run_from_row(self._by_prefix(runs, prefix, "run", "`desktop-agent runs` lists them"))

    def add_command(self, run_id: str, kind: CommandKind, payload: Any = None) -> int:
        """Queue a command for the worker; returns its id."""
        known = select(runs.c.id).where(runs.c.id == run_id)

        def txn(conn: Connection) -> int:
            if conn.execute(known).first() is None:
                raise NotFoundError(f"no run {run_id!r}")
            return queue_command(conn, run_id, kind, payload, self.now())

        return self._write(txn)

    def get_command(self, command_id: int) -> Command:
        """One command row."""
        stmt = select(commands).where(commands.c.id == command_id)
        row = self._read(lambda c: c.execute(stmt).mappings().first())
        if row is None:
            raise NotFoundError(f"no command {command_id}")
        return command_from_row(row)

    def list_approvals(
        self, state: ApprovalState | None = ApprovalState.PENDING, run_id: str | None = None
    ) -> list[Approval]:
        """Approvals, oldest first."""
        stmt = select(approvals_table).order_by(approvals_table.c.created_at, approvals_table.c.id)
        if state is not None:
            stmt = stmt.where(approvals_table.c.state == str(state))
        if run_id is not None:
            stmt = stmt.where(approvals_table.c.run_id == run_id)
        rows = self._read(lambda c: c.execute(stmt).mappings().all())
        return [approval_from_row(r) for r in rows]

    def get_approval(self, approval_id: str) -> Approval:
        """One approval; raises NotFoundError."""
        stmt = select(approvals_table).where(approvals_table.c.id == approval_id)
        row = self._read(lambda c: c.execute(stmt).mappings().first())
        if row is None:
            raise NotFoundError(
                f"no approval {approval_id!r}; `desktop-agent approvals` lists them"
            )
        return approval_from_row(row)

    def change_token(self) -> tuple[int, float, int, int]:
        """A cheap value that changes whenever anything the GUI shows changes.

        Run count, newest ``updated_at``, newest heartbeat, and a fourth part of each
        database's own (SQLite: the newest step's rowid, see
        :data:`~desktop_agent.persistence.store_sqlite.TOUCH_EVERY_S`).
        """
        stmt = self.journal_writer.change_token_statement
        n, u, h, s = self._read(lambda c: c.execute(stmt).one())
        return int(n or 0), float(u or 0.0), int(h or 0), int(s or 0)

    def resume_waiting_for(self, reason: str) -> int:
        """Queue a resume command for every run waiting for ``reason``; returns how many."""
        waiting = [
            r for r in self.list_runs([RunStatus.WAITING], limit=100_000) if r.wait_reason == reason
        ]
        for run in waiting:
            self.add_command(run.id, CommandKind.RESUME, {"why": f"{reason} resolved"})
        return len(waiting)


def open_store(db: Database, clock: Callable[[], float] = _now) -> SqlStore:
    """The store over ``db``, with the journal's writer for its URL (:func:`journal_writer_for`).

    The same as ``SqlStore(db, clock)``, said explicitly.
    """
    return SqlStore(db, clock)
