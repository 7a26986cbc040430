"""Fixtures for the Claude adapter tests: the fake Messages API and adapters talking to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from desktop_agent.llm.claude import ClaudeModel, RetryPolicy
from desktop_agent.llm.pacing import RateLimitPacer
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Script

KEY = "sk-ant-api03-test-0123456789abcdef"

StartFake = Callable[..., FakeAnthropic]


@dataclass
class FallbackSettings:
    """The settings the adapter reads."""

    fallback_model: str = ""


@pytest.fixture
def start_fake() -> Iterator[StartFake]:
    """Start fake API servers (stopped at teardown)."""
    servers: list[FakeAnthropic] = []

    def start(
        script: list[Reply] | Script | None = None, accept_keys: set[str] | None = None
    ) -> FakeAnthropic:
        server = FakeAnthropic(script, accept_keys).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


MakeModel = Callable[..., ClaudeModel]


@pytest.fixture
def make_model() -> MakeModel:
    """A ClaudeModel on a fake server, with its own pacer and quick retries."""

    def make(
        fake: FakeAnthropic | None = None,
        *,
        key: str | None = KEY,
        base_url: str | None = None,
        fallback: str = "",
        pacer: RateLimitPacer | None = None,
        **policy: Any,
    ) -> ClaudeModel:
        url = base_url or (fake.url if fake else None)
        return ClaudeModel(
            lambda: key,
            FallbackSettings(fallback),
            base_url=url,
            policy=RetryPolicy(**{"backoff_s": 0.01, **policy}),
            pacer=pacer or RateLimitPacer(),
            timeout=20.0,
        )

    return make
