"""A local fake of the Anthropic Messages API that the real SDK talks to.

The server listens on 127.0.0.1 on a free port, in a thread of the test process, and answers
``POST /v1/messages`` from a script: streamed messages (SSE frames, each with an ``event:``
and a ``data:`` line, in the order the real API sends them) or error statuses. It records
every request (body and headers) so tests can check what the adapter sent.

Child processes reach it through ``ANTHROPIC_BASE_URL`` (see :attr:`FakeAnthropic.url`).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# --------------------------------------------------------------------------- script


@dataclass
class Text:
    """A text block, streamed in pieces of ``chunk`` characters."""

    text: str
    chunk: int = 12


@dataclass
class ToolUse:
    """A tool_use block whose JSON input streams in pieces."""

    name: str
    input: dict[str, Any]
    id: str = ""
    chunk: int = 10


@dataclass
class Thinking:
    """A thinking block with its signature."""

    thinking: str
    signature: str = "sig-opaque-123"
    chunk: int = 16


@dataclass
class Raw:
    """Any other block (e.g. a server tool's result), sent whole in ``content_block_start``."""

    block: dict[str, Any]


Block = Text | ToolUse | Thinking | Raw


@dataclass
class Stream:
    """A streamed message.

    Attributes:
        blocks: content blocks in order.
        stop_reason: defaults to ``tool_use`` when a tool is used, else ``end_turn``.
        input_tokens, output_tokens, cache_write, cache_read: usage reported (input and
            cache in ``message_start``, output in ``message_delta``).
        model: model id in the message (defaults to the requested one).
        headers: extra response headers (e.g. rate-limit headers).
        delay: seconds between events.
        hold_after: number of text deltas after which to wait for :attr:`gate`.
        gate: event released by the test (the stream stays open until then).
        error: mid-stream ``error`` event (type, message) sent after ``error_after`` deltas.
        error_after: deltas before the error event.
        cut_after: deltas after which the connection is closed without ``message_stop``.
        garbage_after: deltas after which an event whose data is not JSON is sent, and the
            stream ends.
    """

    blocks: list[Block] = field(default_factory=list)
    stop_reason: str | None = None
    input_tokens: int = 100
    output_tokens: int = 20
    cache_write: int = 0
    cache_read: int = 0
    model: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hold_after: int | None = None
    gate: threading.Event | None = None
    error: tuple[str, str] | None = None
    error_after: int = 0
    cut_after: int | None = None
    garbage_after: int | None = None


@dataclass
class Status:
    """An HTTP error answer with the API's error body.

    Attributes:
        gate: if set, the answer waits until the test releases it (the caller stays
            mid-request until then).
    """

    status: int
    type: str
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)
    gate: threading.Event | None = None


Reply = Stream | Status
Script = Callable[[dict[str, Any], int], Reply]


@dataclass
class Request:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float

    @property
    def key(self) -> str:
        """The API key sent (``x-api-key``, or ``authorization: Bearer`` as SDK 2.x does)."""
        return _key_of(self.headers)

    def last_user_text(self) -> str:
        """Text of the newest message (to tell calls apart)."""
        msg = self.body["messages"][-1]
        content = msg["content"]
        if isinstance(content, str):
            return content
        return " ".join(str(b.get("text", b.get("content", ""))) for b in content)


def ratelimit_headers(
    *,
    requests_remaining: int,
    requests_limit: int = 50,
    reset_in: float = 60.0,
    reset_at: float | None = None,
    tokens_remaining: int | None = None,
    tokens_limit: int = 100_000,
) -> dict[str, str]:
    """``anthropic-ratelimit-*`` headers as the API sends them (RFC 3339 reset times)."""
    when = reset_at if reset_at is not None else time.time() + reset_in
    reset = datetime.fromtimestamp(when, UTC).isoformat().replace("+00:00", "Z")
    out = {
        "anthropic-ratelimit-requests-limit": str(requests_limit),
        "anthropic-ratelimit-requests-remaining": str(requests_remaining),
        "anthropic-ratelimit-requests-reset": reset,
    }
    if tokens_remaining is not None:
        out |= {
            "anthropic-ratelimit-input-tokens-limit": str(tokens_limit),
            "anthropic-ratelimit-input-tokens-remaining": str(tokens_remaining),
            "anthropic-ratelimit-input-tokens-reset": reset,
        }
    return out


# --------------------------------------------------------------------------- server


