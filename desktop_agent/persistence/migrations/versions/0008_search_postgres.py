"""Search on PostgreSQL: the words of each document, stored and indexed, and its hours.

SQLite's index is FTS5 (migration 0004). On PostgreSQL:

- ``search_docs.body_tsv``, a stored generated column: ``to_tsvector('simple', body)`` with
  ASCII punctuation read as spaces (:mod:`desktop_agent.persistence.search` says why).
  Stored, because a phrase makes the server check every candidate row again: computed
  from the text each time, a phrase of common words took 98 s on a million documents,
  and 0.8 s read from the column (``bench/search_bench.py --scale --postgresql``).
- a GIN index on it, for rare words;
- the trigger that keeps ``search_hours`` (migration 0007), as SQLite's does, so that a
  date window becomes a range of ids there too.

The table was empty on PostgreSQL until now (search was SQLite only): the first search
indexes what runs recorded. Nothing changes on SQLite. The column and the index are not in
the tables' declaration (an expression the declaration would make SQLite create too), as
SQLite's FTS5 table is not.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

INDEX = "ix_search_docs_body_tsv"

SEPARATORS = "!\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~"
"""``search.PG_SEPARATORS`` as this revision wrote it (a revision never changes)."""

_QUOTED = "'" + SEPARATORS.replace("'", "''") + "'"

HOURS_FUNCTION = (
    "CREATE FUNCTION search_docs_hours() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO search_hours(hour, first_id, last_id) "
    "VALUES (CAST(floor(new.at / 3600) AS INTEGER), new.id, new.id) "
    "ON CONFLICT (hour) DO UPDATE SET "
    "first_id = LEAST(search_hours.first_id, excluded.first_id), "
    "last_id = GREATEST(search_hours.last_id, excluded.last_id); "
    "RETURN NULL; END $$"
)
"""Widens the hour's id range to every document inserted for it (as 0007's SQLite trigger;
``floor``: SQLite's ``CAST`` truncates, PostgreSQL's would round)."""


def upgrade() -> None:
    """Add the column, its index and the hours trigger on PostgreSQL."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "ALTER TABLE search_docs ADD COLUMN body_tsv tsvector GENERATED ALWAYS AS "
        f"(to_tsvector('simple'::regconfig, translate(body, {_QUOTED}, "
        f"'{' ' * len(SEPARATORS)}'))) STORED"
    )
    op.execute(f"CREATE INDEX {INDEX} ON search_docs USING gin (body_tsv)")
    op.execute(HOURS_FUNCTION)
    op.execute(  # documents indexed before (none: PostgreSQL had no search until now)
        "INSERT INTO search_hours(hour, first_id, last_id) "
        "SELECT CAST(floor(at / 3600) AS INTEGER), min(id), max(id) FROM search_docs "
        "GROUP BY CAST(floor(at / 3600) AS INTEGER)"
    )
    op.execute(
        "CREATE TRIGGER search_docs_hours AFTER INSERT ON search_docs "
        "FOR EACH ROW EXECUTE FUNCTION search_docs_hours()"
    )


def downgrade() -> None:
    """Drop them again."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS search_docs_hours ON search_docs")
    op.execute("DROP FUNCTION IF EXISTS search_docs_hours()")
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
    op.execute("ALTER TABLE search_docs DROP COLUMN IF EXISTS body_tsv")
