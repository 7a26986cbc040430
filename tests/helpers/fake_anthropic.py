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

It also serves the Message Batches API (``/v1/messages/batches``: create, retrieve, list,
cancel, results; the batches themselves are :mod:`tests.helpers.fake_batches`). Each request
of a batch goes, when the batch ends, through the same path as a ``POST /v1/messages`` (the
contract checks, the script, the message building, the prompt cache): a request the API
refuses ends ``errored`` with the error a direct call gets, an accepted one ``succeeded``
with the message a non-streamed call gets. A test decides when batches end
(``batch_delay``, ``hold_batches``, :meth:`FakeAnthropic.release_batches`), can make chosen
requests end ``expired`` or ``errored`` (:meth:`FakeAnthropic.batch_outcome`), and can stop
and restart the HTTP server on the same port (:meth:`FakeAnthropic.restart`) while the
batches stay in the fake object.

It serves the Files API (``POST /v1/files`` multipart upload, ``GET /v1/files`` newest
first with ``limit``/``page`` cursors and ``next_page``, ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content`` for the files code execution made
(:meth:`FakeAnthropic.produce_file`), ``DELETE /v1/files/{id}``), each call needing the
``anthropic-beta: files-api-2025-04-14`` header; a file larger than ``file_max_bytes`` (500
MB by default) gets 413 ``request_too_large``; an unknown id 404 ``not_found_error``. A test
makes a file expire
(:meth:`FakeAnthropic.expire_file`: ``expires_at`` in the past, and a request naming it
refused with ``error.details.error_code: "file_expired"``) or vanish
(:meth:`FakeAnthropic.forget_file`), and reads what was uploaded
(:attr:`FakeAnthropic.uploads`, :attr:`FakeAnthropic.files`). ``document`` blocks (base64
PDF, plain text, ``file`` source; at a message's top level or in a ``tool_result``) are
checked by :func:`~tests.helpers.claude_contract.check_documents` only where the model's
contract allows them; a :class:`Cited` block of the script answers with a citation of the
request's document (``page_location`` for a PDF, ``char_location`` for a text, streamed as
a ``citations_delta`` before the text, the ``cited_text`` read from the document). A
``POST /v1/messages`` body over ``max_request_bytes`` (32 MB) gets 413.

Documentation relied on for documents (read 2026-11-27): the Files API pages ("Create a
File", "Get File Metadata", "List Files", "Delete File": the beta header, the
``FileMetadata`` fields ``id``, ``type: "file"``, ``filename``, ``mime_type``,
``size_bytes``, ``created_at``, ``downloadable``), the PDF support page (base64 and
``file`` sources, ``application/pdf``, the 32 MB request limit), the citations page
(``citations: {"enabled": true}`` on all or none of a request's documents;
``page_location`` with 1-based ``start_page_number`` and exclusive ``end_page_number``,
``char_location`` with 0-based ``start_char_index`` and exclusive ``end_char_index``,
``cited_text``, ``document_index``, ``document_title``), and the ``anthropic`` SDK 2.14
types (``BetaFileMetadata`` with ``expires_at``, ``files.upload(expires_in_seconds=...)``,
``FileExpiredErrorDetails`` (``error_code: "file_expired"``), ``BetaCitationPageLocation``
/ ``BetaCitationCharLocation`` with ``file_id``, ``citations_delta``). Unconfirmed, and
chosen here: the texts of the document refusals (see ``claude_contract``), a request
naming an unknown file answered 400 ``invalid_request_error`` ("File not found") rather
than 404, the message of the 413, and the list's ``page_N`` cursors.

Code execution (read 2026-11-27: the code execution tool's page and the SDK 2.14's types):
a request carrying the tool runs in a container, answered in the message's ``container:
{id, expires_at}``; a request naming a container the fake issued reuses it, one naming a
container it never issued or one that expired is refused (see
:meth:`FakeAnthropic._container_for`). Scripts answer with the documented result blocks as
:class:`Raw` blocks (``server_tool_use`` named ``bash_code_execution`` /
``text_editor_code_execution``, ``bash_code_execution_tool_result`` whose outputs name
files by ``file_id``); code execution adds no ``usage.server_tool_use`` count.

With ``cache=True`` it models the prompt cache (see :meth:`FakeAnthropic._cache_usage`) on an
injectable ``clock``, and answers cache ``diagnostics``.

