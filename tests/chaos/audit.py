"""Who wrote what, and whether they held the run: SQLite triggers that audit every write.

A worker that lost its lease (frozen past it, then woken) must not write to the run any
more: not its status, not its journal. Sampling the database from outside cannot tell
who wrote a row, so each worker child installs triggers on its own connections
(:func:`register_writer`) that record, inside the writing transaction itself, each of its
journal writes with its identity and the run's lease owner at that instant, in a table
the test creates (:func:`install`).

The triggers watch what an engine writes while it executes a run (status and progress of
the run, steps, applied commands, approvals); lease bookkeeping (claim, heartbeat, release)
is not audited.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

_NOW = "((julianday('now') - 2440587.5) * 86400.0)"

_TABLE = """
CREATE TABLE IF NOT EXISTS audit_writes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    what TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq INTEGER,
    old_status TEXT,
    new_status TEXT,
    writer TEXT,
    owner TEXT,
    at REAL NOT NULL
)
"""

_INSERT = "INSERT INTO audit_writes (what, run_id, seq, old_status, new_status, writer, owner, at)"
_OWNER = "(SELECT lease_owner FROM runs WHERE id = NEW.run_id)"

_TRIGGERS = {
    "audit_run_status": f"""AFTER UPDATE OF status ON main.runs BEGIN {_INSERT}
        VALUES ('status', NEW.id, NEW.last_seq, OLD.status, NEW.status, audit_writer(),
                NEW.lease_owner, {_NOW}); END""",
    "audit_run_commit": f"""AFTER UPDATE OF last_seq ON main.runs BEGIN {_INSERT}
        VALUES ('commit', NEW.id, NEW.last_seq, OLD.status, NEW.status, audit_writer(),
                NEW.lease_owner, {_NOW}); END""",
    "audit_step_insert": f"""AFTER INSERT ON main.steps BEGIN {_INSERT}
        VALUES ('step insert', NEW.run_id, NEW.seq, NULL, NEW.status, audit_writer(),
                {_OWNER}, {_NOW}); END""",
    "audit_step_update": f"""AFTER UPDATE ON main.steps BEGIN {_INSERT}
        VALUES ('step update', NEW.run_id, NEW.seq, OLD.status, NEW.status, audit_writer(),
                {_OWNER}, {_NOW}); END""",
    "audit_command_applied": f"""AFTER UPDATE OF applied_at ON main.commands BEGIN {_INSERT}
        VALUES ('command ' || NEW.kind, NEW.run_id, NEW.id, NULL, NEW.result, audit_writer(),
                {_OWNER}, {_NOW}); END""",
    "audit_approval_update": f"""AFTER UPDATE OF state ON main.approvals BEGIN {_INSERT}
        VALUES ('approval', NEW.run_id, NEW.seq, OLD.state, NEW.state, audit_writer(),
                {_OWNER}, {_NOW}); END""",
}
"""Temporary triggers: they live in one connection and fire only for its writes."""


def register_writer(identity: Callable[[], str]) -> None:
    """Audit every write of this process's SQLite connections, opened from now on.

    Each connection gets ``audit_writer()`` (``identity``: a worker's id) and the audit
    triggers as TEMP triggers, which fire for that connection's writes only: the analyst's
    CLI and the test process, which write commands, are not audited and need nothing.

    Raises:
        sqlite3.OperationalError: from a connection opened before the database has its
            tables (the audit would silently miss its writes).
    """

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        if not isinstance(dbapi_conn, sqlite3.Connection):
            return
        dbapi_conn.create_function("audit_writer", 0, identity)
        for name, body in _TRIGGERS.items():
            dbapi_conn.execute(f"CREATE TEMP TRIGGER IF NOT EXISTS {name} {body}")

    event.listen(Engine, "connect", on_connect)


def install(db: Path) -> None:
    """Create the audit table in the (already migrated) database."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        conn.execute(_TABLE)
        conn.commit()
    finally:
        conn.close()


@dataclass(frozen=True)
class Write:
    """One audited write.

    Attributes:
        what: ``status``, ``commit``, ``step insert``, ``step update``, ``command KIND``
            or ``approval``.
        run_id: the run written to.
        seq: the step (or command id, for commands; the run's last step for the others).
        old_status, new_status: before and after (a command's result as new_status).
        writer: ``audit_writer()`` of the writing connection (a worker's id).
        owner: the run's lease owner when the row was written.
        at: when (seconds since the epoch, SQLite's clock).
    """

    id: int
    what: str
    run_id: str
    seq: int | None
    old_status: str | None
    new_status: str | None
    writer: str | None
    owner: str | None
    at: float

    @property
    def by_non_holder(self) -> bool:
        """Written by a worker that did not hold the run's lease at that instant."""
        return self.writer is not None and self.writer != self.owner

    def describe(self) -> str:
        """One line for a failure message."""
        change = f"{self.old_status} -> {self.new_status}"
        return (
            f"#{self.id} {self.what} run {self.run_id} seq {self.seq} ({change}) "
            f"by {self.writer} while the lease was held by {self.owner}"
        )


def writes(db: Path) -> list[Write]:
    """Every audited write, in the order they were made."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute(
            "SELECT id, what, run_id, seq, old_status, new_status, writer, owner, at "
            "FROM audit_writes ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    return [Write(*row) for row in rows]


@dataclass(frozen=True)
class Event:
    """An event the engine recorded on a run (``run_events``, from the fencing work).

    Attributes:
        worker: the worker that recorded it (its ``data``), if it says.
    """

    run_id: str
    seq: int | None
    kind: str
    message: str
    worker: str | None


def events(db: Path) -> list[Event] | None:
    """Every run event, oldest first; None when the database has no events table."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        has = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_events'"
        ).fetchone()
        if not has:
            return None
        rows = conn.execute(
            "SELECT run_id, seq, kind, message, data FROM run_events ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    out = []
    for run_id, seq, kind, message, data in rows:
        worker = None
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            worker = json.loads(data or "{}").get("worker")
        out.append(Event(run_id, seq, kind, message, worker))
    return out
