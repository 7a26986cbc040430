"""The MCP servers as the app and the CLI see them: the catalogue a worker last wrote.

The app never connects to MCP servers itself (a stdio server is a program to start, an HTTP
one may be slow): it reads the catalogue (:data:`~desktop_agent.tools.mcp.CATALOGUE_FILE`)
that workers write when they connect. :func:`refresh` connects from the calling process,
for ``desktop-agent mcp list --refresh`` (blocking: never on the GUI thread).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from desktop_agent import config
from desktop_agent.domain.errors import InvalidInputError
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


PREFIX = "mcp:"
"""How a tool list names an MCP server's tools: ``mcp:SERVER`` or ``mcp:SERVER/TOOL``."""


def _close(word: str, choices: list[str]) -> str:
    """`` (did you mean x?)`` when ``word`` is close to one of ``choices``."""
    near = difflib.get_close_matches(word, choices, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def expand_tools(names: Sequence[str], listed: dict[str, Any]) -> list[str]:
    """``names`` with ``mcp:SERVER`` and ``mcp:SERVER/TOOL`` replaced by the tools they name.

    ``mcp:SERVER`` stands for every tool the catalogue ``listed`` has of that server, as
    it names them (``SERVER__TOOL``), ``mcp:SERVER/TOOL`` for one. ``TOOL`` is the tool's
    name on its server, or the name ``mcp list`` shows. Other names are kept; a tool named
    twice is kept once, where it first came.

    Raises:
        InvalidInputError: an unknown server or tool (with those that exist, the closest
            first), a server marked failed (with its status), or one that lists no tools.
    """
    servers = {
        str(s.get("name")): s
        for s in listed.get("servers") or []
        if isinstance(s, dict) and s.get("name")
    }
    out: list[str] = []
    for name in names:
        if not name.startswith(PREFIX):
            out.append(name)
            continue
        server_name, _, tool = name[len(PREFIX) :].partition("/")
        out += _server_tools(name, server_name.strip(), tool.strip(), servers, listed)
    return list(dict.fromkeys(out))


def _server_tools(
    given: str, server_name: str, tool: str, servers: dict[str, Any], listed: dict[str, Any]
) -> list[str]:
    """The internal names ``given`` (``mcp:SERVER[/TOOL]``) stands for."""
    if not server_name:
        raise InvalidInputError(f"{given!r}: name the MCP server, e.g. mcp:notes or mcp:notes/TOOL")
    server = servers.get(server_name)
    if server is None:
        if listed.get("error"):
            raise InvalidInputError(
                f"no MCP server {server_name!r}: the MCP servers were not started "
                f"({listed['error']})"
            )
        if not servers:
            raise InvalidInputError(
                f"no MCP server {server_name!r}: none is listed (declare them in settings.json, "
                "mcp_servers; `desktop-agent mcp list --refresh` connects and lists them)"
            )
        known = sorted(servers)
        raise InvalidInputError(
            f"no MCP server {server_name!r}{_close(server_name, known)}; "
            f"MCP servers: {', '.join(known)} (`desktop-agent mcp list`)"
        )
    state = str(server.get("state") or "?")
    if state == "failed":
        why = f": {server['message']}" if server.get("message") else ""
        raise InvalidInputError(
            f"MCP server {server_name!r} is failed{why}; `desktop-agent mcp list --refresh` "
            "tries it again"
        )
    tools = [t for t in server.get("tools") or [] if isinstance(t, dict) and t.get("name")]
    if not tools:
        raise InvalidInputError(
            f"MCP server {server_name!r} lists no tools (it is {state}); "
            "`desktop-agent mcp list --refresh` lists them anew"
        )
    if not tool:
        return [str(t["name"]) for t in tools]
    for t in tools:
        if tool in (str(t.get("remote")), str(t["name"])):
            return [str(t["name"])]
    remote = [str(t.get("remote") or t["name"]) for t in tools]
    raise InvalidInputError(
        f"MCP server {server_name!r} has no tool {tool!r}{_close(tool, remote)}; "
        f"its tools: {', '.join(remote)}"
    )
