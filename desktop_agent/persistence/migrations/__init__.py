"""Alembic migrations of the desktop-agent schema."""
