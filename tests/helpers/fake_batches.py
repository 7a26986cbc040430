"""The Message Batches API of the test fake: batches and their lifecycle, no HTTP.

:class:`BatchStore` keeps every batch a :class:`~tests.helpers.fake_anthropic.FakeAnthropic`
accepted (on the fake object, so they outlive a restart of its HTTP server), decides when
each one ends, and renders the API's shapes: the ``MessageBatch`` object, a page of
``GET /v1/messages/batches``, and the results file (JSON Lines). Turning one request's
``params`` into its result is not done here: the fake passes a ``process`` function that
runs the request through the same contract checks, reply script and message building as a
``POST /v1/messages`` (so a batched request is answered exactly as a non-streamed call).

Sources: the Message Batches API reference (create, retrieve, list, cancel, results) and
the batch processing guide (read 2026-11-26), and the ``anthropic`` SDK 2.14 types
(``MessageBatch``, ``MessageBatchRequestCounts``, ``MessageBatchIndividualResponse`` and the
four result types). What they state and the fake follows:

* at least 1 and at most 100,000 requests, at most 256 MB of body (the errors page: a body
  over a limit is a 413 ``request_too_large``); ``custom_id`` matching
  ``^[a-zA-Z0-9_-]{1,64}$``, unique within the batch;
* a batch is ``in_progress``, ``canceling`` or ``ended``; ``request_counts`` stay all
  ``processing`` until the whole batch ends; ``expires_at`` is 24 hours after creation, and
  what has not ended by then ends ``expired``; ``results_url`` is set only once processing
  ended, and results come in no promised order;
* a cancelled batch goes ``canceling``, then ``ended`` with its unprocessed requests
  ``canceled``; list is newest first, ``limit`` 1..1000 (default 20) with ``before_id`` /
  ``after_id`` cursors.

Not stated by the pages, so chosen here (all 400 ``invalid_request_error``; tests should
match key words, not whole texts): the messages of the batch-level refusals, ``stream:
true`` in a request's params refused for the whole batch, cancelling an ended batch, and
reading the results of a batch that has not ended.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tests.helpers.claude_contract import ApiError

MAX_REQUESTS = 100_000
"""Requests the API takes in one batch."""

MAX_BYTES = 256 * 1024 * 1024
"""Bytes of body the API takes for one batch."""

LIFETIME_S = 24 * 3600.0
"""A batch still processing this long after its creation ends, its requests ``expired``."""

_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")

Outcome = Literal["expired"] | ApiError
"""What a test makes a request end as: ``"expired"``, or ``errored`` with this error."""

Process = Callable[["Batch", str, dict[str, Any]], dict[str, Any]]
"""Runs one request of a batch: (batch, custom_id, params) → its ``result`` object."""

Ending = Literal["processed", "expired", "canceled"]


def rfc3339(epoch: float | None) -> str | None:
    """A time as the API writes it (UTC, ``Z``), or ``None``."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def error_object(error: ApiError) -> dict[str, Any]:
    """An error as an ``errored`` result carries it: ``{"type": "error", "error": {...}}``."""
    body = error.body("")
    del body["request_id"]
    return body


def _bad(message: str) -> ApiError:
    return ApiError(400, "invalid_request_error", message)


def _new_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "msgbatch_" + "".join(secrets.choice(alphabet) for _ in range(24))


@dataclass
class Batch:
    """One Message Batch as the fake keeps it.

    Attributes:
        requests: ``(custom_id, params)`` in the order they were sent.
        headers: the create call's headers (lower-cased): each request is checked with its
            ``anthropic-beta`` header, as the API does for a batch sent with betas.
        held: the batch does not end on its own until released (see
            :meth:`BatchStore.release`); it still expires.
        results: each request's ``result`` object, once the batch ended.
    """

    id: str
    created_at: float
    requests: list[tuple[str, dict[str, Any]]]
    headers: dict[str, str]
    held: bool
    status: Literal["in_progress", "canceling", "ended"] = "in_progress"
    ended_at: float | None = None
    cancel_initiated_at: float | None = None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def expires_at(self) -> float:
        return self.created_at + LIFETIME_S

    def counts(self) -> dict[str, int]:
        """``request_counts``: all ``processing`` until the batch ended."""
        tally = Counter(str(r["type"]) for r in self.results.values())
        out = {kind: tally[kind] for kind in ("succeeded", "errored", "canceled", "expired")}
        return {"processing": len(self.requests) - len(self.results), **out}

    def shape(self, base_url: str) -> dict[str, Any]:
        """The ``MessageBatch`` object; ``results_url`` is on ``base_url`` once ended."""
        ended = self.status == "ended"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": self.counts(),
            "created_at": rfc3339(self.created_at),
            "ended_at": rfc3339(self.ended_at),
            "expires_at": rfc3339(self.expires_at),
            "cancel_initiated_at": rfc3339(self.cancel_initiated_at),
            "archived_at": None,
            "results_url": f"{base_url}/v1/messages/batches/{self.id}/results" if ended else None,
        }

    def results_file(self) -> bytes:
        """The results as JSON Lines, newest request first (the API promises no order)."""
        lines = [
            _json_line({"custom_id": custom_id, "result": self.results[custom_id]})
            for custom_id, _ in reversed(self.requests)
        ]
        return "".join(lines).encode()


