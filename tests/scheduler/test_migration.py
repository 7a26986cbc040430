"""Migration 0002 from the previous release's database, and back."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from desktop_agent.persistence.db import MIGRATIONS, Database, DbSettings, head_revision

NEW_TABLES = {"schedules", "batches", "batch_items", "watches", "seen_files", "run_alerts"}


def _alembic(conn: sa.Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def _tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def test_a_0001_database_with_runs_upgrades_and_downgrades(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(_alembic(conn), "0001")
        conn.exec_driver_sql(
            "INSERT INTO runs (id, goal, status, spec, definition_hash, workspace, created_at, "
            "updated_at, schedule_id) VALUES ('r1', 'old goal', 'completed', '{}', 'h', '/w', "
            "1, 2, NULL)"
        )
    assert not NEW_TABLES & _tables(engine)

    db = Database(DbSettings.for_path(path))  # the app opens it: migrated to the newest
    try:
        with db.read() as conn:
            assert db.current_revision(conn) == head_revision()
            goal = conn.exec_driver_sql("SELECT goal FROM runs WHERE id = 'r1'").scalar()
        assert goal == "old goal"
        indexes = {i["name"] for i in sa.inspect(db.reader).get_indexes("runs")}
        assert {"ix_runs_schedule_id", "ix_runs_parent_id"} <= indexes
    finally:
        db.dispose()
    assert _tables(engine) >= NEW_TABLES

    with engine.begin() as conn:
        command.downgrade(_alembic(conn), "0001")
    assert not NEW_TABLES & _tables(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM runs").scalar() == 1
    engine.dispose()
