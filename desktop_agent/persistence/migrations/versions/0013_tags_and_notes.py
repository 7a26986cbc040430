"""Tags on runs and the analyst's notes on steps.

``run_tags`` holds one row per tag of a run (key: run and tag; an index on the tag for
``runs --tag``); ``step_notes`` one row per note the analyst wrote on a step. Neither is
part of the journal: the engine never reads them, and a run's conversation never holds
them. Both go with a run into an archive and a bundle (``persistence/archive.py``).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two tables and their indexes."""
    op.create_table(
        "run_tags",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("tag", sa.String(40), primary_key=True),
    )
    op.create_index("ix_run_tags_tag", "run_tags", ["tag"])
    op.create_table(
        "step_notes",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_step_notes_run_id_seq", "step_notes", ["run_id", "seq"])


def downgrade() -> None:
    """Drop the tables."""
    op.drop_table("step_notes")
    op.drop_table("run_tags")
