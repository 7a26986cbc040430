"""Automatic backups: before migrations, on a schedule, consistent under writes, restorable.

Real SQLite files throughout; the backup is SQLite's online backup API, checked with
``PRAGMA quick_check`` before it is kept.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from alembic import command

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain.errors import StorageError
from desktop_agent.persistence import backup
from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.conftest import MakeExecutor
from tests.helpers.polling import wait_worker


def _revision(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("SELECT version_num FROM alembic_version").fetchone()[0])
    finally:
        conn.close()


def test_a_backup_is_made_before_a_migration_and_holds_the_old_schema(tmp_path: Path) -> None:
    path = tmp_path / "data" / "desktop-agent.db"
    old = Database(DbSettings.for_path(path), migrate=False)
    with old.writer.connect() as conn:  # the database as the previous release left it
        command.upgrade(old._alembic_config(conn), "0001")
        conn.commit()
    old.dispose()
    assert _revision(path) == "0001" and backup.list_backups(path) == []

    Database(DbSettings.for_path(path)).dispose()  # this release opens it: migrates

    (made,) = backup.list_backups(path)
    assert made.reason == "pre-migration"
    assert _revision(made.path) == "0001" and _revision(path) != "0001"
    assert backup.check_file(made.path) == "ok"
    assert stat.S_IMODE(made.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(made.path.parent.stat().st_mode) == 0o700
    Database(DbSettings.for_path(path)).dispose()  # up to date now: no second backup
    assert len(backup.list_backups(path)) == 1


def test_backup_under_concurrent_writes_is_consistent(client: Client) -> None:
    path = client.db_path
    with client.store.db.write() as conn:
        conn.exec_driver_sql("CREATE TABLE pairs (a INTEGER, b INTEGER)")
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            with client.store.db.write() as conn:  # two rows per commit: a backup sees both or none
                conn.exec_driver_sql(f"INSERT INTO pairs VALUES ({n}, 0), ({n}, 1)")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        made = [backup.make_backup(path, reason="manual", keep=10) for _ in range(5)]
    finally:
        stop.set()
        thread.join()
    for info in made:
        copy = sqlite3.connect(info.path)
        try:
            count, pairs = copy.execute("SELECT count(*), count(DISTINCT a) FROM pairs").fetchone()
        finally:
            copy.close()
        assert count == 2 * pairs
        assert backup.check_file(info.path) == "ok"


def test_schedule_keeps_the_newest_and_skips_when_recent(client: Client) -> None:
    path = client.db_path
    t = [1_800_000_000.0]
    for _ in range(7):
        assert backup.backup_if_due(path, every_s=3600, keep=3, clock=lambda: t[0]) is not None
        assert backup.backup_if_due(path, every_s=3600, keep=3, clock=lambda: t[0] + 60) is None
        t[0] += 3601
    kept = backup.list_backups(path)
    assert len(kept) == 3 and all(b.reason == "scheduled" for b in kept)
    assert kept[0].created_at > kept[1].created_at > kept[2].created_at


def test_worker_makes_the_scheduled_backup(client: Client, make_executor: MakeExecutor) -> None:
    assert backup.list_backups(client.db_path) == []
    worker = Worker(
        client.store, make_executor(), WorkerConfig(until_idle=True, backup_every_s=3600)
    )
    worker.run()
    (made,) = backup.list_backups(client.db_path)
    assert made.reason == "scheduled" and backup.check_file(made.path) == "ok"


def test_restore_skips_a_damaged_backup_and_keeps_the_damaged_database(client: Client) -> None:
    path = client.db_path
    client.start_run("Kept in the backup", model="demo")
    good = backup.make_backup(path, reason="manual")
    client.start_run("After the backup", model="demo")
    bad = backup.make_backup(path, reason="manual")
    with open(bad.path, "r+b") as f:  # the newest backup is damaged too
        f.seek(4096)
        f.write(os.urandom(4096 * 4))
    client.close()
    with open(path, "r+b") as f:
        f.seek(8192)
        f.write(os.urandom(8192))

    done = backup.restore(path)
    assert done.backup.path == good.path
    assert done.damaged is not None and done.damaged.exists()
    reopened = Client(path, Settings())
    try:
        assert [r.goal for r in reopened.runs()] == ["Kept in the backup"]
    finally:
        reopened.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_restore_refuses_without_a_sound_backup(tmp_path: Path) -> None:
    path = tmp_path / "d" / "desktop-agent.db"
    Database(DbSettings.for_path(path)).dispose()
    with pytest.raises(StorageError, match="no automatic backup"):
        backup.restore(path)
    with pytest.raises(StorageError, match=r"no backup nope\.db"):
        backup.restore(path, Path("nope.db"))


def test_restore_is_refused_while_a_worker_uses_the_database(
    client: Client, make_executor: MakeExecutor, capsys: pytest.CaptureFixture[str]
) -> None:
    backup.make_backup(client.db_path)
    worker = Worker(client.store, make_executor(), WorkerConfig(poll_s=0.02, backup_every_s=0))
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_worker(client)
        code = cli.main(["--db", str(client.db_path), "db", "restore", "--yes"])
    finally:
        worker.stop()
        thread.join(timeout=20)
    assert code == 2
    err = capsys.readouterr().err
    assert "is using the database: stop it" in err and len(err.strip().splitlines()) == 1
