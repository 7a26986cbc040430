"""Migration 0003 (lease epochs, run events) from the previous release's database, and back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

from desktop_agent.domain import RunEventKind
from desktop_agent.persistence.db import MIGRATIONS, Database, DbSettings, head_revision
from desktop_agent.persistence.store import SqlStore
from desktop_agent.persistence.tables import metadata


def _alembic(conn: sa.Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def _columns(engine: sa.Engine, table: str) -> set[str]:
    return {c["name"] for c in sa.inspect(engine).get_columns(table)}


def test_a_0002_database_with_a_claimed_run_upgrades_and_downgrades(tmp_path: Path) -> None:
    path = tmp_path / "previous.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(_alembic(conn), "0002")
        conn.exec_driver_sql(
            "INSERT INTO runs (id, goal, status, spec, definition_hash, workspace, created_at, "
            "updated_at, lease_owner, lease_expires_at) VALUES ('r1', 'old goal', 'running', "
            "'{}', 'h', '/w', 1, 2, 'old-worker', 5)"
        )
    assert "lease_epoch" not in _columns(engine, "runs")

    db = Database(DbSettings.for_path(path))  # the app opens it: migrated to the newest
    try:
        with db.read() as conn:
            assert db.current_revision(conn) == head_revision()
            row = conn.exec_driver_sql("SELECT lease_owner, lease_epoch FROM runs").one()
        assert tuple(row) == ("old-worker", 0)  # a claim of the old release: epoch 0
        store = SqlStore(db)
        lease = store.claim_run("r1", "new-worker", 10.0, 30.0)  # its lease expired at 5
        assert lease is not None and lease.epoch == 1
        store.record_event("r1", RunEventKind.LATE_EFFECT, "late", seq=1)
        assert [e.message for e in store.run_events("r1")] == ["late"]
    finally:
        db.dispose()

    with engine.begin() as conn:
        command.downgrade(_alembic(conn), "0002")
    assert "lease_epoch" not in _columns(engine, "runs")
    assert "run_events" not in sa.inspect(engine).get_table_names()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT goal, lease_owner FROM runs").one() == (
            "old goal",
            "new-worker",
        )
    engine.dispose()


def test_the_tables_agree_with_the_migration(tmp_path: Path) -> None:
    db = Database(DbSettings.for_path(tmp_path / "new.db"))
    try:
        with db.writer.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diffs = compare_metadata(context, metadata)
    finally:
        db.dispose()

    def ours(diff: Any) -> bool:
        text = repr(diff)
        return "run_events" in text or "lease_epoch" in text

    assert [d for d in diffs if ours(d)] == []
