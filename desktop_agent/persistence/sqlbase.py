"""The base of the SQL store: connections, transactions and clear storage errors."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from sqlalchemy import RowMapping, Select, Table, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError, DBAPIError, OperationalError

from desktop_agent.domain import CommandKind
from desktop_agent.domain.errors import NotFoundError, StorageError
from desktop_agent.persistence import backup
from desktop_agent.persistence.db import Database, locked_message
from desktop_agent.persistence.mapping import dumps
from desktop_agent.persistence.tables import commands, runs

T = TypeVar("T")


def _now() -> float:
    return time.time()


class SqlBase:
    """Connections and transactions of the SQL store, with database failures made clear.

    Args:
        db: an opened, migrated database.
        clock: time source for bookkeeping columns (``updated_at``, ``created_at``).
    """

    def __init__(self, db: Database, clock: Callable[[], float] = _now) -> None:
        self.db = db
        self.now = clock

    # ------------------------------------------------------------------ helpers

    def _write(self, fn: Callable[[Connection], T]) -> T:
        return self._run(self.db.write, fn)

    def _read(self, fn: Callable[[Connection], T]) -> T:
        return self._run(self.db.read, fn)

    def _run(
        self,
        transaction: Callable[[], AbstractContextManager[Connection]],
        fn: Callable[[Connection], T],
    ) -> T:
        """Run ``fn`` in ``transaction``, turning database failures into clear errors."""
        try:
            with transaction() as conn:
                return fn(conn)
        except OperationalError as exc:
            raise storage_error(exc, self.db.busy_ms) from exc
        except DatabaseError as exc:
            damaged = self._damaged(exc)
            if damaged is None:
                raise
            raise damaged from exc

    def _by_prefix(self, table: Table, prefix: str, what: str, hint: str) -> RowMapping:
        """The row of ``table`` whose id is ``prefix``, or the only one it starts.

        Raises:
            NotFoundError: none matches (``hint`` says where to look), or several do.
        """
        rows = self._read(lambda c: c.execute(by_prefix(table, prefix)).mappings().all())
        exact = [r for r in rows if r[table.c.id] == prefix]
        if exact:
            return exact[0]
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise NotFoundError(f"no {what} {prefix!r}; {hint}")
        raise NotFoundError(f"{prefix!r} matches several {what}s; give more of the id")

    def _damaged(self, exc: DatabaseError) -> StorageError | None:
        """For a damaged file, a StorageError offering the backup; else None."""
        text = str(exc.orig) if exc.orig is not None else str(exc)
        path = self.db.settings.sqlite_path
        if path is not None and backup.is_corruption(text):
            return StorageError(backup.damaged_message(path, text), code="damaged")
        return None


def by_prefix(table: Table, prefix: str) -> Select[Any]:
    """Rows of ``table`` whose ``id`` starts with ``prefix``: at most two, by id.

    Two are enough to tell a unique prefix from an ambiguous one; the caller prefers an
    exact match. ``%`` is dropped and ``_`` matched literally.
    """
    pattern = prefix.replace("%", "").replace("_", "\\_") + "%"
    return select(table).where(table.c.id.like(pattern, escape="\\")).order_by(table.c.id).limit(2)


def queue_command(
    conn: Connection, run_id: str, kind: CommandKind, payload: Any, now: float
) -> int:
    """Insert a command row for the worker and move the run's ``updated_at``; its id.

    The caller has checked, in the same transaction, that the command may be queued.
    """
    inserted = conn.execute(
        insert(commands).values(
            run_id=run_id, kind=str(kind), payload=dumps(payload), created_at=now, result=""
        )
    )
    conn.execute(update(runs).where(runs.c.id == run_id).values(updated_at=now))
    key = inserted.inserted_primary_key
    assert key is not None  # a single-row INSERT always has one
    return int(key[0])


def storage_error(exc: DBAPIError, busy_ms: int | None = None) -> StorageError:
    """The StorageError of a failed database operation: what to do, and a code for what."""
    text = str(exc.orig) if exc.orig is not None else str(exc)
    if "locked" in text:
        return StorageError(locked_message(busy_ms), code="locked")
    if "disk" in text and "full" in text:
        return StorageError(
            "the disk is full: free some space; nothing committed was lost", code="disk_full"
        )
    if "readonly" in text or "read-only" in text:
        return StorageError(
            "the database is read-only: check the permissions of the data folder",
            code="read_only",
        )
    return StorageError(f"database error: {text}")
