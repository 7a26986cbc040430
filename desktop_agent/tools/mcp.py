"""MCP servers as tool sources: their tools offered to the model beside the built-in ones.

Servers are declared in the settings (``mcp_servers``): a command started over stdio, or a
Streamable HTTP URL. The worker connects to each (:class:`McpHub`), lists its tools and
registers one :class:`McpTool` per remote tool, named ``<server>__<tool>``. Nothing else
changes for the engine: an MCP tool is a :class:`~desktop_agent.engine.ports.Tool` like
any other, so approvals, the journal, idempotency keys and in-doubt handling apply.

Effects. Each tool's effect class comes from its annotations, as the MCP specification
describes them: ``readOnlyHint`` → read only, else ``idempotentHint`` → idempotent, else
unsafe (the conservative reading: an unannotated tool may act on the world, so it is
asked about and, after a crash mid-call, left for the analyst to decide). A server may
be wrong about its hints; ``effects`` in a server's settings overrides them per tool.

Idempotency. Every call carries the step's idempotency key (``run_id:seq``, stable across
retries of that step) and the worker's fencing token in the request's ``_meta``
(``io.desktop-agent/idempotency-key``, ``io.desktop-agent/fencing-token``, plus the plain
``idempotency_key`` that simpler servers read), so a server that honours keys can make a
retried call a no-op.

Failures. A server that cannot be started or reached, that is slower than ``timeout_s``,
or that answers something unreadable gives the model an error result saying so, and the
server's status (shown by ``desktop-agent mcp list``, the Settings dialog) says what went
wrong; nothing raises out of the worker. A dropped session is opened again on the next
call, with a growing pause between attempts.

Definitions. A tool's ``version`` is a short hash of its description, input schema and
effect: a server whose tool changed between runs changes the run's agent definition, and
the engine's definition check stops a resumed run until the analyst accepts the change.

Secrets. ``env`` and ``headers`` values written ``keyring:NAME`` are read from the OS
keyring (service :data:`SECRET_SERVICE`, user ``<server>/<NAME>``) when the worker
connects, and live only in its memory: never in the settings file, a log line or a
command line (a stdio server gets them in its environment).

Threads. The SDK is asyncio; the worker runs each activation in a thread. The hub owns
one event loop in a thread of its own, where one task per server holds its session open;
a tool call is handed to that loop and waited for with a timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.engine.ports import ToolContext, ToolResult

log = logging.getLogger(__name__)

SECRET_SERVICE = "desktop-agent-mcp"
"""Keyring service of MCP secrets; the user name is ``<server>/<NAME>``."""

SEPARATOR = "__"
"""Between a server's name and its tool's in the name the model sees."""

MAX_NAME = 64
"""The longest tool name the Messages API accepts."""

DEFAULT_TIMEOUT_S = 60.0
"""How long one call may take unless a server's settings say otherwise."""

CONNECT_TIMEOUT_S = 20.0
"""How long connecting to a server and listing its tools may take."""

RESULT_CHARS = 100_000
"""The most characters of a result given to the model."""

_SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,23}$")
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")
_EFFECTS = {e.value: e for e in EffectClass}


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server as the settings declare it.

    Attributes:
        name: short name; prefixes its tools' names (``<name>__<tool>``).
        command: the program of a stdio server (empty for an HTTP one).
        args: its arguments.
        env: its environment (values may be ``keyring:NAME``).
        url: the Streamable HTTP endpoint of an HTTP server (empty for a stdio one).
        headers: HTTP headers (values may be ``keyring:NAME``).
        effects: per-tool effect classes overriding the server's hints.
        timeout_s: how long one call may take.
    """

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    effects: Mapping[str, EffectClass] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "http" if self.url else "stdio"


def _strings(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidInputError(f"{what} must map names to strings")
    return dict(value)


def parse_server(raw: Mapping[str, Any]) -> ServerConfig:
    """One entry of ``mcp_servers``, checked.

    Raises:
        InvalidInputError: what is wrong with it, in one line.
    """
    name = raw.get("name")
    if not isinstance(name, str) or not _SERVER_NAME.match(name):
        raise InvalidInputError(
            f"MCP server name {name!r} must be 1-24 lowercase letters, digits, - or _"
        )
    where = f"MCP server {name!r}"
    command, url = raw.get("command") or "", raw.get("url") or ""
    if not isinstance(command, str) or not isinstance(url, str):
        raise InvalidInputError(f"{where}: command and url must be text")
    if bool(command) == bool(url):
        raise InvalidInputError(f"{where}: give either a command (stdio) or a url (HTTP)")
    if url and not url.startswith(("http://", "https://")):
        raise InvalidInputError(f"{where}: url must start with http:// or https://")
    args = raw.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise InvalidInputError(f"{where}: args must be a list of strings")
    effects: dict[str, EffectClass] = {}
    for tool, effect in _strings(raw.get("effects"), f"{where}: effects").items():
        if effect not in _EFFECTS:
            raise InvalidInputError(
                f"{where}: effect of {tool!r} must be one of {', '.join(_EFFECTS)}"
            )
        effects[tool] = _EFFECTS[effect]
    timeout = raw.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise InvalidInputError(f"{where}: timeout_s must be a number of seconds above 0")
    return ServerConfig(
        name=name,
        command=command,
        args=tuple(args),
        env=_strings(raw.get("env"), f"{where}: env"),
        url=url,
        headers=_strings(raw.get("headers"), f"{where}: headers"),
        effects=effects,
        timeout_s=float(timeout),
    )


def parse_servers(raw: Iterable[Mapping[str, Any]]) -> list[ServerConfig]:
    """Every declared server, checked (names unique)."""
    servers = [parse_server(r) for r in raw]
    names = [s.name for s in servers]
    doubles = sorted({n for n in names if names.count(n) > 1})
    if doubles:
        raise InvalidInputError(f"MCP server names must be unique: {', '.join(doubles)}")
    return servers


def resolve_secrets(server: str, values: Mapping[str, str]) -> dict[str, str]:
    """``values`` with ``keyring:NAME`` references replaced by the secrets they name.

    Raises:
        InvalidInputError: a referenced secret is not in the keyring.
    """
    out: dict[str, str] = {}
    for key, value in values.items():
        if not value.startswith("keyring:"):
            out[key] = value
            continue
        ref = value.removeprefix("keyring:")
        import keyring

        try:
            secret = keyring.get_password(SECRET_SERVICE, f"{server}/{ref}")
        except Exception:  # a broken keyring reads as a missing secret
            secret = None
        if not secret:
            raise InvalidInputError(
                f"MCP server {server!r}: secret {ref!r} is not in the keyring "
                f"(keyring set {SECRET_SERVICE} {server}/{ref})"
            )
        out[key] = secret
    return out


# --------------------------------------------------------------------------- tools


def tool_name(server: str, remote: str) -> str:
    """The name the model sees: ``<server>__<tool>``, cut to 64 characters with a hash."""
    name = f"{server}{SEPARATOR}{_TOOL_NAME.sub('_', remote)}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def effect_of(annotations: Mapping[str, Any] | None, override: EffectClass | None) -> EffectClass:
    """The effect class of a remote tool: the override, else its hints, else unsafe."""
    if override is not None:
        return override
    hints = annotations or {}
    if hints.get("readOnlyHint") is True:
        return EffectClass.READ_ONLY
    if hints.get("idempotentHint") is True:
        return EffectClass.IDEMPOTENT
    return EffectClass.UNSAFE


def tool_version(description: str, schema: Mapping[str, JSON], effect: EffectClass) -> str:
    """A short hash of what the model and the engine rely on about a tool."""
    text = json.dumps([description, schema, effect.value], sort_keys=True)
    return "mcp-" + hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class RemoteTool:
    """A tool a server listed, as desktop-agent offers it.

    Attributes:
        server: the server's name.
        remote: the tool's name on the server.
        name: the name the model sees.
        description: what the model reads.
        input_schema: the JSON schema of its arguments.
        effect: its effect class (see the module's docstring).
    """

    server: str
    remote: str
    name: str
    description: str
    input_schema: Mapping[str, JSON]
    effect: EffectClass

    @property
    def version(self) -> str:
        """See :func:`tool_version`."""
        return tool_version(self.description, self.input_schema, self.effect)

    def to_json(self) -> dict[str, JSON]:
        """Plain data for the catalogue file."""
        return {
            "server": self.server,
            "remote": self.remote,
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
            "effect": self.effect.value,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RemoteTool:
        """Read back :meth:`to_json`."""
        return cls(
            str(data["server"]),
            str(data["remote"]),
            str(data["name"]),
            str(data.get("description", "")),
            dict(data.get("input_schema") or {"type": "object"}),
            _EFFECTS.get(str(data.get("effect")), EffectClass.UNSAFE),
        )


def remote_tools(server: ServerConfig, listed: Sequence[Any]) -> list[RemoteTool]:
    """The SDK's listed tools of ``server`` as :class:`RemoteTool` values."""
    out = []
    for t in listed:
        annotations = (
            t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None
        )
        schema = dict(t.input_schema or {"type": "object"})
        schema.setdefault("type", "object")
        out.append(
            RemoteTool(
                server.name,
                t.name,
                tool_name(server.name, t.name),
                (t.description or t.title or t.name)[:4000],
                schema,
                effect_of(annotations, server.effects.get(t.name)),
            )
        )
    return out


class McpTool:
    """A remote tool as a :class:`~desktop_agent.engine.ports.Tool` (see the module).

    Args:
        spec: what the server listed.
        hub: the connections that carry calls (None: listed only, e.g. in the app, where
            a call is an error result).
        timeout_s: how long one call may take.
    """

    approval = ApprovalPolicy.ALWAYS

    def __init__(
        self, spec: RemoteTool, hub: McpHub | None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.spec = spec
        self.hub = hub
        self.timeout = timeout_s

    @property
    def name(self) -> str:
        """``<server>__<tool>``."""
        return self.spec.name

    @property
    def version(self) -> str:
        """A hash of description, schema and effect."""
        return self.spec.version

    @property
    def description(self) -> str:
        """The server's description, marked with the server's name."""
        return f"[MCP server {self.spec.server}] {self.spec.description}"

    @property
    def input_schema(self) -> Mapping[str, JSON]:
        """The server's schema."""
        return self.spec.input_schema

    @property
    def effect(self) -> EffectClass:
        """From the hints or the settings."""
        return self.spec.effect

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        """Call the remote tool with the step's idempotency key in ``_meta``."""
        if self.hub is None:
            return ToolResult(f"MCP server {self.spec.server} is not connected here", True)
        meta: dict[str, Any] = {
            "idempotency_key": ctx.idempotency_key,
            "io.desktop-agent/idempotency-key": ctx.idempotency_key,
        }
        if ctx.fencing_token is not None:
            meta["io.desktop-agent/fencing-token"] = ctx.fencing_token
        if self.effect != EffectClass.READ_ONLY:
            ctx.check_lease()  # the point of no return: another worker may hold the run now
        return self.hub.call(self.spec.server, self.spec.remote, dict(args), meta, self.timeout)

    def approval_reason(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """No rule of its own: the effect class decides (``ask_unsafe``)."""
        return None

    def validate(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """Nothing to re-check before an approved call."""
        return None

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        """A server cannot be asked whether a call happened: the analyst decides."""
        return None

    def effect_of(self, args: Mapping[str, JSON], ctx: ToolContext) -> EffectClass:
        """The tool's own class."""
        return self.effect

    def timeout_s(self, args: Mapping[str, JSON], ctx: ToolContext) -> float | None:
        """The server's call timeout (the lease is made to outlast it)."""
        return self.timeout


# --------------------------------------------------------------------------- connections


@dataclass
class ServerStatus:
    """How a server is doing, for the catalogue and the analyst.

    Attributes:
        name: the server's name.
        transport: ``stdio`` or ``http``.
        state: ``connected``, ``connecting`` or ``failed``.
        message: what went wrong, when it failed.
        tools: its tools, once listed.
        checked_at: when this was last known.
    """

    name: str
    transport: str
    state: str = "connecting"
    message: str = ""
    tools: list[RemoteTool] = field(default_factory=list)
    checked_at: float = 0.0

    def to_json(self) -> dict[str, JSON]:
        """Plain data for the catalogue file."""
        return {
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "message": self.message,
            "checked_at": self.checked_at,
            "tools": [t.to_json() for t in self.tools],
        }


def _plain(exc: BaseException) -> str:
    """One line about ``exc``, from inside exception groups too (anyio wraps errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


def _result_text(result: Any) -> tuple[str, bool]:
    """The model's text of a ``CallToolResult``, and whether it is an error."""
    parts = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(block.text))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} content of {getattr(block, 'mime_type', '?')} not shown]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False)[:RESULT_CHARS])
    text = "\n".join(parts)
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS] + f"\n[cut at {RESULT_CHARS} characters]"
    return text, bool(getattr(result, "is_error", False))