Child processes reach it through ``ANTHROPIC_BASE_URL`` (see :attr:`FakeAnthropic.url`).
"""

from __future__ import annotations

import hashlib
import io
import json
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import policy as email_policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.helpers import claude_contract as contract
from tests.helpers import fake_batches
from tests.helpers.claude_contract import ApiError, Binding, Segment
from tests.helpers.fake_batches import Batch, BatchStore, Outcome
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
class Cited:
    """A text block citing a document of the request.

    In strict mode, when the request's document number ``document`` (``document_index``
    order) has citations enabled, the block carries one citation of it: a
    ``page_location`` of page ``page`` for a PDF (``end_page_number`` is exclusive, as the
    API's), a ``char_location`` of ``chars`` (start, exclusive end; the whole text when
    None) for a text document, with the ``cited_text`` read from the document itself.
    Otherwise (no such document, citations off, ``strict=False``) it is plain text.
    """

    text: str
    document: int = 0
    page: int = 1
    chars: tuple[int, int] | None = None
    chunk: int = 12


@dataclass
class Raw:
    """Any other block (e.g. a server tool's result), sent whole in ``content_block_start``."""

    block: dict[str, Any]


Block = Text | Cited | ToolUse | Thinking | RedactedThinking | Compaction | Raw

SERVER_TOOL_COUNTS = {"web_search": "web_search_requests", "web_fetch": "web_fetch_requests"}
"""The ``usage.server_tool_use`` count of each server tool (the tools' pages; the SDK 2.14's
``ServerToolUsage`` has these two: code execution is billed by container time, not uses)."""

CODE_EXECUTION_USES = frozenset(
    {"code_execution", "bash_code_execution", "text_editor_code_execution"}
)
"""``server_tool_use`` names of the code execution tool (its Bash and file editing)."""


def server_tool_counts(blocks: list[Block], body: dict[str, Any]) -> dict[str, int]:
    """``usage.server_tool_use`` for a scripted answer: one use per ``server_tool_use`` block.

    A script that has the model use a server tool the request did not offer is a test
    error (the API never does that), so it fails loudly.
    """
    offered = {
        str(t.get("name"))
        for t in body.get("tools") or []
        if isinstance(t, dict) and t.get("type") not in (None, "custom")
    }
    counts: dict[str, int] = {}
    for block in blocks:
        if not (isinstance(block, Raw) and block.block.get("type") == "server_tool_use"):
            continue
        name = str(block.block.get("name"))
        tool = "code_execution" if name in CODE_EXECUTION_USES else name
        if tool not in offered:
            raise AssertionError(f"the script uses the server tool {name!r}, not offered")
        if tool in SERVER_TOOL_COUNTS:
            key = SERVER_TOOL_COUNTS[tool]
            counts[key] = counts.get(key, 0) + 1
    return counts


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

    A request of a Message Batch is one too, recorded when its batch ends: ``path`` is
    ``/v1/messages/batches``, ``body`` its ``params``, ``headers`` those of the create call,
    and ``custom_id`` / ``batch_id`` say which it was.

    Attributes:
        status: HTTP status of the answer (200 for a message, also when it broke off).
        error: the error answered, if any (contract refusals and scripted statuses).
        response: the message as the fake built it (``content`` in full, as a client
            assembles it from the stream, and ``usage``), or the ``count_tokens`` / Models
            API / batches answer.
    """

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    status: int = 200
    error: ApiError | None = None
    response: dict[str, Any] | None = None
    custom_id: str | None = None
    batch_id: str | None = None

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
    pieces: list[tuple[str, str, Any]]
    final: dict[str, Any]


@dataclass
class _Outcome:
    """What a model call comes to: a refusal, a scripted error status, or a message."""

    error: ApiError | None = None
    status: Status | None = None
    reply: Stream | None = None
    message: dict[str, Any] = field(default_factory=dict)
    outs: list[_Out] = field(default_factory=list)

    def whole(self) -> dict[str, Any]:
        """The message with its content, as a non-streamed call returns it."""
        return dict(self.message, content=[o.final for o in self.outs])


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
        clock: the time source of the prompt cache and of Message Batches (a test may jump
            it by hours; a batch expires 24 hours after its creation).
        cache: model the prompt cache; ``usage`` is then computed from the request.
        batch_delay: seconds from a batch's creation to its end (its requests processed at
            the first look at the batches after that; 0: at the first look).
        hold_batches: new batches stay ``in_progress`` until :meth:`release_batches`.
        batch_max_requests, batch_max_bytes: the API's limits of one batch (tests may use
            small ones).
        max_request_bytes: the largest ``POST /v1/messages`` body (413 above it).
        file_max_bytes: the largest file the Files API takes (413 above it).
        container_ttl_s: how long a code execution container lives after its last use
            (chosen; :meth:`expire_container` ends one at once).

    Attributes:
        requests: the model calls in order: ``POST /v1/messages`` requests (and unknown
            routes), and each request of a Message Batch when its batch ends.
        side_requests: the ``count_tokens``, Models API and Message Batches API calls (kept
            apart so that :attr:`requests`, :meth:`bodies` and :meth:`wait_requests` count
            model calls).
    """

    def __init__(
        self,
        script: Sequence[Reply] | Script | None = None,
        accept_keys: set[str] | None = None,
        *,
        strict: bool = True,
        clock: Callable[[], float] = time.time,
        cache: bool = False,
        batch_delay: float = 0.0,
        hold_batches: bool = False,
        batch_max_requests: int = fake_batches.MAX_REQUESTS,
        batch_max_bytes: int = fake_batches.MAX_BYTES,
        max_request_bytes: int = contract.REQUEST_MAX_BYTES,
        file_max_bytes: int = contract.FILE_MAX_BYTES,
        container_ttl_s: float = 3600.0,
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
        self._batches = BatchStore(
            delay=batch_delay,
            hold=hold_batches,
            max_requests=batch_max_requests,
            max_bytes=batch_max_bytes,
        )
        self.max_request_bytes = max_request_bytes
        self.file_max_bytes = file_max_bytes
        self._files: dict[str, contract.FileRecord] = {}
        self._uploads: list[str] = []
        self._containers: dict[str, float] = {}
        self.container_ttl_s = container_ttl_s
        self._running = False
        self._bind(0)
        self._port = int(self._server.server_address[1])

    def _bind(self, port: int) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake._handle(self)

            def do_GET(self) -> None:
                fake._handle_get(self)

            def do_DELETE(self) -> None:
                fake._handle_delete(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """Base URL for the SDK (``base_url`` or ``ANTHROPIC_BASE_URL``); kept by a restart."""
        return f"http://127.0.0.1:{self._port}"

    def __enter__(self) -> FakeAnthropic:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for gate in self._gates:
            gate.set()
        self.stop()

    def start(self) -> None:
        """Serve (again, after :meth:`stop`, on the same port); nothing if serving."""
        if self._running:
            return
        if self._thread.ident is not None:  # stopped before: a new server on the same port
            self._bind(self._port)
        self._thread.start()
        self._running = True

    def stop(self) -> None:
        """Stop serving: connections are refused until :meth:`start`. State is kept."""
        if not self._running:
            return
        self._running = False
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def restart(self) -> None:
        """Stop and start the HTTP server on the same port (batches, records, cache kept)."""
        self.stop()
        self.start()

    # ------------------------------------------------------------------ batches (tests)

    def hold_batches(self, hold: bool = True) -> None:
        """Whether batches created from now on stay ``in_progress`` until released."""
        with self._batches.lock:
            self._batches.hold = hold

    def release_batches(self, *batch_ids: str) -> list[str]:
        """End the named batches now (every batch not ended when none is named).

        Their requests are processed here, in the caller's thread, so the results are
        there when this returns. A ``canceling`` batch ends with its requests ``canceled``.
        Returns the ids of the batches it ended.
        """
        for batch_id in batch_ids:
            if batch_id not in self._batches.batches:
                raise KeyError(batch_id)
        return self._batches.release(batch_ids, self.clock(), self._batch_request)

    def batch_outcome(self, custom_id: str, outcome: Outcome | None) -> None:
        """Make a request end ``expired`` or ``errored`` instead of being processed.

        Applies to the request ``custom_id`` in any batch that ends from now on.

        Args:
            custom_id: the request's ``custom_id``.
            outcome: ``"expired"``, or the error of an ``errored`` result (e.g.
                ``ApiError(529, "overloaded_error", "Overloaded")``); ``None``: process the
                request again.
        """
        with self._batches.lock:
            if outcome is None:
                self._batches.outcomes.pop(custom_id, None)
            else:
                self._batches.outcomes[custom_id] = outcome

    def batch(self, batch_id: str) -> dict[str, Any]:
        """The ``MessageBatch`` object the API would answer now (a look: due batches end)."""
        self._settle()
        with self._batches.lock:
            return self._batches.batches[batch_id].shape(self.url)

    def batch_results(self, batch_id: str) -> list[dict[str, Any]]:
        """The results of an ended batch, in request order (not counted as a fetch)."""
        self._settle()
        with self._batches.lock:
            batch = self._batches.batches[batch_id]
            if batch.status != "ended":
                raise AssertionError(f"batch {batch_id} has not ended ({batch.status})")
            return [{"custom_id": cid, "result": batch.results[cid]} for cid, _ in batch.requests]

    @property
    def batch_ids(self) -> list[str]:
        """Ids of the batches created, oldest first."""
        with self._batches.lock:
            return list(self._batches.batches)

    @property
    def batches_created(self) -> int:
        """How many batches were created (refused create calls do not count)."""
        with self._batches.lock:
            return len(self._batches.batches)

    @property
    def batch_submissions(self) -> Counter[str]:
        """How many times each custom_id was sent in a created batch, over all batches."""
        with self._batches.lock:
            return Counter(self._batches.submissions)

    @property
    def results_fetches(self) -> Counter[str]:
        """How many times each batch's results were served (refused reads do not count)."""
        with self._batches.lock:
            return Counter(self._batches.fetches)

    def wait_batches(self, n: int, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Block until ``n`` batches were created."""
        wait_until(
            lambda: self.batches_created >= n,
            timeout,
            f"{n} batches created on the fake API",
            last=lambda: f"{self.batches_created} batches",
        )

    # ------------------------------------------------------------------ files (tests)

    @property
    def uploads(self) -> list[str]:
        """The file names of the successful uploads (``POST /v1/files``), in order."""
        with self._lock:
            return list(self._uploads)

    @property
    def files(self) -> dict[str, contract.FileRecord]:
        """The Files API's files by id (deleted ones are gone)."""
        with self._lock:
            return dict(self._files)

    def expire_file(self, file_id: str) -> None:
        """Make a file expire now (a request naming it gets ``file_expired``)."""
        with self._lock:
            self._files[file_id].expired = True

    def forget_file(self, file_id: str) -> None:
        """Remove a file as if deleted elsewhere (a request naming it: file not found)."""
        with self._lock:
            del self._files[file_id]

    def produce_file(self, filename: str, data: bytes, mime_type: str = "text/csv") -> str:
        """A file as code execution makes one (``downloadable``); its id, for a script."""
        created = datetime.fromtimestamp(self.clock(), UTC).isoformat().replace("+00:00", "Z")
        record = contract.FileRecord(
            f"file_{uuid.uuid4().hex[:24]}", filename, mime_type, data, created, downloadable=True
        )
        with self._lock:
            self._files[record.id] = record
        return record.id

    # ------------------------------------------------------------------ containers (tests)

    @property
    def containers(self) -> dict[str, float]:
        """The containers the fake issued: id → expiry (epoch seconds on :attr:`clock`)."""
        with self._lock:
            return dict(self._containers)

    def expire_container(self, container_id: str) -> None:
        """Make a container expire now (a request naming it is refused)."""
        with self._lock:
            self._containers[container_id] = self.clock() - 1.0

    def _container_for(self, body: dict[str, Any]) -> tuple[str | None, ApiError | None]:
        """The container a request with the code execution tool runs in, or its refusal.

        A ``container`` the fake issued and that has not expired is reused (its expiry
        moves on); none starts a new one; an unknown or expired one is refused with 400
        ``invalid_request_error`` (chosen: the pages do not give the error).
        """
        tools = body.get("tools") or []
        if not any(
            isinstance(t, dict) and str(t.get("type", "")).startswith("code_execution_")
            for t in tools
        ):
            return None, None
        asked = body.get("container")
        wanted = asked.get("id") if isinstance(asked, dict) else asked
        now = self.clock()
        with self._lock:
            if wanted:
                expires = self._containers.get(str(wanted))
                if expires is None:
                    return None, contract._bad(f"container: container {wanted} not found")
                if expires <= now:
                    return None, contract._bad(f"container: container {wanted} has expired")
                box = str(wanted)
            else:
                box = f"container_{uuid.uuid4().hex[:24]}"
            self._containers[box] = now + self.container_ttl_s
        return box, None

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
        if path.rstrip("/") == "/v1/files":
            request, _ = self._record(h, {"size": len(raw)}, side=True)
            self._upload(h, request, raw)
            return
        batches = _batch_route(path)
        side = path == "/v1/messages/count_tokens" or batches is not None
        request, index = self._record(h, body if isinstance(body, dict) else {}, side=side)
        if batches == ():
            self._create_batch(h, request, len(raw), body)
            return
        if batches is not None and batches[1:] == ("cancel",):
            if self._authorized(h, request):
                self._cancel_batch(h, request, batches[0])
            return
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            self._error(h, request, ApiError(404, "not_found_error", f"no route {h.path}"))
            return
        if not self._authorized(h, request):
            return
        if len(raw) > self.max_request_bytes:
            self._error(h, request, _too_large())
        elif not isinstance(body, dict):
            self._error(h, request, ApiError(400, "invalid_request_error", "invalid JSON"))
        elif path == "/v1/messages/count_tokens":
            self._count_tokens(h, request)
        else:
            self._messages(h, request, index)

    def _handle_get(self, h: BaseHTTPRequestHandler) -> None:
        request, _ = self._record(h, {}, side=True)
        parts = urlsplit(h.path)
        if parts.path.rstrip("/") == "/v1/files" or parts.path.startswith("/v1/files/"):
            if self._authorized(h, request) and self._files_beta(h, request):
                self._read_files(h, request, parts.path, parse_qs(parts.query))
            return
        batches = _batch_route(parts.path)
        if batches is not None and batches[-1:] != ("cancel",):
            if self._authorized(h, request):
                self._read_batches(h, request, batches, parse_qs(parts.query))
            return
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
            error = contract.validate(body, request.headers, count_tokens=True, files=self.files)
            if error is not None:
                self._error(h, request, error)
                return
        counted = {k: v for k, v in body.items() if k != "compaction"}
        self._json(h, request, {"input_tokens": contract.count_tokens(counted)})

    def _outcome(
        self, body: dict[str, Any], headers: dict[str, str], index: int, *, batched: bool = False
    ) -> _Outcome:
        """What one model call comes to: a refusal, a scripted status, or a message.

        The one path of streamed, non-streamed and batched requests: the contract checks,
        the script, the message with its usage and signatures.
        """
        binding: Binding | None = None
        docs: list[contract.Document] = []
        if self.strict:
            files = self.files
            error = contract.validate(body, headers, files=files)
            if error is None:
                docs = contract.documents(body, files)
                binding = contract.check_binding(body, self.signer)
                error = binding.error
            if error is not None:
                return _Outcome(error=error)
        box: str | None = None
        if self.strict:
            box, refused = self._container_for(body)
            if refused is not None:
                return _Outcome(error=refused)
        reply = self._reply_for(body, index)
        if isinstance(reply, Status):
            return _Outcome(status=reply)
        if not self.strict and not batched and not body.get("stream"):
            return _Outcome(error=ApiError(400, "invalid_request_error", "the fake only streams"))
        message, outs = self._answer(reply, body, binding, docs)
        if box is not None:
            expires = datetime.fromtimestamp(self.containers[box], UTC)
            message["container"] = {
                "id": box,
                "expires_at": expires.isoformat().replace("+00:00", "Z"),
            }
        return _Outcome(reply=reply, message=message, outs=outs)

    def _messages(self, h: BaseHTTPRequestHandler, request: Request, index: int) -> None:
        body = request.body
        outcome = self._outcome(body, request.headers, index)
        if outcome.status is not None:
            status = outcome.status
            if status.gate is not None:
                with self._lock:
                    self._gates.append(status.gate)
                status.gate.wait(timeout=30)
            error = ApiError(status.status, status.type, status.message)
            self._error(h, request, error, status.headers)
            return
        if outcome.error is not None:
            self._error(h, request, outcome.error)
            return
        reply = outcome.reply
        assert reply is not None
        with self._lock:
            request.response = outcome.whole()
        if not body.get("stream"):
            self._json(h, request, request.response, reply.headers)
            return
        try:
            self._stream(h, reply, outcome.message, outcome.outs)
        except (BrokenPipeError, ConnectionResetError):
            with self._lock:
                self.disconnects += 1

    # ------------------------------------------------------------------ files (HTTP)

    def _files_beta(self, h: BaseHTTPRequestHandler, request: Request) -> bool:
        if contract.BETA_FILES in contract.beta_headers(request.headers):
            return True
        self._error(h, request, contract._bad(contract._msg_beta("files", contract.BETA_FILES)))
        return False

    def _upload(self, h: BaseHTTPRequestHandler, request: Request, raw: bytes) -> None:
        """``POST /v1/files`` (multipart ``file``): the file's metadata."""
        if len(raw) > self.file_max_bytes:  # refused in front of the API, as a large request
            self._error(h, request, _too_large())
            return
        if not self._authorized(h, request) or not self._files_beta(h, request):
            return
        part = _multipart_file(h.headers.get("content-type", ""), raw)
        if part is None:
            self._error(h, request, contract._bad("file: Field required"))
            return
        filename, mime_type, data = part
        if len(data) > self.file_max_bytes:
            self._error(h, request, _too_large())
            return
        created = datetime.fromtimestamp(self.clock(), UTC).isoformat().replace("+00:00", "Z")
        record = contract.FileRecord(
            f"file_{uuid.uuid4().hex[:24]}", filename, mime_type, data, created
        )
        with self._lock:
            self._files[record.id] = record
            self._uploads.append(filename)
            request.body = {"filename": filename, "size": len(data), "mime_type": mime_type}
        self._json(h, request, record.metadata())

    def _read_files(
        self,
        h: BaseHTTPRequestHandler,
        request: Request,
        path: str,
        query: dict[str, list[str]],
    ) -> None:
        """``GET /v1/files`` (newest first, ``limit``, ``page``) and ``/v1/files/{id}``."""
        rest = unquote(path[len("/v1/files") :].strip("/"))
        content = rest.endswith("/content")
        rest = rest.removesuffix("/content")
        with self._lock:
            files = sorted(self._files.values(), key=lambda f: f.created_at, reverse=True)
            record = self._files.get(rest) if rest else None
        if content:
            self._file_content(h, request, rest, record)
            return
        if rest:
            if record is None:
                self._error(h, request, ApiError(404, "not_found_error", f"File not found: {rest}"))
            else:
                self._json(h, request, record.metadata())
            return
        try:
            limit = int(query.get("limit", ["20"])[0])
            start = int(query.get("page", ["page_0"])[0].removeprefix("page_"))
        except ValueError:
            self._error(h, request, contract._bad("page: not a page cursor of this list"))
            return
        if not 1 <= limit <= 1000:
            self._error(h, request, contract._bad("limit: Input should be between 1 and 1000"))
            return
        page = [f.metadata() for f in files[start : start + limit]]
        more = start + limit < len(files)
        self._json(
            h,
            request,
            {
                "data": page,
                "has_more": more,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "next_page": f"page_{start + limit}" if more else None,
            },
        )

    def _file_content(
        self,
        h: BaseHTTPRequestHandler,
        request: Request,
        file_id: str,
        record: contract.FileRecord | None,
    ) -> None:
        """``GET /v1/files/{id}/content``: the bytes of a file a tool made.

        The SDK 2.14's errors: an upload is not downloadable (400, ``error_code:
        "file_not_downloadable"``), an expired file's bytes are gone (404, ``error_code:
        "file_expired"``); an unknown id is 404.
        """
        if record is None:
            self._error(h, request, ApiError(404, "not_found_error", f"File not found: {file_id}"))
        elif record.expired:
            error = ApiError(404, "not_found_error", f"File {file_id} has expired.", "file_expired")
            self._error(h, request, error)
        elif not record.downloadable:
            message = f"File {file_id} is not downloadable: only files a tool made are."
            self._error(h, request, contract._bad(message, "file_not_downloadable"))
        else:
            request_id = f"req_{uuid.uuid4().hex[:24]}"
            self._write_bytes(h, 200, record.data, "application/octet-stream", request_id, None)

    def _handle_delete(self, h: BaseHTTPRequestHandler) -> None:
        """``DELETE /v1/files/{id}``."""
        request, _ = self._record(h, {}, side=True)
        path = urlsplit(h.path).path
        if not path.startswith("/v1/files/"):
            self._error(h, request, ApiError(404, "not_found_error", f"no route {h.path}"))
            return
        if not self._authorized(h, request) or not self._files_beta(h, request):
            return
        file_id = unquote(path[len("/v1/files/") :].strip("/"))
        with self._lock:
            gone = self._files.pop(file_id, None)
        if gone is None:
            self._error(h, request, ApiError(404, "not_found_error", f"File not found: {file_id}"))
        else:
            self._json(h, request, {"id": file_id, "type": "file_deleted"})

    # ------------------------------------------------------------------ batches (HTTP)

    def _settle(self) -> None:
        self._batches.settle(self.clock(), self._batch_request)

    def _batch_request(
        self, batch: Batch, custom_id: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """The ``result`` of one request of an ending batch.

        Recorded in :attr:`requests` as a model call and answered through :meth:`_outcome`,
        as a non-streamed ``POST /v1/messages`` is.
        """
        request = Request(
            "/v1/messages/batches",
            dict(batch.headers),
            params,
            time.time(),
            custom_id=custom_id,
            batch_id=batch.id,
        )
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
        outcome = self._outcome(params, request.headers, index, batched=True)
        error = outcome.error
        if outcome.status is not None:
            error = ApiError(outcome.status.status, outcome.status.type, outcome.status.message)
        if error is not None:
            with self._lock:
                request.status = error.status
                request.error = error
            return {"type": "errored", "error": fake_batches.error_object(error)}
        message = outcome.whole()
        with self._lock:
            request.response = message
        return {"type": "succeeded", "message": message}

    def _create_batch(
        self, h: BaseHTTPRequestHandler, request: Request, size: int, body: object
    ) -> None:
        too_large = self._batches.oversize(size)
        if too_large is not None:  # refused in front of the API, before the key is read
            self._error(h, request, too_large)
            return
        if not self._authorized(h, request):
            return
        error = self._batches.refusal(body)
        if error is not None:
            self._error(h, request, error)
            return
        assert isinstance(body, dict)
        batch = self._batches.create(body["requests"], request.headers, self.clock())
        self._json(h, request, batch.shape(self.url))

    def _cancel_batch(self, h: BaseHTTPRequestHandler, request: Request, batch_id: str) -> None:
        self._settle()
        if batch_id not in self._batches.batches:
            self._error(h, request, _no_batch(batch_id))
            return
        batch = self._batches.cancel(batch_id, self.clock())
        if isinstance(batch, ApiError):
            self._error(h, request, batch)
        else:
            self._json(h, request, batch.shape(self.url))

    def _read_batches(
        self,
        h: BaseHTTPRequestHandler,
        request: Request,
        route: tuple[str, ...],
        query: dict[str, list[str]],
    ) -> None:
        self._settle()
        if route == ():  # GET on the collection: the list
            page = self._batches.page(query)
            if isinstance(page, ApiError):
                self._error(h, request, page)
                return
            data = [b.shape(self.url) for b in page["batches"]]
            self._json(
                h,
                request,
                {
                    "data": data,
                    "has_more": page["has_more"],
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                },
            )
            return
        batch_id = route[0]
        if batch_id not in self._batches.batches:
            self._error(h, request, _no_batch(batch_id))
            return
        if route[1:] == ():
            self._json(h, request, self._batches.batches[batch_id].shape(self.url))
            return
        results = self._batches.results(batch_id)
        if isinstance(results, ApiError):
            self._error(h, request, results)
            return
        request_id = f"req_{uuid.uuid4().hex[:24]}"
        self._write_bytes(h, 200, results, "application/x-jsonl", request_id, None)

    # ------------------------------------------------------------------ answers

    def _answer(
        self,
        reply: Stream,
        body: dict[str, Any],
        binding: Binding | None,
        docs: Sequence[contract.Document] = (),
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
            outs = self._blocks(reply, body, binding, docs)
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

    def _blocks(
        self,
        reply: Stream,
        body: dict[str, Any],
        binding: Binding | None,
        docs: Sequence[contract.Document] = (),
    ) -> list[_Out]:
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
            elif isinstance(block, Cited):
                outs.append(_cited_out(block, docs))
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
        server = server_tool_counts(reply.blocks, body)
        if server:
            usage["server_tool_use"] = server
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
        FakeAnthropic._write_bytes(h, status, raw, "application/json", request_id, headers)

    @staticmethod
    def _write_bytes(
        h: BaseHTTPRequestHandler,
        status: int,
        raw: bytes,
        content_type: str,
        request_id: str,
        headers: dict[str, str] | None,
    ) -> None:
        h.send_response(status)
        h.send_header("content-type", content_type)
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
    if isinstance(block, Text | Cited):
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
    start.pop("container", None)  # the API tells it at the end (``message_delta.delta``)
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
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": None,
                **({"container": message["container"]} if "container" in message else {}),
            },
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield ("meta", "message_stop", {"type": "message_stop"})


def _batch_route(path: str) -> tuple[str, ...] | None:
    """The Message Batches route of a path, or ``None``.

    ``()`` for the collection (create on POST, list on GET), ``(id,)``, ``(id, "cancel")``,
    ``(id, "results")``.
    """
    prefix = "/v1/messages/batches"
    if path.rstrip("/") == prefix:
        return ()
    if not path.startswith(prefix + "/"):
        return None
    parts = tuple(unquote(p) for p in path[len(prefix) + 1 :].strip("/").split("/"))
    if len(parts) == 1 or (len(parts) == 2 and parts[1] in ("cancel", "results")):
        return parts
    return None


def _too_large() -> ApiError:
    message = "Request exceeds the maximum allowed number of bytes."
    return ApiError(413, "request_too_large", message)


def _multipart_file(content_type: str, raw: bytes) -> tuple[str, str, bytes] | None:
    """(file name, MIME type, bytes) of the ``file`` part of a multipart body."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = BytesParser(policy=email_policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart():
        return None
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") != "file":
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        return part.get_filename() or "unnamed", part.get_content_type(), data
    return None


def _page_texts(pdf: bytes) -> list[str]:
    """The text of each page of a PDF (what a ``page_location`` citation quotes)."""
    from pypdf import PdfReader

    return [page.extract_text() or "" for page in PdfReader(io.BytesIO(pdf)).pages]


def _cited_out(block: Cited, docs: Sequence[contract.Document]) -> _Out:
    """A text block with one citation of the request's document ``block.document``."""
    doc = docs[block.document] if 0 <= block.document < len(docs) else None
    if doc is None or not doc.citations:
        return _lenient_out(Text(block.text, block.chunk))
    citation: dict[str, Any]
    if doc.kind == "pdf":
        pages = _page_texts(doc.data)
        if not 1 <= block.page <= len(pages):
            return _lenient_out(Text(block.text, block.chunk))
        citation = {
            "type": "page_location",
            "cited_text": pages[block.page - 1].strip(),
            "document_index": block.document,
            "document_title": doc.title,
            "start_page_number": block.page,
            "end_page_number": block.page + 1,
        }
    else:
        text = doc.data.decode("utf-8", "replace")
        start, end = block.chars if block.chars is not None else (0, len(text))
        citation = {
            "type": "char_location",
            "cited_text": text[start:end],
            "document_index": block.document,
            "document_title": doc.title,
            "start_char_index": start,
            "end_char_index": end,
        }
    if doc.file_id is not None:
        citation["file_id"] = doc.file_id
    pieces: list[tuple[str, str, Any]] = [("citations_delta", "citation", citation)]
    pieces += [("text_delta", "text", p) for p in _chunks(block.text, block.chunk)]
    final = {"type": "text", "text": block.text, "citations": [citation]}
    return _Out({"type": "text", "text": "", "citations": []}, pieces, final)


def _no_batch(batch_id: str) -> ApiError:
    return ApiError(404, "not_found_error", f"message_batch: {batch_id}")


def _models_page(query: dict[str, list[str]], beta: bool) -> dict[str, Any] | ApiError:
    """A page of ``GET /v1/models`` (newest first, ``after_id`` / ``before_id`` cursors)."""
    models = contract.catalogue()
    span = fake_batches.cursor_page([m.id for m in models], query, "model")
    if isinstance(span, ApiError):
        return span
    start, end, has_more = span
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
