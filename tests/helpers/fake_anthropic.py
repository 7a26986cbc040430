"""A local fake of the Anthropic Messages API that the real SDK talks to.

The server listens on 127.0.0.1 on a free port, in a thread of the test process, and answers
``POST /v1/messages`` from a script: streamed messages (SSE frames, each with an ``event:``
and a ``data:`` line, in the order the real API sends them) or error statuses. It records
every request (body and headers, and the answer) so tests can check what the adapter sent.

By default (``strict=True``) it enforces the contract each model documents
(:mod:`tests.helpers.claude_contract`) before the script is consulted: a request the real API
refuses gets the real API's status and error body. Accepted requests are answered in the
API's shapes: thinking blocks first, signed with the fake's own HMAC and bound to their
prefix (preserved thinking), thinking text empty unless ``display: "summarized"``, progress
text between tool calls as thinking blocks on the models that do that, ``usage`` with
``cache_creation`` by TTL. It also serves ``POST /v1/messages/count_tokens`` and the Models
API (``GET /v1/models``, ``GET /v1/models/{id}``). ``strict=False`` keeps the lenient fake
for tests of transport faults: any request is answered from the script as written.

With ``cache=True`` it models the prompt cache (see :meth:`FakeAnthropic._cache_usage`) on an
injectable ``clock``, and answers cache ``diagnostics``.

Child processes reach it through ``ANTHROPIC_BASE_URL`` (see :attr:`FakeAnthropic.url`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.helpers import claude_contract as contract
from tests.helpers.claude_contract import ApiError, Binding, Segment
from tests.helpers.polling import DEFAULT_TIMEOUT_S, wait_until

# --------------------------------------------------------------------------- script


@dataclass
class Text:
    """A text block, streamed in pieces of ``chunk`` characters.

    In strict mode, on the models that return progress text as thinking (Sonnet 5.5, Opus
    5.5, Fable/Mythos 5.1 and 5.2), a text block that comes before a :class:`ToolUse` of the
    same reply is sent as a thinking block instead.
    """

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
    """A thinking block.

    In strict mode the block is sent first, only when the request's thinking is on, its text
    only with ``display: "summarized"``, and ``signature`` is ignored: the fake signs the
    block itself (see :class:`~tests.helpers.claude_contract.Signer`). With ``strict=False``
    it is sent where it stands, with its text and this signature.
    """

    thinking: str
    signature: str = "sig-opaque-123"
    chunk: int = 16


@dataclass
class RedactedThinking:
    """A ``redacted_thinking`` block (its ``data`` is the fake's signature in strict mode)."""

    data: str = "redacted-opaque-123"


@dataclass
class Compaction:
    """The summary of an on-demand compaction (``compaction: {"type": "summarize"}``).

    A compaction request is answered with a single ``compaction`` block whatever the reply's
    other blocks; without a :class:`Compaction` block the summary is a deterministic text.
    """

    summary: str


@dataclass
class Raw:
    """Any other block (e.g. a server tool's result), sent whole in ``content_block_start``."""

    block: dict[str, Any]


Block = Text | ToolUse | Thinking | RedactedThinking | Compaction | Raw


@dataclass
class Stream:
    """A streamed message.

    Attributes:
        blocks: content blocks in order.
        stop_reason: defaults to ``tool_use`` when a tool is used, else ``end_turn``.
        input_tokens, output_tokens, cache_write, cache_write_1h, cache_read: usage reported
            (input and cache in ``message_start``, output in ``message_delta``);
            ``cache_write`` is the 5-minute part. With ``cache=True`` the fake computes input
            and cache usage itself.
        model: model id in the message (defaults to the requested one).
        headers: extra response headers (e.g. rate-limit headers).
        delay: seconds between events.
        hold_after: number of deltas after which to wait for :attr:`gate`.
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
    cache_write_1h: int = 0


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
    """One request the server received, and what it answered.

    Attributes:
        status: HTTP status of the answer (200 for a message, also when it broke off).
        error: the error answered, if any (contract refusals and scripted statuses).
        response: the message as the fake built it (``content`` in full, as a client
            assembles it from the stream, and ``usage``), or the ``count_tokens`` / Models
            API answer.
    """

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    status: int = 200
    error: ApiError | None = None
    response: dict[str, Any] | None = None

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


# --------------------------------------------------------------------------- answer parts


@dataclass
class _Out:
    """One block of an answer: its ``content_block_start``, its deltas, its final form."""

    start: dict[str, Any]
    pieces: list[tuple[str, str, str]]
    final: dict[str, Any]


@dataclass
class _Entry:
    """A prompt cache entry."""

    expires: float
    ttl: str


@dataclass
class _Fingerprint:
    """What cache diagnostics compare between a request and an earlier one."""

    model: str
    tools: str
    system: str
    messages: list[str]
    other: str
    segments: list[Segment]


# --------------------------------------------------------------------------- server


class FakeAnthropic:
    """The fake API server (a context manager).

    Args:
        script: a list of replies used in order (the last one repeats), or a function of
            (request body, request index) returning the reply. The index counts the earlier
            requests in :attr:`requests`, refused ones too.
        accept_keys: when given, other keys get a 401 ``authentication_error``.
        strict: enforce the documented contract and answer in the API's shapes (see the
            module docstring); ``False`` answers any request from the script as written.
        clock: the time source of the prompt cache (a test may jump it by hours).
        cache: model the prompt cache; ``usage`` is then computed from the request.

    Attributes:
        requests: the ``POST /v1/messages`` requests (and unknown routes), in order.
        side_requests: the ``count_tokens`` and Models API requests (kept apart so that
            :attr:`requests`, :meth:`bodies` and :meth:`wait_requests` count model calls).
    """

    def __init__(
        self,
        script: Sequence[Reply] | Script | None = None,
        accept_keys: set[str] | None = None,
        *,
        strict: bool = True,
        clock: Callable[[], float] = time.time,
        cache: bool = False,
    ) -> None:
        self.script: Sequence[Reply] | Script = (
            script if script is not None else [Stream([Text("ok")])]
        )
        self.accept_keys = accept_keys
        self.strict = strict
        self.clock = clock
        self.cache = cache
        self.signer = contract.Signer(secrets.token_bytes(32))
        self.requests: list[Request] = []
        self.side_requests: list[Request] = []
        self.disconnects = 0
        self._lock = threading.Lock()
        self._gates: list[threading.Event] = []
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._fingerprints: dict[str, _Fingerprint] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake._handle(self)

            def do_GET(self) -> None:
                fake._handle_get(self)

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

    def wait_requests(self, n: int, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Block until ``n`` requests arrived."""

        def arrived() -> int:
            with self._lock:
                return len(self.requests)

        wait_until(
            lambda: arrived() >= n,
            timeout,
            f"{n} requests to the fake API",
            last=lambda: f"{arrived()} requests",
        )

    # ------------------------------------------------------------------ handling

    def _reply_for(self, body: dict[str, Any], index: int) -> Reply:
        if callable(self.script):
            return self.script(body, index)
        return self.script[min(index, len(self.script) - 1)]

    def _record(
        self, h: BaseHTTPRequestHandler, body: dict[str, Any], *, side: bool = False
    ) -> tuple[Request, int]:
        """Record a request in :attr:`requests` (its index) or :attr:`side_requests`."""
        headers = {k.lower(): v for k, v in h.headers.items()}
        request = Request(h.path, headers, body, time.time())
        with self._lock:
            index = len(self.requests)
            (self.side_requests if side else self.requests).append(request)
        return request, index

    def _authorized(self, h: BaseHTTPRequestHandler, request: Request) -> bool:
        if self.accept_keys is not None and request.key not in self.accept_keys:
            self._error(h, request, ApiError(401, "authentication_error", "invalid x-api-key"))
            return False
        return True

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length", "0"))
        raw = h.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        path = urlsplit(h.path).path
        side = path == "/v1/messages/count_tokens"
        request, index = self._record(h, body if isinstance(body, dict) else {}, side=side)
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            self._error(h, request, ApiError(404, "not_found_error", f"no route {h.path}"))
            return
        if not self._authorized(h, request):
            return
        if not isinstance(body, dict):
            self._error(h, request, ApiError(400, "invalid_request_error", "invalid JSON"))
        elif path == "/v1/messages/count_tokens":
            self._count_tokens(h, request)
        else:
            self._messages(h, request, index)

    def _handle_get(self, h: BaseHTTPRequestHandler) -> None:
        request, _ = self._record(h, {}, side=True)
        parts = urlsplit(h.path)
        if not parts.path.startswith("/v1/models"):
            self._error(h, request, ApiError(404, "not_found_error", f"no route {h.path}"))
            return
        if not self._authorized(h, request):
            return
        beta = contract.BETA_COMPACTION in contract.beta_headers(request.headers)
        rest = parts.path[len("/v1/models") :].strip("/")
        if rest:
            rules = contract.resolve(unquote(rest))
            if rules is None:
                self._error(h, request, ApiError(404, "not_found_error", f"model: {unquote(rest)}"))
                return
            self._json(h, request, contract.model_info(rules, beta_compaction=beta))
            return
        page = _models_page(parse_qs(parts.query), beta)
        if isinstance(page, ApiError):
            self._error(h, request, page)
        else:
            self._json(h, request, page)

    def _count_tokens(self, h: BaseHTTPRequestHandler, request: Request) -> None:
        body = request.body
        if self.strict:
            error = contract.validate(body, request.headers, count_tokens=True)
            if error is not None:
                self._error(h, request, error)
                return
        counted = {k: v for k, v in body.items() if k != "compaction"}
        self._json(h, request, {"input_tokens": contract.count_tokens(counted)})

    def _messages(self, h: BaseHTTPRequestHandler, request: Request, index: int) -> None:
        body = request.body
        binding: Binding | None = None
        if self.strict:
            error = contract.validate(body, request.headers)
            if error is None:
                binding = contract.check_binding(body, self.signer)
                error = binding.error
            if error is not None:
                self._error(h, request, error)
                return
        reply = self._reply_for(body, index)
        if isinstance(reply, Status):
            if reply.gate is not None:
                with self._lock:
                    self._gates.append(reply.gate)
                reply.gate.wait(timeout=30)
            self._error(
                h, request, ApiError(reply.status, reply.type, reply.message), reply.headers
            )
            return
        if not self.strict and not body.get("stream"):
            error = ApiError(400, "invalid_request_error", "the fake only streams")
            self._error(h, request, error)
            return
        message, outs = self._answer(reply, body, binding)
        with self._lock:
            request.response = dict(message, content=[o.final for o in outs])
        if not body.get("stream"):
            self._json(h, request, request.response, reply.headers)
            return
        try:
            self._stream(h, reply, message, outs)
        except (BrokenPipeError, ConnectionResetError):
            with self._lock:
                self.disconnects += 1

    # ------------------------------------------------------------------ answers

    def _answer(
        self, reply: Stream, body: dict[str, Any], binding: Binding | None
    ) -> tuple[dict[str, Any], list[_Out]]:
        """The message (without content) and its blocks."""
        model = str(body.get("model", "claude"))
        seen = binding.body if binding is not None else body
        compacting = binding is not None and body.get("compaction") is not None
        if compacting:
            assert binding is not None
            outs = [self._compaction_out(_summary(reply, seen), binding)]
            stop = "compaction"
        else:
            outs = self._blocks(reply, body, binding)
            uses_tool = any(o.final.get("type") == "tool_use" for o in outs)
            stop = reply.stop_reason or ("tool_use" if uses_tool else "end_turn")
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        message: dict[str, Any] = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": reply.model or model,
            "content": [],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self._usage(reply, seen, outs if compacting else None),
        }
        if "diagnostics" in body:
            message["diagnostics"] = self._diagnostics(body, seen)
        if binding is not None and binding.transformations:
            message["input_transformations"] = binding.transformations
        with self._lock:
            self._fingerprints[message_id] = _fingerprint(seen)
        return message, outs

    def _blocks(self, reply: Stream, body: dict[str, Any], binding: Binding | None) -> list[_Out]:
        if binding is None:
            return [_lenient_out(block) for block in reply.blocks]
        rules = contract.resolve(str(body["model"]))
        assert rules is not None
        kind = contract.thinking_type(body, rules)
        display = contract.thinking_display(body, rules)
        thinking_on = kind in ("adaptive", "enabled")
        progress = rules.progress_as_thinking and kind in ("adaptive", "between_tools")
        show_reasoning = display == "summarized"
        show_progress = kind == "between_tools" or display in ("summarized", "updates")
        reasoning = [b for b in reply.blocks if isinstance(b, Thinking | RedactedThinking)]
        rest = [b for b in reply.blocks if not isinstance(b, Thinking | RedactedThinking)]
        outs: list[_Out] = []

        def prefix() -> str:
            return binding.response_prefix([o.final for o in outs])

        for thought in reasoning if thinking_on else []:
            if isinstance(thought, RedactedThinking):
                data = self.signer.sign_thinking(rules.id, prefix(), "")
                redacted = {"type": "redacted_thinking", "data": data}
                outs.append(_Out(redacted, [], dict(redacted)))
            else:
                text = thought.thinking if show_reasoning else ""
                outs.append(_thinking_out(text, thought.chunk, rules.id, prefix(), self.signer))
        for n, block in enumerate(rest):
            later_tool = any(isinstance(b, ToolUse) for b in rest[n + 1 :])
            if isinstance(block, Text) and progress and later_tool:
                text = block.text if show_progress else ""
                outs.append(_thinking_out(text, block.chunk, rules.id, prefix(), self.signer))
            elif isinstance(block, Compaction):
                outs.append(self._compaction_out(block.summary, binding))
            else:
                outs.append(_lenient_out(block))
        return outs

    def _compaction_out(self, summary: str, binding: Binding) -> _Out:
        signature = self.signer.sign_compaction(binding.chain, summary)
        return _Out(
            {"type": "compaction", "content": None, "signature": signature},
            [("compaction_delta", "content", summary)],
            {"type": "compaction", "content": summary, "signature": signature},
        )

    def _usage(
        self, reply: Stream, body: dict[str, Any], compaction: list[_Out] | None
    ) -> dict[str, Any]:
        if self.cache:
            usage = self._cache_usage(str(body.get("model")), contract.segments(body))
        else:
            usage = {
                "input_tokens": reply.input_tokens,
                "cache_creation_input_tokens": reply.cache_write + reply.cache_write_1h,
                "cache_read_input_tokens": reply.cache_read,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": reply.cache_write,
                    "ephemeral_1h_input_tokens": reply.cache_write_1h,
                },
            }
        output = reply.output_tokens
        if compaction is not None:
            output = contract.tokens(str(compaction[0].final["content"]))
        return usage | {"output_tokens": output}

    def _cache_usage(self, model: str, segs: list[Segment]) -> dict[str, Any]:
        """Usage under the prompt cache model.

        Each breakpoint keeps an entry keyed by (model, digest of the prompt through its
        block) until now + its TTL. A request reads the longest prefix with a live entry,
        looking from each breakpoint back over at most 20 blocks, and refreshes that entry;
        it writes the rest up to its last breakpoint (each stretch at the TTL of the
        breakpoint that ends it); what follows is ``input_tokens``.
        """
        rules = contract.resolve(model)
        key_model = rules.id if rules else model
        now = self.clock()
        marks = [n for n, s in enumerate(segs) if s.ttl is not None]
        with self._lock:
            read_end = -1
            for mark in marks:
                for n in range(mark, max(-1, mark - contract.LOOKBACK_BLOCKS), -1):
                    entry = self._entries.get((key_model, segs[n].digest))
                    if entry is not None and entry.expires > now:
                        read_end = max(read_end, n)
                        break
            if read_end >= 0:
                entry = self._entries[(key_model, segs[read_end].digest)]
                entry.expires = now + contract.CACHE_TTLS[entry.ttl]
            written = {"5m": 0, "1h": 0}
            done = read_end
            for mark in marks:
                if mark <= done:
                    continue
                ttl = str(segs[mark].ttl)
                written[ttl] += sum(s.tokens for s in segs[done + 1 : mark + 1])
                self._entries[(key_model, segs[mark].digest)] = _Entry(
                    now + contract.CACHE_TTLS[ttl], ttl
                )
                done = mark
        read = sum(s.tokens for s in segs[: read_end + 1])
        total = sum(s.tokens for s in segs)
        write = written["5m"] + written["1h"]
        return {
            "input_tokens": total - read - write,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }

    def _diagnostics(self, body: dict[str, Any], seen: dict[str, Any]) -> dict[str, Any] | None:
        """``diagnostics`` of the answer: why the prefix of the named message was not reused."""
        config = body.get("diagnostics")
        previous_id = config.get("previous_message_id") if isinstance(config, dict) else None
        if not previous_id:
            return None
        with self._lock:
            previous = self._fingerprints.get(str(previous_id))
        if previous is None:
            return {"cache_miss_reason": {"type": "previous_message_not_found"}}
        reason = _miss_reason(previous, _fingerprint(seen))
        return {"cache_miss_reason": reason} if reason is not None else None

    # ------------------------------------------------------------------ writing

    def _error(
        self,
        h: BaseHTTPRequestHandler,
        request: Request,
        error: ApiError,
        headers: dict[str, str] | None = None,
    ) -> None:
        request_id = f"req_{uuid.uuid4().hex[:24]}"
        with self._lock:
            request.status = error.status
            request.error = error
        self._write(h, error.status, error.body(request_id), request_id, headers)

    def _json(
        self,
        h: BaseHTTPRequestHandler,
        request: Request,
        data: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            request.response = data
        self._write(h, 200, data, f"req_{uuid.uuid4().hex[:24]}", headers)

    @staticmethod
    def _write(
        h: BaseHTTPRequestHandler,
        status: int,
        data: dict[str, Any],
        request_id: str,
        headers: dict[str, str] | None,
    ) -> None:
        raw = json.dumps(data).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(raw)))
        h.send_header("request-id", request_id)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(raw)

    def _stream(
        self,
        h: BaseHTTPRequestHandler,
        reply: Stream,
        message: dict[str, Any],
        outs: list[_Out],
    ) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("cache-control", "no-cache")
        h.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()
        if reply.gate is not None:
            with self._lock:
                self._gates.append(reply.gate)
        deltas = 0
        for event in _events(message, outs):
            if event[0] == "delta":
                deltas += 1
                if reply.error is not None and deltas > reply.error_after:
                    etype, text = reply.error
                    self._send(
                        h, "error", {"type": "error", "error": {"type": etype, "message": text}}
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
                time.sleep(reply.delay)  # a slow stream is what the reply simulates

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, name: str, data: dict[str, Any]) -> None:
        h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        h.wfile.flush()


