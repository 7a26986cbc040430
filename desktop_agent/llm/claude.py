"""Claude through the ``anthropic`` SDK: the engine's model port on the Messages API.

One call is one streamed Messages request. Text deltas (and the arguments of tool calls as
they stream) go to ``on_text``, which the engine persists a few times a second. Thinking
blocks are kept in the content with their signatures, so that tool-use turns stay valid,
and their text is returned as the step's thought.

Prompt caching: breakpoints on the last tool definition, on the system prompt and on the
newest message (plus the one the previous call marked, which guarantees a cache hit even
when a turn adds many blocks), at most four; a long run pays cache-read prices for its
history.

Failures never hold a thread for long and never sleep through a long ``retry-after``. The
SDK's own retries are off (it sleeps uninterruptibly and obeys ``retry-after`` uncapped);
this adapter retries a few times itself, only before any output streamed, and only when
the wait is short, sleeping on the run's cancel token. Longer waits become
:class:`RateLimitedError` or :class:`ApiConnectionError` with ``retry_after`` and the
engine hibernates the run. 401/403 and a missing key become :class:`AuthenticationError`;
other 4xx become :class:`BadRequestError` with the API's message. The key is used only in
the request header: error texts are scrubbed of it, and it is never logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import anthropic
import httpx2
from anthropic.types.beta import BetaMessage

from desktop_agent.domain import JSON, Usage
from desktop_agent.domain.catalogue import BETWEEN_TOOLS_EFFORTS, ModelEntry
from desktop_agent.domain.errors import (
    ApiConnectionError,
    AuthenticationError,
    BadRequestError,
    DesktopAgentError,
    RateLimitedError,
    RunCancelled,
    TransientError,
    plain_error,
)
from desktop_agent.domain.server_tools import RUN_NAMES, takes_server_tool
from desktop_agent.engine.ports import CancelToken, ModelRequest, ModelResponse
from desktop_agent.http_client import sdk_client
from desktop_agent.llm import documents as docs
from desktop_agent.llm import outputs
from desktop_agent.llm.catalogue import COMPACTION_BETA, SHARED, Catalogue
from desktop_agent.llm.pacing import (
    MAX_REFILL_S,
    PREFIX,
    SHARED_PACER,
    RateLimitPacer,
    parse_reset,
    parse_retry_after,
)
from desktop_agent.llm.pricing import (
    SERVER_TOOL_USD,
    ModelInfo,
    billed_seconds,
    code_execution_cost,
    is_known,
    model_info,
    server_tool_cost,
)

log = logging.getLogger(__name__)

NO_KEY_MESSAGE = "no API key: set one with `desktop-agent key set` or ANTHROPIC_API_KEY"
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
TASK_BUDGET_BETA = "task-budgets-2026-03-13"
"""Beta header of ``output_config.task_budget``."""
MIN_TASK_BUDGET = 20_000
"""Smallest task budget worth telling the model (below it the run's own budget stops it)."""
MAX_BREAKPOINTS = 4
"""The API accepts at most four ``cache_control`` breakpoints per request."""
MIN_THINKING_BUDGET = 1024
"""Smallest extended-thinking budget the API accepts."""

WEB_SEARCH_USD = SERVER_TOOL_USD["web_search_requests"]
"""Price of one server-side web search ($10 per 1,000 searches: ``llm/pricing.py``)."""
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
_AUTH_TYPES = frozenset({"authentication_error", "permission_error"})
_REQUEST_TYPES = frozenset(
    {"invalid_request_error", "not_found_error", "request_too_large", "billing_error"}
)


class ClaudeSettings(Protocol):
    """The part of the user's settings the adapter reads."""

    @property
    def fallback_model(self) -> str:
        """Model used after repeated overload of the run's model ("" for none)."""
        ...


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one call tries before it hands the wait to the engine.

    Attributes:
        max_retries: retries inside one call (before any output streamed).
        max_inline_wait_s: longest wait slept inside a call; longer ones hibernate the run.
        backoff_s: first wait after a failure without ``retry-after``; doubles each time.
        fallback_after: overloads of a model in a row before the fallback model is used.
        fallback_cooldown_s: how long the fallback stays in use after the last overload.
    """

    max_retries: int = 2
    max_inline_wait_s: float = 10.0
    backoff_s: float = 0.5
    fallback_after: int = 2
    fallback_cooldown_s: float = 300.0


class _AttemptFailedError(Exception):
    """A failed attempt: the error for the engine plus what the retry logic needs."""

    def __init__(
        self,
        error: DesktopAgentError,
        headers: Mapping[str, str],
        *,
        overloaded: bool = False,
        unknown_model: bool = False,
        file_gone: bool = False,
        container_gone: bool = False,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.headers = headers
        self.overloaded = overloaded
        self.unknown_model = unknown_model
        self.file_gone = file_gone
        self.container_gone = container_gone


class ClaudeModel:
    """The engine's :class:`~desktop_agent.engine.ports.ModelPort` for Claude models.

    Thread-safe: one instance serves every run of the worker.

    Args:
        key_source: returns the API key (or None) at each call, so a new key is used at once.
        settings: user settings (the fallback model).
        base_url: API address; None lets the SDK read ``ANTHROPIC_BASE_URL``.
        policy: retry and fallback tunables.
        pacer: rate-limit memory shared by the runs of this process.
        clock: epoch seconds, for pacing and ``retry-after`` dates.
        timeout: seconds to wait for the API to answer or to send the next event (each
            operation; a connection is waited for at most
            :data:`desktop_agent.http_client.CONNECT_TIMEOUT_S`). The HTTP client, its
            certificates and proxies come from :func:`desktop_agent.http_client.sdk_client`.
        catalogue: what each model accepts (default: the process's shared catalogue).
        on_unknown_model: called with the model id when the API answers 404 naming a
            model (the worker reads the catalogue again).
    """

    def __init__(
        self,
        key_source: Callable[[], str | None],
        settings: ClaudeSettings | None = None,
        *,
        base_url: str | None = None,
        policy: RetryPolicy | None = None,
        pacer: RateLimitPacer | None = None,
        clock: Callable[[], float] = time.time,
        timeout: float = 600.0,
        catalogue: Catalogue | None = None,
        on_unknown_model: Callable[[str], None] | None = None,
    ) -> None:
        self.key_source = key_source
        self.settings = settings
        self.base_url = base_url
        self.policy = policy or RetryPolicy()
        self.pacer = pacer or SHARED_PACER
        self.clock = clock
        self.timeout = timeout
        self.catalogue = catalogue or SHARED
        self.on_unknown_model = on_unknown_model
        self._lock = threading.Lock()
        self._sdk: anthropic.Anthropic | None = None
        self._sdk_key_id = ""
        self._http: httpx2.Client | None = None
        self._overloads: dict[str, tuple[int, float]] = {}

    # ------------------------------------------------------------------ port

    def context_window(self, model: str) -> int:
        """Tokens the model accepts in one request (the catalogue's, else the table's)."""
        entry = self.catalogue.entry(model)
        if entry is not None and entry.max_input_tokens:
            return entry.max_input_tokens
        return model_info(model).context_window

    def compacts_on_server(self, model: str) -> bool:
        """Whether the catalogue lists on-demand compaction for ``model``."""
        entry = self.catalogue.entry(model)
        return entry is not None and entry.server_compaction

    def count_tokens(self, request: ModelRequest) -> int | None:
        """The prompt's exact size from ``messages.count_tokens`` (None if it cannot be had).

        Never raises: a count is an improvement on the estimate, not a requirement.
        """
        try:
            client = self._client(self._key())
            params = build_params(request, request.model, self.catalogue)
            betas = params.pop("betas", None)
            for unused in ("max_tokens", "diagnostics", "compaction", "_documents", "_uploads"):
                params.pop(unused, None)
            if betas:
                return int(client.beta.messages.count_tokens(**params, betas=betas).input_tokens)
            return int(client.messages.count_tokens(**params).input_tokens)
        except (DesktopAgentError, anthropic.AnthropicError, httpx2.HTTPError) as exc:
            log.info("could not count the prompt's tokens: %s", exc)
            return None

    def worst_case_cost(self, request: ModelRequest) -> float:
        """Upper bound of the call's price: the whole prompt written to the cache, full output.

        The prompt is the counted size when the request carries one, else a generous
        estimate; output is the most the call may write, thinking included (a higher
        effort thinks longer, up to the same ``max_tokens``).
        """
        prompt = request.prompt_tokens or estimate_tokens(request)
        models = {request.model, self._fallback() or request.model}
        searches = sum(
            int(t.get("max_uses", 0) or 0) for t in request.tools if t.get("name") == "web_search"
        )
        one_hour = prompt if request.cache_ttl == "1h" else 0
        container = code_execution_cost(self.timeout, request.tools) if _coding(request) else 0.0
        return (
            container
            + searches * WEB_SEARCH_USD
            + max(
                model_info(m).cost(
                    Usage(
                        cache_write_tokens=prompt,
                        output_tokens=_limits(request, model_info(m), self.catalogue.entry(m))[0],
                    ),
                    cache_write_1h_tokens=one_hour,
                )
                for m in models
            )
        )

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        """Stream one model turn (see the module docstring for failures).

        Raises:
            RunCancelled: ``cancel`` was set during the call.
            RateLimitedError, ApiConnectionError: try again later (``retry_after`` set if known).
            AuthenticationError: no key, or the key was rejected.
            BadRequestError: the API refused the request itself.
        """
        cancel.raise_if_cancelled()
        key = self._key()
        client = self._client(key)
        key_id = _fingerprint(key)
        model = self._pick_model(request.model)
        streamed = False

        def emit(text: str) -> None:
            nonlocal streamed
            if text:
                streamed = True
                on_text(text)

        def spent(usage: Any) -> None:
            # Reported as the API counts it, so an interrupted call is still paid for.
            if on_usage is not None and usage is not None:
                counted = _usage(usage)
                on_usage(counted, model_info(model).cost(counted, cache_write_1h_tokens=_1h(usage)))

        attempt = 0
        run_id = idempotency_key.split(":")[0]
        file_ids: dict[str, str] = {}  # SHA-256 -> file id, uploaded or found by this call
        refreshed = False  # files uploaded again after the API said they were gone
        sent: list[dict[str, JSON]] = []  # the documents of the last request, in order
        replaced = ""  # the container the API no longer had (a new one was started)
        while True:
            bucket = f"{key_id}:{model}"
            ticket = self.pacer.reserve(
                bucket,
                input_tokens=estimate_uncached_tokens(request),
                max_wait=self.policy.max_inline_wait_s,
            )
            try:
                if ticket.delay > 0:
                    log.info("pacing: waiting %.1fs before calling %s", ticket.delay, model)
                    if cancel.wait(ticket.delay):
                        raise RunCancelled("cancelled while waiting for the rate limit")
                self._upload_pending(client, request, model, file_ids, run_id, key)
                params = build_params(request, model, self.catalogue, file_ids)
                sent = list(params.get("_documents") or [])
                began = time.monotonic()
                message, headers = self._stream_once(client, params, emit, cancel, key, spent)
                elapsed = time.monotonic() - began
            except _AttemptFailedError as failure:
                self.pacer.release(ticket, failure.headers)
                if failure.container_gone and request.container and not streamed:
                    # Gone before the expiry the run knew: a new container, said so.
                    log.info("container %s is gone: the API starts a new one", request.container)
                    replaced, request = request.container, replace(request, container=None)
                    continue
                if failure.file_gone and not refreshed and not streamed and sent:
                    # A file named by id expired or was deleted: upload it again, once.
                    refreshed = True
                    self._upload_again(client, request, sent, file_ids, run_id, key)
                    continue
                model, attempt = self._after_failure(
                    failure, request, model, bucket, attempt, streamed, cancel, idempotency_key
                )
                continue
            except BaseException:
                self.pacer.release(ticket)
                raise
            self.pacer.release(ticket, headers)
            with self._lock:
                self._overloads.pop(model, None)
            response = _response(message, model, self.catalogue, elapsed_s=elapsed, request=request)
            return _with_files(client, response, request, params, idempotency_key, replaced)

    # ------------------------------------------------------------------ documents

    def _upload_pending(
        self,
        client: anthropic.Anthropic,
        request: ModelRequest,
        model: str,
        file_ids: dict[str, str],
        run_id: str,
        key: str,
    ) -> None:
        """Upload the large documents the model reads and the container's files not uploaded.

        The container's files (the run's attachments) go up only when the request carries
        code execution for a model that takes it.
        """
        entry = self.catalogue.entry(model)
        coding = _coding(request) and takes_server_tool(entry, "code_execution")
        for descriptor in docs.pending_uploads(request.messages, entry, file_ids, container=coding):
            file_id = self._upload(
                client, descriptor, run_id, key, look_first=True, workspace=request.workspace
            )
            if file_id is not None:
                file_ids[str(descriptor["sha256"])] = file_id

    def _upload_again(
        self,
        client: anthropic.Anthropic,
        request: ModelRequest,
        sent: list[dict[str, JSON]],
        file_ids: dict[str, str],
        run_id: str,
        key: str,
    ) -> None:
        """Upload again each file of the request the API no longer has (gone or expired).

        Raises:
            DesktopAgentError: the API refused or could not be reached (no retry here).
        """
        try:
            self._replace_gone(client, request, sent, file_ids, run_id, key)
        except _AttemptFailedError as again:
            raise again.error from None

    def _replace_gone(
        self,
        client: anthropic.Anthropic,
        request: ModelRequest,
        sent: list[dict[str, JSON]],
        file_ids: dict[str, str],
        run_id: str,
        key: str,
    ) -> None:
        by_sha = {str(d.get("sha256")): d for d in docs.descriptors(request.messages)}
        for document in sent:
            file_id = document.get("file_id")
            descriptor = by_sha.get(str(document.get("sha256")))
            if not isinstance(file_id, str) or descriptor is None:
                continue
            if self._file_alive(client, file_id, key):
                continue
            log.info("file %s is gone: uploading %s again", file_id, document.get("title"))
            fresh = self._upload(
                client, descriptor, run_id, key, look_first=True, workspace=request.workspace
            )
            if fresh is not None:
                file_ids[str(descriptor["sha256"])] = fresh

    def _file_alive(self, client: anthropic.Anthropic, file_id: str, key: str) -> bool:
        try:
            meta = client.beta.files.retrieve_metadata(file_id, betas=[docs.FILES_BETA])
        except anthropic.NotFoundError:
            return False
        except anthropic.APIStatusError as exc:
            error, overloaded = status_error(exc, key, self.clock(), self.catalogue)
            raise _AttemptFailedError(
                error, _lower(exc.response.headers), overloaded=overloaded
            ) from None
        except anthropic.APIConnectionError as exc:
            raise _AttemptFailedError(
                ApiConnectionError(f"cannot reach the model API: {exc.message}"), {}
            ) from None
        return meta.expires_at is None or not docs._expired(meta.expires_at)

    def _upload(
        self,
        client: anthropic.Anthropic,
        descriptor: Mapping[str, Any],
        run_id: str,
        key: str,
        *,
        look_first: bool,
        workspace: str,
    ) -> str | None:
        """The file id of ``descriptor``'s file, uploaded under :func:`docs.upload_name`.

        An upload is an effect the API takes no key for: before it, the API's list of
        files is read for this run's upload of the same file (one made by an attempt that
        crashed before its outcome was recorded). None when the file's copy is gone (the
        document stays the tool's text).
        """
        data = docs.read_blob(descriptor, workspace)
        if data is None:
            log.warning("the copy of %s kept for upload is gone", descriptor.get("title"))
            return None
        name = str(descriptor.get("upload_name") or docs.upload_name(run_id, descriptor))
        media = str(
            descriptor.get("media_type")
            or (mimetypes.guess_type(name)[0] if descriptor.get("upload_name") else None)
            or (docs.PDF if not descriptor.get("upload_name") else "application/octet-stream")
        )
        try:
            if look_first:
                found = docs.find_upload(client.beta.files, name, len(data))
                if found is not None:
                    return found
            meta = client.beta.files.upload(file=(name, data, media), betas=[docs.FILES_BETA])
        except anthropic.APIStatusError as exc:
            error, overloaded = status_error(exc, key, self.clock(), self.catalogue)
            raise _AttemptFailedError(
                error, _lower(exc.response.headers), overloaded=overloaded
            ) from None
        except anthropic.APIConnectionError as exc:
            raise _AttemptFailedError(
                ApiConnectionError(f"cannot reach the model API to upload a file: {exc.message}"),
                {},
            ) from None
        log.info("uploaded %s as %s (%d bytes)", descriptor.get("title"), meta.id, len(data))
        return str(meta.id)

    # ------------------------------------------------------------------ batches

    def batch_params(self, request: ModelRequest) -> dict[str, JSON] | None:
        """``params`` of a Message Batch request for ``request`` (``betas`` kept in it).

        None when the catalogue says the model takes no batches. The params are those of
        a streamed call (:func:`build_params`), so a run's turns are the same requests in
        either mode; the batch's worker sends the ``betas`` as the batch's headers.
        """
        entry = self.catalogue.entry(request.model)
        if entry is not None and not entry.has("batch"):
            return None
        params: dict[str, JSON] = build_params(request, request.model, self.catalogue)
        params.pop("_documents", None)
        params.pop("_uploads", None)
        return params

    def batch_response(self, request: ModelRequest, result: JSON) -> ModelResponse:
        """The answer in a batch's ``result`` object, at the batch price (see the port)."""
        data = result if isinstance(result, dict) else {}
        kind = str(data.get("type", ""))
        if kind == "succeeded" and isinstance(data.get("message"), dict):
            message = BetaMessage.model_validate(data["message"])
            if message.stop_reason is None:
                raise ApiConnectionError("the batch's answer ended before the message was complete")
            return _response(message, request.model, self.catalogue, batch=True)
        if kind == "errored":
            raise batch_error(data.get("error"), self.catalogue)
        if kind == "expired":
            raise ApiConnectionError(
                "the batch request expired before the API processed it (a batch ends within "
                "24 hours); the turn is sent again"
            )
        if kind == "canceled":
            raise ApiConnectionError(
                "the batch was canceled before this request was processed; the turn is sent again"
            )
        raise ApiConnectionError(
            f"the batch's result could not be read (type {kind or 'missing'!r})"
        )

    # ------------------------------------------------------------------ failures

    def _after_failure(
        self,
        failure: _AttemptFailedError,
        request: ModelRequest,
        model: str,
        bucket: str,
        attempt: int,
        streamed: bool,
        cancel: CancelToken,
        idempotency_key: str,
    ) -> tuple[str, int]:
        """Decide between another attempt (returns its model and number) and giving up."""
        err = failure.error
        log.warning("model call %s on %s failed: %s", idempotency_key, model, err)
        if failure.unknown_model and self.on_unknown_model is not None:
            try:
                self.on_unknown_model(model)
            except Exception:  # a failed refresh must not hide the API's answer
                log.exception("reading the model catalogue again failed")
        if isinstance(err, TransientError) and err.retry_after:
            # Every run of this process calling this model waits too, not only this one.
            self.pacer.block(bucket, err.retry_after)
        if failure.overloaded:
            self._note_overload(model)
            fallback = self._pick_model(request.model)
            if fallback != model and not streamed and attempt < self.policy.max_retries + 1:
                log.warning("%s is overloaded: using the fallback model %s", model, fallback)
                return fallback, attempt + 1
        # Once text streamed, a retry would repeat it in the live output: the engine decides.
        if not isinstance(err, TransientError) or streamed or attempt >= self.policy.max_retries:
            raise err from None
        if err.retry_after is not None:
            if err.retry_after > self.policy.max_inline_wait_s:
                raise err from None
            return model, attempt + 1  # the pacer holds the next attempt until then
        delay = self.policy.backoff_s * (2**attempt)
        if cancel.wait(delay):
            raise RunCancelled("cancelled while waiting to retry the model call")
        return model, attempt + 1

    def _note_overload(self, model: str) -> None:
        with self._lock:
            count, _ = self._overloads.get(model, (0, 0.0))
            self._overloads[model] = (count + 1, self.clock())

    def _fallback(self) -> str:
        value = getattr(self.settings, "fallback_model", "") if self.settings else ""
        model = str(value or "").strip()
        return model if model.startswith("claude-") else ""

    def _pick_model(self, requested: str) -> str:
        """The run's model, or the fallback while the run's model is repeatedly overloaded."""
        fallback = self._fallback()
        if not fallback or fallback == requested:
            return requested
        with self._lock:
            count, last = self._overloads.get(requested, (0, 0.0))
        recent = self.clock() - last < self.policy.fallback_cooldown_s
        return fallback if count >= self.policy.fallback_after and recent else requested

    # ------------------------------------------------------------------ SDK

    def _key(self) -> str:
        try:
            key = self.key_source()
        except Exception as exc:  # a broken keyring must read as "no key", not a crash
            raise AuthenticationError(
                f"the API key cannot be read ({plain_error(exc, 'the keyring gave no reason')}); "
                f"{NO_KEY_MESSAGE}"
            ) from None
        key = (key or "").strip()
        if not key:
            raise AuthenticationError(NO_KEY_MESSAGE)
        if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
            raise AuthenticationError(
                "the API key contains characters that cannot be sent; set it again"
            )
        return key

    def _client(self, key: str) -> anthropic.Anthropic:
        """The SDK for ``key``, over the one HTTP client of this adapter.

        A new key makes a new SDK object on the same HTTP client (its connections stay
        open; a call streaming with the old key finishes undisturbed).
        """
        key_id = _fingerprint(key)
        with self._lock:
            if self._sdk is None or self._sdk_key_id != key_id:
                if self._http is None:
                    self._http = sdk_client(self.timeout)
                self._sdk = anthropic.Anthropic(
                    api_key=key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self._http.timeout,
                    http_client=self._http,
                )
                self._sdk_key_id = key_id
            return self._sdk

    def _stream_once(
        self,
        client: anthropic.Anthropic,
        params: dict[str, Any],
        emit: Callable[[str], None],
        cancel: CancelToken,
        key: str,
        spent: Callable[[Any], None] = lambda _usage: None,
    ) -> tuple[Any, dict[str, str]]:
        """One streamed request; API and network failures raise ``_AttemptFailedError``."""
        headers: dict[str, str] = {}
        params = dict(params)
        betas = params.pop("betas", None)
        params.pop("_documents", None)
        params.pop("_uploads", None)
        opened = (
            client.beta.messages.stream(**params, betas=betas)
            if betas
            else client.messages.stream(**params)
        )
        try:
            with opened as stream:
                headers = _lower(stream.response.headers)
                for event in stream:
                    if cancel.cancelled:
                        # Leaving the ``with`` closes the connection: the API stops generating.
                        raise RunCancelled("cancelled during the model's answer")
                    if event.type in ("message_start", "message_delta"):
                        spent(stream.current_message_snapshot.usage)
                    _show(event, emit)
                message = stream.get_final_message()
        except anthropic.APIStatusError as exc:
            error, overloaded = status_error(exc, key, self.clock(), self.catalogue)
            gone = _file_gone(exc)
            boxed = _container_gone(exc)
            raise _AttemptFailedError(
                error,
                headers or _lower(exc.response.headers),
                overloaded=overloaded,
                unknown_model=exc.status_code == 404 and not gone and not boxed,
                file_gone=gone,
                container_gone=boxed,
            ) from None
        except anthropic.APITimeoutError:
            raise _AttemptFailedError(
                ApiConnectionError(f"the model API did not answer within {self.timeout:.0f}s"),
                headers,
            ) from None
        except anthropic.APIConnectionError as exc:
            cause = f" ({redact(str(exc.__cause__), key)})" if exc.__cause__ else ""
            raise _AttemptFailedError(
                ApiConnectionError(f"cannot reach the model API: {exc.message}{cause}"), headers
            ) from None
        except (anthropic.AnthropicError, httpx2.HTTPError, ValueError, AssertionError) as exc:
            # Broken connections mid-stream, malformed events, events out of order. The
            # message is the analyst's: what happened, not the exception's class name.
            text = redact(_broke_off(exc), key)
            raise _AttemptFailedError(
                ApiConnectionError(f"the model API's answer broke off: {text}"), headers
            ) from None
        if message.stop_reason is None:
            raise _AttemptFailedError(
                ApiConnectionError("the model API's answer ended before the message was complete"),
                headers,
            )
        return message, headers


