"""On a real PostgreSQL server, the migrations build exactly the declared schema too.

The same Alembic scripts as SQLite's, from an empty database and from the databases of
earlier releases (holding a run, upgraded and downgraded again), compared with the
declaration by Alembic's autogenerate (types, nullability, server defaults, indexes, keys).
Each database's full-text index is its own (SQLite's FTS5 tables, PostgreSQL's GIN index
of migration 0008), outside the declaration.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from desktop_agent.domain import RunStatus
from desktop_agent.persistence import search
from desktop_agent.persistence.db import MIGRATIONS, Database, DbSettings
from desktop_agent.persistence.store import SqlStore
from desktop_agent.persistence.tables import metadata
from tests.helpers import postgres
from tests.persistence.test_schema import _plain
from tests.store.runs import new_run

pytestmark = pytest.mark.skipif(
    postgres.unavailable() is not None, reason=str(postgres.unavailable())
)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """An empty database of its own on the test process's server."""
    server = postgres.shared_server()
    name = server.create_database()
    yield server.url(name)
    server.drop_database(name)


def _defaults_differ(
    _context: Any,
    _inspected_column: Any,
    _metadata_column: Any,
    inspected_default: str | None,
    _metadata_default: Any,
    rendered_metadata_default: str | None,
) -> bool:
    """Defaults compared as values: PostgreSQL reflects ``''`` as ``''::text``."""
    inspected = None if inspected_default is None else re.sub(r"::[a-z ]+$", "", inspected_default)
    return _plain(inspected) != _plain(rendered_metadata_default)


def _declared(name: str | None, type_: str, _parents: Any) -> bool:
    """Everything but the search's words and their index (PostgreSQL's alone: see 0008)."""
    return (type_, name) not in {("index", search.PG_INDEX), ("column", "body_tsv")}


def _differences(db: Database) -> list[Any]:
    with db.writer.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "compare_server_default": _defaults_differ,
                "include_name": _declared,
            },
        )
        return list(compare_metadata(context, metadata))


def test_a_freshly_migrated_postgresql_database_is_exactly_the_declaration(pg_url: str) -> None:
    db = Database(DbSettings(pg_url))
    try:
        assert _differences(db) == []
        tables = set(sa.inspect(db.reader).get_table_names())
        assert tables - {"alembic_version"} == set(metadata.tables)
    finally:
        db.dispose()


def test_opening_again_keeps_the_data_and_migrates_nothing(pg_url: str) -> None:
    first = Database(DbSettings(pg_url))
    store = SqlStore(first)
    new_run(store, "run-1")
    with first.reader.connect() as conn:
        revision = MigrationContext.configure(conn).get_current_revision()
    first.dispose()

    again = Database(DbSettings(pg_url))
    try:
        with again.reader.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == revision
        run = SqlStore(again).get_run("run-1")
        assert run.status == RunStatus.QUEUED and run.goal == "Summarise the sources"
    finally:
        again.dispose()


def _alembic(conn: sa.Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


@pytest.mark.parametrize("previous", ["0004", "0005"])
def test_a_previous_release_database_with_runs_upgrades_to_the_declaration_and_back(
    pg_url: str, previous: str
) -> None:
    """A database an older release made, holding a run and its steps, opened by this one."""
    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as conn:
            command.upgrade(_alembic(conn), previous)
            conn.exec_driver_sql(
                "INSERT INTO runs (id, goal, status, spec, definition_hash, workspace, "
                "created_at, updated_at, last_seq, lease_owner, lease_expires_at, lease_epoch) "
                "VALUES ('r1', 'old goal', 'running', '{\"model\": \"demo\"}', 'h', '/w', "
                "1, 2, 1, 'old-worker', 5, 3)"
            )
            conn.exec_driver_sql(
                "INSERT INTO steps (run_id, seq, kind, name, status, input, started_at) "
                "VALUES ('r1', 1, 'model_call', 'claude', 'completed', '{}', 1)"
            )
        head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
        db = Database(DbSettings(pg_url))  # the app opens it: migrated to the newest
        try:
            with db.read() as conn:
                assert db.current_revision(conn) == head
            assert _differences(db) == []
            store = SqlStore(db)
            run = store.get_run("r1")
            assert (run.goal, run.last_seq, run.lease_owner) == ("old goal", 1, "old-worker")
            assert [s.seq for s in store.load_steps("r1")] == [1]
            lease = store.claim_run("r1", "new-worker", 10.0, 30.0)  # the old lease expired
            assert lease is not None and lease.epoch == 4  # fencing goes on from the old epoch
            assert search.catch_up(db) == 1  # runs from before search are indexed when asked
            found = search.search(db, '"old goal"', search.SearchFilters(), 10)
            assert [(h.run_id, h.kind) for h in found] == [("r1", "goal")]
        finally:
            db.dispose()
        with engine.begin() as conn:
            command.downgrade(_alembic(conn), previous)  # and back, keeping the run
        with engine.connect() as conn:
            row = conn.exec_driver_sql("SELECT goal, lease_owner FROM runs").one()
            assert tuple(row) == ("old goal", "new-worker")
            revision = MigrationContext.configure(conn).get_current_revision()
            assert revision == previous
    finally:
        engine.dispose()


def _alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def test_processes_opening_a_new_database_at_once_all_find_it_migrated(pg_url: str) -> None:
    """A worker and the app (or two machines) open a new database together.

    One migrates, the others wait for it; none fails on the tables the first one created.
    """
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []
    revisions: list[str | None] = []

    def open_it() -> None:
        barrier.wait()
        try:
            db = Database(DbSettings(pg_url))
            try:
                with db.read() as conn:
                    revisions.append(db.current_revision(conn))
            finally:
                db.dispose()
        except BaseException as exc:  # reported below, with the others'
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert revisions == [head] * 4
