"""The store over a PostgreSQL server: a commit is one statement, one round trip.

:class:`PostgresJournalWriter` sends each commit of the journal of a
:class:`~desktop_agent.persistence.store.SqlStore` on a server as one ``WITH`` statement of
data-modifying CTEs (:mod:`~desktop_agent.persistence.pgcommit`), alone in autocommit mode:
the fence is the run's ``UPDATE`` in it, so a worker that lost its lease writes nothing.
Every commit moves the run's ``updated_at`` (the change token has no rowid of the newest
step here), and there is no effect ledger (it is kept beside a SQLite file only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import literal
from sqlalchemy.exc import DBAPIError, OperationalError

from desktop_agent.domain import Approval
from desktop_agent.engine.ports import RunPatch, StepIntent
from desktop_agent.persistence import pgcommit
from desktop_agent.persistence.compiled import Rendered
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.journal_sql import (
    PROGRESS,
    JournalWrite,
    change_token_query,
    intent_values,
    outcome_params,
    snapshot_values,
)
from desktop_agent.persistence.mapping import approval_values
from desktop_agent.persistence.sqlbase import storage_error
from desktop_agent.persistence.workers import fence_params, lease_lost


class PostgresJournalWriter:
    """The :class:`~desktop_agent.persistence.store.JournalWriter` of a PostgreSQL server.

    Args:
        db: an opened, migrated database on the server (the store's).
    """

    change_token_statement = change_token_query(literal(0))
    """Without a fourth part: every commit moves the run's ``updated_at``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def write_commit(self, w: JournalWrite) -> None:
        """The commit as one statement of its shape (:mod:`~desktop_agent.persistence.pgcommit`)."""
        run_id, now, lease = w.run_id, w.now, w.lease
        shape = pgcommit.Shape(
            fenced=lease is not None,
            patch=tuple(w.changes),
            outcome=w.outcome is not None,
            intents=len(w.intents),
            touch=w.touch,
            snapshot=w.snapshot is not None,
            commands=len(w.applied_commands),
            approvals=len(w.approvals),
        )
        values = pgcommit.params(
            progress=w.progress,
            fence=fence_params(run_id, lease) if lease is not None else None,
            patch=w.changes,
            outcome=outcome_params(run_id, w.outcome, now) if w.outcome is not None else None,
            intents=[intent_values(run_id, i, now) for i in w.intents],
            snapshot=snapshot_values(run_id, w.snapshot, now) if w.snapshot else None,
            applied=[
                {"id": cmd_id, "applied_at": now, "result": result}
                for cmd_id, result in w.applied_commands
            ],
            approved=[approval_values(a) for a in w.approvals],
        )
        held = self._write_statement(pgcommit.statement(shape, PROGRESS), values)
        if lease is not None and held != 1:
            raise lease_lost(run_id, lease)

    def touch_due(
        self,
        run_id: str,
        now: float,
        intents: Sequence[StepIntent],
        applied_commands: Sequence[tuple[int, str]],
        approvals: Sequence[Approval],
    ) -> bool:
        """Always: every commit moves the run's ``updated_at`` (the change token needs it)."""
        return True

    def remember_touch(self, run_id: str, patch: RunPatch | None, touch: bool, now: float) -> None:
        """Nothing to remember (see :meth:`touch_due`)."""

    def ledger(self, run_id: str, intents: Sequence[StepIntent]) -> None:
        """Nothing: only a SQLite file keeps an effect ledger (for a restore from its backups)."""

    def _write_statement(self, sql: Rendered, params: dict[str, Any]) -> int:
        """The journal's hot path: one statement, alone in its transaction.

        ``sql`` is a whole commit (see :mod:`~desktop_agent.persistence.pgcommit`), run in
        autocommit mode: the server wraps it in a transaction of its own and commits it
        before it answers, so the commit is one round trip with no ``BEGIN`` or ``COMMIT``
        of ours. Returns the statement's one value (the run rows written: 0 when the fence
        did not hold). Errors are mapped as the store's other writes map them; a connection
        found broken is discarded from the pool, never handed out again.
        """
        import psycopg  # the driver is optional: a SQLite install may not have it

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
