"""Spend reservations: the worst case of the model calls in flight, held against the cap.

One row per run with a model call in flight: what the call may cost at worst
(``amount_usd``), when it was reserved and by whom (``token``: a worker that lost the run
removes its own reservation, never the new holder's). A worker reserves before the call,
in a transaction that also reads the month's spend and the other runs' reservations (see
``persistence.usage.MonthSpend.reserve``), and removes the row once the call's cost is in
the journal. A row left by a worker that died counts only while its run is running and
for :data:`~desktop_agent.persistence.usage.RESERVATION_TTL_S` at most.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the table."""
    op.create_table(
        "spend_reservations",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("token", sa.String(32), nullable=False),
        sa.Column("amount_usd", sa.Float(), nullable=False),
        sa.Column("reserved_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("spend_reservations")
