"""Forks: a run may share the first steps of another run's journal.

``runs.forked_from`` is the run a fork (or a "run again") was made from, indexed so that a
run lists its forks; ``runs.forked_at_seq`` the last step of the parent the fork shares (0:
a "run again", which shares none). Both are null for every run written before this
revision. The shared steps are not copied: a fork's own ``steps`` rows start after
``forked_at_seq`` and the store reads the parent's rows for the prefix. ``parent_id`` keeps
its meaning (the batch a run belongs to).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two nullable columns and the index (no row is rewritten)."""
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("forked_from", sa.String(64), nullable=True))
        batch.add_column(sa.Column("forked_at_seq", sa.Integer(), nullable=True))
    op.create_index("ix_runs_forked_from", "runs", ["forked_from"])


def downgrade() -> None:
    """Drop the index and the columns in place (see 0005 for why not in batch mode)."""
    op.drop_index("ix_runs_forked_from", table_name="runs")
    op.drop_column("runs", "forked_at_seq")
    op.drop_column("runs", "forked_from")
