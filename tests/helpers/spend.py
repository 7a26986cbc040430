"""Model calls with round prices, for the tests of budgets and of the monthly cap.

Every call through :func:`million_token_api` reads a million prompt tokens and writes ten:
a dollar (and a little) on Haiku 4.5, so that a cap of $1.01 lets exactly one run through.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from desktop_agent.llm.claude import ClaudeModel, RetryPolicy
from desktop_agent.llm.pacing import RateLimitPacer
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text

HAIKU = "claude-haiku-4-5"
"""$1 per million input tokens: one call of :func:`million_token_api` costs about $1."""

KEY = "sk-ant-api03-test-0000000000000000"


@dataclass
class _NoFallback:
    fallback_model: str = ""


@contextmanager
def million_token_api() -> Iterator[FakeAnthropic]:
    """The contract fake answering every call at once, having read a million prompt tokens."""
    with FakeAnthropic(
        lambda body, i: Stream([Text("Done.")], input_tokens=1_000_000, output_tokens=10)
    ) as server:
        yield server


def claude_on(fake: FakeAnthropic) -> ClaudeModel:
    """The product's Claude adapter talking to ``fake``, retrying at once."""
    return ClaudeModel(
        lambda: KEY,
        _NoFallback(),
        base_url=fake.url,
        policy=RetryPolicy(backoff_s=0.01),
        pacer=RateLimitPacer(),
        timeout=20.0,
    )
