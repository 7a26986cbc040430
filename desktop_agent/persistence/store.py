"""The SQL store: the engine's journal port, plus what the worker and the client need.

Every statement is built from the tables declared in
:mod:`~desktop_agent.persistence.tables`. The journal's hot path keeps its statements as
module constants: on SQLite, :meth:`SqlStore.commit` runs them on the pooled DB-API
connection itself, rendered once by SQLAlchemy (see :meth:`SqlStore._write_journal`), since
the ORM, and even Core's per-statement execution, cost more per row than an fsync. Every
public method owns its transaction; one call is one commit.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.sql.dml import UpdateBase

from desktop_agent.domain import (
    AgentSpec,
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
from desktop_agent.persistence import pgcommit, tagging
from desktop_agent.persistence.compiled import Rendered, render
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.forks import Segment, journal_where, lineage
from desktop_agent.persistence.ledger import EffectLedger
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
from desktop_agent.persistence.sqlbase import _now, queue_command, storage_error
from desktop_agent.persistence.tables import approvals as approvals_table
from desktop_agent.persistence.tables import commands, runs, snapshots, steps
from desktop_agent.persistence.tables import run_events as events_table
from desktop_agent.persistence.tables import workers as workers_table
from desktop_agent.persistence.workers import FENCE, WorkerQueries, fence_params, lease_lost

_Exec = Callable[[UpdateBase, dict[str, Any]], int]
"""Runs one statement of the journal in the current transaction (SQLite); returns its
rowcount.

The parameters name columns (an INSERT, or an UPDATE's SET without explicit values) or the
statement's own bound parameters (``run``, ``at_seq``, ...), as with SQLAlchemy's execute.
"""


def _spent() -> dict[Any, ColumnElement[Any]]:
    """Add a cost and token counts (``cost``, ``it``, ``ot``, ``cw``, ``cr``) to a run's totals."""
    c = runs.c
    return {
        c.cost_usd: c.cost_usd + bindparam("cost"),
        c.input_tokens: c.input_tokens + bindparam("it"),
        c.output_tokens: c.output_tokens + bindparam("ot"),
        c.cache_write_tokens: c.cache_write_tokens + bindparam("cw"),
        c.cache_read_tokens: c.cache_read_tokens + bindparam("cr"),
    }


def _spent_params(usage: Usage | None, cost_usd: float) -> dict[str, Any]:
    """The parameters of :func:`_spent`."""
    u = usage or Usage()
    return {
        "cost": cost_usd,
        "it": u.input_tokens,
        "ot": u.output_tokens,
        "cw": u.cache_write_tokens,
        "cr": u.cache_read_tokens,
    }


def _usage_values(usage: Usage | None, cost_usd: float) -> dict[str, Any]:
    """A step's own usage and cost columns, by column name."""
    u = usage or Usage()
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cost_usd": cost_usd,
    }


_THE_RUN = runs.c.id == bindparam("run")
_THE_STEP = (steps.c.run_id == bindparam("run")) & (steps.c.seq == bindparam("at_seq"))

_INSERT_STEP = insert(steps)
"""A journal record's intent (parameters: its columns)."""


_FINISH_STEP = update(steps).where(_THE_STEP)
"""A journal record's outcome (parameters: ``run``, ``at_seq`` and the columns it sets)."""

_ADD_SPENT = update(runs).where(_THE_RUN).values({**_spent(), runs.c.updated_at: bindparam("now")})
"""Add what was spent outside a commit to the run's totals (parameters: ``run``, ``now``
and those of :func:`_spent`)."""

_PROGRESS: dict[Any, ColumnElement[Any]] = {
    **_spent(),
    runs.c.last_seq: case(
        (runs.c.last_seq > bindparam("seq"), runs.c.last_seq), else_=bindparam("seq")
    ),
    runs.c.active_seconds: runs.c.active_seconds + bindparam("active"),
}
"""What every commit sets on the run's row: newest seq, totals, time worked (parameters
``run``, ``seq``, ``active`` and those of :func:`_spent`)."""

