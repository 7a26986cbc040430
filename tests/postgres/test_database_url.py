"""``--db`` and ``DESKTOP_AGENT_DB`` take a PostgreSQL URL: the CLI, its worker, the keyring.

A URL stands for a local folder of its own (settings, logs, archives) holding the URL,
never a password, so a worker started with ``--db`` on that folder finds the server.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import keyring
import psycopg
import pytest

from desktop_agent import config
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError, StorageError
from tests.helpers import postgres

pytestmark = pytest.mark.skipif(
    postgres.unavailable() is not None, reason=str(postgres.unavailable())
)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def database() -> Iterator[str]:
    """An empty database on the test process's server; its name."""
    server = postgres.shared_server()
    name = server.create_database()
    yield name
    server.drop_database(name)


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's data folder, in the test's folder."""
    home = tmp_path / "data-home"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        cwd=REPO,
    )


def steps_on_server(database: str, run_id: str) -> int:
    with psycopg.connect(postgres.shared_server().dsn(database)) as conn:
        row = conn.execute("SELECT count(*) FROM steps WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_demo_run_on_a_server_url_completes_through_its_own_worker(
    database: str, data_home: Path, tmp_path: Path
) -> None:
    url = postgres.shared_server().url(database).replace("postgresql+psycopg", "postgresql")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("Cobalt prices rose in Q3.\n")
    done = cli("--db", url, "run", "Summarise the notes", "--model", "demo", "--workspace",
               str(ws), "--yes", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = cli("runs", "--json", env={"DESKTOP_AGENT_DB": url})
    assert listed.returncode == 0, listed.stderr
    (run,) = __import__("json").loads(listed.stdout)
    assert run["status"] == "completed"
    assert steps_on_server(database, run["id"]) == run["steps"] > 5  # in the server's tables
    (folder,) = (data_home / "desktop-agent" / "servers").iterdir()
    pointer = folder / "database.url"
    assert pointer.read_text().strip() == postgres.shared_server().url(database)
    assert stat.S_IMODE(pointer.stat().st_mode) == 0o600
    assert not (folder / config.DB_FILE).exists()  # no SQLite file beside it
    assert (folder / "logs").is_dir()  # the worker's log is local


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://ana:hunter2@db.local/agents", "keyring set desktop-agent-database"),
        ("mysql://ana@db.local/agents", "must be PostgreSQL ones"),
        ("postgresql://ana@db.local/", "must name a host and a database"),
    ],
)
def test_a_url_that_cannot_be_used_is_one_line_and_exit_2(
    url: str, says: str, data_home: Path
) -> None:
    result = cli("--db", url, "runs")
    assert result.returncode == 2
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "hunter2" not in result.stderr
    assert not (data_home / "desktop-agent" / "servers").exists()  # nothing written


def test_a_server_that_is_down_is_one_line(data_home: Path) -> None:
    result = cli("--db", "postgresql://ana@127.0.0.1:1/agents", "runs")
    assert result.returncode == 2
    assert "cannot open the database" in result.stderr and "Connection refused" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_password_comes_from_the_keyring(
    database: str, data_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    server = postgres.shared_server()
    server.add_password_user("pw_analyst", "s3cret-pw")
    url = f"postgresql://pw_analyst@127.0.0.1:{server.port}/{database}"
    path = config.resolve_db_path(url)
    with pytest.raises(StorageError, match="no password supplied"):
        Client(path)
    keyring.set_password(
        "desktop-agent-database", f"pw_analyst@127.0.0.1:{server.port}/{database}", "s3cret-pw"
    )
    client = Client(path)
    try:
        run = client.start_run("Summarise", model="demo")
        assert client.run(run.id).status == RunStatus.QUEUED
    finally:
        client.close()
    assert "s3cret-pw" not in (path.parent / "database.url").read_text()


def test_resolve_refuses_before_touching_anything(data_home: Path) -> None:
    with pytest.raises(InvalidInputError, match="not a database URL"):
        config.resolve_db_path("post gres://db.local/agents")
    assert not data_home.exists()
