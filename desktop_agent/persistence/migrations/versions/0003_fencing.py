"""Fencing: a lease epoch on every run, and run events.

Each claim of a run increments ``runs.lease_epoch`` (the fencing token), and a worker's
journal writes are conditional on it. ``run_events`` records what a worker that lost its
lease did anyway, for the analyst to see.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the lease epoch and the run events table."""
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("lease_epoch", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "run_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("seq", sa.Integer()),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False, server_default=""),
        sa.Column("data", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_run_events_run_id", "run_events", ["run_id"])


def downgrade() -> None:
    """Drop the run events and the lease epoch."""
    op.drop_index("ix_run_events_run_id", "run_events")
    op.drop_table("run_events")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("lease_epoch")