def _show(event: Any, emit: Callable[[str], None]) -> None:
    """What the timeline shows live of one stream event: text, thinking, tool arguments.

    Thinking is shown too (marked as such): on the 2026 models the words written between
    tool calls arrive as thinking, and a run must never look silent while it works.
    """
    kind = event.type
    if kind == "text":
        emit(event.text)
    elif kind == "thinking":
        emit(event.thinking)
    elif kind == "input_json":
        emit(event.partial_json)
    elif kind == "content_block_start":
        block = event.content_block
        if block.type in ("tool_use", "server_tool_use"):
            emit(f"\n[{block.name}] ")
        elif block.type == "thinking":
            emit("\n(thinking) ")
        elif block.type == "compaction":
            emit("\n(summarizing the conversation) ")


def _with_files(
    client: anthropic.Anthropic,
    response: ModelResponse,
    request: ModelRequest,
    params: Mapping[str, Any],
    key: str,
    replaced: str,
) -> ModelResponse:
    """``response`` with what the step keeps of its files.

    The request's documents (``document_index`` order) and container uploads, a container
    started in the place of one the API no longer had (``container.replaces``), and the
    files code execution wrote, saved into the workspace (:mod:`desktop_agent.llm.outputs`).
    """
    extra: dict[str, JSON] = {}
    if params.get("_documents"):
        extra["documents"] = list(params["_documents"])
    if params.get("_uploads"):
        extra["uploads"] = list(params["_uploads"])
    box = response.details.get("container")
    if replaced and isinstance(box, dict):
        extra["container"] = {**box, "replaces": replaced}
    produced = outputs.produced_file_ids(response.content)
    if produced:
        extra["files"] = outputs.save_outputs(
            client.beta.files, request.workspace, key, produced, betas=[docs.FILES_BETA]
        )
    if not extra:
        return response
    return replace(response, details={**response.details, **extra})


