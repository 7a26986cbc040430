"""The Message Batches API as the worker's batch pump uses it (create, poll, read, cancel).

Requests carry the params :meth:`ClaudeModel.batch_params` built, so a turn is the same
request in a batch as in a streamed call. Beta headers are a batch's, not a request's:
requests are grouped by the betas they need (``persistence/batches.py``), and a batch
with betas is sent through ``client.beta``.

Failures say whether a batch may have been created: :class:`NotCreatedError` (the API
refused the call: nothing exists) against any other error (the call may have reached the
API; the pump then settles the doubt from the API's list of batches).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2

from desktop_agent.domain import JSON
from desktop_agent.domain.errors import (
    ApiConnectionError,
    AuthenticationError,
    DesktopAgentError,
)
from desktop_agent.http_client import sdk_client
from desktop_agent.llm.claude import NO_KEY_MESSAGE, redact, status_error

MAX_REQUESTS = 100_000
"""Requests the API takes in one batch."""

MAX_BYTES = 256 * 1024 * 1024
"""Bytes the API takes in one batch's body."""


@dataclass(frozen=True)
class RemoteBatch:
    """A batch as the API describes it."""

    id: str
    status: str
    """``in_progress``, ``canceling`` or ``ended``."""
    created_at: float
    requests: int
    """Requests in the batch, whatever their state."""


class NotCreatedError(DesktopAgentError):
    """The API refused to create the batch: it does not exist (``refusal`` says why)."""

    def __init__(self, message: str, *, refusal: JSON, lasting: bool) -> None:
        super().__init__(message)
        self.refusal = refusal
        """The API's error object, for the requests' results when ``lasting``."""
        self.lasting = lasting
        """Sending the same requests again would be refused again (not a rate limit)."""


class BatchApi:
    """Thin, thread-safe access to ``messages.batches`` with the user's key.

    Args:
        key_source: the API key now (None or "": no key, every call raises).
        base_url: the API's address (None: the SDK's, or ``ANTHROPIC_BASE_URL``).
        timeout: seconds an answer may take (the HTTP client, its certificates, proxies
            and connect timeout come from :func:`desktop_agent.http_client.sdk_client`).
    """

    def __init__(
        self,
        key_source: Callable[[], str | None],
        *,
        base_url: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.key_source = key_source
        self.base_url = base_url
        self.timeout = timeout
        self._lock = threading.Lock()
        self._sdk: anthropic.Anthropic | None = None
        self._key = ""
        self._http: httpx2.Client | None = None

    def has_key(self) -> bool:
        """Whether a key is set (no call is made without one)."""
        try:
            return bool((self.key_source() or "").strip())
        except Exception:  # a keyring that cannot be read means no key
            return False

    def create(
        self, requests: Sequence[tuple[str, dict[str, JSON]]], betas: Sequence[str] = ()
    ) -> RemoteBatch:
        """Create a batch of ``(custom_id, params)`` requests.

        Raises:
            NotCreatedError: the API refused it (nothing was created).
            DesktopAgentError: anything else (it may have been created).
        """
        body = [{"custom_id": cid, "params": params} for cid, params in requests]
        sdk, key = self._client()
        # Never retried by the SDK: a retry after a lost answer could create the batch twice.
        client = sdk.with_options(max_retries=0)
        try:
            if betas:
                made: Any = client.beta.messages.batches.create(
                    requests=body,  # type: ignore[arg-type]
                    betas=list(betas),
                )
            else:
                made = client.messages.batches.create(requests=body)  # type: ignore[arg-type]
        except anthropic.APIStatusError as exc:
            error, _overloaded = status_error(exc, key, 0.0)
            status = exc.status_code
            if status < 500:
                body_json = exc.body if isinstance(exc.body, dict) else {}
                raise NotCreatedError(
                    f"the API refused the batch: {error}",
                    refusal=body_json or {"type": "error", "error": {"type": str(exc.type)}},
                    lasting=status not in (408, 409, 429),
                ) from None
            raise ApiConnectionError(f"creating the batch failed: {error}") from None
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise ApiConnectionError(
                f"creating the batch failed: {redact(str(exc), key)}"
            ) from None
        return _remote(made)

    def retrieve(self, batch_id: str) -> RemoteBatch | None:
        """The batch's state (None: the API does not know it, e.g. deleted)."""
        client, key = self._client()
        try:
            return _remote(client.messages.batches.retrieve(batch_id))
        except anthropic.NotFoundError:
            return None
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise _failed("reading the batch's state", exc, key) from None

    def created_since(self, since: float, *, pages: int = 20) -> list[RemoteBatch]:
        """Batches created at or after ``since`` (epoch seconds), newest first."""
        client, key = self._client()
        out: list[RemoteBatch] = []
        try:
            page: Any = client.messages.batches.list(limit=100)
            for _ in range(pages):
                for item in page.data:
                    batch = _remote(item)
                    if batch.created_at < since:
                        return out
                    out.append(batch)
                if not page.has_next_page():
                    return out
                page = page.get_next_page()
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise _failed("listing the batches", exc, key) from None
        return out

    def results(self, batch_id: str) -> Iterator[tuple[str, str, JSON]]:
        """Each request's ``(custom_id, result type, result object)``, as the API sends them."""
        client, key = self._client()
        try:
            for item in client.messages.batches.results(batch_id):
                result: dict[str, JSON] = item.result.model_dump(mode="json", exclude_none=True)
                yield item.custom_id, str(item.result.type), result
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise _failed("reading the batch's results", exc, key) from None

    def cancel(self, batch_id: str) -> None:
        """Ask the API to cancel the batch (its unprocessed requests end ``canceled``)."""
        client, key = self._client()
        try:
            client.messages.batches.cancel(batch_id)
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise _failed("canceling the batch", exc, key) from None

    def _client(self) -> tuple[anthropic.Anthropic, str]:
        try:
            key = (self.key_source() or "").strip()
        except Exception:
            key = ""
        if not key:
            raise AuthenticationError(NO_KEY_MESSAGE)
        with self._lock:
            if self._sdk is None or key != self._key:
                if self._http is None:
                    self._http = sdk_client(self.timeout)
                self._sdk = anthropic.Anthropic(
                    api_key=key,
                    base_url=self.base_url,
                    max_retries=2,
                    timeout=self._http.timeout,
                    http_client=self._http,
                )
                self._key = key
            return self._sdk, key


def _remote(batch: Any) -> RemoteBatch:
    counts = batch.request_counts
    total = sum(
        int(getattr(counts, name, 0) or 0)
        for name in ("processing", "succeeded", "errored", "canceled", "expired")
    )
    return RemoteBatch(
        id=str(batch.id),
        status=str(batch.processing_status),
        created_at=batch.created_at.timestamp(),
        requests=total,
    )


def _failed(what: str, exc: BaseException, key: str) -> DesktopAgentError:
    if isinstance(exc, anthropic.APIStatusError):
        error, _overloaded = status_error(exc, key, 0.0)
        return error
    return ApiConnectionError(f"{what} failed: {redact(str(exc), key)}")