_RUN_PROGRESS = update(runs).where(_THE_RUN).values(_PROGRESS)
"""A commit's progress on the run's row: newest seq, totals, time worked."""

_RUN_TOTALS = _RUN_PROGRESS.values(updated_at=bindparam("now"))
""":data:`_RUN_PROGRESS`, moving ``updated_at`` too (see :data:`TOUCH_EVERY_S`)."""

_PATCH_RUN = update(runs).where(_THE_RUN)
"""Change the run's row (parameters: ``run`` and the columns it sets)."""

_DELETE_SNAPSHOT = delete(snapshots).where(snapshots.c.run_id == bindparam("run"))
_INSERT_SNAPSHOT = insert(snapshots)

_APPLY_COMMAND = update(commands).where(commands.c.id == bindparam("command"))
"""Mark a command applied (parameters: ``command``, ``applied_at``, ``result``)."""

_DECIDE_APPROVAL = update(approvals_table).where(approvals_table.c.id == bindparam("approval"))
"""Record an approval's decision (parameters: ``approval`` and the columns it sets)."""

_INSERT_APPROVAL = insert(approvals_table)

_DECIDED = ("state", "decided_arguments", "decision_note", "decided_at")
"""The columns of an approval that a decision changes."""


def _change_token_query(newest_step: ColumnElement[Any]) -> Select[Any]:
    """Run count, newest ``updated_at``, newest heartbeat, and ``newest_step``."""
    return select(
        select(func.count()).select_from(runs).scalar_subquery(),
        select(func.max(runs.c.updated_at)).scalar_subquery(),
        select(func.max(workers_table.c.heartbeat_at)).scalar_subquery(),
        newest_step,
    )


_CHANGE_TOKEN_SQLITE = _change_token_query(
    select(func.max(literal_column("rowid"))).select_from(steps).scalar_subquery()
)
"""With SQLite's rowid of the newest step, whatever run it belongs to."""

_CHANGE_TOKEN_OTHER = _change_token_query(literal(0))

TOUCH_EVERY_S = 1.0
"""While a run only adds steps, its ``updated_at`` moves at most this often (SQLite).

``updated_at`` is indexed (the GUI's change token and incremental reads use it), so moving
it costs one more page in every commit: a quarter of a journal step's pages. The steps
themselves, ``last_seq`` and the totals are written at every commit; the GUI notices new
steps through :meth:`SqlStore.change_token` (the newest step's rowid) and re-reads running
runs whatever their ``updated_at``. A commit that changes anything else about the run (what
:func:`_patch_values` finds: status, wait, budget, ...; applied commands; approvals), or
adds no step, moves it at once.
"""


def _wait_values(p: RunPatch) -> dict[str, Any]:
    """The run's status and wait columns a patch changes, by column name."""
    values: dict[str, Any] = {}
    if p.status is not None:
        values["status"] = str(p.status)
    if p.clear_wait or (p.status is not None and p.status != RunStatus.WAITING):
        values["wait_reason"] = None
        values["wake_at"] = None
    if p.wait_reason is not None:
        values["wait_reason"] = str(p.wait_reason)
        values["wake_at"] = p.wake_at
    return values


def _patch_values(p: RunPatch) -> dict[str, Any]:
    """The run's columns a patch changes, by column name (its time worked aside)."""
    values = _wait_values(p)
    if p.status_message is not None:
        values["status_message"] = p.status_message
    if p.attention_seq is not None or p.clear_attention:
        values["attention_seq"] = p.attention_seq
    if p.budget is not None:
        values["budget"] = dumps(p.budget)
    if p.started_at is not None:
        values["started_at"] = p.started_at
    if p.finished_at is not None:
        values["finished_at"] = p.finished_at
    if p.spec is not None:
        values["spec"] = dumps(p.spec)
        values["definition_hash"] = AgentSpec.from_json(p.spec).definition_hash
    return values