class FakeAnthropic:
    """The fake API server (a context manager).

    Args:
        script: a list of replies used in order (the last one repeats), or a function of
            (request body, request index) returning the reply.
        accept_keys: when given, other keys get a 401 ``authentication_error``.
    """

    def __init__(
        self, script: list[Reply] | Script | None = None, accept_keys: set[str] | None = None
    ) -> None:
        self.script: list[Reply] | Script = script if script is not None else [Stream([Text("ok")])]
        self.accept_keys = accept_keys
        self.requests: list[Request] = []
        self.disconnects = 0
        self._lock = threading.Lock()
        self._gates: list[threading.Event] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """Base URL for the SDK (``base_url`` or ``ANTHROPIC_BASE_URL``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for gate in self._gates:
            gate.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def bodies(self) -> list[dict[str, Any]]:
        """Bodies of the requests received so far."""
        with self._lock:
            return [r.body for r in self.requests]

    def wait_requests(self, n: int, timeout: float = 10.0) -> None:
        """Block until ``n`` requests arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.requests) >= n:
                    return
            time.sleep(0.01)
        raise AssertionError(f"the fake API got {len(self.requests)} requests, expected {n}")

    # ------------------------------------------------------------------ handling

    def _reply_for(self, body: dict[str, Any], index: int) -> Reply:
        if callable(self.script):
            return self.script(body, index)
        return self.script[min(index, len(self.script) - 1)]

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length", "0"))
        raw = h.rfile.read(length) if length else b"{}"
        body = json.loads(raw or b"{}")
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            index = len(self.requests)
            self.requests.append(Request(h.path, headers, body, time.time()))
        if h.path.split("?")[0] != "/v1/messages":
            self._status(h, Status(404, "not_found_error", f"no route {h.path}"))
            return
        if self.accept_keys is not None and _key_of(headers) not in self.accept_keys:
            self._status(h, Status(401, "authentication_error", "invalid x-api-key"))
            return
        reply = self._reply_for(body, index)
        if isinstance(reply, Status):
            if reply.gate is not None:
                with self._lock:
                    self._gates.append(reply.gate)
                reply.gate.wait(timeout=30)
            self._status(h, reply)
            return
        if not body.get("stream"):
            self._status(h, Status(400, "invalid_request_error", "the fake only streams"))
            return
        try:
            self._stream(h, reply, body)
        except (BrokenPipeError, ConnectionResetError):
            with self._lock:
                self.disconnects += 1

    def _status(self, h: BaseHTTPRequestHandler, reply: Status) -> None:
        data = json.dumps(
            {"type": "error", "error": {"type": reply.type, "message": reply.message}}
        ).encode()
        h.send_response(reply.status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(data)))
        h.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _stream(self, h: BaseHTTPRequestHandler, reply: Stream, body: dict[str, Any]) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("cache-control", "no-cache")
        h.send_header("request-id", f"req_{uuid.uuid4().hex[:12]}")
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()
        if reply.gate is not None:
            with self._lock:
                self._gates.append(reply.gate)
        deltas = 0
        for event in _events(reply, body):
            if event[0] == "delta":
                deltas += 1
                if reply.error is not None and deltas > reply.error_after:
                    etype, message = reply.error
                    self._send(
                        h, "error", {"type": "error", "error": {"type": etype, "message": message}}
                    )
                    return
                if reply.cut_after is not None and deltas > reply.cut_after:
                    return
                if reply.garbage_after is not None and deltas > reply.garbage_after:
                    h.wfile.write(b"event: content_block_delta\ndata: {not json\n\n")
                    h.wfile.flush()
                    return
                if reply.hold_after is not None and deltas == reply.hold_after + 1:
                    assert reply.gate is not None
                    reply.gate.wait(timeout=30)
            _, name, data = event
            self._send(h, name, data)
            if reply.delay:
                time.sleep(reply.delay)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, name: str, data: dict[str, Any]) -> None:
        h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        h.wfile.flush()


def _events(reply: Stream, body: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """The SSE events of a streamed message: (class, event name, data)."""
    model = reply.model or str(body.get("model", "claude"))
    uses_tool = any(isinstance(b, ToolUse) for b in reply.blocks)
    stop = reply.stop_reason or ("tool_use" if uses_tool else "end_turn")
    yield (
        "meta",
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": f"msg_{uuid.uuid4().hex[:16]}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": reply.input_tokens,
                    "cache_creation_input_tokens": reply.cache_write,
                    "cache_read_input_tokens": reply.cache_read,
                    "output_tokens": 1,
                },
            },
        },
    )
    yield ("meta", "ping", {"type": "ping"})
    for index, block in enumerate(reply.blocks):
        if isinstance(block, Text):
            start: dict[str, Any] = {"type": "text", "text": ""}
            pieces = [("text_delta", "text", p) for p in _chunks(block.text, block.chunk)]
        elif isinstance(block, ToolUse):
            tool_id = block.id or f"toolu_{uuid.uuid4().hex[:12]}"
            start = {"type": "tool_use", "id": tool_id, "name": block.name, "input": {}}
            raw = json.dumps(block.input)
            pieces = [("input_json_delta", "partial_json", p) for p in _chunks(raw, block.chunk)]
        elif isinstance(block, Raw):
            start, pieces = block.block, []
        else:
            start = {"type": "thinking", "thinking": "", "signature": ""}
            pieces = [
                ("thinking_delta", "thinking", p) for p in _chunks(block.thinking, block.chunk)
            ]
            pieces.append(("signature_delta", "signature", block.signature))
        yield (
            "meta",
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for delta_type, key, piece in pieces:
            yield (
                "delta",
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": delta_type, key: piece},
                },
            )
        yield ("meta", "content_block_stop", {"type": "content_block_stop", "index": index})
    yield (
        "meta",
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield ("meta", "message_stop", {"type": "message_stop"})


def _key_of(headers: dict[str, str]) -> str:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return headers.get("x-api-key", "")


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))] or [""]
