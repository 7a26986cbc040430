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

Arguments. A call's arguments are checked against the tool's input schema, at every depth,
before anything is sent (:func:`desktop_agent.engine.schema.schema_problem`, the
``jsonschema`` library, references resolved inside the schema only): the model reads the
path of each bad field (``filters[2].since: 'soon' is not of type 'number'``), and an
analyst's edit of a pending call is refused the same way before it is recorded
(:mod:`desktop_agent.engine.edits`).

Failures. A server that cannot be started or reached, that is slower than ``timeout_s``,
or that answers something unreadable gives the model an error result saying so, and the
server's status (shown by ``desktop-agent mcp list``, the Settings dialog) says what went
wrong; nothing raises out of the worker. A dropped session is opened again on the next
call, with a growing pause between attempts. A call that times out resets its server's
session (a stdio server is stopped and started again): a server stuck in one call does
not make every later call wait. After :data:`FAIL_AFTER` failures in a row the server is
marked failed (its status and the catalogue say so, with the last failure): its calls
fail at once until a reconnection, tried after a pause, works (:class:`McpHub`).

Long answers. A result reaches the model cut at :data:`RESULT_CHARS` characters (the
built-in tools' limit), with a note saying so. Messages are read incrementally, each held
up to :data:`MESSAGE_BYTES` bytes (:class:`_Lines` over stdio, :func:`_cut_body` over
HTTP): a longer answer is not gathered whole but cut while it arrives, and the run gets
its first characters with a note saying how many bytes the server sent and how many were
read. So a server answering 50 MB costs a few megabytes of memory and one pass over the
bytes, not a timeout.

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
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.engine.ports import ToolContext, ToolInputError, ToolResult
from desktop_agent.engine.schema import schema_problem
from desktop_agent.tools.files import MAX_READ_CHARS

if TYPE_CHECKING:  # imported where a server is reached by URL
    import httpx2

log = logging.getLogger(__name__)

SECRET_SERVICE = "desktop-agent-mcp"
"""The keyring service of MCP secrets: :data:`desktop_agent.secrets.MCP_SERVICE`."""
"""Keyring service of MCP secrets; the user name is ``<server>/<NAME>``."""

SEPARATOR = "__"
"""Between a server's name and its tool's in the name the model sees."""

MAX_NAME = 64
"""The longest tool name the Messages API accepts."""

DEFAULT_TIMEOUT_S = 60.0
"""How long one call may take unless a server's settings say otherwise."""

CONNECT_TIMEOUT_S = 20.0
"""How long connecting to a server and listing its tools may take."""

RESULT_CHARS = MAX_READ_CHARS
"""The most characters of a result given to the model (the built-in tools' limit)."""

FAIL_AFTER = 3
"""Failures in a row (timeouts, lost sessions) after which a server is marked failed."""

RETRY_FAILED_S = 30.0
"""How long a server marked failed waits before it is connected again (doubling, to 10 min)."""

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
        from desktop_agent.secrets import mcp_secret  # the keyring only when one is named

        secret = mcp_secret(server, ref)  # a broken keyring reads as a missing secret
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

    def check_arguments(self, args: Mapping[str, JSON]) -> None:
        """Refuse ``args`` that do not fit the server's schema, at any depth.

        Raises:
            ToolInputError: the path of each bad field and what is wrong with it (see
                :func:`desktop_agent.engine.schema.schema_problem`).
        """
        problem = schema_problem(self.spec.input_schema, args)
        if problem is not None:
            raise ToolInputError(problem)

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        """Call the remote tool with the step's idempotency key in ``_meta``.

        The arguments are checked against the server's schema first: a call that does not
        fit never reaches the server.
        """
        self.check_arguments(args)
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
        """No rule of its own: the effect class decides (``ask_unsafe``).

        Raises:
            ToolInputError: the arguments do not fit the schema (the call will not run).
        """
        self.check_arguments(args)
        return None

    def validate(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """Before an approved call (or an edit is recorded): the arguments fit the schema.

        Raises:
            ToolInputError: they do not (the path of each bad field is named).
        """
        self.check_arguments(args)
        return None

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        """A server cannot be asked whether a call happened: the analyst decides."""
        return None

    def effect_of(self, args: Mapping[str, JSON], ctx: ToolContext) -> EffectClass:
        """The tool's own class."""
        return self.effect

    def timeout_s(self, args: Mapping[str, JSON], ctx: ToolContext) -> float | None:
        """The server's call timeout, plus a reconnection's (the lease is made to outlast it)."""
        return self.timeout + CONNECT_TIMEOUT_S


# --------------------------------------------------------------------------- reading answers

MESSAGE_BYTES = 4 * 1024 * 1024
"""The most bytes of one message from a server held in memory (see :class:`_Cut`)."""

CUT_META = "io.desktop-agent/cut"
"""Key in a cut result's ``_meta``: how many bytes the server sent and how many were read."""

_STRUCTURAL = re.compile(rb'[{}\[\]",:]')
_STRING_STOP = re.compile(rb'["\\]')
_TOKEN_BYTES = 1024  # a top-level key or scalar (the id) is never longer


class _Cut:
    """One message longer than ``cap`` bytes, read as it arrives without holding it whole.

    It keeps the first ``cap`` bytes and, over the whole message, the JSON structure's
    depth and the top-level members' small values (so the ``id`` is found wherever the
    server put it, first or last). Memory: ``cap`` bytes plus a few small tokens, however
    long the message is. :meth:`message` turns it into a message the session can read.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.size = 0
        self.stack: list[int] = []  # b"{" or b"[" per open container
        self.keys: list[bool] = []  # per container: a key comes next (objects only)
        self.in_string = False
        self.escaped = False
        self.string_is_key = False
        self.escape_at = -1  # where the current string's last escape began, in the head
        self.unicode_escape = False
        self.scalar = False  # a number or literal is being read
        self.token = bytearray()
        self.key = b""
        self.top: dict[bytes, bytes] = {}  # top-level members: key -> raw scalar (b"" for more)
        self.safe = 0  # head[:safe] + safe_closers is complete JSON
        self.safe_closers = b""
        self.at_cap: tuple[bool, bool, bool, bytes, int, bool] | None = None

    def feed(self, data: bytes) -> None:
        """Read the next bytes of the message."""
        room = self.cap - len(self.head)
        if room > 0:
            part = data[:room]
            self.head += part
            self._scan(part, self.size, True)
            self.size += len(part)
            data = data[room:]
            if len(self.head) == self.cap:
                self.at_cap = (
                    self.in_string,
                    self.escaped,
                    self.string_is_key,
                    self._closers(),
                    self.escape_at,
                    self.unicode_escape,
                )
        if data:
            self._scan(data, self.size, False)
            self.size += len(data)

    def _closers(self) -> bytes:
        return bytes(0x7D if c == 0x7B else 0x5D for c in reversed(self.stack))

    def _mark_safe(self, pos: int) -> None:
        self.safe, self.safe_closers = pos, self._closers()

    def _scan(self, data: bytes, base: int, in_head: bool) -> None:
        i, n = 0, len(data)
        while i < n:
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                    self.unicode_escape = data[i] == 0x75  # \uXXXX
                    self._keep(data, i, i + 1)
                    i += 1
                    continue
                m = _STRING_STOP.search(data, i)
                j = m.start() if m else n
                self._keep(data, i, j)
                if m is None:
                    return
                if data[j] == 0x5C:
                    self.escaped, self.escape_at = True, base + j
                    self._keep(b"\\")
                else:
                    self.in_string = False
                    self._string_end(base + j + 1, in_head)
                i = j + 1
                continue
            m = _STRUCTURAL.search(data, i)
            j = m.start() if m else n
            if j > i:
                gap = data[i:j].strip()
                if gap:
                    self.scalar = True
                    self._keep(gap)
            if m is None:
                return
            self._structural(data[j], base + j, in_head)
            i = j + 1

    def _keep(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        """Keep ``data[start:end]`` when it is part of a top-level token (copied only then)."""
        if len(self.stack) == 1 and len(self.token) < _TOKEN_BYTES:
            end = len(data) if end is None else end
            self.token += data[start : min(end, start + _TOKEN_BYTES - len(self.token))]

    def _string_end(self, pos: int, in_head: bool) -> None:
        if len(self.stack) == 1:
            if self.string_is_key:
                self.key = bytes(self.token)
            else:
                self.top[self.key] = b'"' + bytes(self.token) + b'"'
            self.token = bytearray()
        if in_head and not self.string_is_key:
            self._mark_safe(pos)

    def _scalar_end(self, pos: int, in_head: bool) -> None:
        if self.scalar:
            if len(self.stack) == 1:
                self.top[self.key] = bytes(self.token)
            if in_head:
                self._mark_safe(pos)
        self.scalar = False
        if len(self.stack) == 1:
            self.token = bytearray()

    def _structural(self, c: int, pos: int, in_head: bool) -> None:
        if c == 0x22:  # "
            self.in_string, self.unicode_escape, self.escape_at = True, False, -1
            self.string_is_key = bool(self.keys) and self.keys[-1]
            if len(self.stack) == 1:
                self.token = bytearray()
        elif c in (0x7B, 0x5B):  # { [
            self._open(c, pos, in_head)
        elif c in (0x7D, 0x5D):  # } ]
            self._close(pos, in_head)
        elif c == 0x3A:  # :
            if self.keys:
                self.keys[-1] = False
        elif c == 0x2C:  # ,
            self._scalar_end(pos, in_head)
            if self.stack and self.stack[-1] == 0x7B:
                self.keys[-1] = True

    def _open(self, c: int, pos: int, in_head: bool) -> None:
        if len(self.stack) == 1:
            self.top[self.key] = b""
        self.stack.append(c)
        self.keys.append(c == 0x7B)
        if in_head:
            self._mark_safe(pos + 1)

    def _close(self, pos: int, in_head: bool) -> None:
        self._scalar_end(pos, in_head)
        if self.stack:
            self.stack.pop()
            self.keys.pop()
        if in_head:
            self._mark_safe(pos + 1)

    def completed(self) -> bytes:
        """The head made complete JSON: an open text cut short and closed, the rest dropped."""
        if self.at_cap is not None:
            in_string, escaped, is_key, closers, escape_at, unicode_escape = self.at_cap
            if in_string and not is_key:
                end = self.cap
                if escaped or (unicode_escape and escape_at > end - 6):
                    end = escape_at  # not half an escape
                end = _whole_chars(self.head, end)
                return bytes(self.head[:end]) + b'"' + closers
        return bytes(self.head[: self.safe]) + self.safe_closers

    def member(self, key: str) -> Any:
        """A top-level scalar member (None when absent or not a scalar)."""
        raw = self.top.get(key.encode())
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def message(self, methods: Mapping[Any, str]) -> Any:
        """The message to hand to the session, or None to drop it (logged).

        A response to ``tools/call`` becomes a result holding the text that was read
        (cut at :data:`RESULT_CHARS`) and :data:`CUT_META`; a response to anything else
        becomes an error saying how long it was.
        """
        from mcp.shared.message import SessionMessage
        from mcp_types.jsonrpc import jsonrpc_message_adapter

        rid = self.member("id")
        if b"method" in self.top or not isinstance(rid, int | str) or isinstance(rid, bool):
            log.warning("an MCP server sent a message of %d bytes: dropped", self.size)
            return None
        try:
            partial = json.loads(self.completed().decode("utf-8", "replace"))
        except ValueError:
            partial = None
        body = partial.get("result") if isinstance(partial, dict) else None
        said = f"the server answered {self.size:,} bytes, more than the {self.cap:,} read"
        if methods.get(rid) != "tools/call" or b"error" in self.top:
            error = partial.get("error") if isinstance(partial, dict) else None
            text = str(error.get("message", "")) if isinstance(error, dict) else ""
            message = f"{text[:300]} ({said})" if text else said
            raw: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32603, "message": message},
            }
        else:
            raw = {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "content": [{"type": "text", "text": _partial_text(body)}],
                    # an error to the SDK, which then does not hold a cut answer to the
                    # tool's output schema; the hub reads the server's own flag in _meta
                    "isError": True,
                    "resultType": "complete",
                    "_meta": {
                        CUT_META: {
                            "received_bytes": self.size,
                            "read_bytes": self.cap,
                            "is_error": isinstance(body, dict) and body.get("isError") is True,
                        }
                    },
                },
            }
        return SessionMessage(jsonrpc_message_adapter.validate_python(raw))


def _whole_chars(data: bytearray, end: int) -> int:
    """``end``, or where the UTF-8 character that ``end`` cuts in two begins."""
    start = end
    while start > 0 and end - start < 3 and data[start - 1] & 0xC0 == 0x80:
        start -= 1  # continuation bytes
    if start > 0 and data[start - 1] >= 0xC0:
        lead = data[start - 1]
        length = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        if end - start + 1 < length:
            return start - 1
    return end


def _partial_text(result: Any) -> str:
    """The text blocks of a result read in part (other kinds named, not shown)."""
    parts = []
    content = result.get("content") if isinstance(result, dict) else None
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("text", None) and isinstance(block.get("text"), str):  # type may come last
            parts.append(block["text"])
        else:
            parts.append(f"[{kind or 'unknown'} content not shown]")
    if not parts and isinstance(result, dict) and "structuredContent" in result:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    text = "\n".join(parts)[:RESULT_CHARS]
    if text and "\ud800" <= text[-1] <= "\udbff":  # half of a pair cut in two
        text = text[:-1]
    return text


class _Lines:
    """Messages of a byte stream, one a line, each held up to ``cap`` bytes (see :class:`_Cut`).

    ``feed`` returns the lines a chunk completed: whole ones as bytes, longer ones as
    :class:`_Cut`. Memory: at most ``cap`` bytes of the line being read, plus the chunk.
    """

    def __init__(self, cap: int = MESSAGE_BYTES, sse: bool = False) -> None:
        self.cap = cap
        self.sse = sse  # lines of server-sent events: a message follows ``data:``
        self.line = bytearray()
        self.cut: _Cut | None = None

    def feed(self, chunk: bytes) -> list[bytes | _Cut]:
        """The lines ``chunk`` ends."""
        out: list[bytes | _Cut] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            self._add(chunk[start : len(chunk) if end < 0 else end])
            if end < 0:
                return out
            out.append(self.cut if self.cut is not None else bytes(self.line))
            self.line, self.cut = bytearray(), None
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if self.cut is None and len(self.line) + len(piece) <= self.cap:
            self.line += piece
            return
        if self.cut is None:
            self.cut = _Cut(self.cap)
            start = bytes(self.line)
            if self.sse:  # the field's name is not part of the message
                start = start.removeprefix(b"data:").removeprefix(b" ")
            self.cut.feed(start)
            self.line = bytearray()
        self.cut.feed(piece)


def _read_line(line: bytes | _Cut, methods: dict[Any, str]) -> Any:
    """What one line from a server is for the session (None: nothing)."""
    from mcp.shared.message import SessionMessage
    from mcp_types.jsonrpc import JSONRPCError, JSONRPCResponse, jsonrpc_message_adapter

    if isinstance(line, _Cut):
        message = line.message(methods)
        rid = line.member("id")
    else:
        if not line.strip():
            return None
        try:
            parsed = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            log.warning("an MCP server sent a line that is not JSON-RPC: %s", _plain(exc))
            return exc
        message = SessionMessage(parsed)
        rid = (
            getattr(parsed, "id", None)
            if isinstance(parsed, JSONRPCResponse | JSONRPCError)
            else None
        )
    if rid is not None:
        methods.pop(rid, None)
    return message


@contextlib.asynccontextmanager
async def _stdio(
    params: Any, stuck: Callable[[], bool] = lambda: False, cap: int = MESSAGE_BYTES
) -> AsyncIterator[Any]:
    """The SDK's stdio transport with each message read through :class:`_Lines`.

    The server is started and stopped as the SDK does (its own process group; stdin
    closed, then terminated, then killed; at once terminated when ``stuck()`` says the
    session ends because the server stopped answering); what differs is the reading: a
    line is cut at ``cap`` bytes instead of being gathered whole, so a server answering
    50 MB costs ``cap`` bytes of memory and one pass over the bytes, and the session
    goes on.
    """
    import anyio
    from mcp.client import stdio as sdk
    from mcp.shared.message import SessionMessage
    from mcp_types.jsonrpc import JSONRPCRequest

    command = await sdk._get_executable_command(params.command)
    process = await sdk._create_platform_compatible_process(
        command=command, args=params.args, env=params.env, errlog=sys.stderr, cwd=params.cwd
    )
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    methods: dict[Any, str] = {}  # requests sent and not answered: id -> method

    async def reader() -> None:
        assert process.stdout is not None
        lines = _Lines(cap)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with to_session:
                async for chunk in process.stdout:
                    for line in lines.feed(chunk):
                        message = _read_line(line, methods)
                        if message is not None:
                            await to_session.send(message)

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for sent in from_session:
                    if isinstance(sent.message, JSONRPCRequest):
                        methods[sent.message.id] = sent.message.method
                    data = sent.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the session sees the end instead of waiting

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                if stuck() and process.returncode is None:
                    await sdk._terminate_process_tree(process)
                await sdk._stop_server_process(process)
                for stream in (read_stream, write_stream, to_session, from_session):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


def _request_methods(request: Any) -> dict[Any, str]:
    """The id and method of the JSON-RPC request an HTTP request carries (empty if none)."""
    try:
        sent = json.loads(request.content or b"null")
    except (ValueError, RuntimeError):  # not JSON, or a body not read yet
        return {}
    if isinstance(sent, dict) and "id" in sent and isinstance(sent.get("method"), str):
        return {sent["id"]: sent["method"]}
    return {}


def _encoded(message: Any) -> bytes:
    """A message from :class:`_Cut` as JSON text (nothing for a dropped one)."""
    if message is None:
        return b""
    return str(message.message.model_dump_json(by_alias=True, exclude_unset=True)).encode()


async def _cut_body(
    inner: AsyncIterator[bytes], sse: bool, methods: dict[Any, str], cap: int
) -> AsyncIterator[bytes]:
    """An HTTP response body of JSON-RPC read through :class:`_Cut` / :class:`_Lines`.

    A JSON body longer than ``cap`` becomes the message :meth:`_Cut.message` makes; in an
    event stream each ``data:`` line longer than ``cap`` does. Memory: ``cap`` bytes plus
    one chunk.
    """
    if sse:
        lines = _Lines(cap, sse=True)
        async for chunk in inner:
            for line in lines.feed(chunk):
                if isinstance(line, _Cut):
                    message = _encoded(line.message(methods))
                    yield b"data: " + message + b"\n" if message else b"\n"
                else:
                    yield line + b"\n"
        if lines.cut is None and lines.line:  # an unfinished last line, as it came
            yield bytes(lines.line)
        return
    held, cut = bytearray(), None
    async for chunk in inner:
        if cut is None and len(held) + len(chunk) <= cap:
            held += chunk
            continue
        if cut is None:
            cut = _Cut(cap)
            cut.feed(bytes(held))
            held = bytearray()
        cut.feed(chunk)
    yield bytes(held) if cut is None else _encoded(cut.message(methods))


def _http_transport(
    inner: httpx2.AsyncBaseTransport, cap: int = MESSAGE_BYTES
) -> httpx2.AsyncBaseTransport:
    """An HTTP transport whose JSON-RPC answers are read through :func:`_cut_body`.

    Args:
        inner: the transport that carries the requests (made by
            :func:`desktop_agent.http_client.mcp_client`).
        cap: see :func:`_cut_body`.

    Bodies sent compressed are left as they are (the hub asks for them uncompressed).
    """
    import httpx2

    class Body(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, sse: bool, methods: dict[Any, str]) -> None:
            self.inner, self.sse, self.methods = inner, sse, methods

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for part in _cut_body(self.inner, self.sse, self.methods, cap):
                yield part

        async def aclose(self) -> None:
            await self.inner.aclose()

    class Transport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = inner

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await self.inner.handle_async_request(request)
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            encoded = response.headers.get("content-encoding", "identity") != "identity"
            if kind not in ("application/json", "text/event-stream") or encoded:
                return response
            headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
            sse = kind == "text/event-stream"
            return httpx2.Response(
                response.status_code,
                headers=headers,
                stream=Body(response.stream, sse, _request_methods(request)),
                extensions=response.extensions,
                request=request,
            )

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Transport()


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
    """The model's text of a ``CallToolResult``, and whether it is an error.

    Cut at :data:`RESULT_CHARS`, with a note saying so: how many characters there were,
    or, for an answer the transport already cut (:data:`CUT_META`), how many bytes the
    server sent and how many were read.
    """
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
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts)
    meta = getattr(result, "meta", None)
    cut = meta.get(CUT_META) if isinstance(meta, dict) else None
    if isinstance(cut, dict):
        received, read = (int(cut.get(k) or 0) for k in ("received_bytes", "read_bytes"))
        text = text[:RESULT_CHARS] + (
            f"\n[cut: the server answered {received:,} bytes; the first {read:,} were "
            f"read and at most {RESULT_CHARS:,} characters are kept]"
        )
        return text, cut.get("is_error") is True
    if len(text) > RESULT_CHARS:
        text = text[:RESULT_CHARS] + f"\n[cut at {RESULT_CHARS:,} of {len(text):,} characters]"
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

    A call that times out resets its server's session (a stdio server is stopped and
    started again, an HTTP session opened anew), so the next call finds a server that
    answers. After :data:`FAIL_AFTER` failures in a row (timeouts, lost sessions) the
    server is marked failed: its calls fail at once, saying so, instead of each waiting
    its timeout; it is connected again after ``retry_failed_s`` (doubling each time it
    is marked again, up to 10 minutes) and its calls work again once it answers. The
    catalogue file, when given, is rewritten whenever a server is marked failed or
    comes back.

    Args:
        servers: the declared servers.
        catalogue: the catalogue file to keep current (None: none).
        retry_failed_s: the first pause before a server marked failed is tried again.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        catalogue: Path | None = None,
        retry_failed_s: float = RETRY_FAILED_S,
    ) -> None:
        self.servers = {s.name: s for s in servers}
        self.status = {s.name: ServerStatus(s.name, s.transport) for s in servers}
        self.catalogue_path = catalogue
        self.retry_failed_s = retry_failed_s
        self._failures = {s.name: 0 for s in servers}
        self._retry = {s.name: retry_failed_s for s in servers}
        self._clients: dict[str, Any] = {}
        self._http: dict[str, Any] = {}  # a server's HTTP client: ours to close, not the SDK's
        self._dropped: dict[str, asyncio.Event] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._ready: dict[str, threading.Event] = {s.name: threading.Event() for s in servers}
        self._loop = asyncio.new_event_loop()
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._tasks: list[concurrent.futures.Future[None]] = []
        self._lock = threading.Lock()
        self._started = False
        self._closed = False

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
        self._started = True
        self.write_catalogue()

    def close(self) -> None:
        """Close every session (stopping stdio servers) and the loop."""
        self._closed = True
        if not self._thread.is_alive():
            if not self._loop.is_running():
                self._loop.close()  # never started (no servers), or closed before
            return
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        for task in self._tasks:
            with contextlib.suppress(Exception):
                task.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            # What closing the sessions left for the loop (a closed connection's last
            # callback, which closes its socket) runs here, then the loop closes (its
            # self-pipe): otherwise both are left to the garbage collector.
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def tools(self) -> list[McpTool]:
        """Every listed tool of every connected server, as engine tools."""
        out = []
        for name, st in self.status.items():
            timeout = self.servers[name].timeout_s
            out += [McpTool(t, self, timeout) for t in st.tools]
        return out

    def write_catalogue(self) -> None:
        """Write the catalogue file (when there is one) with the servers as they are now."""
        if self.catalogue_path is None or self._closed:
            return
        with self._lock:
            try:
                write_catalogue(self.catalogue_path, self.catalogue())
            except OSError as exc:
                log.warning("MCP catalogue not written: %s", exc)

    def reconnect(self, name: str) -> None:
        """Connect to a failed server now rather than after its pause."""
        wake = self._wake.get(name)
        if wake is not None:
            self._loop.call_soon_threadsafe(wake.set)

    # ------------------------------------------------------------------ on the loop

    def _client(self, server: ServerConfig) -> Any:
        from mcp import Client, StdioServerParameters

        if server.url:
            from mcp.client.streamable_http import streamable_http_client

            from desktop_agent.http_client import mcp_client

            headers = {"Accept-Encoding": "identity"}  # bodies are cut as they come
            headers.update(resolve_secrets(server.name, server.headers))
            http = mcp_client(headers, _http_transport)
            self._http[server.name] = http  # closed by _hold when the session ends
            events = MESSAGE_BYTES + 65_536  # the longest event left whole, with its fields
            transport = streamable_http_client(
                server.url, http_client=http, max_sse_event_size=events
            )
            return Client(transport, raise_exceptions=True)
        env = resolve_secrets(server.name, server.env)
        params = StdioServerParameters(
            command=server.command, args=list(server.args), env={**os.environ, **env}
        )
        st = self.status[server.name]
        return Client(_stdio(params, lambda: st.state != "connected"), raise_exceptions=True)

    def _marked(self, name: str) -> bool:
        """Whether calls marked ``name`` failed (see the class)."""
        return self._failures[name] >= FAIL_AFTER

    async def _hold(self, name: str) -> None:
        """Keep ``name``'s session open until the hub closes, opening it again if it drops."""
        server, st = self.servers[name], self.status[name]
        pause = 1.0
        assert self._stopping is not None
        self._wake[name] = asyncio.Event()
        while not self._stopping.is_set():
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    client = self._client(server)
                    await client.__aenter__()
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        listed = await client.list_tools()
                    st.tools = remote_tools(server, listed.tools)
                    was = st.state
                    st.state, st.message, st.checked_at = "connected", "", time.time()
                    self._clients[name] = client
                    self._ready[name].set()
                    if was == "failed" and self._started:
                        self.write_catalogue()  # back after being marked failed
                    pause = 1.0
                    dropped = self._dropped[name] = asyncio.Event()
                    waits = [asyncio.ensure_future(e.wait()) for e in (self._stopping, dropped)]
                    try:
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for w in waits:
                            w.cancel()
                    if dropped.is_set() and st.state == "connected":
                        st.state = "connecting"
                finally:
                    self._clients.pop(name, None)
                    with contextlib.suppress(BaseException):
                        await client.__aexit__(None, None, None)
            except (Exception, BaseExceptionGroup) as exc:
                st.state, st.message, st.checked_at = "failed", _plain(exc), time.time()
                log.warning("MCP server %s: %s", name, st.message)
                self._ready[name].set()
                if self._started:
                    self.write_catalogue()
                await self._pause(name, pause)
                pause = min(pause * 2, 60.0)
                continue
            finally:
                http = self._http.pop(name, None)
                if http is not None:  # its pooled connections (the SDK leaves them open)
                    with contextlib.suppress(BaseException):
                        await http.aclose()
            if self._marked(name):  # its calls kept failing: leave it a while
                retry = self._retry[name]
                self._retry[name] = min(retry * 2, 600.0)
                await self._pause(name, retry)

    async def _pause(self, name: str, seconds: float) -> None:
        """Wait ``seconds``, or less when the hub closes or :meth:`reconnect` is called."""
        assert self._stopping is not None
        wake = self._wake[name]
        waits = [asyncio.ensure_future(e.wait()) for e in (self._stopping, wake)]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        wake.clear()

    async def _call(
        self, name: str, remote: str, args: dict[str, Any], meta: dict[str, Any], timeout: float
    ) -> Any:
        client = self._clients.get(name)
        if client is None:
            raise ConnectionError(self.status[name].message or "not connected")
        return await client.call_tool(remote, args, read_timeout_seconds=timeout, meta=meta)

    # ------------------------------------------------------------------ calls

    def _answered(self, name: str) -> None:
        """The server answered: its failures in a row start again from none."""
        with self._lock:
            self._failures[name] = 0
            self._retry[name] = self.retry_failed_s

    def _failed(self, name: str, why: str) -> str:
        """Count a failure and reset the session; what the run is told beyond the failure.

        The session is closed and opened again (a stdio server restarted) at once, or,
        at :data:`FAIL_AFTER` failures in a row, after the server's retry pause, the
        server marked failed meanwhile.
        """
        st = self.status[name]
        with self._lock:
            if st.state != "connected":  # already being reset: one failure, not two
                return "; its session is being reset"
            self._failures[name] += 1
            failures = self._failures[name]
        note = "; its session was reset (the next call starts it anew)"
        if failures >= FAIL_AFTER:
            st.state = "failed"
            st.message = (
                f"marked failed after {failures} failures in a row (last: {why}); "
                f"tried again in {self._retry[name]:.0f} s"
            )
            note = (
                f"; the server is marked failed after {failures} failures in a row: its "
                "calls fail at once until it is reconnected and answers again"
            )
        else:
            st.state, st.message = "connecting", f"reconnecting after: {why}"
        st.checked_at = time.time()
        self._ready[name].clear()
        dropped = self._dropped.get(name)
        if dropped is not None:
            self._loop.call_soon_threadsafe(dropped.set)
        if failures >= FAIL_AFTER:
            log.warning("MCP server %s: %s", name, st.message)
            self.write_catalogue()
        return note

    def call(
        self, name: str, remote: str, args: dict[str, Any], meta: dict[str, Any], timeout: float
    ) -> ToolResult:
        """Call ``remote`` on server ``name``; any failure is an error result, never raised."""
        if name not in self.servers or not self._thread.is_alive():
            return ToolResult(f"MCP server {name} is not connected", True)
        st = self.status[name]
        if st.state == "connecting":  # reconnecting after a drop or a reset: wait for it
            self._ready[name].wait(CONNECT_TIMEOUT_S)
        if st.state == "failed":
            return ToolResult(f"MCP server {name} is failed: {st.message}", True)
        future = asyncio.run_coroutine_threadsafe(
            self._call(name, remote, args, meta, timeout), self._loop
        )
        try:
            result = future.result(timeout=timeout + 5)
        except (FutureTimeout, TimeoutError):
            future.cancel()
            return ToolResult(_late(name, remote, timeout) + self._failed(name, "a timeout"), True)
        except (Exception, BaseExceptionGroup) as exc:
            message = _plain(exc)
            if "timed out" in message:
                note = self._failed(name, "a timeout")
                return ToolResult(_late(name, remote, timeout) + note, True)
            log.warning("MCP server %s, tool %s: %s", name, remote, message)
            if _is_protocol_error(exc):  # it answered: the session is fine
                self._answered(name)
                return ToolResult(f"MCP server {name} failed to run {remote}: {message}", True)
            note = self._failed(name, f"the session dropped ({message})")
            return ToolResult(f"MCP server {name} failed to run {remote}: {message}{note}", True)
        self._answered(name)
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
    hub = McpHub(servers, catalogue)
    hub.start()  # writes the catalogue, and again when a server fails or comes back
    return hub