def _late(name: str, remote: str, timeout: float) -> str:
    return (
        f"MCP server {name} did not answer {remote} within {timeout:.0f} s "
        "(timeout_s in its settings)"
    )


def _is_protocol_error(exc: BaseException) -> bool:
    """An error the server answered (the session is fine), not a lost connection."""
    from mcp.shared.exceptions import MCPError
    from mcp_types.jsonrpc import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


class McpHub:
    """Connections to the declared servers, on an event loop of their own (see the module).

    Args:
        servers: the declared servers.
    """

    def __init__(self, servers: Sequence[ServerConfig]) -> None:
        self.servers = {s.name: s for s in servers}
        self.status = {s.name: ServerStatus(s.name, s.transport) for s in servers}
        self._clients: dict[str, Any] = {}
        self._dropped: dict[str, asyncio.Event] = {}
        self._ready: dict[str, threading.Event] = {s.name: threading.Event() for s in servers}
        self._loop = asyncio.new_event_loop()
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._tasks: list[concurrent.futures.Future[None]] = []
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ life

    def start(self, wait_s: float = CONNECT_TIMEOUT_S) -> None:
        """Connect to every server; waits up to ``wait_s`` for each to list its tools."""
        if not self.servers:
            return
        self._thread.start()

        async def make_event() -> asyncio.Event:
            return asyncio.Event()

        self._stopping = asyncio.run_coroutine_threadsafe(make_event(), self._loop).result()
        for name in self.servers:
            self._tasks.append(asyncio.run_coroutine_threadsafe(self._hold(name), self._loop))
        deadline = time.monotonic() + wait_s
        for event in self._ready.values():
            event.wait(max(0.0, deadline - time.monotonic()))
        for st in self.status.values():
            if st.state == "connecting":
                st.state, st.message = "failed", f"no answer within {wait_s:.0f} s"
                st.checked_at = time.time()

    def close(self) -> None:
        """Close every session (stopping stdio servers) and the loop."""
        if not self._thread.is_alive():
            return
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        for task in self._tasks:
            with contextlib.suppress(Exception):
                task.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def tools(self) -> list[McpTool]:
        """Every listed tool of every connected server, as engine tools."""
        out = []
        for name, st in self.status.items():
            timeout = self.servers[name].timeout_s
            out += [McpTool(t, self, timeout) for t in st.tools]
        return out

    # ------------------------------------------------------------------ on the loop

    def _client(self, server: ServerConfig) -> Any:
        from mcp import Client, StdioServerParameters

        if server.url:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            headers = resolve_secrets(server.name, server.headers)
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
            return Client(
                streamable_http_client(server.url, http_client=http), raise_exceptions=True
            )
        env = resolve_secrets(server.name, server.env)
        params = StdioServerParameters(
            command=server.command, args=list(server.args), env={**os.environ, **env}
        )
        return Client(params, raise_exceptions=True)

    async def _hold(self, name: str) -> None:
        """Keep ``name``'s session open until the hub closes, opening it again if it drops."""
        server, st = self.servers[name], self.status[name]
        pause = 1.0
        assert self._stopping is not None
        while not self._stopping.is_set():
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    client = self._client(server)
                    await client.__aenter__()
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        listed = await client.list_tools()
                    st.tools = remote_tools(server, listed.tools)
                    st.state, st.message, st.checked_at = "connected", "", time.time()
                    self._clients[name] = client
                    self._ready[name].set()
                    pause = 1.0
                    dropped = self._dropped[name] = asyncio.Event()
                    waits = [asyncio.ensure_future(e.wait()) for e in (self._stopping, dropped)]
                    try:
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for w in waits:
                            w.cancel()
                    if dropped.is_set():
                        st.state = "connecting"
                finally:
                    self._clients.pop(name, None)
                    with contextlib.suppress(BaseException):
                        await client.__aexit__(None, None, None)
            except (Exception, BaseExceptionGroup) as exc:
                st.state, st.message, st.checked_at = "failed", _plain(exc), time.time()
                log.warning("MCP server %s: %s", name, st.message)
                self._ready[name].set()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(pause):
                        await self._stopping.wait()
                pause = min(pause * 2, 60.0)

    async def _call(
        self, name: str, remote: str, args: dict[str, Any], meta: dict[str, Any], timeout: float
    ) -> Any:
        client = self._clients.get(name)
        if client is None:
            raise ConnectionError(self.status[name].message or "not connected")
        return await client.call_tool(remote, args, read_timeout_seconds=timeout, meta=meta)

    # ------------------------------------------------------------------ calls

    def call(
        self, name: str, remote: str, args: dict[str, Any], meta: dict[str, Any], timeout: float
    ) -> ToolResult:
        """Call ``remote`` on server ``name``; any failure is an error result, never raised."""
        if name not in self.servers or not self._thread.is_alive():
            return ToolResult(f"MCP server {name} is not connected", True)
        if self.status[name].state == "connecting":  # reconnecting after a drop: wait a bit
            self._ready[name].wait(min(timeout, CONNECT_TIMEOUT_S))
        future = asyncio.run_coroutine_threadsafe(
            self._call(name, remote, args, meta, timeout), self._loop
        )
        try:
            result = future.result(timeout=timeout + 5)
        except (FutureTimeout, TimeoutError):
            future.cancel()
            return ToolResult(_late(name, remote, timeout), True)
        except (Exception, BaseExceptionGroup) as exc:
            message = _plain(exc)
            if "timed out" in message:
                return ToolResult(_late(name, remote, timeout), True)
            log.warning("MCP server %s, tool %s: %s", name, remote, message)
            dropped = self._dropped.get(name)
            if dropped is not None and not _is_protocol_error(exc):
                st = self.status[name]
                st.state, st.message = "connecting", f"the session dropped ({message})"
                self._ready[name].clear()
                self._loop.call_soon_threadsafe(dropped.set)  # the next call reconnects
            return ToolResult(f"MCP server {name} failed to run {remote}: {message}", True)
        text, is_error = _result_text(result)
        return ToolResult(text or ("(no content)" if not is_error else "the tool failed"), is_error)

    def catalogue(self) -> dict[str, JSON]:
        """Servers, their status and tools, for the catalogue file."""
        return {
            "written_at": time.time(),
            "servers": [st.to_json() for st in self.status.values()],
        }


