"""The model catalogue: what ``GET /v1/models`` answered, and when.

One row per model, holding the API's JSON for it as it came (``data``), the time it was read
(``read_at``) and its place in the API's list (``position``). A worker writes it at start and
daily; the app and the CLI read it for the New run dialog and ``desktop-agent models``
without a key of their own. Nothing else refers to it: a database without rows falls back to
the catalogue shipped with the program.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the table."""
    op.create_table(
        "model_catalogue",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("position", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("read_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("model_catalogue")
