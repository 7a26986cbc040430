"""Fixtures of the MCP tests: the tests' own MCP server, over stdio or Streamable HTTP.

``hub_for(*servers, **options)`` connects a real :class:`~desktop_agent.tools.mcp.McpHub`
(closed after the test; ``options`` are the hub's own: ``catalogue``, ``retry_failed_s``);
``http_server()`` starts ``tests.mcp.server`` as a child process serving
Streamable HTTP on a free loopback port and returns its URL.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import Run
from desktop_agent.tools.mcp import CATALOGUE_FILE, McpHub, parse_servers, write_catalogue
from desktop_agent.tools.registry import ToolRegistry
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]

HubFor = Callable[..., McpHub]


def stdio_server(name: str = "glossary", **more: Any) -> dict[str, Any]:
    """The settings entry of the tests' server over stdio."""
    return {"name": name, "command": sys.executable, "args": ["-m", "tests.mcp.server"], **more}


@pytest.fixture
def server_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the tests' server records each ``post`` call (its ``_meta`` included)."""
    log = tmp_path / "posts.jsonl"
    monkeypatch.setenv("MCP_TEST_LOG", str(log))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return log


@pytest.fixture
def hub_for(server_log: Path) -> Iterator[HubFor]:
    """Connect hubs to servers (closed after the test)."""
    hubs: list[McpHub] = []

    def make(*servers: dict[str, Any], **options: Any) -> McpHub:
        hub = McpHub(parse_servers(servers), **options)
        hubs.append(hub)
        hub.start()
        return hub

    yield make
    for hub in hubs:
        hub.close()


def registry_with(hub: McpHub) -> ToolRegistry:
    """The built-in tools and the hub's."""
    registry = ToolRegistry(plugins=False)
    for tool in hub.tools():
        registry.add(tool)
    return registry


@pytest.fixture
def http_server(server_log: Path) -> Iterator[Callable[[], str]]:
    """Start the tests' server over Streamable HTTP; returns its URL (stopped after)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.mcp.server", "http", str(port)],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, 20, "the MCP test server to listen")
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def start_run(client: Client, hub: McpHub, goal: str, tools: list[str]) -> Run:
    """Start a run offered ``tools``, the MCP ones known from the catalogue a worker wrote.

    The client (like the app's) learns MCP tools from the catalogue file when it opens:
    the hub writes it, and a client opened afterwards starts the run.
    """
    write_catalogue(client.db_path.parent / CATALOGUE_FILE, hub.catalogue())
    fresh = Client(client.db_path, client.settings)
    try:
        return fresh.start_run(goal, model="demo", tools=tools)
    finally:
        fresh.close()