def _json_line(value: Mapping[str, Any]) -> str:
    return json.dumps(value) + "\n"


class BatchStore:
    """Every batch of one fake, and when each ends.

    A batch ends (its requests are processed) at the first look (any batch route, or a
    test's own look through the fake) at or after ``created_at + delay``, unless it is held;
    :meth:`release` ends batches at once whatever their delay. A batch still processing at
    ``expires_at`` (a test can jump the fake's clock) ends with its requests ``expired``.
    A cancelled batch is ``canceling`` until the next look (or, held, until released), and
    then ends with every request ``canceled`` (none had been processed).

    Args:
        delay: seconds from creation to the end of a batch that is not held.
        hold: new batches are held.
        max_requests, max_bytes: the API's limits (tests may set small ones).
    """

    def __init__(self, *, delay: float, hold: bool, max_requests: int, max_bytes: int) -> None:
        self.delay = delay
        self.hold = hold
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.lock = threading.RLock()
        self.batches: dict[str, Batch] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.submissions: Counter[str] = Counter()
        self.fetches: Counter[str] = Counter()

    # ------------------------------------------------------------------ creating

    def oversize(self, size: int) -> ApiError | None:
        """The 413 a create call of ``size`` bytes gets, if over the limit."""
        if size <= self.max_bytes:
            return None
        return ApiError(
            413,
            "request_too_large",
            f"Request exceeds the maximum size of {self.max_bytes} bytes for a Message Batch "
            f"({size} bytes sent).",
        )

    def refusal(self, body: object) -> ApiError | None:
        """The 400 the API answers to a create call with this body, or ``None``."""
        if not isinstance(body, Mapping):
            return _bad("The request body is not valid JSON.")
        requests = body.get("requests")
        if requests is None:
            return _bad("requests: Field required")
        if not isinstance(requests, list):
            return _bad("requests: Input should be a valid list")
        if not requests:
            return _bad("requests: a Message Batch needs at least 1 request, got 0")
        if len(requests) > self.max_requests:
            return _bad(
                f"requests: a Message Batch takes at most {self.max_requests} requests, "
                f"got {len(requests)}"
            )
        first_use: dict[str, int] = {}
        for i, item in enumerate(requests):
            error = _item_refusal(i, item, first_use)
            if error is not None:
                return error
        return None

    def create(
        self, requests: Iterable[Mapping[str, Any]], headers: Mapping[str, str], now: float
    ) -> Batch:
        """A new batch of requests :meth:`refusal` accepted."""
        items = [(str(r["custom_id"]), dict(r["params"])) for r in requests]
        with self.lock:
            batch = Batch(_new_id(), now, items, dict(headers), held=self.hold)
            self.batches[batch.id] = batch
            self.submissions.update(custom_id for custom_id, _ in items)
        return batch

    # ------------------------------------------------------------------ ending

    def settle(self, now: float, process: Process) -> None:
        """End every batch that is due by ``now`` (see the class docstring)."""
        with self.lock:
            for batch in list(self.batches.values()):
                if batch.status == "canceling":
                    if not batch.held or now >= batch.expires_at:
                        self._end(batch, "canceled", now, process)
                elif batch.status == "in_progress":
                    due = batch.created_at + self.delay
                    if not batch.held and due < batch.expires_at and now >= due:
                        self._end(batch, "processed", due, process)
                    elif now >= batch.expires_at:
                        self._end(batch, "expired", batch.expires_at, process)

    def release(self, ids: Iterable[str], now: float, process: Process) -> list[str]:
        """End the named batches (all unended ones when none are named) now."""
        with self.lock:
            self.settle(now, process)
            wanted = list(ids) or [b.id for b in self.batches.values() if b.status != "ended"]
            ended: list[str] = []
            for batch_id in wanted:
                batch = self.batches[batch_id]
                batch.held = False
                if batch.status != "ended":
                    how: Ending = "canceled" if batch.status == "canceling" else "processed"
                    self._end(batch, how, now, process)
                    ended.append(batch_id)
            return ended

    def cancel(self, batch_id: str, now: float) -> Batch | ApiError:
        """Start cancelling a batch (the caller settled the store first)."""
        with self.lock:
            batch = self.batches[batch_id]
            if batch.status == "ended":
                return _bad(
                    f"Message Batch {batch_id} has already ended and can no longer be canceled."
                )
            if batch.status == "in_progress":
                batch.status = "canceling"
                batch.cancel_initiated_at = now
            return batch

    def _end(self, batch: Batch, how: Ending, at: float, process: Process) -> None:
        for custom_id, params in batch.requests:
            outcome = self.outcomes.get(custom_id)
            result: dict[str, Any]
            if how != "processed":
                result = {"type": how}
            elif outcome == "expired":
                result = {"type": "expired"}
            elif isinstance(outcome, ApiError):
                result = {"type": "errored", "error": error_object(outcome)}
            else:
                result = process(batch, custom_id, params)
            batch.results[custom_id] = result
        batch.status = "ended"
        batch.ended_at = at

    # ------------------------------------------------------------------ reading

    def page(self, query: Mapping[str, list[str]]) -> dict[str, Any] | ApiError:
        """The batches of one page of ``GET /v1/messages/batches`` (newest first)."""
        with self.lock:
            newest_first = list(reversed(self.batches.values()))
        span = cursor_page([b.id for b in newest_first], query, "message_batch")
        if isinstance(span, ApiError):
            return span
        start, end, has_more = span
        return {"batches": newest_first[start:end], "has_more": has_more}

    def results(self, batch_id: str) -> bytes | ApiError:
        """The results file of an ended batch (counted in :attr:`fetches`)."""
        with self.lock:
            batch = self.batches[batch_id]
            if batch.status != "ended":
                return _bad(
                    f"Message Batch {batch_id} has not ended yet (processing_status: "
                    f"{batch.status}); its results are available once it has ended."
                )
            self.fetches[batch_id] += 1
            return batch.results_file()


