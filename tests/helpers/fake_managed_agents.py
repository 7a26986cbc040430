"""A local fake of the Managed Agents sessions API that the real SDK talks to.

The server listens on 127.0.0.1 on a free port, in a thread of the test process (as
:mod:`tests.helpers.fake_anthropic` does), and serves what desktop-agent reads and sends:

* ``GET /v1/sessions`` (``limit``, ``order``, ``page``; ``data``, ``next_page``,
  ``prev_page``), ``GET /v1/sessions/{id}``;
* ``GET /v1/sessions/{id}/events`` (oldest first by default; ``limit`` up to 1000, the
  default; ``order``; ``page``; ``created_at[gt|gte|lt|lte]`` compared with each event's
  ``processed_at``; ``types[]``);
* ``POST /v1/sessions/{id}/events`` (``{"events": [...]}``: ``user.message``,
  ``user.interrupt``, ``user.tool_confirmation``, ``user.custom_tool_result``; answered
  with the events taken, ids and ``processed_at`` set);
* ``GET /v1/sessions/{id}/events/stream``: Server-Sent Events, one frame per event appended
  after the connection opened (``event:`` the event's type, ``data:`` the event), and a
  ``ping`` frame every ``ping_s`` seconds; no replay.

Every request needs the API key (``x-api-key``, or ``Authorization: Bearer`` as the SDK 2.x
sends it) and ``anthropic-version``; a Managed Agents request also the beta header
``anthropic-beta: managed-agents-2026-04-01``. The errors are the API's error objects
(``{"type": "error", "error": {"type", "message"}, "request_id"}``): 401
``authentication_error`` for a missing or wrong key; 404 ``not_found_error`` for an unknown
session or route, and for a request without the beta header (the events page says the
beta-gated endpoints do not exist without it); 400 ``invalid_request_error`` for a body the
API refuses.

A test scripts each session (:class:`FakeSession`): it appends the agent's events in the
documented shapes (``span.model_request_start``/``_end`` with ``model_usage``,
``agent.message``, ``agent.tool_use`` with ``evaluated_permission``, ``agent.tool_result``,
``session.status_*``, ``session.error``, ``session.usage``), makes the session stop with
``stop_reason: requires_action`` on tool uses (:meth:`FakeSession.ask`) and goes on only
once each of them got a ``user.tool_confirmation``: ``allow`` runs the tool (its result is
appended), ``deny`` appends an ``is_error`` result carrying the ``deny_message``.

Documentation relied on (read 2026-11-27): the SDK's ``beta.sessions`` resources and
``types/beta/sessions`` (paths, query names, event fields, ``requires_action.event_ids``,
``deny_message`` "only allowed when result is 'deny'"), the Managed Agents events and
streaming page (events persisted with ``id``, ``type``, ``processed_at``; ``limit``
default 1000; a ``user.interrupt`` forces the session idle and the interrupted turn ends
with ``stop_reason: end_turn``; an interrupt against an idle session is a no-op; the stream
echoes user events and has no replay). Chosen here, not documented: a confirmation for an
event that is not awaiting one is a 400 ``invalid_request_error``; the SSE ``event:`` name
is the event's type and the heartbeat a ``ping`` frame; the list's ``page_N`` cursors; the
messages of the errors.
"""

from __future__ import annotations

import itertools
import json
import operator
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BETA = "managed-agents-2026-04-01"
KEY = "sk-ant-api03-managed-fake-0123456789"
SENDABLE = ("user.message", "user.interrupt", "user.tool_confirmation", "user.custom_tool_result")

PRICES = {"input": 5.0, "output": 25.0, "cache_write": 6.25, "cache_read": 0.5}
"""Dollars per million tokens the fake's list cost uses (a session's ``usage.list_cost``)."""


