"""Search by id ranges: the document ids indexed per hour and per run.

A search reads the full-text index newest first and stops after a bound; these let the
date window and the run filters narrow which ids FTS5 reads
(:func:`desktop_agent.persistence.search.search`):

- ``search_hours`` holds, per hour of ``search_docs.at`` (``CAST(at / 3600 AS INTEGER)``),
  the lowest and highest ``search_docs.id`` indexed for it. On SQLite a trigger on
  ``search_docs`` keeps it (documents are inserted and deleted, never updated; a deleted
  document's id stays counted, so the range stays a superset).
- ``search_runs.first_doc_id``/``last_doc_id``: the lowest and highest id indexed for the
  run, kept by the indexer.

The upgrade fills both from the documents already indexed: a pass over ``search_docs``
(under 6 s for a million documents, 2 GB, in ``bench/search_bench.py --scale``). On other
databases the table exists but stays empty, as the index does.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

HOURS_TRIGGER = (
    "CREATE TRIGGER search_docs_hours AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_hours(hour, first_id, last_id) "
    "VALUES (CAST(new.at / 3600 AS INTEGER), new.id, new.id) "
    "ON CONFLICT(hour) DO UPDATE SET first_id = min(first_id, excluded.first_id), "
    "last_id = max(last_id, excluded.last_id); END"
)
"""Widens the hour's id range to every document inserted for it."""

HOURS_FILL = (
    "INSERT INTO search_hours(hour, first_id, last_id) "
    "SELECT CAST(at / 3600 AS INTEGER), min(id), max(id) FROM search_docs "
    "GROUP BY CAST(at / 3600 AS INTEGER)"
)
"""The hours of the documents indexed before this revision."""

RUNS_FILL = (
    "UPDATE search_runs SET first_doc_id = d.first_id, last_doc_id = d.last_id "
    "FROM (SELECT run_id, min(id) AS first_id, max(id) AS last_id FROM search_docs "
    "GROUP BY run_id) AS d WHERE d.run_id = search_runs.run_id"
)
"""The runs' ranges of the documents indexed before this revision."""


def upgrade() -> None:
    """Create the table and the columns; on SQLite, fill them and add the trigger."""
    op.create_table(
        "search_hours",
        sa.Column("hour", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("first_id", sa.Integer(), nullable=False),
        sa.Column("last_id", sa.Integer(), nullable=False),
    )
    with op.batch_alter_table("search_runs") as batch:
        batch.add_column(sa.Column("first_doc_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("last_doc_id", sa.Integer(), nullable=True))
    if op.get_bind().dialect.name == "sqlite":
        op.execute(HOURS_FILL)
        op.execute(RUNS_FILL)
        op.execute(HOURS_TRIGGER)


def downgrade() -> None:
    """Drop the trigger, the columns (in place, as 0005 does) and the table."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS search_docs_hours")
    op.drop_column("search_runs", "last_doc_id")
    op.drop_column("search_runs", "first_doc_id")
    op.drop_table("search_hours")
