"""Search on PostgreSQL: a GIN index over the searchable text.

SQLite's index is FTS5 (migration 0004); PostgreSQL's is a GIN index on
``to_tsvector('simple', translate(body, <ASCII punctuation>, <spaces>))``, which the server
keeps in step with the table itself (:mod:`desktop_agent.persistence.search` queries that
very expression, and says why punctuation is read as spaces). The table was empty on
PostgreSQL until now: the first search indexes what runs recorded.

Nothing changes on SQLite.

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


def upgrade() -> None:
    """Create the GIN index on PostgreSQL."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"CREATE INDEX {INDEX} ON search_docs USING gin (to_tsvector('simple'::regconfig, "
            f"translate(body, {_QUOTED}, '{' ' * len(SEPARATORS)}')))"
        )


def downgrade() -> None:
    """Drop it again."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP INDEX IF EXISTS {INDEX}")
