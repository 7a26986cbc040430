"""The MCP servers as the app and the CLI see them: the catalogue a worker last wrote.

The app never connects to MCP servers itself (a stdio server is a program to start, an HTTP
one may be slow): it reads the catalogue (:data:`~desktop_agent.tools.mcp.CATALOGUE_FILE`)
that workers write when they connect. :func:`refresh` connects from the calling process,
for ``desktop-agent mcp list --refresh`` (blocking: never on the GUI thread).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from desktop_agent import config
from desktop_agent.tools.mcp import CATALOGUE_FILE, read_catalogue, start_hub


def catalogue_path(db_path: Path) -> Path:
    """Where the catalogue of the database at ``db_path`` lives."""
    return db_path.parent / CATALOGUE_FILE


def catalogue(db_path: Path) -> dict[str, Any]:
    """Servers, their status and tools as last listed (empty when never listed)."""
    return read_catalogue(catalogue_path(db_path))


def refresh(db_path: Path) -> dict[str, Any]:
    """Connect to every declared server now, write the catalogue anew and return it."""
    settings = config.Settings.load(db_path)
    hub = start_hub(settings.mcp_servers, catalogue_path(db_path))
    if hub is not None:
        hub.close()
    return catalogue(db_path)


def declared(db_path: Path) -> int:
    """How many servers the settings declare."""
    return len(config.Settings.load(db_path).mcp_servers)