# --------------------------------------------------------------------------- requests


def build_params(
    request: ModelRequest,
    model: str,
    catalogue: Catalogue | None = None,
    file_ids: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of ``messages.stream`` for ``request`` sent to ``model``.

    Everything the model may refuse is chosen from its catalogue entry (see
    :func:`thinking_param`); what the conversation holds is sent as the engine recorded it,
    so every turn's prefix stays byte-identical to what earlier turns sent (cache markers
    aside), as preserved thinking requires. Two exceptions, both the same on every request
    to one model: thinking blocks another model wrote are left out (a model is bound to its
    own blocks), and the messages' ``model`` labels are removed. A ``betas`` key lists the
    beta headers the request needs (the caller sends them through ``client.beta``).

    Tool results that carry a file become ``document`` blocks where the model takes them
    (:func:`desktop_agent.llm.documents.prepare`, ``file_ids`` naming uploads); the key
    ``_documents`` then lists them in ``document_index`` order (the caller removes it).
    """
    entry = (catalogue or SHARED).entry(model)
    info = model_info(model)
    max_tokens, thinking_budget = _limits(request, info, entry)
    params: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    cache = {**EPHEMERAL, "ttl": "1h"} if request.cache_ttl == "1h" else dict(EPHEMERAL)
    breakpoints = 0
    coding = _tools_param(params, request, entry, cache)
    breakpoints += 1 if "tools" in params else 0
    if request.system.strip():
        params["system"] = [{"type": "text", "text": request.system, "cache_control": dict(cache)}]
        breakpoints += 1
    messages = own_thinking_only(request.messages, entry.id if entry else model, catalogue)
    prepared = docs.prepare(messages, entry, file_ids or {}, request.workspace, container=coding)
    params["messages"] = with_breakpoints(prepared.messages, MAX_BREAKPOINTS - breakpoints, cache)
    effort = request.effort if entry is not None and entry.accepts_effort(request.effort) else ""
    thinking = thinking_param(entry, request.thinking_budget > 0, effort or info.default_effort)
    if thinking is not None:
        if thinking.get("type") == "enabled":
            thinking["budget_tokens"] = thinking_budget
        params["thinking"] = thinking
    output_config, betas = _output_config(request, info, effort)
    if output_config:
        params["output_config"] = output_config
    if request.compaction:
        params["compaction"] = {"type": "summarize", "instructions": COMPACTION_INSTRUCTIONS}
    if request.compaction or _holds_compaction(params["messages"]):
        # The signed summary block needs the header on every request that carries it.
        betas.append(COMPACTION_BETA)
    if not request.compaction:
        params["diagnostics"] = {"previous_message_id": request.previous_message_id}
    if prepared.files:
        betas.append(docs.FILES_BETA)
    if prepared.documents:
        params["_documents"] = prepared.documents
    if prepared.uploads:
        params["_uploads"] = prepared.uploads
    if betas:
        params["betas"] = betas
    return params


def _tools_param(
    params: dict[str, Any],
    request: ModelRequest,
    entry: ModelEntry | None,
    cache: Mapping[str, str],
) -> bool:
    """Put the tools the model takes (and the container to go on in) into ``params``.

    The last tool carries a cache breakpoint. Returns whether code execution is sent: the
    request's ``container`` is named only then.
    """
    tools = [dict(t) for t in request.tools if _server_tool_allowed(entry, t)]
    coding = any(t.get("name") == "code_execution" and "type" in t for t in tools)
    if coding and request.container:
        params["container"] = request.container
    if tools:
        tools[-1]["cache_control"] = dict(cache)
        params["tools"] = tools
    return coding


def _output_config(
    request: ModelRequest, info: ModelInfo, effort: str
) -> tuple[dict[str, Any], list[str]]:
    """``output_config`` (effort, task budget) and the beta headers it needs."""
    output_config: dict[str, Any] = {}
    betas: list[str] = []
    if effort:
        output_config["effort"] = effort
    if request.task_budget is not None and info.task_budget and not request.compaction:
        total, remaining = request.task_budget
        if total >= MIN_TASK_BUDGET:
            output_config["task_budget"] = {
                "type": "tokens",
                "total": total,
                "remaining": max(0, min(total, remaining)),
            }
            betas.append(TASK_BUDGET_BETA)
    return output_config, betas


COMPACTION_INSTRUCTIONS = (
    "Summarize the work so far for the agent's own later use: what was found, with its "
    "sources and file names; what was decided; what is still to do. Be complete but concise."
)


def thinking_param(entry: ModelEntry | None, on: bool, effort: str) -> dict[str, Any] | None:
    """The ``thinking`` field the model accepts for "thinking on" or "off" (None: omit it).

    * On: adaptive thinking with readable (``summarized``) text where the model takes it
      (the 2026 models omit the text by default), else a budget (``enabled``) on models
      that only know that.
    * Off: ``between_tools`` where the model takes it at this effort (only low, medium,
      high), else ``disabled`` where the model takes that (also only up to high), else
      adaptive as for "on": a model that always thinks is never sent a setting it refuses.
      Models without adaptive thinking run without thinking when the field is left out.
    * A model the catalogue does not know gets no field: the API's default.
    """
    if entry is None:
        return None
    adaptive = {"type": "adaptive", "display": "summarized"}
    if on:
        if entry.accepts_thinking("adaptive"):
            return adaptive
        return {"type": "enabled"} if entry.accepts_thinking("enabled") else None
    low_enough = not effort or effort in BETWEEN_TOOLS_EFFORTS
    if entry.accepts_thinking("between_tools") and low_enough:
        return {"type": "between_tools"}
    if not entry.accepts_thinking("adaptive"):
        return None
    if entry.accepts_thinking("disabled") and low_enough:
        return {"type": "disabled"}
    return adaptive


def own_thinking_only(
    messages: Sequence[Mapping[str, JSON]], model: str, catalogue: Catalogue | None = None
) -> list[dict[str, JSON]]:
    """Copies of ``messages`` for ``model``: no ``model`` labels, no other model's thinking.

    The engine labels each assistant turn with the model that wrote it. Thinking blocks
    are bound to that model: sent to another (a fallback switch) they are unreadable, so
    they are left out, the same way on every request to that model, which keeps its own
    later blocks' prefix unchanged.
    """
    out: list[dict[str, JSON]] = []
    for message in messages:
        copy = {k: v for k, v in message.items() if k != "model"}
        writer = message.get("model")
        if isinstance(writer, str) and writer and not _same_model(writer, model, catalogue):
            content = copy.get("content")
            if isinstance(content, list):
                copy["content"] = [
                    b
                    for b in content
                    if not (isinstance(b, Mapping) and b.get("type") in _UNCACHEABLE)
                ]
        out.append(copy)
    return out


def _same_model(a: str, b: str, catalogue: Catalogue | None = None) -> bool:
    """Whether two ids name the same model (a dated id and its alias do)."""
    if a == b:
        return True
    known = catalogue or SHARED
    first, second = known.entry(a), known.entry(b)
    return first is not None and second is not None and first.id == second.id


def _holds_compaction(messages: Sequence[Mapping[str, JSON]]) -> bool:
    for message in messages[:1]:
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "compaction" for b in content
        ):
            return True
    return False


def _limits(
    request: ModelRequest, info: ModelInfo, entry: ModelEntry | None = None
) -> tuple[int, int]:
    """``max_tokens`` and thinking budget (0: none) that the API accepts for the model."""
    ceiling = (entry.max_tokens if entry is not None else None) or info.max_output
    max_tokens = max(1, min(request.max_tokens, ceiling))
    takes_budget = (
        entry.accepts_thinking("enabled") and not entry.accepts_thinking("adaptive")
        if entry is not None
        else info.thinking and info.thinking_mode == "budget"
    )
    if request.thinking_budget <= 0 or not takes_budget:
        return max_tokens, 0
    budget = max(MIN_THINKING_BUDGET, request.thinking_budget)
    if max_tokens <= budget:
        # The budget is part of max_tokens: leave the answer its own share.
        max_tokens = min(ceiling, budget + request.max_tokens)
    if max_tokens <= budget:
        budget = max_tokens - 1
    return max_tokens, budget if budget >= MIN_THINKING_BUDGET else 0


def with_breakpoints(
    messages: Sequence[Mapping[str, JSON]], budget: int, cache: Mapping[str, str] = EPHEMERAL
) -> list[dict[str, JSON]]:
    """Copies of ``messages`` with cache breakpoints, the caller's left unchanged.

    The breakpoints go on the newest message and, budget permitting, on the user message
    that the previous call marked as its newest (a guaranteed cache hit).
    """
    out = [dict(m) for m in messages]
    targets: list[int] = []
    if out:
        targets.append(len(out) - 1)
        for i in range(len(out) - 2, -1, -1):
            if out[i].get("role") == "user" and out[i + 1].get("role") == "assistant":
                targets.append(i)
                break
    for index in targets[: max(0, budget)]:
        blocks = _blocks(out[index].get("content"))
        for j in range(len(blocks) - 1, -1, -1):
            block = blocks[j]
            if block.get("type") in _UNCACHEABLE:
                continue
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                continue
            blocks[j] = {**block, "cache_control": dict(cache)}
            out[index]["content"] = blocks
            break
    return out


def _blocks(content: JSON) -> list[dict[str, JSON]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [dict(b) for b in content if isinstance(b, Mapping)]
    return []


def estimate_tokens(request: ModelRequest) -> int:
    """Generous estimate of the prompt's tokens (three characters per token)."""
    size = len(request.system)
    size += len(json.dumps(list(request.messages), default=str, ensure_ascii=False))
    size += len(json.dumps(list(request.tools), default=str, ensure_ascii=False))
    return size // 3 + 1


