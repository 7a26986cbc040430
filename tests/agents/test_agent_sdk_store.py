"""The Agent SDK's session store over the journal's database, on SQLite and PostgreSQL.

The SDK ships the conformance suite every ``SessionStore`` must pass; it runs here against
:class:`~desktop_agent.persistence.sdk_sessions.JournalSessionStore` on both databases,
each contract on a database of its own. What the suite leaves out is checked after it: an
entry appended twice (the SDK retries a failed batch) is kept once, across store objects
(another worker) too, and a session is read back whole by another store.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from claude_agent_sdk import SessionStore
from claude_agent_sdk.testing import run_session_store_conformance

from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.sdk_sessions import JournalSessionStore
from tests.helpers import postgres

Opener = Callable[[], JournalSessionStore]


@pytest.fixture(params=postgres.BACKENDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Makes stores, each on a fresh database of the backend (all disposed at the end)."""
    backend = str(request.param)
    if backend == "postgresql" and postgres.unavailable():
        pytest.skip(str(postgres.unavailable()))
    made: list[Database] = []
    dropped: list[str] = []
    numbers = itertools.count()

    def fresh() -> JournalSessionStore:
        if backend == "postgresql":
            server = postgres.shared_server()
            name = server.create_database(migrated=True)
            dropped.append(name)
            settings = DbSettings(server.url(name))
        else:
            settings = DbSettings.for_path(tmp_path / f"db{next(numbers)}" / "desktop-agent.db")
        db = Database(settings)
        made.append(db)
        return JournalSessionStore(db)

    yield fresh
    for db in made:
        db.dispose()
    for name in dropped:
        postgres.shared_server().drop_database(name)


def test_the_store_passes_the_sdks_conformance_suite(open_store: Opener) -> None:
    # A structural store: the protocol's optional methods it leaves out are not there.
    make = cast("Callable[[], SessionStore]", open_store)
    anyio.run(run_session_store_conformance, make)


KEY = {"project_key": "-work-ws", "session_id": "5eb5a7b8-ceec-427f-85e1-f645fa9e3d51"}


def _line(uuid: str | None, text: str) -> dict[str, Any]:
    line: dict[str, Any] = {"type": "user", "message": {"role": "user", "content": text}}
    if uuid is not None:
        line["uuid"] = uuid
    return line


def test_an_entry_sent_again_is_kept_once_by_any_store_of_the_database(
    open_store: Opener,
) -> None:
    store = open_store()
    other = JournalSessionStore(store.db)  # another worker's store on the same database
    first = [_line("u1", "a"), _line(None, "title"), _line("u2", "b")]
    anyio.run(store.append, KEY, first)
    again = [_line("u2", "b"), _line("u3", "c"), _line("u3", "c"), _line(None, "title")]
    anyio.run(other.append, KEY, again)
    loaded = anyio.run(other.load, KEY)
    assert loaded == [
        _line("u1", "a"),
        _line(None, "title"),
        _line("u2", "b"),
        _line("u3", "c"),
        _line(None, "title"),  # no uuid: never taken for a duplicate
    ]
    sub = {**KEY, "subpath": "subagents/agent-1"}
    anyio.run(store.append, sub, [_line("u1", "same uuid, other transcript")])
    assert anyio.run(store.load, sub) == [_line("u1", "same uuid, other transcript")]
    assert [s["session_id"] for s in anyio.run(store.list_sessions, "-work-ws")] == [
        KEY["session_id"]
    ]