# --------------------------------------------------------------------------- helpers


def _lenient_out(block: Block) -> _Out:
    """A block as the script wrote it (strict mode for text, tools and raw blocks too)."""
    if isinstance(block, Text):
        pieces = [("text_delta", "text", p) for p in _chunks(block.text, block.chunk)]
        return _Out({"type": "text", "text": ""}, pieces, {"type": "text", "text": block.text})
    if isinstance(block, ToolUse):
        tool_id = block.id or f"toolu_{uuid.uuid4().hex[:12]}"
        start = {"type": "tool_use", "id": tool_id, "name": block.name, "input": {}}
        raw = json.dumps(block.input)
        pieces = [("input_json_delta", "partial_json", p) for p in _chunks(raw, block.chunk)]
        return _Out(start, pieces, dict(start, input=block.input))
    if isinstance(block, Raw):
        return _Out(block.block, [], block.block)
    if isinstance(block, RedactedThinking):
        start = {"type": "redacted_thinking", "data": block.data}
        return _Out(start, [], dict(start))
    if isinstance(block, Compaction):
        final = {"type": "compaction", "content": block.summary, "signature": "cmp-opaque"}
        opening: dict[str, Any] = {**final, "content": None}
        return _Out(opening, [("compaction_delta", "content", block.summary)], final)
    pieces = [("thinking_delta", "thinking", p) for p in _chunks(block.thinking, block.chunk)]
    pieces.append(("signature_delta", "signature", block.signature))
    final = {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    return _Out({"type": "thinking", "thinking": "", "signature": ""}, pieces, final)


def _thinking_out(text: str, chunk: int, model: str, prefix: str, signer: contract.Signer) -> _Out:
    """A thinking block of the answer, signed by the fake (empty text: only the signature)."""
    signature = signer.sign_thinking(model, prefix, text)
    pieces = [("thinking_delta", "thinking", p) for p in _chunks(text, chunk)] if text else []
    pieces.append(("signature_delta", "signature", signature))
    final = {"type": "thinking", "thinking": text, "signature": signature}
    return _Out({"type": "thinking", "thinking": "", "signature": ""}, pieces, final)


def _summary(reply: Stream, body: dict[str, Any]) -> str:
    """The scripted compaction summary, or a deterministic one."""
    for block in reply.blocks:
        if isinstance(block, Compaction):
            return block.summary
    messages = body.get("messages") or []
    digest = hashlib.sha256(contract.canonical(messages).encode()).hexdigest()[:12]
    return f"Summary of the conversation so far: {len(messages)} messages ({digest})."


def _events(message: dict[str, Any], outs: list[_Out]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """The SSE events of a streamed message: (class, event name, data)."""
    usage = message["usage"]
    start = dict(message, stop_reason=None, usage=dict(usage, output_tokens=1))
    yield ("meta", "message_start", {"type": "message_start", "message": start})
    yield ("meta", "ping", {"type": "ping"})
    for index, out in enumerate(outs):
        yield (
            "meta",
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": out.start},
        )
        for delta_type, key, piece in out.pieces:
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
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield ("meta", "message_stop", {"type": "message_stop"})


def _models_page(query: dict[str, list[str]], beta: bool) -> dict[str, Any] | ApiError:
    """A page of ``GET /v1/models`` (newest first, ``after_id`` / ``before_id`` cursors)."""
    models = contract.catalogue()
    ids = [m.id for m in models]
    raw_limit = query.get("limit", ["20"])[0]
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 1000:
        return ApiError(400, "invalid_request_error", "limit: must be between 1 and 1000")
    limit = int(raw_limit)
    after, before = query.get("after_id", [""])[0], query.get("before_id", [""])[0]
    for cursor in (after, before):
        if cursor and cursor not in ids:
            return ApiError(404, "not_found_error", f"model: {cursor}")
    if before:
        end = ids.index(before)
        start = max(0, end - limit)
        has_more = start > 0
    else:
        start = ids.index(after) + 1 if after else 0
        end = min(len(ids), start + limit)
        has_more = end < len(ids)
    page = [contract.model_info(m, beta_compaction=beta) for m in models[start:end]]
    return {
        "data": page,
        "has_more": has_more,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
    }


def _fingerprint(body: dict[str, Any]) -> _Fingerprint:
    rules = contract.resolve(str(body.get("model")))
    messages = body.get("messages") or []
    return _Fingerprint(
        model=rules.id if rules else str(body.get("model")),
        tools=contract.canonical(body.get("tools") or []),
        system=contract.canonical(contract.blocks_of(body.get("system"))),
        messages=[contract.canonical(m) for m in messages],
        other=contract.canonical({k: body.get(k) for k in ("thinking", "tool_choice")}),
        segments=contract.segments(body),
    )


def _miss_reason(previous: _Fingerprint, current: _Fingerprint) -> dict[str, Any] | None:
    """The ``cache_miss_reason`` of ``current`` against ``previous`` (SDK ``CacheMiss*``)."""
    marks = [n for n, s in enumerate(previous.segments) if s.ttl is not None]
    cacheable = sum(s.tokens for s in previous.segments[: marks[-1] + 1]) if marks else 0
    # what this request can still read: the previous entries its prompt still matches
    kept = [
        n
        for n in marks
        if n < len(current.segments) and current.segments[n].digest == previous.segments[n].digest
    ]
    common = sum(s.tokens for s in previous.segments[: kept[-1] + 1]) if kept else 0
    missed = cacheable - common
    if previous.model != current.model:
        return {"type": "model_changed", "cache_missed_input_tokens": cacheable}
    if previous.tools != current.tools:
        return {"type": "tools_changed", "cache_missed_input_tokens": missed}
    if previous.system != current.system:
        return {"type": "system_changed", "cache_missed_input_tokens": missed}
    if current.messages[: len(previous.messages)] != previous.messages:
        return {"type": "messages_changed", "cache_missed_input_tokens": missed}
    if previous.other != current.other:
        return {"type": "unavailable"}
    return None


def _key_of(headers: dict[str, str]) -> str:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return headers.get("x-api-key", "")


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))] or [""]