def estimate_uncached_tokens(request: ModelRequest) -> int:
    """Estimate of the input tokens not read from the cache (the newest turns)."""
    if len(request.messages) <= 2:
        return estimate_tokens(request)
    tail = json.dumps(list(request.messages[-2:]), default=str, ensure_ascii=False)
    return len(tail) // 3 + 1


# --------------------------------------------------------------------------- responses


def _usage(u: Any) -> Usage:
    """Our usage from the API's (cache writes and reads counted apart)."""
    return Usage(
        input_tokens=getattr(u, "input_tokens", 0) or 0,
        output_tokens=getattr(u, "output_tokens", 0) or 0,
        cache_write_tokens=getattr(u, "cache_creation_input_tokens", 0) or 0,
        cache_read_tokens=getattr(u, "cache_read_input_tokens", 0) or 0,
    )


def _server_tool_allowed(entry: ModelEntry | None, tool: Mapping[str, Any]) -> bool:
    """Whether ``tool`` may be sent to the model of ``entry``.

    A server tool (one with a ``type``, e.g. ``web_search_20260318``) goes only where the
    catalogue lists it (``capabilities.server_tools.web_search``, as the Models API and the
    web search tool's page say to check; web fetch where code execution is listed, see
    :func:`desktop_agent.domain.server_tools.takes_server_tool`). A model the catalogue
    does not know gets it (as elsewhere: the API will say if it is wrong). Our own tools
    always go.
    """
    if "type" not in tool or tool.get("type") == "custom" or entry is None:
        return True
    name = str(tool.get("name", ""))
    if not takes_server_tool(entry, RUN_NAMES.get(name, name)):
        log.info("%s does not take the server tool %s: left out", entry.id, name)
        return False
    return True


