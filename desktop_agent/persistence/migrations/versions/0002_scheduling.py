"""Scheduling: schedules, batches and their items, folder watches, seen files, run alerts.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the scheduling tables and the run indexes they need."""
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False, server_default=""),
        sa.Column("template", sa.Text(), nullable=False),
        sa.Column("cron", sa.String(200)),
        sa.Column("every_s", sa.Float()),
        sa.Column("timezone", sa.String(64), nullable=False, server_default=""),
        sa.Column("overlap", sa.String(16), nullable=False, server_default="skip"),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("last_fire_at", sa.Float()),
        sa.Column("fire_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("skipped", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("queued", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_run_id", sa.String(64)),
        sa.Column("last_result", sa.Text(), nullable=False, server_default=""),
        sa.Column("version", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_table(
        "batches",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("template", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False, server_default=""),
        sa.Column("concurrency", sa.Integer(), nullable=False, server_default="4"),
        sa.Column("total", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("from_folder", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "batch_items",
        sa.Column("batch_id", sa.String(64), sa.ForeignKey("batches.id"), primary_key=True),
        sa.Column("idx", sa.Integer(), primary_key=True),
        sa.Column("item", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
        sa.Column("run_id", sa.String(64)),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_batch_items_status", "batch_items", ["status"])
    op.create_index("ix_batch_items_run_id", "batch_items", ["run_id"])
    op.create_table(
        "watches",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("folder", sa.Text(), nullable=False),
        sa.Column("pattern", sa.String(200), nullable=False, server_default="*"),
        sa.Column("template", sa.Text(), nullable=False),
        sa.Column("scan_s", sa.Float(), nullable=False, server_default="10"),
        sa.Column("paused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False, server_default="0"),
    )
    op.create_table(
        "seen_files",
        sa.Column("watch_id", sa.String(64), sa.ForeignKey("watches.id"), primary_key=True),
        sa.Column("path", sa.Text(), primary_key=True),
        sa.Column("size", sa.BigInteger(), primary_key=True),
        sa.Column("mtime_ns", sa.BigInteger(), primary_key=True),
        sa.Column("run_id", sa.String(64)),
        sa.Column("seen_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "run_alerts",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("kind", sa.String(32), primary_key=True),
        sa.Column("since", sa.Float(), nullable=False),
        sa.Column("raised_at", sa.Float(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False, server_default=""),
        sa.Column("cleared_at", sa.Float()),
    )
    op.create_index("ix_runs_schedule_id", "runs", ["schedule_id"])
    op.create_index("ix_runs_parent_id", "runs", ["parent_id"])


def downgrade() -> None:
    """Drop the scheduling tables and indexes."""
    op.drop_index("ix_runs_parent_id", "runs")
    op.drop_index("ix_runs_schedule_id", "runs")
    for name in ("run_alerts", "seen_files", "watches", "batch_items", "batches", "schedules"):
        op.drop_table(name)
