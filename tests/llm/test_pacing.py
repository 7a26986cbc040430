"""The rate-limit pacer's arithmetic, on a clock the test moves."""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime

import pytest

from desktop_agent.domain.errors import RateLimitedError
from desktop_agent.llm.pacing import RateLimitPacer, parse_reset, parse_retry_after
from tests.helpers.fakes import FakeClock

NOW = 1_800_000_000.0


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _headers(
    remaining: int, reset_in: float, limit: int = 50, dim: str = "requests"
) -> dict[str, str]:
    p = f"anthropic-ratelimit-{dim}-"
    return {
        p + "limit": str(limit),
        p + "remaining": str(remaining),
        p + "reset": _iso(NOW + reset_in),
    }


def test_parse_headers() -> None:
    assert (
        parse_reset("2027-01-15T08:00:00Z", NOW) == datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()
    )
    assert parse_reset("12", NOW) == NOW + 12
    assert parse_reset("garbage", NOW) is None
    assert parse_retry_after({"retry-after": "120"}, NOW) == 120
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}, NOW) == 1.5
    date = email.utils.formatdate(NOW + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, NOW) == pytest.approx(30, abs=1)
    assert parse_retry_after({}, NOW) is None


def test_plenty_left_means_no_wait() -> None:
    clock = FakeClock(NOW)
    pacer = RateLimitPacer(clock.now)
    pacer.observe("k", _headers(remaining=45, reset_in=10))
    ticket = pacer.reserve("k", input_tokens=1000, max_wait=10)
    assert ticket.delay == 0


def test_empty_bucket_waits_until_refill_or_hibernates() -> None:
    clock = FakeClock(NOW)
    pacer = RateLimitPacer(clock.now)
    pacer.observe("k", _headers(remaining=0, reset_in=4))
    assert pacer.reserve("k", input_tokens=1, max_wait=10).delay == pytest.approx(4)
    pacer.observe("k", _headers(remaining=0, reset_in=30))
    with pytest.raises(RateLimitedError) as info:
        pacer.reserve("k", input_tokens=1, max_wait=10)
    assert info.value.retry_after == pytest.approx(30)
    clock.advance(31)
    assert pacer.reserve("k", input_tokens=1, max_wait=10).delay == 0  # refilled since


def test_low_bucket_spreads_calls_and_reservations_count_calls_in_flight() -> None:
    clock = FakeClock(NOW)
    pacer = RateLimitPacer(clock.now)
    pacer.observe("k", _headers(remaining=3, reset_in=6, limit=100))
    delays = [pacer.reserve("k", input_tokens=1, max_wait=60).delay for _ in range(4)]
    # Three left over six seconds: one call every two seconds, then the fourth waits for the
    # refill because three are already in flight.
    assert delays == pytest.approx([0.0, 2.0, 4.0, 6.0])


def test_input_tokens_bucket_holds_a_large_prompt() -> None:
    clock = FakeClock(NOW)
    pacer = RateLimitPacer(clock.now)
    pacer.observe("k", _headers(remaining=5_000, reset_in=8, limit=400_000, dim="input-tokens"))
    assert pacer.reserve("k", input_tokens=20_000, max_wait=30).delay == pytest.approx(8)
    other = RateLimitPacer(clock.now)
    other.observe("k", _headers(remaining=300_000, reset_in=8, limit=400_000, dim="input-tokens"))
    assert other.reserve("k", input_tokens=20_000, max_wait=30).delay == 0


def test_release_returns_the_reservation_and_records_new_headers() -> None:
    clock = FakeClock(NOW)
    pacer = RateLimitPacer(clock.now)
    pacer.observe("k", _headers(remaining=1, reset_in=5))
    ticket = pacer.reserve("k", input_tokens=1, max_wait=10)
    pacer.release(ticket, _headers(remaining=40, reset_in=5))
    assert pacer.reserve("k", input_tokens=1, max_wait=10).delay == 0


def test_block_holds_every_caller_of_the_key_only() -> None:
    clock = FakeClock(NOW)
    pacer = RateLimitPacer(clock.now)
    pacer.block("k", 3)
    assert pacer.reserve("k", input_tokens=1, max_wait=10).delay == pytest.approx(3)
    assert pacer.reserve("other", input_tokens=1, max_wait=10).delay == 0
    pacer.block("k", 120)
    with pytest.raises(RateLimitedError):
        pacer.reserve("k", input_tokens=1, max_wait=10)


def test_reset_times_beyond_a_minute_are_clock_skew() -> None:
    clock = FakeClock(NOW)
    pacer = RateLimitPacer(clock.now)
    pacer.observe("k", _headers(remaining=0, reset_in=3600))
    with pytest.raises(RateLimitedError) as info:
        pacer.reserve("k", input_tokens=1, max_wait=10)
    assert info.value.retry_after == pytest.approx(60)
