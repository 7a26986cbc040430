"""Search: the searchable text of runs, kept after archiving, and its FTS5 index.

``search_docs`` holds the text of each step, goal and approval (redacted);
``search_runs`` what search filters on per run and how far the run is indexed. On SQLite,
``search_fts`` is an FTS5 index over ``search_docs.body`` (external content: the text is
stored once, in ``search_docs``), kept in step with it by triggers. On other databases the
two tables exist but no index yet: search says it needs SQLite.

Nothing is filled here: the first search indexes every run in short transactions
(:func:`desktop_agent.persistence.search.catch_up`), so a large journal never holds the
write lock for the whole upgrade.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

FTS_DDL = (
    "CREATE VIRTUAL TABLE search_fts USING fts5(body, content='search_docs', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_fts(rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER search_docs_ad AFTER DELETE ON search_docs BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, body) VALUES ('delete', old.id, old.body); END",
)
"""The index and the triggers that keep it in step with ``search_docs`` (never updated:
a changed document is deleted and inserted again)."""


def upgrade() -> None:
    """Create the search tables, and the FTS5 index on SQLite."""
    op.create_table(
        "search_docs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False, server_default=""),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
    )
    op.create_index("ix_search_docs_run_id_seq", "search_docs", ["run_id", "seq"])
    op.create_table(
        "search_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("goal", sa.Text(), nullable=False, server_default=""),
        sa.Column("title", sa.Text(), nullable=False, server_default=""),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("model", sa.Text(), nullable=False, server_default=""),
        sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"),
        sa.Column("schedule_id", sa.String(64)),
        sa.Column("batch_id", sa.String(64)),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("indexed_seq", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("seen_updated_at", sa.Float(), nullable=False, server_default="0"),
        sa.Column("archived", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    if op.get_bind().dialect.name == "sqlite":
        for ddl in FTS_DDL:
            op.execute(ddl)


def downgrade() -> None:
    """Drop the index and the search tables."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS search_fts")
    op.drop_table("search_runs")
    op.drop_index("ix_search_docs_run_id_seq", "search_docs")
    op.drop_table("search_docs")
