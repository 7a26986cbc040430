"""Alembic environment: runs on the connection handed over by ``db.migrate``."""

from __future__ import annotations

from alembic import context

from desktop_agent.persistence.tables import metadata

config = context.config
connection = config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
