"""Agent SDK sessions kept in the journal's database.

``sdk_session_entries`` holds the transcript lines of Claude Agent SDK sessions (the
SDK's ``SessionStore`` protocol, :mod:`desktop_agent.persistence.sdk_sessions`), so that a
session a worker started can be resumed by any worker of the database. A unique index on
the entry's ``uuid`` within its session makes appends idempotent.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the table and its two indexes."""
    op.create_table(
        "sdk_session_entries",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("project_key", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("subpath", sa.Text(), nullable=False, server_default=""),
        sa.Column("uuid", sa.Text()),
        sa.Column("entry", sa.Text(), nullable=False),
        sa.Column("mtime_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index(
        "ix_sdk_session_entries_key",
        "sdk_session_entries",
        ["project_key", "session_id", "subpath", "id"],
    )
    op.create_index(
        "ux_sdk_session_entries_uuid",
        "sdk_session_entries",
        ["project_key", "session_id", "subpath", "uuid"],
        unique=True,
    )


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("sdk_session_entries")
