"""A new SQLite database at the newest schema, copied instead of migrated.

Opening an empty database file migrates it (every Alembic revision, in one transaction):
about a tenth of a second of CPU, and more of waiting on the disk, for each test that
starts from a fresh database. The first call in a process migrates one database the way the
app does (``Database`` on an empty file) and keeps it, its write-ahead log folded back into
the file; every call copies that file to where the test's database goes, with the folder
and file modes the app gives a database it creates (0700 and 0600). Opening the copy finds
the schema up to date and migrates nothing; everything else about opening (settings, the
folder's other files) happens as for a migrated new database.

Only for a path where no database exists yet: the copy would replace one.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

_template: Path | None = None


def _migrated_template() -> Path:
    """This process's migrated database (made on first use, removed at exit)."""
    global _template
    if _template is None:
        from desktop_agent.persistence.db import Database, DbSettings

        folder = Path(tempfile.mkdtemp(prefix="desktop-agent-template-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "template.db"
        Database(DbSettings.for_path(path)).dispose()  # migrates the empty file
        conn = sqlite3.connect(path)
        try:  # everything into the main file: the copy needs no -wal beside it
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
        _template = path
    return _template


def migrated_database(db_path: Path) -> Path:
    """Put a database at the newest schema at ``db_path`` (nothing there yet); return it."""
    if db_path.exists():
        raise FileExistsError(f"{db_path} exists: a migrated copy would replace it")
    template = _migrated_template()
    folder = db_path.parent
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700)
    shutil.copyfile(template, db_path)
    os.chmod(db_path, 0o600)
    return db_path