# --------------------------------------------------------------------------- catalogue

CATALOGUE_FILE = "mcp-tools.json"
"""Beside the database: the servers, their status and tools as last listed by a worker or
``desktop-agent mcp list``. The app and the CLI read it to offer MCP tools to new runs
without connecting to servers themselves."""


def write_catalogue(path: Path, data: Mapping[str, JSON]) -> None:
    """Write the catalogue atomically (private file: tool schemas may say much)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def read_catalogue(path: Path) -> dict[str, Any]:
    """The catalogue, or an empty one when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"servers": []}
    return (
        data
        if isinstance(data, dict) and isinstance(data.get("servers"), list)
        else {"servers": []}
    )


def listed_tools(path: Path) -> list[McpTool]:
    """The catalogue's tools as engine tools that cannot be called (for the app and CLI)."""
    out = []
    for server in read_catalogue(path)["servers"]:
        for raw in server.get("tools") or [] if isinstance(server, dict) else []:
            with contextlib.suppress(KeyError, TypeError, ValueError):
                out.append(McpTool(RemoteTool.from_json(raw), None))
    return out


def start_hub(raw_servers: Sequence[Mapping[str, Any]], catalogue: Path | None) -> McpHub | None:
    """Connect to the declared servers and write the catalogue; None when none is declared.

    A declaration that cannot be used is logged and written to the catalogue as the
    reason no server was started: the worker goes on with its other tools.
    """
    if not raw_servers:
        if catalogue is not None and catalogue.exists():
            write_catalogue(catalogue, {"written_at": time.time(), "servers": []})
        return None
    try:
        servers = parse_servers(raw_servers)
    except InvalidInputError as exc:
        log.error("MCP servers not started: %s", exc)
        if catalogue is not None:
            write_catalogue(
                catalogue, {"written_at": time.time(), "servers": [], "error": str(exc)}
            )
        return None
    hub = McpHub(servers)
    hub.start()
    if catalogue is not None:
        write_catalogue(catalogue, hub.catalogue())
    return hub
