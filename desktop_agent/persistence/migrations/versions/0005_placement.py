"""Placement: which workers may claim a run.

``runs.placement`` is ``any`` (every worker), ``host:NAME`` (only workers on that machine:
the run's workspace is a folder there) or ``pool:NAME`` (workers started with that pool).
Runs written before this revision may run anywhere, as before.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the placement column, ``any`` for every existing run."""
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("placement", sa.String(200), nullable=False, server_default="any")
        )


def downgrade() -> None:
    """Drop the column, in place.

    Not by Alembic's batch mode: on SQLite that copies ``runs`` and drops the original,
    which the steps' foreign keys forbid once a run has steps. ``ALTER TABLE ... DROP
    COLUMN`` (SQLite 3.35 and later) drops a plain column without the copy.
    """
    op.drop_column("runs", "placement")
