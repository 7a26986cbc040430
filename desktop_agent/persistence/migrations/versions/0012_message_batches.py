"""Message Batches: the requests of economy-mode runs and the batches that carry them.

``batch_requests`` holds one row per model turn sent through a batch (its params, its
state, the result once read); ``message_batches`` one row per batch created (or suspected
of holding requests whose submission's answer was lost). See
``desktop_agent/persistence/batches.py`` for the protocol that keeps a turn from being
submitted twice or its result applied twice.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two tables and their indexes."""
    op.create_table(
        "batch_requests",
        sa.Column("custom_id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("betas", sa.String(400), nullable=False, server_default=""),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, server_default="queued"),
        sa.Column("submission", sa.String(32)),
        sa.Column("batch_id", sa.String(64)),
        sa.Column("result", sa.Text()),
        sa.Column("queued_at", sa.Float(), nullable=False),
        sa.Column("submitted_at", sa.Float()),
        sa.Column("ended_at", sa.Float()),
        sa.Column("consumed_at", sa.Float()),
    )
    for column in ("run_id", "state", "submission", "batch_id"):
        op.create_index(f"ix_batch_requests_{column}", "batch_requests", [column])
    op.create_table(
        "message_batches",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("submission", sa.String(32)),
        sa.Column("status", sa.String(16), nullable=False, server_default="in_progress"),
        sa.Column("requests", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("suspect", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("results_read", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("next_poll_at", sa.Float(), nullable=False),
        sa.Column("polls", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("ended_at", sa.Float()),
    )
    for column in ("submission", "results_read"):
        op.create_index(f"ix_message_batches_{column}", "message_batches", [column])


def downgrade() -> None:
    """Drop the tables."""
    op.drop_table("message_batches")
    op.drop_table("batch_requests")
