"""A database from before search: upgraded, then indexed in batches by the first search."""

from __future__ import annotations

from pathlib import Path

from alembic import command

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.persistence import search as search_index
from desktop_agent.persistence.db import Database, DbSettings
from tests.helpers.journal import write_long_run

STEPS = 1200


def _back_to_0003(path: Path) -> None:
    """The database as the release before search left it (its steps kept)."""
    db = Database(DbSettings.for_path(path), migrate=False)
    try:
        with db.writer.connect() as conn:
            command.downgrade(db._alembic_config(conn), "0003")
            conn.commit()
        with db.reader.connect() as conn:
            assert db.current_revision(conn) == "0003"
            names = conn.exec_driver_sql("SELECT name FROM sqlite_master").scalars().all()
            assert not [n for n in names if str(n).startswith("search")]
    finally:
        db.dispose()


def test_runs_recorded_before_the_upgrade_are_found(tmp_path: Path) -> None:
    path = tmp_path / "data" / "agent.db"
    Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
    client = Client(path)
    run = client.start_run("Chart the heron sightings", model="demo")
    write_long_run(client, run.id, STEPS)
    client.close()
    _back_to_0003(path)

    client = Client(path)  # upgrades to 0004: empty index
    try:
        with client.store.db.read() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM search_docs").scalar() == 0
        # The backfill, in transactions of at most 100 steps.
        assert search_index.catch_up(client.store.db, batch_steps=100) >= STEPS - 1
        assert {h.kind for h in client.search("heron")} == {"goal"}
        assert [h.seq for h in client.search('"part 1111"')] == [1111]
    finally:
        client.close()


def test_catch_up_indexes_only_what_is_new(client: Client) -> None:
    run = client.start_run("Count the otters", model="demo")
    write_long_run(client, run.id, 30)
    assert search_index.catch_up(client.store.db) >= 29
    assert search_index.catch_up(client.store.db) <= 1  # at most the open approval, again
    assert [h.seq for h in client.search('"part 21"')] == [21]
