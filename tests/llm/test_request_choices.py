"""What the engine asks of each model call: effort, cache lifetime, task budget, exact counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.engine.ports import ModelRequest
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel


def _first_request(
    client: Client, make_executor: MakeExecutor, workspace: Path, **options: object
) -> ModelRequest:
    model = ScriptedModel([Reply("Done.")])
    cfg = EngineConfig(settings=client.settings)
    run = client.start_run("Look", model="claude-sonnet-5-5", workspace=workspace, **options)  # type: ignore[arg-type]
    drain(client.store, make_executor(model, config=cfg))
    assert client.run(run.id).status == RunStatus.COMPLETED
    return model.requests[0]


def test_a_run_that_can_wait_writes_its_cache_for_an_hour(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    # The default tools can set a timer and ask the analyst: the run may hibernate.
    assert _first_request(client, make_executor, workspace).cache_ttl == "1h"
    # Reading files only, without approvals: no wait can come, five minutes is cheaper.
    only_reads = _first_request(client, make_executor, workspace, tools=["read_file", "list_files"])
    assert only_reads.cache_ttl == "5m"
    # A tool the analyst must approve makes a wait likely.
    asks = _first_request(
        client,
        make_executor,
        workspace,
        tools=["read_file"],
        approval_overrides={"read_file": "ask"},
    )
    assert asks.cache_ttl == "1h"


@pytest.mark.parametrize("chosen", ["5m", "1h"])
def test_the_cache_lifetime_setting_overrides_the_choice(
    chosen: str, client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    client.settings = client.settings.updated({"prompt_cache_ttl": chosen})
    assert _first_request(client, make_executor, workspace).cache_ttl == chosen
    only_reads = _first_request(client, make_executor, workspace, tools=["read_file"])
    assert only_reads.cache_ttl == chosen


def test_effort_and_the_token_budget_reach_the_request(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    request = _first_request(
        client, make_executor, workspace, effort="low", max_tokens_budget=200_000
    )
    assert request.effort == "low"
    assert request.task_budget == (200_000, 200_000)
    assert _first_request(client, make_executor, workspace).task_budget is None


class CountingModel(ScriptedModel):
    """A scripted model whose worst case is dear and whose exact count is small."""

    def __init__(self, replies: list[Reply]) -> None:
        super().__init__(replies)
        self.counted: list[ModelRequest] = []

    def count_tokens(self, request: ModelRequest) -> int | None:
        self.counted.append(request)
        return 100

    def worst_case_cost(self, request: ModelRequest) -> float:
        # The estimate is dearer than the budget; the exact count is well within it.
        return 0.0009 if request.prompt_tokens is not None else 0.012


def test_an_estimate_near_the_budget_is_checked_with_an_exact_count(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    # Far from the budget: the estimate decides, nothing is counted.
    far = CountingModel([Reply("Done.")])
    run = client.start_run("Look", model="claude-sonnet-5-5", workspace=workspace, max_cost_usd=1.0)
    drain(client.store, make_executor(far))
    assert client.run(run.id).status == RunStatus.COMPLETED and far.counted == []
    # The estimate ($0.012) would stop a $0.01 budget: near a limit the prompt is counted,
    # and the exact worst case ($0.0009) lets the call through.
    near = CountingModel([Reply("Done.")])
    run = client.start_run(
        "Look", model="claude-sonnet-5-5", workspace=workspace, max_cost_usd=0.01
    )
    drain(client.store, make_executor(near))
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert len(near.counted) == 1


def test_an_economy_run_writes_its_cache_for_an_hour_even_when_it_cannot_wait(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    streamed = _first_request(client, make_executor, workspace, tools=["read_file"])
    economy = _first_request(client, make_executor, workspace, tools=["read_file"], economy=True)
    assert (streamed.cache_ttl, economy.cache_ttl) == ("5m", "1h")


def test_the_demo_model_cannot_run_in_economy_mode(client: Client) -> None:
    with pytest.raises(InvalidInputError, match=r"demo model .* cannot be sent in a Message Batch"):
        client.start_run("Look", model="demo", economy=True)
    assert client.runs() == []  # nothing was created