def _item_refusal(i: int, item: object, first_use: dict[str, int]) -> ApiError | None:
    """The batch-level refusal one entry of ``requests`` causes, if any."""
    if not isinstance(item, Mapping):
        return _bad(f"requests.{i}: Input should be an object with custom_id and params")
    custom_id = item.get("custom_id")
    if custom_id is None:
        return _bad(f"requests.{i}.custom_id: Field required")
    if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
        return _bad(
            f"requests.{i}.custom_id: {custom_id!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$ "
            "(1 to 64 letters, digits, hyphens and underscores)"
        )
    if custom_id in first_use:
        return _bad(
            f"requests.{i}.custom_id: {custom_id!r} is also the custom_id of "
            f"requests.{first_use[custom_id]}; each custom_id must be unique within a batch"
        )
    first_use[custom_id] = i
    params = item.get("params")
    if not isinstance(params, Mapping):
        return _bad(f"requests.{i}.params: Field required")
    if params.get("stream") not in (None, False):
        return _bad(f"requests.{i}.params.stream: streaming is not supported in a Message Batch")
    return None


def cursor_page(
    ids: list[str], query: Mapping[str, list[str]], kind: str
) -> tuple[int, int, bool] | ApiError:
    """``(start, end, has_more)`` of a page over ``ids`` (already in listing order).

    ``limit`` is 1..1000 (default 20); ``after_id`` pages forward from an item, ``before_id``
    back; an unknown cursor is a 404 ``not_found_error`` naming ``kind``.
    """
    raw_limit = query.get("limit", ["20"])[0]
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 1000:
        return ApiError(400, "invalid_request_error", "limit: must be between 1 and 1000")
    limit = int(raw_limit)
    after, before = query.get("after_id", [""])[0], query.get("before_id", [""])[0]
    for cursor in (after, before):
        if cursor and cursor not in ids:
            return ApiError(404, "not_found_error", f"{kind}: {cursor}")
    if before:
        end = ids.index(before)
        start = max(0, end - limit)
        return start, end, start > 0
    start = ids.index(after) + 1 if after else 0
    end = min(len(ids), start + limit)
    return start, end, end < len(ids)
