"""The search index's text passes through the redaction again (keys wrapped over lines).

An older redaction replaced a key only up to its first line break: a key wrapped over two
lines kept the part after the break in ``search_docs`` (and so in snippets, and as words
of the index). The rule now takes a :data:`~desktop_agent.persistence.redaction.REDACTED`
already in the text as the start of a key; every document that holds one is read and,
where that removes a tail, written again with the same id (deleted and inserted: the
triggers of 0004 and 0007 keep the full-text index and the hours in step on SQLite; the
generated column of 0008 does on PostgreSQL). Documents without the mark are not touched.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from desktop_agent.persistence.redaction import REDACTED, redact_text

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_DOCS = sa.table(
    "search_docs",
    sa.column("id", sa.Integer()),
    sa.column("run_id", sa.String()),
    sa.column("seq", sa.Integer()),
    sa.column("source", sa.String()),
    sa.column("kind", sa.String()),
    sa.column("tool", sa.Text()),
    sa.column("at", sa.Float()),
    sa.column("body", sa.Text()),
)


def upgrade() -> None:
    """Redact again every document that holds the mark, where that changes it."""
    conn = op.get_bind()
    marked = sa.select(_DOCS).where(_DOCS.c.body.contains(REDACTED, autoescape=True))
    for row in conn.execute(marked).mappings().all():
        body = redact_text(row["body"])
        if body != row["body"]:
            conn.execute(sa.delete(_DOCS).where(_DOCS.c.id == row["id"]))
            conn.execute(sa.insert(_DOCS).values({**row, "body": body}))


def downgrade() -> None:
    """Nothing to undo: the text removed was half of a key."""
