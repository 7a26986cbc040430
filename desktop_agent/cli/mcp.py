"""``desktop-agent mcp list [--refresh]``: the MCP servers, their status and their tools.

Without ``--refresh`` it prints the catalogue a worker wrote when it connected (what the
app offers to new runs); ``--refresh`` connects to every declared server from this process
first (starting stdio servers, reaching HTTP ones), writes the catalogue anew and prints
it. A server that fails is listed with why; that is not an error of the command.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_OK, echo

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out

AddParser = Callable[[str, str], argparse.ArgumentParser]


def add_parsers(add: AddParser) -> None:
    """Add the ``mcp`` command to the main parser (``add(name, help)``)."""
    p = add("mcp", "MCP servers whose tools runs may use (the mcp_servers setting)")
    p.add_argument("action", choices=["list"])
    p.add_argument(
        "--refresh", action="store_true", help="connect to every server now and list anew"
    )


def _lines(catalogue: dict[str, Any], declared: int) -> list[str]:
    servers = catalogue.get("servers") or []
    if catalogue.get("error"):
        return [f"MCP servers not started: {catalogue['error']}"]
    if not servers:
        if declared:
            return [
                f"{declared} MCP server(s) declared but not listed yet: "
                "`desktop-agent mcp list --refresh` connects now"
            ]
        return ["no MCP servers: declare them in settings.json (mcp_servers); see the README"]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(catalogue.get("written_at", 0)))
    lines = [f"as listed {when}:"]
    for server in servers:
        state = server.get("state", "?")
        why = f": {server['message']}" if server.get("message") else ""
        lines.append(f"{server.get('name')} ({server.get('transport')}) {state}{why}")
        for tool in server.get("tools") or []:
            lines.append(f"  {tool['name']:40} {tool['effect']:10} {tool['description'][:60]}")
    return lines


def cmd_mcp(args: argparse.Namespace, out: Out) -> int:
    """List the MCP servers (connecting first with ``--refresh``)."""
    from desktop_agent import config
    from desktop_agent.client import mcp

    db_path = config.resolve_db_path(getattr(args, "db", None))
    listed = mcp.refresh(db_path) if args.refresh else mcp.catalogue(db_path)
    if out.as_json:
        out.emit("", listed)
    else:
        for line in _lines(listed, mcp.declared(db_path)):
            echo(line, file=out.stream)
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"mcp": cmd_mcp}
