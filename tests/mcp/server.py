"""A real MCP server for the tests, written with the SDK's server side.

Run as ``python -m tests.mcp.server`` (stdio) or ``python -m tests.mcp.server http PORT``
(Streamable HTTP on 127.0.0.1). Its tools cover each effect class and each failure:

* ``lookup`` (read only), ``tag`` (idempotent), ``post`` (no hints: unsafe);
* ``post`` appends the ``_meta`` it received to the file named by ``MCP_TEST_LOG``, one
  JSON line per call, so a test can see the idempotency key (and the server's environment
  secret, when ``MCP_TEST_TOKEN`` is set, to show a keyring secret reached it);
* ``slow`` sleeps ``seconds``; ``broken`` fails (an ``isError`` result);
* ``whoami`` answers the ``Authorization`` header of an HTTP request;
* ``report`` (no hints: unsafe) takes nested arguments (``filters``, a list of objects
  with a numeric ``since``) and, like ``post``, appends what it received to
  ``MCP_TEST_LOG``; its server side reads ``since`` leniently (``"5"`` passes as 5.0),
  so only the client's own check keeps a call that does not fit the schema from it;
* misbehaving ones: ``huge`` answers ``megabytes`` MB of text in one message, and
  ``wedge`` blocks the whole server (its event loop) for an hour, as a server stuck in a
  call does: nothing else it is asked is answered.

``MCP_TEST_VARIANT=2`` changes ``lookup``'s schema (a server upgraded between two runs).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict

server: MCPServer[Any] = MCPServer("test-tools")
VARIANT = os.environ.get("MCP_TEST_VARIANT", "1")


def lookup_v1(word: str) -> str:
    """Look a word up in the glossary."""
    return f"{word}: a metal used in batteries"


def lookup_v2(word: str, language: str = "en") -> str:
    """Look a word up in the glossary."""
    return f"{word} ({language}): a metal used in batteries"


server.tool(name="lookup", annotations=ToolAnnotations(read_only_hint=True))(
    lookup_v2 if VARIANT == "2" else lookup_v1
)


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def tag(note: str, label: str) -> str:
    """Put a label on a note (the same label twice changes nothing)."""
    return f"{note} is tagged {label}"


def _log(record: dict[str, Any]) -> None:
    log = os.environ.get("MCP_TEST_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")


@server.tool()
def post(text: str, ctx: Context) -> str:
    """Post a message to the team channel."""
    meta = dict(ctx.request_context.meta or {})
    _log({"text": text, "meta": meta, "token": os.environ.get("MCP_TEST_TOKEN")})
    return f"posted: {text}"


class Filter(BaseModel):
    """One condition of a report: entries of ``field`` changed since ``since`` (epoch s)."""

    model_config = ConfigDict(extra="forbid")

    field: str
    since: float


@server.tool()
def report(title: str, filters: list[Filter]) -> str:
    """File a report on the entries that match every filter."""
    _log({"report": title, "filters": [f.model_dump() for f in filters]})
    return f"filed {title} with {len(filters)} filters"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def slow(seconds: float) -> str:
    """Take a while."""
    time.sleep(seconds)  # the slow tool the tests call: its slowness is the point
    return "done"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def broken() -> str:
    """Always fail."""
    raise RuntimeError("the glossary database is offline")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context) -> str:
    """The credentials the request came with."""
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None)
    return str(headers.get("authorization", "none")) if headers is not None else "stdio"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def huge(megabytes: float) -> str:
    """Answer a very long text."""
    return "x" * int(megabytes * 1_000_000)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def wedge() -> str:
    """Never answer, and block everything else meanwhile."""
    time.sleep(3600)  # blocking on purpose: the server answers nothing else
    return "never"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