class ApiError(Exception):
    """An error answer: status, error type, message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


@dataclass
class Recorded:
    """One request the fake answered."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    status: int = 200


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _parse(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


Then = Callable[["FakeSession"], None]


@dataclass
class _Ask:
    """Tool uses a session waits on, what each returns when allowed, what follows."""

    ids: list[str]
    results: dict[str, str]
    then: Then | None
    answers: dict[str, tuple[str, str]] = field(default_factory=dict)


class FakeSession:
    """One scripted session (its events, status and usage)."""

    def __init__(self, fake: FakeManagedAgents, session_id: str, title: str, model: str) -> None:
        self.fake = fake
        self.id = session_id
        self.title = title
        self.model = model
        self.agent_name = "Research agent"
        self.status = "idle"
        self.created = fake.tick()
        self.updated = self.created
        self.events: list[dict[str, Any]] = []
        self.tokens = {"input": 0, "output": 0, "cache_write": 0, "cache_read": 0}
        self.active_seconds = 0.0
        self.budget_usd: float | None = None
        self.asked: _Ask | None = None
        self.on_message: Then | None = None
        self.interrupts = 0

    # ------------------------------------------------------------------ script

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append an event (id and ``processed_at`` set) and return it."""
        with self.fake.lock:
            event = {"id": self.fake.event_id(), "type": type_, **fields}
            event["processed_at"] = _stamp(self.fake.tick())
            self.events.append(event)
            self.updated = self.fake.now()
            self.fake.changed.notify_all()
        return event

    def user_message(self, text: str) -> dict[str, Any]:
        """A ``user.message`` someone sent (the session's task, say)."""
        return self.emit("user.message", content=[{"type": "text", "text": text}])

    def running(self) -> None:
        """``session.status_running``."""
        self.status = "running"
        self.emit("session.status_running")

    def idle(self, stop: str = "end_turn", **more: Any) -> None:
        """``session.status_idle`` with ``stop_reason`` of type ``stop``."""
        self.status = "idle"
        self.emit("session.status_idle", stop_reason={"type": stop, **more}, stop_details=None)

    def terminate(self) -> None:
        """``session.status_terminated``."""
        self.status = "terminated"
        self.emit("session.status_terminated")

    def error(self, kind: str, message: str) -> None:
        """``session.error``."""
        error = {"type": kind, "message": message, "retry_status": {"type": "terminal"}}
        self.emit("session.error", error=error)

    def model_request(
        self,
        text: str = "",
        tools: Sequence[tuple[str, dict[str, Any]]] = (),
        *,
        usage: tuple[int, int, int, int] = (1000, 200, 0, 0),
        ask: bool = True,
        mcp_server: str = "",
    ) -> list[str]:
        """One model request: its span, the agent's message and tool uses; their ids.

        ``ask``: the tool uses wait for a confirmation (``evaluated_permission: "ask"``,
        policy ``always_ask``) rather than run (``allow``, ``always_allow``).
        """
        start = self.emit("span.model_request_start")
        self.emit("agent.thinking")
        if text:
            self.emit("agent.message", content=[{"type": "text", "text": text}])
        ids = []
        for name, arguments in tools:
            permission = "ask" if ask else "allow"
            fields: dict[str, Any] = {
                "name": name,
                "input": arguments,
                "evaluated_permission": permission,
                "evaluation": {"type": "always_ask" if ask else "always_allow"},
            }
            if mcp_server:
                fields["mcp_server_name"] = mcp_server
            kind = "agent.mcp_tool_use" if mcp_server else "agent.tool_use"
            ids.append(str(self.emit(kind, **fields)["id"]))
        i, o, cw, cr = usage
        for name, n in (("input", i), ("output", o), ("cache_write", cw), ("cache_read", cr)):
            self.tokens[name] += n
        model_usage = {
            "input_tokens": i,
            "output_tokens": o,
            "cache_creation_input_tokens": cw,
            "cache_read_input_tokens": cr,
        }
        self.emit(
            "span.model_request_end",
            model_request_start_id=start["id"],
            model_usage=model_usage,
            is_error=False,
        )
        return ids

    def tool_result(self, tool_use_id: str, text: str, *, is_error: bool = False) -> None:
        """The result of a tool the agent ran (``agent.tool_result``)."""
        content = [{"type": "text", "text": text}]
        self.emit("agent.tool_result", tool_use_id=tool_use_id, content=content, is_error=is_error)

    def ask(
        self, ids: Sequence[str], results: dict[str, str] | None = None, then: Then | None = None
    ) -> None:
        """Stop with ``requires_action`` on ``ids``; go on once each is confirmed.

        An allowed tool returns ``results[id]`` (default ``"done"``); a denied one an error
        result with the deny message. Then ``then`` runs (default: the turn ends idle).
        """
        self.asked = _Ask(list(ids), dict(results or {}), then)
        self.idle("requires_action", event_ids=list(ids))

    def usage_snapshot(self) -> None:
        """``session.usage`` with the cumulative usage now."""
        self.emit("session.usage", usage=self.usage_json())

    # ------------------------------------------------------------------ shapes

    def list_cost_usd(self) -> float:
        return sum(self.tokens[k] * PRICES[k] for k in self.tokens) / 1_000_000

    def usage_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.tokens["input"],
            "output_tokens": self.tokens["output"],
            "cache_read_input_tokens": self.tokens["cache_read"],
            "cache_creation": {"ephemeral_5m_input_tokens": self.tokens["cache_write"]},
            "list_cost": {"amount": str(round(self.list_cost_usd() * 100)), "currency": "USD"},
            "active_seconds": self.active_seconds,
        }

    def json(self) -> dict[str, Any]:
        budget = None
        if self.budget_usd is not None:
            amount = {"amount": str(round(self.budget_usd * 100)), "currency": "USD"}
            budget = {"type": "limit", "max_list_cost": amount}
        return {
            "id": self.id,
            "type": "session",
            "title": self.title or None,
            "status": self.status,
            "agent": {
                "id": "agent_01fake",
                "type": "agent",
                "name": self.agent_name,
                "description": None,
                "model": {"id": self.model, "speed": "standard"},
                "system": "You are a careful research agent.",
                "tools": [{"type": "agent_toolset_20260401"}],
                "mcp_servers": [],
                "skills": [],
                "version": 1,
                "execution_identity": {"type": "service_account"},
            },
            "archived_at": None,
            "budget": budget,
            "created_at": _stamp(self.created),
            "updated_at": _stamp(self.updated),
            "environment_id": "env_01fake",
            "metadata": {},
            "outcome_evaluations": [],
            "resources": [],
            "stats": {
                "active_seconds": self.active_seconds,
                "duration_seconds": self.fake.now() - self.created,
            },
            "usage": self.usage_json(),
            "vault_ids": [],
        }

    # ------------------------------------------------------------------ what is sent

    def take(self, event: dict[str, Any]) -> list[Callable[[], None]]:
        """Check and record one user event; what follows it (run after the answer)."""
        kind = event.get("type")
        if kind not in SENDABLE:
            raise ApiError(400, "invalid_request_error", f"events.0.type: {kind!r} cannot be sent")
        if self.status == "terminated":
            raise ApiError(400, "invalid_request_error", "the session is terminated")
        if kind == "user.tool_confirmation":
            return self._confirmation(event)
        if kind == "user.interrupt":
            return [lambda: self._interrupted(event)]
        if kind == "user.message":
            text = " ".join(str(b.get("text", "")) for b in event.get("content") or [])
            if not text.strip():
                raise ApiError(400, "invalid_request_error", "events.0.content: empty message")
            return [lambda: self._messaged(event, text)]
        return [lambda: self._echoed(event)]

    def _echoed(self, event: dict[str, Any]) -> None:
        self._echo(event)

    def _echo(self, event: dict[str, Any]) -> dict[str, Any]:
        fields = {k: v for k, v in event.items() if k not in ("type", "id", "processed_at")}
        return self.emit(str(event["type"]), **fields)

    def _confirmation(self, event: dict[str, Any]) -> list[Callable[[], None]]:
        use = str(event.get("tool_use_id", ""))
        result = event.get("result")
        if result not in ("allow", "deny"):
            raise ApiError(400, "invalid_request_error", "events.0.result: must be allow or deny")
        if event.get("deny_message") is not None and result != "deny":
            raise ApiError(
                400, "invalid_request_error", "events.0.deny_message: only allowed with deny"
            )
        asked = self.asked
        if asked is None or use not in asked.ids or use in asked.answers:
            raise ApiError(
                400, "invalid_request_error", f"event {use!r} is not awaiting a tool confirmation"
            )
        asked.answers[use] = (str(result), str(event.get("deny_message") or ""))
        return [lambda: self._confirmed(event, asked)]

    def _confirmed(self, event: dict[str, Any], asked: _Ask) -> None:
        self._echo(event)
        left = [i for i in asked.ids if i not in asked.answers]
        if left:
            self.idle("requires_action", event_ids=left)
            return
        self.asked = None
        self.running()
        for use in asked.ids:
            result, note = asked.answers[use]
            if result == "allow":
                self.tool_result(use, asked.results.get(use, "done"))
            else:
                self.tool_result(use, note or "The user denied this tool call.", is_error=True)
        if asked.then is not None:
            asked.then(self)
        else:
            self.idle()

    def _interrupted(self, event: dict[str, Any]) -> None:
        self.interrupts += 1
        self._echo(event)
        if self.status in ("running", "rescheduling"):
            self.idle()  # the interrupted turn ends with end_turn

    def _messaged(self, event: dict[str, Any], text: str) -> None:
        self._echo(event)
        if self.on_message is not None:
            self.on_message(self)
            return
        self.running()
        self.model_request(f"Noted: {text}")
        self.idle()


class FakeManagedAgents:
    """The fake API (a context manager).

    Args:
        key: the only API key it accepts.
        ping_s: seconds between the stream's heartbeats.

    Attributes:
        requests: every request answered, in order.
    """

    def __init__(self, key: str = KEY, *, ping_s: float = 0.5) -> None:
        self.key = key
        self.ping_s = ping_s
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.sessions: dict[str, FakeSession] = {}
        self.requests: list[Recorded] = []
        self._ids = itertools.count(1)
        self._last = 0.0
        self._closing = False
        self._bind()

    # ------------------------------------------------------------------ life

    def _bind(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """Base URL for the SDK (``base_url`` or ``ANTHROPIC_BASE_URL``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeManagedAgents:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self._closing = True
            self.changed.notify_all()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------------ state

    def now(self) -> float:
        return time.time()

    def tick(self) -> float:
        """A time after every earlier one (events never share a ``processed_at``)."""
        with self.lock:
            self._last = max(time.time(), self._last + 0.001)
            return self._last

    def event_id(self) -> str:
        return f"sevt_{next(self._ids):06d}"

    def add_session(
        self, title: str = "Quarterly research", *, model: str = "claude-opus-4-8"
    ) -> FakeSession:
        """A new session, idle, with no events."""
        session = FakeSession(self, f"sesn_{uuid.uuid4().hex[:20]}", title, model)
        with self.lock:
            self.sessions[session.id] = session
        return session

    def received(
        self, session_id: str, kind: str | None = None, *, refused: bool = False
    ) -> list[dict[str, Any]]:
        """The events POSTed to a session and taken (of type ``kind``), in order.

        With ``refused``, those the fake refused too (every event that was sent).
        """
        out = []
        with self.lock:
            for r in self.requests:
                if r.method != "POST" or (r.status != 200 and not refused):
                    continue
                if not isinstance(r.body, dict):
                    continue
                if r.path != f"/v1/sessions/{session_id}/events":
                    continue
                out += [e for e in r.body.get("events", []) if kind in (None, e.get("type"))]
        return out

    # ------------------------------------------------------------------ serving

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        split = urlsplit(h.path)
        query = parse_qs(split.query)
        headers = {k.lower(): v for k, v in h.headers.items()}
        length = int(headers.get("content-length", "0") or 0)
        raw = h.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        record = Recorded(method, split.path, query, headers, body)
        with self.lock:
            self.requests.append(record)
        after: list[Callable[[], None]] = []
        try:
            self._check_headers(headers)
            if method == "GET" and split.path.endswith("/events/stream"):
                session = self._session(split.path.split("/")[3])
                self._stream(h, session)
                return
            data, after = self._route(method, split.path, query, body)
        except ApiError as exc:
            record.status = exc.status
            self._write(h, exc.status, _error_body(exc))
            return
        self._write(h, 200, data)
        for step in after:
            step()

    def _check_headers(self, headers: dict[str, str]) -> None:
        auth = headers.get("authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else headers.get("x-api-key")
        if not key:
            raise ApiError(401, "authentication_error", "x-api-key header is required")
        if key != self.key:
            raise ApiError(401, "authentication_error", "invalid x-api-key")
        if not headers.get("anthropic-version"):
            raise ApiError(400, "invalid_request_error", "anthropic-version header is required")
        betas = [b.strip() for b in headers.get("anthropic-beta", "").split(",")]
        if BETA not in betas:
            raise ApiError(404, "not_found_error", "Not Found")

    def _session(self, session_id: str) -> FakeSession:
        with self.lock:
            session = self.sessions.get(session_id)
        if session is None:
            raise ApiError(404, "not_found_error", f"session {session_id!r} not found")
        return session

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[dict[str, Any], list[Callable[[], None]]]:
        parts = path.strip("/").split("/")
        if parts[:2] != ["v1", "sessions"]:
            raise ApiError(404, "not_found_error", f"no route {path}")
        if method == "GET" and len(parts) == 2:
            with self.lock:
                items = sorted(self.sessions.values(), key=lambda s: s.created)
                return self._page([s.json() for s in items], query, "desc", 20, 100), []
        session = self._session(parts[2]) if len(parts) > 2 else None
        if session is None:
            raise ApiError(404, "not_found_error", f"no route {path}")
        if method == "GET" and len(parts) == 3:
            with self.lock:
                return session.json(), []
        if parts[3:] == ["events"] and method == "GET":
            with self.lock:
                events = self._filtered(session.events, query)
                return self._page(events, query, "asc", 1000, 1000), []
        if parts[3:] == ["events"] and method == "POST":
            return self._send(session, body)
        raise ApiError(404, "not_found_error", f"no route {method} {path}")

    def _send(
        self, session: FakeSession, body: Any
    ) -> tuple[dict[str, Any], list[Callable[[], None]]]:
        events = body.get("events") if isinstance(body, dict) else None
        if not isinstance(events, list) or not events:
            raise ApiError(400, "invalid_request_error", "events: at least one event is required")
        with self.lock:
            after = [step for event in events for step in session.take(event)]
            before = len(session.events)
        for step in after:
            step()  # the echoes: taken now (answered with them, as the API does)
        with self.lock:
            taken = [e for e in session.events[before:] if e["type"] in SENDABLE]
        return {"data": taken[: len(events)]}, []

    @staticmethod
    def _filtered(
        events: list[dict[str, Any]], query: dict[str, list[str]]
    ) -> list[dict[str, Any]]:
        out = list(events)
        keeps: dict[str, Callable[[float, float], bool]] = {
            "gt": operator.gt,
            "gte": operator.ge,
            "lt": operator.lt,
            "lte": operator.le,
        }
        for op, keep in keeps.items():
            bound = query.get(f"created_at[{op}]")
            if bound:
                t = _parse(bound[0])
                out = [e for e in out if keep(_parse(e["processed_at"]), t)]
        types = query.get("types[]") or query.get("types")
        if types:
            out = [e for e in out if e["type"] in types]
        return out

    @staticmethod
    def _page(
        items: list[dict[str, Any]],
        query: dict[str, list[str]],
        default_order: str,
        default_limit: int,
        max_limit: int,
    ) -> dict[str, Any]:
        order = (query.get("order") or [default_order])[0]
        if order not in ("asc", "desc"):
            raise ApiError(400, "invalid_request_error", "order: must be asc or desc")
        try:
            limit = int((query.get("limit") or [str(default_limit)])[0])
        except ValueError:
            raise ApiError(400, "invalid_request_error", "limit: must be an integer") from None
        if not 1 <= limit <= max_limit:
            raise ApiError(400, "invalid_request_error", f"limit: must be 1 to {max_limit}")
        page = (query.get("page") or ["page_0"])[0]
        try:
            offset = int(page.removeprefix("page_"))
        except ValueError:
            raise ApiError(400, "invalid_request_error", "page: invalid cursor") from None
        ordered = items if order == "asc" else list(reversed(items))
        data = ordered[offset : offset + limit]
        more = offset + limit < len(ordered)
        return {
            "data": data,
            "next_page": f"page_{offset + limit}" if more else None,
            "prev_page": f"page_{max(0, offset - limit)}" if offset else None,
        }

    def _stream(self, h: BaseHTTPRequestHandler, session: FakeSession) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("cache-control", "no-cache")
        h.send_header("connection", "close")
        h.end_headers()
        h.close_connection = True
        with self.lock:
            sent = len(session.events)
        try:
            while True:
                with self.lock:
                    if len(session.events) == sent and not self._closing:
                        self.changed.wait(self.ping_s)
                    if self._closing:
                        return
                    fresh = session.events[sent:]
                    sent += len(fresh)
                frames = [
                    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in fresh
                ] or [b'event: ping\ndata: {"type": "ping"}\n\n']
                for frame in frames:
                    h.wfile.write(frame)
                h.wfile.flush()
        except OSError:
            return

    @staticmethod
    def _write(h: BaseHTTPRequestHandler, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(raw)))
        h.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        h.end_headers()
        h.wfile.write(raw)


def _error_body(exc: ApiError) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": exc.kind, "message": exc.message},
        "request_id": f"req_{uuid.uuid4().hex[:24]}",
    }
