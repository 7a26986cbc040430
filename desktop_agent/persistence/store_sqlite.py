"""The store over a SQLite file: the journal written on the DB-API connection itself.

:class:`SqliteJournalWriter` writes the commits of a
:class:`~desktop_agent.persistence.store.SqlStore` over a SQLite file, with the statements of
:mod:`~desktop_agent.persistence.journal_sql` run on the pooled ``sqlite3`` connection,
between a ``BEGIN IMMEDIATE`` and a ``COMMIT`` of its own, each rendered once by SQLAlchemy
(:func:`~desktop_agent.persistence.compiled.render`): SQLAlchemy's per-transaction and
per-statement machinery costs more than the commit itself at ``synchronous=NORMAL``, and
half as much again as the fsync at ``FULL``. Besides, it keeps what only a file needs: the
effect ledger beside it (a restore from an older backup reads it), a run's ``updated_at``
moved at most every :data:`TOUCH_EVERY_S`, and the newest step's rowid in the change token.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import func, literal_column, select
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.sql.dml import UpdateBase

from desktop_agent.domain import Approval, RunStatus
from desktop_agent.engine.ports import RunPatch, StepIntent
from desktop_agent.persistence.compiled import render
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.journal_sql import (
    APPLY_COMMAND,
    DECIDE_APPROVAL,
    DECIDED,
    DELETE_SNAPSHOT,
    FINISH_STEP,
    INSERT_APPROVAL,
    INSERT_SNAPSHOT,
    INSERT_STEP,
    PATCH_RUN,
    RUN_PROGRESS,
    RUN_TOTALS,
    JournalWrite,
    change_token_query,
    intent_values,
    outcome_params,
    snapshot_values,
)
from desktop_agent.persistence.ledger import EffectLedger
from desktop_agent.persistence.mapping import approval_values
from desktop_agent.persistence.sqlbase import storage_error
from desktop_agent.persistence.tables import steps
from desktop_agent.persistence.workers import FENCE, fence_params, lease_lost

_Exec = Callable[[UpdateBase, dict[str, Any]], int]
"""Runs one statement of the journal in the current transaction; returns its rowcount.

The parameters name columns (an INSERT, or an UPDATE's SET without explicit values) or the
statement's own bound parameters (``run``, ``at_seq``, ...), as with SQLAlchemy's execute.
"""

TOUCH_EVERY_S = 1.0
"""While a run only adds steps, its ``updated_at`` moves at most this often.

``updated_at`` is indexed (the GUI's change token and incremental reads use it), so moving
it costs one more page in every commit: a quarter of a journal step's pages. The steps
themselves, ``last_seq`` and the totals are written at every commit; the GUI notices new
steps through :meth:`SqlStore.change_token
<desktop_agent.persistence.store.SqlStore.change_token>` (the newest step's rowid) and re-reads
running runs whatever their ``updated_at``. A commit that changes anything else about the
run (what :func:`~desktop_agent.persistence.journal_sql.patch_values` finds: status, wait,
budget, ...; applied commands; approvals), or adds no step, moves it at once.
"""


class SqliteJournalWriter:
    """The :class:`~desktop_agent.persistence.store.JournalWriter` of a SQLite file.

    Args:
        db: an opened, migrated SQLite database (the store's).
    """

    change_token_statement = change_token_query(
        select(func.max(literal_column("rowid"))).select_from(steps).scalar_subquery()
    )
    """With SQLite's rowid of the newest step, whatever run it belongs to."""

    def __init__(self, db: Database) -> None:
        path = db.settings.sqlite_path
        if path is None:
            raise ValueError(f"not a SQLite file: {db.describe()}")
        self.db = db
        self._touched: dict[str, float] = {}
        """When each run's ``updated_at`` was last moved by a commit."""
        self._effects = EffectLedger.beside(path)
        """The effect ledger beside the database (see :meth:`_ledger`)."""

    def write_commit(self, w: JournalWrite) -> None:
        """The commit's statements, one by one, in one transaction (:meth:`_write_journal`)."""
        run_id, now, lease = w.run_id, w.now, w.lease

        def txn(run: _Exec) -> None:
            if lease is not None and run(FENCE, fence_params(run_id, lease)) != 1:
                raise lease_lost(run_id, lease)
            if w.changes:
                run(PATCH_RUN, {"run": run_id, **w.changes})
            if w.outcome is not None:
                run(FINISH_STEP, outcome_params(run_id, w.outcome, now))
            for intent in w.intents:
                run(INSERT_STEP, intent_values(run_id, intent, now))
            run(RUN_TOTALS if w.touch else RUN_PROGRESS, w.progress)
            if w.snapshot is not None:
                run(DELETE_SNAPSHOT, {"run": run_id})
                run(INSERT_SNAPSHOT, snapshot_values(run_id, w.snapshot, now))
            for cmd_id, result in w.applied_commands:
                run(APPLY_COMMAND, {"command": cmd_id, "applied_at": now, "result": result})
            for a in w.approvals:
                self._upsert_approval(run, a)

        self._write_journal(txn)

    def touch_due(
        self,
        run_id: str,
        now: float,
        intents: Sequence[StepIntent],
        applied_commands: Sequence[tuple[int, str]],
        approvals: Sequence[Approval],
    ) -> bool:
        """Whether a commit that changes nothing else of the run moves its ``updated_at``.

        Yes unless it only adds steps to a run whose ``updated_at`` moved less than
        :data:`TOUCH_EVERY_S` ago.
        """
        return (
            not intents
            or bool(applied_commands)
            or bool(approvals)
            or not 0.0 <= now - self._touched.get(run_id, -TOUCH_EVERY_S) < TOUCH_EVERY_S
        )

    def remember_touch(self, run_id: str, patch: RunPatch | None, touch: bool, now: float) -> None:
        """Keep when the run's ``updated_at`` moved; forget runs that will add no steps."""
        status = patch.status if patch is not None else None
        if status is not None and (status.is_terminal or status == RunStatus.STOPPED):
            self._touched.pop(run_id, None)
        elif touch:
            self._touched[run_id] = now

    def ledger(self, run_id: str, intents: Sequence[StepIntent]) -> None:
        """Append the effects among ``intents`` to the effect ledger.

        Called right after the transaction that started them committed (one that failed or
        was refused writes no line) and before returning, so before the engine can start
        them: a restore from an older backup reads the ledger to find them.

        Raises:
            StorageError: the ledger cannot be written (the effect must then not start).
        """
        if intents:
            self._effects.record(run_id, intents)

    def _write_journal(self, fn: Callable[[_Exec], None]) -> None:
        """One write transaction of the journal's hot path.

        The statements run on the pooled DB-API connection itself, between a ``BEGIN
        IMMEDIATE`` and a ``COMMIT`` of our own, as SQLAlchemy renders them once
        (:func:`~desktop_agent.persistence.compiled.render`) with the same parameters.
        Errors are mapped as the store's other writes map them (:meth:`SqlBase._write
        <desktop_agent.persistence.sqlbase.SqlBase._write>`).
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

    @staticmethod
    def _upsert_approval(run: _Exec, a: Approval) -> None:
        values = approval_values(a)
        decided = {k: values[k] for k in DECIDED}
        if run(DECIDE_APPROVAL, {"approval": a.id, **decided}) == 0:
            run(INSERT_APPROVAL, values)