def _intent_values(run_id: str, intent: StepIntent, now: float) -> dict[str, Any]:
    """The columns of a new journal record (finished at once unless it is ``started``)."""
    finished = intent.status != StepStatus.STARTED
    return {
        "run_id": run_id,
        "seq": intent.seq,
        "kind": str(intent.kind),
        "name": intent.name,
        "status": str(intent.status),
        "effect": str(intent.effect) if intent.effect else None,
        "attempt": intent.attempt,
        "input": dumps(intent.input),
        "output": dumps(intent.output) if finished else None,
        "error": None,
        "partial_text": "",
        "started_at": now,
        "finished_at": now if finished else None,
    }


def _outcome_params(run_id: str, outcome: StepOutcome, now: float) -> dict[str, Any]:
    """The parameters of :data:`_FINISH_STEP` for an outcome."""
    return {
        "run": run_id,
        "at_seq": outcome.seq,
        "status": str(outcome.status),
        "output": dumps(outcome.output),
        "error": outcome.error,
        "finished_at": now,
        **_usage_values(outcome.usage, outcome.cost_usd),
    }


def _snapshot_values(run_id: str, snapshot: Snapshot, now: float) -> dict[str, Any]:
    """The columns of a run's snapshot row."""
    return {
        "run_id": run_id,
        "seq": snapshot.seq,
        "state": dumps(snapshot.state),
        "created_at": now,
    }


LINEAGES_KEPT = 1024
"""Runs whose journal segments a store keeps (the ones read last)."""


