"""Alembic environment: runs on the connection handed over by ``db.migrate``."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from desktop_agent.persistence import tables  # noqa: F401  (registers the tables)

config = context.config
connection = config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