def _coding(request: ModelRequest) -> bool:
    """Whether ``request`` carries Anthropic's code execution tool."""
    return any(t.get("name") == "code_execution" and "type" in t for t in request.tools)


def _server_uses(u: Any) -> dict[str, int]:
    """The server tool uses the call reports (``usage.server_tool_use``), those above 0.

    The API counts ``web_search_requests`` and ``web_fetch_requests`` (and, where given,
    others such as code execution's); each is priced by :data:`SERVER_TOOL_USD`.
    """
    server = getattr(u, "server_tool_use", None)
    if server is None:
        return {}
    fields = server.model_dump() if hasattr(server, "model_dump") else dict(vars(server))
    return {
        str(name): int(n)
        for name, n in fields.items()
        if isinstance(n, int) and not isinstance(n, bool) and n > 0
    }


def _1h(u: Any) -> int:
    """Cache writes with the 1-hour TTL in the API's usage (0 when it does not split them)."""
    split = getattr(u, "cache_creation", None)
    return int(getattr(split, "ephemeral_1h_input_tokens", 0) or 0) if split is not None else 0


def _details(message: Any) -> dict[str, JSON]:
    """What the step keeps of the API's answer beyond its content and usage."""
    out: dict[str, JSON] = {"message_id": str(getattr(message, "id", "") or "")}
    usage = getattr(message, "usage", None)
    split = getattr(usage, "cache_creation", None)
    if split is not None:
        out["cache_write_5m"] = int(getattr(split, "ephemeral_5m_input_tokens", 0) or 0)
        out["cache_write_1h"] = int(getattr(split, "ephemeral_1h_input_tokens", 0) or 0)
    diagnostics = getattr(message, "diagnostics", None)
    reason = getattr(diagnostics, "cache_miss_reason", None)
    if reason is not None:
        out["cache_miss"] = reason.model_dump(mode="json", exclude_none=True)
    uses = _server_uses(usage)
    if uses:
        out["server_tool_use"] = dict(uses)
    box = getattr(message, "container", None)
    if box is not None and getattr(box, "id", None):
        expires: Any = getattr(box, "expires_at", None)
        out["container"] = {
            "id": str(box.id),
            "expires_at": float(expires.timestamp()) if hasattr(expires, "timestamp") else None,
        }
    dropped = getattr(message, "input_transformations", None)
    if dropped:
        out["input_transformations"] = [
            d.model_dump(mode="json", exclude_none=True) if hasattr(d, "model_dump") else d
            for d in dropped
        ]
    return out


