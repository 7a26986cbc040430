"""A worker started while its PostgreSQL server is down waits for it, then works.

``desktop-agent worker`` on a database server that does not answer (restarting, the network
not up yet) must not exit: it says so on stderr, tries again with a growing pause, and
serves the database once the server is back. A SQLite file that cannot be opened is an
error at once (nothing will change by waiting). SIGTERM ends a waiting worker cleanly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus
from tests.helpers import postgres
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[postgres.PgServer]:
    reason = postgres.unavailable()
    if reason is not None:
        pytest.skip(reason)
    own = postgres.start_server()  # its own: this test stops it
    try:
        yield own
    finally:
        own.close()


def _worker(db: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESKTOP_AGENT_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        DESKTOP_AGENT_AUTOSTART_WORKER="0",
        DESKTOP_AGENT_DEMO_DELAY="0.01",
    )
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "desktop_agent", "--db", str(db), "worker"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            cwd=REPO,
        )


def test_a_worker_started_while_the_server_is_down_waits_and_then_runs(
    server: postgres.PgServer, tmp_path: Path
) -> None:
    name = server.create_database()
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "database.url").write_text(server.url(name) + "\n")
    db = folder / "desktop-agent.db"
    settings = Settings(ask_overwrite=False)
    settings.save(db)
    with contextlib.closing(Client(db, settings)) as client:
        run = client.start_run("Summarise", model="demo", placement="any")
    server.stop("immediate")
    log = tmp_path / "worker.log"
    proc = _worker(db, log)
    try:
        wait_until(
            lambda: log.read_text().count("trying again in") >= 2,
            what="the worker to say twice that it waits for the server",
        )
        assert proc.poll() is None, log.read_text()
        assert "connection failed" in log.read_text()
        server.start()
        with contextlib.closing(Client(db, settings)) as client:
            wait_until(
                lambda: client.run(run.id).status == RunStatus.COMPLETED,
                timeout=60,
                what=f"the run to complete once the server is back:\n{log.read_text()}",
            )
            assert any(i.pid == proc.pid for i, _ in client.store.list_workers())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_waiting_worker_ends_cleanly_on_sigterm(
    server: postgres.PgServer, tmp_path: Path
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "database.url").write_text(server.url(server.create_database()) + "\n")
    server.stop("immediate")
    log = tmp_path / "worker.log"
    proc = _worker(folder / "desktop-agent.db", log)
    try:
        wait_until(lambda: "trying again in" in log.read_text(), what="the worker to wait")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
        assert "worker stopped after 0 activations" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_sqlite_file_that_cannot_be_opened_is_an_error_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "desktop-agent.db").write_bytes(b"this is not a database file at all" * 100)
    log = tmp_path / "worker.log"
    proc = _worker(folder / "desktop-agent.db", log)
    try:
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code != 0
    assert "trying again" not in log.read_text()


def test_a_schema_newer_than_this_release_is_an_error_at_once(
    server: postgres.PgServer, tmp_path: Path
) -> None:
    import psycopg

    from desktop_agent.persistence.db import Database, DbSettings

    name = server.create_database()
    Database(DbSettings(server.url(name))).dispose()  # migrated by this release
    with psycopg.connect(server.dsn(name), autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")  # a later release's
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "database.url").write_text(server.url(name) + "\n")
    log = tmp_path / "worker.log"
    proc = _worker(folder / "desktop-agent.db", log)
    try:
        code = proc.wait(60)  # no waiting for a release that will not come
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code != 0
    assert "written by a newer desktop-agent" in log.read_text()
    assert "trying again" not in log.read_text()
