"""The schema is declared once (``persistence/tables.py``) and the migrations agree with it.

A fresh database is migrated with the app's own Alembic migrations, then Alembic's
autogenerate compares it with the declaration: types, nullability, server defaults,
indexes, keys. Any difference (a column declared but never migrated, a default the users'
databases do not have) fails here, not in a user's database.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection

from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.tables import metadata


def _plain(default: str | None) -> str | None:
    """A server default as SQL text, without the parentheses and quotes around it.

    Alembic's own comparison on SQLite takes the empty string's ``''`` for a value other
    than the declared ``""``; this one reads both the same way and nothing else.
    """
    if default is None:
        return None
    text = str(default).strip()
    text = re.sub(r"^\((.*)\)$", r"\1", text)
    return re.sub(r"^'(.*)'$", r"\1", text)


def _defaults_differ(
    _context: Any,
    _inspected_column: Any,
    _metadata_column: Any,
    inspected_default: str | None,
    _metadata_default: Any,
    rendered_metadata_default: str | None,
) -> bool:
    return _plain(inspected_default) != _plain(rendered_metadata_default)


def _virtual_tables(conn: Connection) -> set[str]:
    """SQLite virtual tables (the FTS5 search index) and the shadow tables they own.

    They are SQLite's implementation of one ``CREATE VIRTUAL TABLE`` statement, not Core
    tables: the declaration cannot hold them, and their own module defines their columns.
    A shadow table is named after its virtual table (``search_fts_data``, ...).
    """
    found = conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    )
    virtual = {str(name) for (name,) in found}
    every = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {
        str(name)
        for (name,) in every
        if name in virtual or any(str(name).startswith(v + "_") for v in virtual)
    }


def _differences(path: Path) -> list[Any]:
    db = Database(DbSettings.for_path(path))  # migrated to the newest revision
    try:
        with db.writer.connect() as conn:
            virtual = _virtual_tables(conn)

            def declared_kind(name: str | None, type_: str, _parents: Any) -> bool:
                return not (type_ == "table" and name in virtual)

            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "compare_server_default": _defaults_differ,
                    "include_name": declared_kind,
                },
            )
            return list(compare_metadata(context, metadata))
    finally:
        db.dispose()


def test_a_freshly_migrated_database_is_exactly_the_declaration(tmp_path: Path) -> None:
    assert _differences(tmp_path / "fresh.db") == []


def test_every_table_of_the_migrations_is_declared(tmp_path: Path) -> None:
    db = Database(DbSettings.for_path(tmp_path / "fresh.db"))
    try:
        with db.reader.connect() as conn:
            migrated = set(MigrationContext.configure(conn).impl.dialect.get_table_names(conn))
            virtual = _virtual_tables(conn)
    finally:
        db.dispose()
    assert "search_fts" in virtual
    assert migrated - {"alembic_version"} - virtual == set(metadata.tables)


def test_the_revisions_read_from_file_names_are_alembics() -> None:
    """Opening a database reads revisions from the migrations' file names (no Alembic)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from desktop_agent.persistence.db import MIGRATIONS, head_revision, known_revisions

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    script = ScriptDirectory.from_config(cfg)
    assert known_revisions() == tuple(sorted(s.revision for s in script.walk_revisions()))
    assert head_revision() == script.get_current_head()


def test_opening_an_up_to_date_database_imports_no_alembic(tmp_path: Path) -> None:
    import subprocess
    import sys

    from desktop_agent.persistence.db import Database, DbSettings

    path = tmp_path / "d.db"
    Database(DbSettings.for_path(path)).dispose()  # created and migrated here
    code = (
        "import sys\n"
        "from desktop_agent.persistence.db import Database, DbSettings\n"
        "Database(DbSettings.for_path(sys.argv[1])).dispose()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