def _response(
    message: Any,
    requested: str,
    catalogue: Catalogue | None = None,
    *,
    batch: bool = False,
    elapsed_s: float = 0.0,
    request: ModelRequest | None = None,
) -> ModelResponse:
    """Our answer from the API's message, priced.

    Tokens, server tool uses and, when a container ran, its time
    (:func:`desktop_agent.llm.pricing.code_execution_cost` of the call's wall time, the
    documented minimum at least; the API does not report it).
    """
    known = (catalogue or SHARED).entry(message.model) if message.model else None
    used = message.model if message.model and (known or is_known(message.model)) else requested
    usage = _usage(message.usage)
    content = [_block(b) for b in message.content]
    thinking = "\n\n".join(
        str(b.get("thinking", "")) for b in content if b.get("type") == "thinking"
    ).strip()
    cost = model_info(used).cost(usage, cache_write_1h_tokens=_1h(message.usage), batch=batch)
    details = _details(message)
    container = 0.0
    if "container" in details:
        tools = request.tools if request is not None else ()
        container = code_execution_cost(elapsed_s, tools)
        details["code_execution"] = {"billed_s": billed_seconds(elapsed_s), "usd": container}
    return ModelResponse(
        content=content,
        stop_reason=str(message.stop_reason),
        usage=usage,
        cost_usd=cost + server_tool_cost(_server_uses(message.usage)) + container,
        model=message.model or requested,
        thinking=thinking,
        details=details,
    )


