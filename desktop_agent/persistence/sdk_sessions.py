"""Claude Agent SDK sessions kept in the journal's database: the SDK's ``SessionStore``.

The Agent SDK mirrors every line of a session's transcript to a *session store* and, to
resume a session, loads it back into a fresh folder for the Claude Code CLI it drives
(``ClaudeAgentOptions(session_store=..., resume=SESSION_ID)``). :class:`JournalSessionStore`
is that store over ``sdk_session_entries`` (migration 0014), on SQLite or PostgreSQL alike:
a session a worker began can be resumed by any worker of the database, after a crash too,
with nothing read from the first worker's disk.

It implements the protocol structurally (the SDK is not imported here): ``append`` (in
call order; idempotent by the entry's ``uuid``), ``load``, and the optional
``list_sessions``, ``delete`` and ``list_subkeys``. ``list_session_summaries`` is left out:
the SDK then lists sessions from ``list_sessions`` and ``load``. The SDK's own conformance
suite runs against it on both databases (``tests/agents/test_agent_sdk_store.py``).

A script uses it as any session store::

    store = JournalSessionStore(Database(DbSettings.for_path(db_path)))
    options = ClaudeAgentOptions(session_store=store, resume=session_id)

Its coroutines run their statements in a thread (``anyio.to_thread``), so a write that
waits for the database never holds up the SDK's event loop; the ``*_now`` methods are the
same reads for callers outside one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import delete, func, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from desktop_agent.persistence.db import Database
from desktop_agent.persistence.tables import sdk_session_entries

_e = sdk_session_entries.c
T = TypeVar("T")

Key = Mapping[str, Any]
"""A ``SessionKey``: ``project_key``, ``session_id`` and, for a sub-agent's transcript,
``subpath``."""


def _parts(key: Key) -> tuple[str, str, str]:
    return str(key["project_key"]), str(key["session_id"]), str(key.get("subpath") or "")


class JournalSessionStore:
    """The Agent SDK's ``SessionStore`` over the journal's database (see the module).

    Args:
        db: the database (the client's or the worker's).
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._last_ms = 0

    # ------------------------------------------------------------------ the protocol

    async def append(self, key: Key, entries: Sequence[Mapping[str, Any]]) -> None:
        """Keep ``entries`` after the key's earlier ones; a ``uuid`` already kept is skipped."""
        if entries:
            await _in_thread(self.append_now, key, entries)

    async def load(self, key: Key) -> list[dict[str, Any]] | None:
        """The key's entries in append order; None for a key never written."""
        found = await _in_thread(self.entries_now, key)
        return found or None

    async def list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        """The project's sessions (main transcripts) with their last write, epoch ms."""
        return await _in_thread(self.sessions_now, project_key)

    async def delete(self, key: Key) -> None:
        """Delete a transcript; a main transcript takes its sub-agents' with it."""
        await _in_thread(self.delete_now, key)

    async def list_subkeys(self, key: Key) -> list[str]:
        """The subpaths (sub-agents' transcripts) kept under a session."""
        return await _in_thread(self.subkeys_now, key)

    # ------------------------------------------------------------------ the statements

    def append_now(self, key: Key, entries: Sequence[Mapping[str, Any]]) -> None:
        """:meth:`append`, in the caller's thread: one transaction."""
        project, session, subpath = _parts(key)
        now = self._now_ms()
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for entry in entries:
            raw = entry.get("uuid")
            uuid = raw if isinstance(raw, str) and raw else None
            if uuid is not None:
                if uuid in seen:
                    continue
                seen.add(uuid)
            rows.append(
                {
                    "project_key": project,
                    "session_id": session,
                    "subpath": subpath,
                    "uuid": uuid,
                    "entry": json.dumps(entry, ensure_ascii=False),
                    "mtime_ms": now,
                }
            )
        if not rows:
            return
        with self.db.write() as conn:
            for row in rows:  # one by one: the ids keep the call's order
                conn.execute(_insert_once(conn), row)

    def entries_now(self, key: Key) -> list[dict[str, Any]]:
        """The key's entries in append order ([] for a key never written)."""
        project, session, subpath = _parts(key)
        query = (
            select(_e.entry)
            .where(_e.project_key == project, _e.session_id == session, _e.subpath == subpath)
            .order_by(_e.id)
        )
        with self.db.read() as conn:
            return [json.loads(str(text)) for (text,) in conn.execute(query)]

    def sessions_now(self, project_key: str) -> list[dict[str, Any]]:
        """:meth:`list_sessions`, in the caller's thread."""
        query = (
            select(_e.session_id, func.max(_e.mtime_ms))
            .where(_e.project_key == project_key, _e.subpath == "")
            .group_by(_e.session_id)
        )
        with self.db.read() as conn:
            return [
                {"session_id": str(session), "mtime": int(mtime)}
                for session, mtime in conn.execute(query)
            ]

    def delete_now(self, key: Key) -> None:
        """:meth:`delete`, in the caller's thread."""
        project, session, subpath = _parts(key)
        query = delete(sdk_session_entries).where(
            _e.project_key == project, _e.session_id == session
        )
        if subpath:
            query = query.where(_e.subpath == subpath)
        with self.db.write() as conn:
            conn.execute(query)

    def subkeys_now(self, key: Key) -> list[str]:
        """:meth:`list_subkeys`, in the caller's thread."""
        project, session, _ = _parts(key)
        query = (
            select(_e.subpath)
            .where(_e.project_key == project, _e.session_id == session, _e.subpath != "")
            .group_by(_e.subpath)
            .order_by(_e.subpath)
        )
        with self.db.read() as conn:
            return [str(subpath) for (subpath,) in conn.execute(query)]

    def _now_ms(self) -> int:
        """The storage time of a write, epoch ms, increasing within this process."""
        now = max(int(time.time() * 1000), self._last_ms + 1)
        self._last_ms = now
        return now


def _insert_once(conn: Connection) -> Any:
    """An insert that keeps an entry whose ``uuid`` its session already holds once."""
    if conn.dialect.name == "postgresql":
        return pg_insert(sdk_session_entries).on_conflict_do_nothing()
    if conn.dialect.name == "sqlite":
        return sqlite_insert(sdk_session_entries).on_conflict_do_nothing()
    return insert(sdk_session_entries)  # pragma: no cover - the two databases above


async def _in_thread(fn: Callable[..., T], *args: object) -> T:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(fn, *args)
