"""Opening the database a second time in one process keeps the first connection's locks.

POSIX advisory locks belong to the process and the file: closing any descriptor of the
database file drops every lock the process holds on it, SQLite's own included. A process
that read the file's header with a descriptor of its own while it had the database open
lost the shared lock its connection holds in WAL mode; another process closing its last
connection then believed itself the last user, checkpointed, and deleted the write-ahead
log under the first connection, whose later commits went to a deleted file and were lost.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from desktop_agent.domain.errors import StorageError
from desktop_agent.persistence.db import Database, DbSettings

_OTHER_PROCESS = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("INSERT INTO probe VALUES ('from the other process')")
conn.commit()
conn.close()  # the last connection it thinks: checkpoint, and delete the WAL if alone
"""


def _rows(path: Path) -> list[str]:
    """What a fresh process reads (nothing of this process's caches)."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "print('\\n'.join(r[0] for r in c.execute('SELECT v FROM probe ORDER BY rowid')))",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_a_second_open_in_the_same_process_loses_no_commit(tmp_path: Path) -> None:
    path = tmp_path / "data" / "desktop-agent.db"
    first = Database(DbSettings.for_path(path))
    try:
        with first.write() as conn:
            conn.exec_driver_sql("CREATE TABLE probe (v TEXT)")
            conn.exec_driver_sql("INSERT INTO probe VALUES ('first')")
        assert Path(f"{path}-wal").exists()  # the pooled connection stays open, in WAL mode

        second = Database(DbSettings.for_path(path))  # e.g. a second client in the app
        second.dispose()

        subprocess.run([sys.executable, "-c", _OTHER_PROCESS, str(path)], check=True)
        with first.write() as conn:
            conn.exec_driver_sql("INSERT INTO probe VALUES ('after')")
        assert _rows(path) == ["first", "from", "the", "other", "process", "after"]
    finally:
        first.dispose()


def test_a_file_that_is_not_sqlite_is_still_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 20)
    with pytest.raises(StorageError, match="is not a desktop-agent database"):
        Database(DbSettings.for_path(path))
    assert path.read_text().startswith("these are my notes")  # left as it was