def _file_gone(exc: anthropic.APIStatusError) -> bool:
    """Whether the API refused a request because a file it names expired or is unknown."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    details = error.get("details") if isinstance(error, dict) else None
    if isinstance(details, dict) and details.get("error_code") == "file_expired":
        return True
    text = str(exc.api_message or exc.message).lower()
    return exc.status_code in (400, 404) and "file_id" in text and "not found" in text


def _container_gone(exc: anthropic.APIStatusError) -> bool:
    """Whether the API refused the request because the container it names is gone.

    The message is matched loosely (a container, and that it is unknown or expired): the
    wording is not documented.
    """
    text = str(exc.api_message or exc.message).lower()
    return (
        exc.status_code in (400, 404)
        and "container" in text
        and any(w in text for w in ("not found", "expired", "no longer"))
    )


def _block(block: Any) -> dict[str, JSON]:
    """A content block as the API takes it back in the next request."""
    kind = block.type
    if kind == "text":
        out: dict[str, JSON] = {"type": "text", "text": block.text}
        if block.citations:
            out["citations"] = [
                c.model_dump(mode="json", exclude_none=True) for c in block.citations
            ]
        return out
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    data: dict[str, JSON] = block.model_dump(mode="json", exclude_none=True)
    data.pop("parsed_output", None)
    return data


# --------------------------------------------------------------------------- errors


def status_error(
    exc: anthropic.APIStatusError, key: str, now: float, catalogue: Catalogue | None = None
) -> tuple[DesktopAgentError, bool]:
    """Our error for an HTTP error status or a mid-stream ``error`` event (status 200).

    Refusals (400, 401, 403, 404, 413) say in plain words what the API refused and what to
    change, with the API's own message kept after it; they are never retried.

    Returns:
        The error, and whether it means the model is overloaded.
    """
    status = exc.status_code
    kind = str(exc.type or "")
    detail = redact(str(exc.api_message or exc.message), key)
    headers = _lower(exc.response.headers)
    mid_stream = status == 200
    retry_after = None if mid_stream else parse_retry_after(headers, now)
    where = f"mid-stream {kind or 'error'}" if mid_stream else f"{status} {kind}".rstrip()
    text = f"{where}: {detail}"
    overloaded = kind == "overloaded_error" or status == 529
    if kind in _AUTH_TYPES or status in (401, 403):
        return AuthenticationError(advice(status, kind, detail, catalogue) + f" ({text})"), False
    if overloaded:
        return RateLimitedError(f"the model is overloaded ({text})", retry_after=retry_after), True
    if kind == "rate_limit_error" or status == 429:
        if retry_after is None and not mid_stream:
            retry_after = _exhausted_wait(headers, now)
        return RateLimitedError(text, retry_after=retry_after), False
    if kind in _REQUEST_TYPES or status in (400, 402, 404, 413, 422):
        return BadRequestError(advice(status, kind, detail, catalogue) + f" ({text})"), False
    return ApiConnectionError(text, retry_after=retry_after), False


_BATCH_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""The HTTP status a streamed call gets for each error type, for a batch's errored result."""


