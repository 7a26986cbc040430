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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anthropic
import httpx2
from anthropic.types import Message

from desktop_agent.domain import JSON, Usage
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
from desktop_agent.engine.ports import CancelToken, ModelRequest, ModelResponse
from desktop_agent.llm.pacing import (
    MAX_REFILL_S,
    PREFIX,
    SHARED_PACER,
    RateLimitPacer,
    parse_reset,
    parse_retry_after,
)
from desktop_agent.llm.pricing import ModelInfo, is_known, model_info

log = logging.getLogger(__name__)

NO_KEY_MESSAGE = "no API key: set one with `desktop-agent key set` or ANTHROPIC_API_KEY"
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
"""The API accepts at most four ``cache_control`` breakpoints per request."""
MIN_THINKING_BUDGET = 1024
"""Smallest extended-thinking budget the API accepts."""

WEB_SEARCH_USD = 0.01
"""Price of one server-side web search ($10 per 1,000 searches)."""
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
        self, error: DesktopAgentError, headers: Mapping[str, str], *, overloaded: bool = False
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.headers = headers
        self.overloaded = overloaded


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
        timeout: seconds to wait for the API to answer or to send the next event.
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
    ) -> None:
        self.key_source = key_source
        self.settings = settings
        self.base_url = base_url
        self.policy = policy or RetryPolicy()
        self.pacer = pacer or SHARED_PACER
        self.clock = clock
        self.timeout = timeout
        self._lock = threading.Lock()
        self._sdk: anthropic.Anthropic | None = None
        self._sdk_key_id = ""
        self._overloads: dict[str, tuple[int, float]] = {}

    # ------------------------------------------------------------------ port

    def context_window(self, model: str) -> int:
        """Tokens the model accepts in one request (from the price table)."""
        return model_info(model).context_window

    def worst_case_cost(self, request: ModelRequest) -> float:
        """Upper bound of the call's price: the whole prompt written to the cache, full output."""
        prompt = estimate_tokens(request)
        models = {request.model, self._fallback() or request.model}
        searches = sum(
            int(t.get("max_uses", 0) or 0) for t in request.tools if t.get("name") == "web_search"
        )
        return searches * WEB_SEARCH_USD + max(
            model_info(m).cost(
                Usage(cache_write_tokens=prompt, output_tokens=_limits(request, model_info(m))[0])
            )
            for m in models
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
                on_usage(counted, model_info(model).cost(counted))

        attempt = 0
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
                message, headers = self._stream_once(
                    client, build_params(request, model), emit, cancel, key, spent
                )
            except _AttemptFailedError as failure:
                self.pacer.release(ticket, failure.headers)
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
            return _response(message, model)

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
        key_id = _fingerprint(key)
        with self._lock:
            if self._sdk is None or self._sdk_key_id != key_id:
                self._sdk = anthropic.Anthropic(
                    api_key=key,
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=anthropic.Timeout(self.timeout, connect=10.0),
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
    ) -> tuple[Message, dict[str, str]]:
        """One streamed request; API and network failures raise ``_AttemptFailedError``."""
        headers: dict[str, str] = {}
        try:
            with client.messages.stream(**params) as stream:
                headers = _lower(stream.response.headers)
                for event in stream:
                    if cancel.cancelled:
                        # Leaving the ``with`` closes the connection: the API stops generating.
                        raise RunCancelled("cancelled during the model's answer")
                    if event.type in ("message_start", "message_delta"):
                        spent(stream.current_message_snapshot.usage)
                    if event.type == "text":
                        emit(event.text)
                    elif event.type == "input_json":
                        emit(event.partial_json)
                    elif event.type == "content_block_start" and event.content_block.type in (
                        "tool_use",
                        "server_tool_use",
                    ):
                        emit(f"\n[{event.content_block.name}] ")
                message = stream.get_final_message()
        except anthropic.APIStatusError as exc:
            error, overloaded = status_error(exc, key, self.clock())
            raise _AttemptFailedError(
                error, headers or _lower(exc.response.headers), overloaded=overloaded
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


# --------------------------------------------------------------------------- requests


def build_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """Keyword arguments of ``messages.stream`` for ``request`` sent to ``model``."""
    info = model_info(model)
    max_tokens, thinking_budget = _limits(request, info)
    params: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    breakpoints = 0
    if request.tools:
        tools = [dict(t) for t in request.tools]
        tools[-1]["cache_control"] = dict(EPHEMERAL)
        params["tools"] = tools
        breakpoints += 1
    if request.system.strip():
        params["system"] = [
            {"type": "text", "text": request.system, "cache_control": dict(EPHEMERAL)}
        ]
        breakpoints += 1
    params["messages"] = with_breakpoints(request.messages, MAX_BREAKPOINTS - breakpoints)
    if info.thinking_mode == "always" or (
        info.thinking_mode == "adaptive" and request.thinking_budget > 0
    ):
        # Adaptive thinking: the model decides how much to think. "summarized" asks for
        # readable thinking text (newer models omit it by default), shown as the thought.
        params["thinking"] = {"type": "adaptive", "display": "summarized"}
    elif info.thinking_mode == "adaptive":
        params["thinking"] = {"type": "disabled"}
    elif thinking_budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    return params


def _limits(request: ModelRequest, info: ModelInfo) -> tuple[int, int]:
    """``max_tokens`` and thinking budget (0: off) that the API accepts for ``info``."""
    max_tokens = max(1, min(request.max_tokens, info.max_output))
    if request.thinking_budget <= 0 or not info.thinking:
        return max_tokens, 0
    budget = max(MIN_THINKING_BUDGET, request.thinking_budget)
    if max_tokens <= budget:
        # The budget is part of max_tokens: leave the answer its own share.
        max_tokens = min(info.max_output, budget + request.max_tokens)
    if max_tokens <= budget:
        budget = max_tokens - 1
    return max_tokens, budget if budget >= MIN_THINKING_BUDGET else 0


def with_breakpoints(messages: Sequence[Mapping[str, JSON]], budget: int) -> list[dict[str, JSON]]:
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
            blocks[j] = {**block, "cache_control": dict(EPHEMERAL)}
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


def _searches(u: Any) -> int:
    """Server-side web searches the call made (billed per search)."""
    server = getattr(u, "server_tool_use", None)
    return int(getattr(server, "web_search_requests", 0) or 0) if server is not None else 0


def _response(message: Message, requested: str) -> ModelResponse:
    used = message.model if message.model and is_known(message.model) else requested
    usage = _usage(message.usage)
    content = [_block(b) for b in message.content]
    thinking = "\n\n".join(
        str(b.get("thinking", "")) for b in content if b.get("type") == "thinking"
    ).strip()
    return ModelResponse(
        content=content,
        stop_reason=str(message.stop_reason),
        usage=usage,
        cost_usd=model_info(used).cost(usage) + _searches(message.usage) * WEB_SEARCH_USD,
        model=message.model or requested,
        thinking=thinking,
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
    exc: anthropic.APIStatusError, key: str, now: float
) -> tuple[DesktopAgentError, bool]:
    """Our error for an HTTP error status or a mid-stream ``error`` event (status 200).

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
        return AuthenticationError(text), False
    if overloaded:
        return RateLimitedError(f"the model is overloaded ({text})", retry_after=retry_after), True
    if kind == "rate_limit_error" or status == 429:
        if retry_after is None and not mid_stream:
            retry_after = _exhausted_wait(headers, now)
        return RateLimitedError(text, retry_after=retry_after), False
    if kind in _REQUEST_TYPES or status in (400, 402, 404, 413, 422):
        return BadRequestError(text), False
    return ApiConnectionError(text, retry_after=retry_after), False


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
