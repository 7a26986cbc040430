"""Client-side pacing from the ``anthropic-ratelimit-*`` response headers.

Every response of the Messages API says how much of the organisation's rate limits is left
and when each bucket is full again. One :class:`RateLimitPacer` per process remembers that
for each model and hands out send times, so that runs executing in parallel slow down
together *before* the API answers 429, instead of all failing at once.

Short waits are returned to the caller, which sleeps on the run's cancel token; a wait
longer than the caller accepts raises :class:`RateLimitedError` so that the run hibernates
(``waiting(rate_limit)`` with a wake time) and holds no thread.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from desktop_agent.domain.errors import RateLimitedError

PREFIX = "anthropic-ratelimit-"
DIMENSIONS = ("requests", "tokens", "input-tokens", "output-tokens")
"""Buckets the API reports; ``tokens`` is the most restrictive token bucket in effect."""

LOW_WATER = 0.1
"""Below this fraction of a bucket left, calls are spread evenly until it refills."""

MAX_REFILL_S = 60.0
"""The API's buckets refill within a minute: a later reset time means clock skew."""


@dataclass
class _Bucket:
    limit: int
    remaining: int
    reset_at: float
    reserved: int = 0


@dataclass
class _ModelState:
    buckets: dict[str, _Bucket] = field(default_factory=dict)
    blocked_until: float = 0.0
    next_slot: float = 0.0


@dataclass(frozen=True)
class Ticket:
    """A reservation made by :meth:`RateLimitPacer.reserve`; give it back with ``release``.

    Attributes:
        key: the bucket set the reservation was taken from.
        delay: seconds the caller must wait before sending.
        needs: units reserved per dimension.
    """

    key: str
    delay: float
    needs: Mapping[str, int]


def parse_reset(value: str | None, now: float) -> float | None:
    """An ``*-reset`` header (RFC 3339 time) as epoch seconds."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.strip()).timestamp()
    except ValueError:
        pass
    try:  # some proxies send a delay in seconds instead
        return now + float(value)
    except ValueError:
        return None


def parse_retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds asked by ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed)) - now)


class RateLimitPacer:
    """Shared memory of the API's rate-limit headers, per key and model.

    Args:
        clock: source of epoch seconds (the headers carry absolute reset times).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._models: dict[str, _ModelState] = {}

    def _state(self, key: str) -> _ModelState:
        return self._models.setdefault(key, _ModelState())

    def observe(self, key: str, headers: Mapping[str, str]) -> None:
        """Record the rate-limit headers of a response (success or error)."""
        now = self.clock()
        with self._lock:
            state = self._state(key)
            for dim in DIMENSIONS:
                try:
                    limit = int(headers[f"{PREFIX}{dim}-limit"])
                    remaining = int(headers[f"{PREFIX}{dim}-remaining"])
                except (KeyError, ValueError):
                    continue
                reset_at = parse_reset(headers.get(f"{PREFIX}{dim}-reset"), now)
                if reset_at is None:
                    continue
                reset_at = min(reset_at, now + MAX_REFILL_S)
                old = state.buckets.get(dim)
                reserved = old.reserved if old else 0
                state.buckets[dim] = _Bucket(limit, remaining, reset_at, reserved)

    def block(self, key: str, seconds: float) -> None:
        """Hold every call on ``key`` for ``seconds`` (the API said 429 or 529 with a delay)."""
        until = self.clock() + max(0.0, seconds)
        with self._lock:
            state = self._state(key)
            state.blocked_until = max(state.blocked_until, until)

    def reserve(self, key: str, *, input_tokens: int, max_wait: float) -> Ticket:
        """Reserve capacity for one call and say how long to wait before sending it.

        Args:
            key: the bucket set (API key and model).
            input_tokens: estimate of the uncached input tokens of the call.
            max_wait: longest wait the caller accepts.

        Raises:
            RateLimitedError: the wait would be longer than ``max_wait``; nothing is reserved.
        """
        now = self.clock()
        needs = {
            "requests": 1,
            "tokens": max(1, input_tokens),
            "input-tokens": max(1, input_tokens),
            "output-tokens": 1,
        }
        with self._lock:
            state = self._state(key)
            send_at = max(now, state.blocked_until)
            interval = 0.0
            for dim, bucket in state.buckets.items():
                if bucket.reset_at <= now:
                    continue  # refilled since we heard of it
                need = min(needs[dim], max(1, bucket.limit))
                available = bucket.remaining - bucket.reserved
                if available < need:
                    send_at = max(send_at, bucket.reset_at)
                elif available < LOW_WATER * bucket.limit:
                    # Spread what the API said is left evenly over the time until the bucket
                    # is full again; calls already in flight hold the earlier slots.
                    calls_left = max(1, bucket.remaining // need)
                    interval = max(interval, (bucket.reset_at - now) / calls_left)
            if interval > 0.0:
                send_at = max(send_at, state.next_slot)
            delay = send_at - now
            if delay > max_wait:
                raise RateLimitedError(
                    f"rate limit nearly used up: next call possible in {delay:.0f}s",
                    retry_after=delay,
                )
            if interval > 0.0:
                state.next_slot = send_at + interval
            for dim, bucket in state.buckets.items():
                bucket.reserved += needs[dim]
        return Ticket(key, max(0.0, delay), needs)

    def release(self, ticket: Ticket, headers: Mapping[str, str] | None = None) -> None:
        """Give a reservation back, recording the headers of the response if there was one."""
        with self._lock:
            state = self._state(ticket.key)
            for dim, bucket in state.buckets.items():
                bucket.reserved = max(0, bucket.reserved - ticket.needs.get(dim, 0))
        if headers is not None:
            self.observe(ticket.key, headers)


SHARED_PACER = RateLimitPacer()
"""The pacer of this process: every run's model calls go through it."""