def batch_error(error: JSON, catalogue: Catalogue | None = None) -> DesktopAgentError:
    """Our error for a batch request that ``errored``: as the same refusal of a streamed call.

    The result's ``error`` is the API's error object (``{"type": "error", "error": {"type":
    ..., "message": ...}}``): a refusal of the request itself is a :class:`BadRequestError`
    with the same advice, a failure on the API's side is worth another attempt.
    """
    outer = error if isinstance(error, dict) else {}
    inner = outer.get("error") if isinstance(outer.get("error"), dict) else outer
    assert isinstance(inner, dict)
    kind = str(inner.get("type", "") or "api_error")
    detail = str(inner.get("message", "") or "no message")
    status = _BATCH_STATUS.get(kind, 500)
    text = f"batch request {kind}: {detail}"
    if kind in _AUTH_TYPES:
        return AuthenticationError(advice(status, kind, detail, catalogue) + f" ({text})")
    if kind in ("overloaded_error", "rate_limit_error"):
        return RateLimitedError(text)
    if kind in _REQUEST_TYPES or status in (400, 402, 404, 413):
        return BadRequestError(advice(status, kind, detail, catalogue) + f" ({text})")
    return ApiConnectionError(text)


_BLOCK_PATH = re.compile(r"messages\.(\d+)\.content\.(\d+)")
_MODEL_404 = re.compile(r"model:?\s*'?([\w.\-]+)")


def advice(status: int, kind: str, detail: str, catalogue: Catalogue | None = None) -> str:
    """What the analyst reads first about a refused request: what was refused, what to do."""
    low = detail.lower()
    if kind == "authentication_error" or status == 401:
        return (
            "The API refused the API key: set a valid one in Settings > API key, with "
            "`desktop-agent key set`, or in ANTHROPIC_API_KEY"
        )
    if kind == "permission_error" or status == 403:
        return (
            "The API key is not allowed to do this (for example, to use this model): use "
            "another model or a key of a workspace that has access"
        )
    if kind == "not_found_error" or status == 404:
        found = _MODEL_404.search(detail)
        model = found.group(1) if found else ""
        instead = model_info(model).replacement if model else ""
        entry = (catalogue or SHARED).entry(model) if model else None
        if entry is not None and entry.retired:
            what = f"The model {model} is retired"
        else:
            what = f"The API does not know the model {model}" if model else "Not found"
        then = (
            f": start the run again on {instead} (`desktop-agent rerun RUN --model {instead}`)"
            if instead
            else ": choose a current model (`desktop-agent models`)"
        )
        return what + then
    if kind == "request_too_large" or status == 413:
        return (
            "The request is larger than the API accepts: a file or a tool result is too big; "
            "fork the run before that step and read less at once"
        )
    if kind == "billing_error" or status == 402:
        return "The API refused to bill this call: check the account's billing and limits"
    where = _BLOCK_PATH.search(detail)
    if where and "signature" in low:
        return (
            f"The API refused a thinking block sent back at message {where.group(1)} (block "
            f"{where.group(2)}): something before it changed since the model wrote it. "
            "Fork the run from the last step before the change, or report it as a bug"
        )
    for words, what in _PARAMETER_ADVICE:
        if all(w in low for w in words):
            return what
    return "The API refused the request as it is; retrying it unchanged cannot help"


_PARAMETER_ADVICE: tuple[tuple[tuple[str, ...], str], ...] = (
    (("effort",), "The model refused the run's effort level: choose another effort for the run"),
    (
        ("thinking",),
        "The model refused the run's thinking setting: turn thinking on or off for the run, "
        "or choose another model",
    ),
    (
        ("max_tokens",),
        "The model refused the run's output limit (max tokens): lower it to the model's maximum",
    ),
    (
        ("cache_control",),
        "The API refused the request's cache markers: report this as a bug; the run can be "
        "forked with another model meanwhile",
    ),
    (
        ("prompt is too long",),
        "The conversation no longer fits the model's context window: fork the run from an "
        "earlier step, or choose a model with a larger window",
    ),
    (
        ("credit balance",),
        "The account has no credit left: add credit in the Console, then resume the run",
    ),
)


def _exhausted_wait(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds until the emptied rate-limit buckets are full again, if the headers say."""
    waits = []
    for dim in ("requests", "tokens", "input-tokens", "output-tokens"):
        if headers.get(f"{PREFIX}{dim}-remaining", "").strip() == "0":
            reset = parse_reset(headers.get(f"{PREFIX}{dim}-reset"), now)
            if reset is not None:
                waits.append(min(MAX_REFILL_S, max(0.0, reset - now)))
    return max(waits) if waits else None


def redact(text: str, key: str) -> str:
    """``text`` without the API key in it."""
    return text.replace(key, "[redacted API key]") if key else text


def _lower(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}


def _fingerprint(key: str) -> str:
    """Tells keys apart in memory without keeping another copy of the key."""
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:16]


def _broke_off(exc: BaseException) -> str:
    """Why a streamed answer broke off, in the analyst's words (no exception class names)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"an event was not valid JSON ({exc.msg} at character {exc.pos})"
    if isinstance(exc, AssertionError):
        return "its events came out of order"
    return " ".join(str(exc).split()) or "the connection closed without a reason"