class SqlStore(WorkerQueries):
    """Runs, journals, approvals, commands and workers in one SQL database.

    Args:
        db: an opened, migrated database.
        clock: time source for bookkeeping columns (``updated_at``, ``created_at``).
    """

    def __init__(self, db: Database, clock: Callable[[], float] = _now) -> None:
        super().__init__(db, clock)
        self._touched: dict[str, float] = {}
        """When each run's ``updated_at`` was last moved by :meth:`commit` (SQLite)."""
        path = db.settings.sqlite_path
        self._effects = EffectLedger.beside(path) if path is not None else None
        """The effect ledger beside a SQLite database (see :meth:`_ledger`)."""
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
        changes = _patch_values(patch) if patch is not None else {}
        # A patch that changes the run's row (status, wait, budget, ...) moves updated_at.
        touch = bool(changes) or self._touch_due(run_id, now, intents, applied_commands, approvals)
        progress = {
            "run": run_id,
            "seq": max([i.seq for i in intents] + ([outcome.seq] if outcome else []), default=0),
            "active": patch.add_active_seconds if patch else 0.0,
            **_spent_params(outcome.usage if outcome else None, outcome.cost_usd if outcome else 0),
            **({"now": now} if touch else {}),
        }

        def txn(run: _Exec) -> None:
            if lease is not None and run(FENCE, fence_params(run_id, lease)) != 1:
                raise lease_lost(run_id, lease)
            if changes:
                run(_PATCH_RUN, {"run": run_id, **changes})
            if outcome is not None:
                run(_FINISH_STEP, _outcome_params(run_id, outcome, now))
            for intent in intents:
                run(_INSERT_STEP, _intent_values(run_id, intent, now))
            run(_RUN_TOTALS if touch else _RUN_PROGRESS, progress)
            if snapshot is not None:
                self._replace_snapshot(run, run_id, snapshot, now)
            for cmd_id, result in applied_commands:
                run(_APPLY_COMMAND, {"command": cmd_id, "applied_at": now, "result": result})
            for a in approvals:
                self._upsert_approval(run, a)

        if self._pg:
            shape = pgcommit.Shape(
                fenced=lease is not None,
                patch=tuple(changes),
                outcome=outcome is not None,
                intents=len(intents),
                touch=touch,
                snapshot=snapshot is not None,
                commands=len(applied_commands),
                approvals=len(approvals),
            )
            values = pgcommit.params(
                progress=progress,
                fence=fence_params(run_id, lease) if lease is not None else None,
                patch=changes,
                outcome=_outcome_params(run_id, outcome, now) if outcome is not None else None,
                intents=[_intent_values(run_id, i, now) for i in intents],
                snapshot=_snapshot_values(run_id, snapshot, now) if snapshot else None,
                applied=[
                    {"id": cmd_id, "applied_at": now, "result": result}
                    for cmd_id, result in applied_commands
                ],
                approved=[approval_values(a) for a in approvals],
            )
            held = self._write_journal_pg(pgcommit.statement(shape, _PROGRESS), values)
            if lease is not None and held != 1:
                raise lease_lost(run_id, lease)
        else:
            self._write_journal(txn)
        self._remember_touch(run_id, patch, touch, now)
        self._ledger(run_id, intents)

    def _touch_due(
        self,
        run_id: str,
        now: float,
        intents: Sequence[StepIntent],
        applied_commands: Sequence[tuple[int, str]],
        approvals: Sequence[Approval],
    ) -> bool:
        """Whether a commit that changes nothing else of the run moves its ``updated_at``."""
        return (
            self._pg
            or not intents
            or bool(applied_commands)
            or bool(approvals)
            or not 0.0 <= now - self._touched.get(run_id, -TOUCH_EVERY_S) < TOUCH_EVERY_S
        )

    def _remember_touch(self, run_id: str, patch: RunPatch | None, touch: bool, now: float) -> None:
        """Keep when the run's ``updated_at`` moved; forget runs that will add no steps."""
        status = patch.status if patch is not None else None
        if status is not None and (status.is_terminal or status == RunStatus.STOPPED):
            self._touched.pop(run_id, None)
        elif touch and not self._pg:
            self._touched[run_id] = now

    @staticmethod
    def _replace_snapshot(run: _Exec, run_id: str, snapshot: Snapshot, now: float) -> None:
        run(_DELETE_SNAPSHOT, {"run": run_id})
        run(_INSERT_SNAPSHOT, _snapshot_values(run_id, snapshot, now))

    def _ledger(self, run_id: str, intents: Sequence[StepIntent]) -> None:
        """Append the effects among ``intents`` to the effect ledger (SQLite).

        Called right after the transaction that started them committed (one that failed or
        was refused writes no line) and before returning, so before the engine can start
        them: a restore from an older backup reads the ledger to find them.

        Raises:
            StorageError: the ledger cannot be written (the effect must then not start).
        """
        if intents and self._effects is not None:
            self._effects.record(run_id, intents)

    def _write_journal(self, fn: Callable[[_Exec], None]) -> None:
        """One write transaction of the journal's hot path.

        On SQLite the statements run on the pooled DB-API connection itself, between a
        ``BEGIN IMMEDIATE`` and a ``COMMIT`` of our own, as SQLAlchemy renders them once
        (:func:`~desktop_agent.persistence.compiled.render`) with the same parameters:
        SQLAlchemy's per-transaction and per-statement machinery costs more than the commit
        itself at ``synchronous=NORMAL``, and half as much again as the fsync at ``FULL``.
        Errors are mapped as :meth:`_write` maps them. (PostgreSQL has a path of its own:
        :meth:`_write_journal_pg`.)
        """
        last: tuple[str, dict[str, Any]] = ("BEGIN IMMEDIATE", {})
        raw = self.db.writer.raw_connection()
        try:
            cursor = raw.cursor()

            def run(stmt: UpdateBase, params: dict[str, Any]) -> int:
                nonlocal last
                rendered = render(stmt, params)
                last = (rendered.sql, params)
                cursor.execute(rendered.sql, rendered.params(params))
                return int(cursor.rowcount)

            try:
                cursor.execute("BEGIN IMMEDIATE")
                fn(run)
                last = ("COMMIT", {})
                cursor.execute("COMMIT")
            except BaseException:
                raw.rollback()  # a no-op when SQLite already rolled back
                raise
            finally:
                cursor.close()
        except sqlite3.Error as exc:
            wrapped = DBAPIError.instance(last[0], last[1], exc, sqlite3.Error)
            if isinstance(wrapped, OperationalError):
                raise storage_error(wrapped) from exc
            raise wrapped from exc
        finally:
            raw.close()  # back to the pool

    def _write_journal_pg(self, sql: Rendered, params: dict[str, Any]) -> int:
        """The journal's hot path on PostgreSQL: one statement, alone in its transaction.

        ``sql`` is a whole commit (see :mod:`~desktop_agent.persistence.pgcommit`), run in
        autocommit mode: the server wraps it in a transaction of its own and commits it
        before it answers, so the commit is one round trip with no ``BEGIN`` or ``COMMIT``
        of ours. Returns the statement's one value (the run rows written: 0 when the fence
        did not hold). Errors are mapped as :meth:`_write` maps them; a connection found
        broken is discarded from the pool, never handed out again.
        """
        import psycopg

        raw = self.db.writer.raw_connection()
        pg: Any = raw.driver_connection
        try:
            pg.autocommit = True
            try:
                row = pg.execute(sql.sql, sql.params(params)).fetchone()
            finally:
                try:
                    pg.autocommit = False
                except psycopg.Error:
                    raw.invalidate()  # never hand a connection out in autocommit mode
            return int(row[0])
        except psycopg.Error as exc:
            if raw.is_valid and pg.closed:
                raw.invalidate(exc)
            wrapped = DBAPIError.instance(sql.sql, params, exc, psycopg.Error)
            if isinstance(wrapped, OperationalError):
                raise storage_error(wrapped) from exc
            raise wrapped from exc
        finally:
            raw.close()  # back to the pool (or away, when invalidated)

    @staticmethod
    def _upsert_approval(run: _Exec, a: Approval) -> None:
        values = approval_values(a)
        decided = {k: values[k] for k in _DECIDED}
        if run(_DECIDE_APPROVAL, {"approval": a.id, **decided}) == 0:
            run(_INSERT_APPROVAL, values)

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
            kept = _salvage(loads(r[c.salvaged]), salvaged, again.attempt - 1, usage, cost)
            conn.execute(
                update(steps)
                .where(c.run_id == run_id, c.seq == seq)
                .values(
                    attempt=again.attempt,
                    salvaged=dumps(kept) if kept else None,
                    partial_text="",
                    **_usage_values(None, 0.0),
                )
            )
            conn.execute(
                _ADD_SPENT, {"run": run_id, "now": self.now(), **_spent_params(usage, cost)}
            )
            return again

        again = self._write(txn)
        self._ledger(run_id, [again])
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
            .values(partial_text=text, **_usage_values(usage, cost_usd))
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
            spent = _spent_params(add_usage, add_cost_usd)
            conn.execute(_ADD_SPENT, {"run": run_id, "now": now, **spent})

        self._write(txn)

    def run_events(self, run_id: str) -> list[RunEvent]:
        """The run's events, oldest first (its forecast, kept as an event, is not one)."""
        stmt = (
            select(events_table)
            .where(
                events_table.c.run_id == run_id,
                events_table.c.kind != str(RunEventKind.FORECAST),
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
                conn.execute(insert(steps).values(_intent_values(run.id, first, now)))
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

        On SQLite the newest step's rowid is part of it: a commit that only adds steps moves
        ``updated_at`` at most once a second (see :data:`TOUCH_EVERY_S`).
        """
        stmt = _CHANGE_TOKEN_OTHER if self._pg else _CHANGE_TOKEN_SQLITE
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


def _salvage(kept: Any, text: str | None, attempt: int, usage: Usage, cost: float) -> list[Any]:
    """A step's salvage, with what its interrupted ``attempt`` streamed and spent added."""
    out = list(kept or [])
    if text or cost or usage.total:
        out.append(
            {"text": text or "", "attempt": attempt, "cost_usd": cost, "usage": usage.to_json()}
        )
    return out
