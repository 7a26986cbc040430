"""A model call that keeps failing stops retrying after a bounded number of attempts.

The real adapter talks through the SDK to the fake Messages API, which cuts every stream
off mid-answer or sends frames that do not parse. Each attempt is a failed, paid-for model
step; without a bound the run would wait and retry until its budget ran out. With the bound
(``model_attempts`` in the settings), the run goes to needs attention after that many
attempts in a row with a message saying what failed and what to do, and a resume tries
again with a fresh count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus
from desktop_agent.engine.loop import EngineConfig, RunExecutor
from desktop_agent.llm.claude import ClaudeModel, RetryPolicy
from desktop_agent.llm.pacing import RateLimitPacer
from tests.conftest import MakeExecutor, drain
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Script, Status, Stream, Text
from tests.helpers.fakes import FakeClock
from tests.llm.conftest import KEY, FallbackSettings

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

CUT = Stream([Text("The figures for Q3 are as foll", chunk=5)], cut_after=3)


def _failed_model_steps(client: Client, run_id: str) -> list[int]:
    return [
        s.seq
        for s in client.steps(run_id)
        if s.kind == StepKind.MODEL_CALL and s.status == StepStatus.FAILED
    ]


Engine = Callable[[list[Reply] | Script, FakeClock], tuple[RunExecutor, FakeAnthropic]]


@pytest.fixture
def engine(client: Client, make_executor: MakeExecutor) -> Iterator[Engine]:
    """The real adapter on a fake API; an engine retrying at once, asking after three."""
    servers: list[FakeAnthropic] = []

    def make(script: list[Reply] | Script, clock: FakeClock) -> tuple[RunExecutor, FakeAnthropic]:
        fake = FakeAnthropic(script).__enter__()
        servers.append(fake)
        model = ClaudeModel(
            lambda: KEY,
            FallbackSettings(),
            base_url=fake.url,
            policy=RetryPolicy(max_retries=0, backoff_s=0.01),
            pacer=RateLimitPacer(clock.now),
            clock=clock.now,
            timeout=20.0,
        )
        settings = client.settings.updated({"model_attempts": 3})
        config = EngineConfig(backoff_base_s=0.0, backoff_cap_s=0.0, settings=settings)
        return make_executor(model, clock=clock, config=config), fake

    yield make
    for server in servers:
        server.__exit__(None, None, None)


def test_cut_streams_stop_after_three_attempts_and_a_resume_counts_afresh(
    client: Client, engine: Engine
) -> None:
    replies: list[Reply] = [CUT]
    clock = FakeClock()
    executor, _fake = engine(lambda _body, _i: replies[0], clock)
    run = client.start_run("Q3 figures", model="claude-haiku-4-5")

    drain(client.store, executor, clock=clock)
    parked = client.run(run.id)
    assert parked.status == RunStatus.NEEDS_ATTENTION, parked.status_message
    assert parked.attention_seq is None
    message = parked.status_message
    assert "failed 3 times in a row" in message and "ended before the message" in message
    assert f"desktop-agent resume {run.id}" in message
    assert _failed_model_steps(client, run.id) == [1, 2, 3]
    drain(client.store, executor, clock=clock)  # parked: no worker retries by itself
    assert _failed_model_steps(client, run.id) == [1, 2, 3]

    client.resume(run.id)  # still failing: three fresh attempts, then it asks again
    drain(client.store, executor, clock=clock)
    assert _failed_model_steps(client, run.id) == [1, 2, 3, 4, 5, 6]
    assert client.run(run.id).status == RunStatus.NEEDS_ATTENTION

    replies[0] = Stream([Text("Revenue rose 12% in Q3.")])  # the API is healthy again
    client.resume(run.id)
    drain(client.store, executor, clock=clock)
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert _failed_model_steps(client, run.id) == [1, 2, 3, 4, 5, 6]


def test_rate_limits_do_not_count_as_failed_attempts(client: Client, engine: Engine) -> None:
    """Two cut streams, a 429, a third cut stream: three failed attempts in a row."""
    script: list[Reply] = [
        CUT,
        CUT,
        Status(429, "rate_limit_error", "slow down", {"retry-after": "0"}),
        CUT,
        Stream([Text("Done.")]),
    ]
    clock = FakeClock()
    executor, _fake = engine(script, clock)
    run = client.start_run("Q3 figures", model="claude-haiku-4-5")
    drain(client.store, executor, clock=clock)
    parked = client.run(run.id)
    assert parked.status == RunStatus.NEEDS_ATTENTION
    assert "failed 3 times in a row" in parked.status_message
    assert _failed_model_steps(client, run.id) == [1, 2, 3, 4]
