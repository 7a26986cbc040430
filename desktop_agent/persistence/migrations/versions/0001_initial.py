"""Initial schema: runs, steps, snapshots, commands, approvals, workers.

Revision ID: 0001
Revises:
Create Date: 2026-11-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the first schema."""
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False, server_default=""),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("wait_reason", sa.String(32)),
        sa.Column("wake_at", sa.Float()),
        sa.Column("status_message", sa.Text(), nullable=False, server_default=""),
        sa.Column("attention_seq", sa.Integer()),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("definition_hash", sa.String(64), nullable=False),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("budget", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float()),
        sa.Column("finished_at", sa.Float()),
        sa.Column("last_seq", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"),
        sa.Column("input_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cache_read_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("active_seconds", sa.Float(), nullable=False, server_default="0"),
        sa.Column("lease_owner", sa.String(128)),
        sa.Column("lease_expires_at", sa.Float()),
        sa.Column("parent_id", sa.String(64)),
        sa.Column("schedule_id", sa.String(64)),
    )
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_wake_at", "runs", ["wake_at"])
    op.create_index("ix_runs_updated_at", "runs", ["updated_at"])
    op.create_index("ix_runs_lease_owner", "runs", ["lease_owner"])
    op.create_table(
        "steps",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("effect", sa.String(16)),
        sa.Column("attempt", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("input", sa.Text()),
        sa.Column("output", sa.Text()),
        sa.Column("error", sa.Text()),
        sa.Column("partial_text", sa.Text(), nullable=False, server_default=""),
        sa.Column("salvaged", sa.Text()),
        sa.Column("input_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cache_read_tokens", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Float(), nullable=False, server_default="0"),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float()),
    )
    op.create_table(
        "snapshots",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "commands",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("payload", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("applied_at", sa.Float()),
        sa.Column("result", sa.Text(), nullable=False, server_default=""),
    )
    op.create_index("ix_commands_run_id", "commands", ["run_id"])
    op.create_index("ix_commands_applied_at", "commands", ["applied_at"])
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(100), primary_key=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("arguments", sa.Text()),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False, server_default=""),
        sa.Column("rule", sa.Text(), nullable=False, server_default=""),
        sa.Column("decided_arguments", sa.Text()),
        sa.Column("decision_note", sa.Text(), nullable=False, server_default=""),
        sa.Column("deadline", sa.Float()),
        sa.Column("default_action", sa.String(16), nullable=False, server_default="reject"),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("decided_at", sa.Float()),
    )
    op.create_index("ix_approvals_run_id", "approvals", ["run_id"])
    op.create_index("ix_approvals_state", "approvals", ["state"])
    op.create_table(
        "workers",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("proc_started_at", sa.Float(), nullable=False, server_default="0"),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("heartbeat_at", sa.Float(), nullable=False),
        sa.Column("stopped_at", sa.Float()),
    )


def downgrade() -> None:
    """Drop everything."""
    for name in ("workers", "approvals", "commands", "snapshots", "steps", "runs"):
        op.drop_table(name)
