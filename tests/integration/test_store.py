"""The SQLite store: configured on purpose, private, migrated, and honest about bad files."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from desktop_agent.domain.errors import SchemaTooNewError, StorageError
from desktop_agent.persistence.db import Database, DbSettings


def _pragma(db: Database, name: str) -> object:
    with db.read() as conn:
        return conn.exec_driver_sql(f"PRAGMA {name}").scalar()


def test_new_database_is_migrated_private_and_durable(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "nested" / "agent.db"
    db = Database(DbSettings.for_path(path))
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert _pragma(db, "journal_mode") == "wal"
        assert _pragma(db, "synchronous") == 2  # FULL
        assert _pragma(db, "foreign_keys") == 1
        assert _pragma(db, "busy_timeout") == 30000
        with db.read() as conn:
            tables = {
                r[0]
                for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")
            }
            version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        assert {"runs", "steps", "snapshots", "commands", "approvals", "workers"} <= tables
        assert version is not None
        with db.write() as conn:
            conn.exec_driver_sql("INSERT INTO workers VALUES ('w', 'h', 1, 0, 0, 0, NULL)")
        for suffix in ("-wal", "-shm"):
            side = Path(str(path) + suffix)
            if side.exists():
                assert stat.S_IMODE(side.stat().st_mode) & 0o077 == 0
    finally:
        db.dispose()


def test_normal_durability_is_a_setting(tmp_path: Path) -> None:
    db = Database(DbSettings.for_path(tmp_path / "n.db", synchronous="NORMAL"))
    try:
        assert _pragma(db, "synchronous") == 1
    finally:
        db.dispose()
    with pytest.raises(StorageError, match="durability"):
        Database(DbSettings.for_path(tmp_path / "x.db", synchronous="SOMETIMES"))


def test_writers_begin_immediate(tmp_path: Path) -> None:
    db = Database(DbSettings.for_path(tmp_path / "w.db"))
    try:
        with db.write() as conn:
            # Inside BEGIN IMMEDIATE the reserved lock is held before the first write:
            # a second writer connection cannot start.
            other = db.writer.raw_connection()
            try:
                other.execute("PRAGMA busy_timeout=50")
                with pytest.raises(Exception, match="locked"):
                    other.execute("BEGIN IMMEDIATE")
            finally:
                other.close()
            conn.exec_driver_sql("SELECT 1")
    finally:
        db.dispose()


def test_database_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    db = Database(DbSettings.for_path(path))
    with db.write() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999_future'")
    db.dispose()
    with pytest.raises(SchemaTooNewError, match="newer desktop-agent"):
        Database(DbSettings.for_path(path))


def test_corrupt_file_gets_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StorageError, match="not a desktop-agent database"):
        Database(DbSettings.for_path(path))


def test_impossible_location_gets_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(StorageError, match="cannot create the database"):
        Database(DbSettings.for_path(blocker / "sub" / "a.db"))
