"""Money spent is money spent: a model call's cost counts however its worker lost the run.

With a worker in a thread on a real database. A model port takes the run away from its
worker in the middle of the call (as if the worker froze and another claimed the run):
what the call cost beyond its last save reaches the run's totals once, and the run's cost
budget sees it. A call left open by a worker that died, whose run is then cancelled or
stopped, keeps what it had saved.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus, Usage, WaitReason
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.engine.ports import (
    CancelToken,
    ModelRequest,
    ModelResponse,
    RunPatch,
    StepIntent,
)
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel


def take_over(client: Client, run_id: str) -> None:
    """Another worker claims the run (its lease epoch moves on), then lets it go."""
    run = client.run(run_id)
    assert run.lease_owner is not None
    lease = client.store.claim_run(run_id, "worker-b", time.time(), 30.0, [run.lease_owner])
    assert lease is not None
    client.store.release_run(run_id, "worker-b")


class TakenOverMidCall:
    """The first call is paid for in two reports; the run is taken away between them."""

    def __init__(self, client: Client, then: list[Reply]) -> None:
        self.client = client
        self.then = ScriptedModel(then)
        self.calls = 0

    def context_window(self, model: str) -> int:
        return 200_000

    def compacts_on_server(self, model: str) -> bool:
        return False

    def count_tokens(self, request: ModelRequest) -> int | None:
        return None

    def worst_case_cost(self, request: ModelRequest) -> float:
        return 0.001

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        self.calls += 1
        if self.calls > 1:
            return self.then.complete(
                request,
                idempotency_key=idempotency_key,
                on_text=on_text,
                cancel=cancel,
                on_usage=on_usage,
            )
        assert on_usage is not None
        on_usage(Usage(1000, 1), 0.004)  # the prompt: saved at once
        take_over(self.client, idempotency_key.split(":")[0])
        on_usage(Usage(1000, 500), 0.009)  # the answer: its save finds the run taken
        return ModelResponse(
            content=[{"type": "text", "text": "An answer nobody will read."}],
            stop_reason="end_turn",
            usage=Usage(1000, 500),
            cost_usd=0.009,
            model=request.model,
        )


def test_the_spend_after_the_last_save_counts_in_the_cost_and_against_the_budget(
    client: Client, make_executor: MakeExecutor
) -> None:
    plan = Reply("Planning.", [("update_plan", {"items": [{"text": "order"}]})], cost=0.001)
    model = TakenOverMidCall(client, [plan, Reply("Done.", cost=0.001)])
    run_id = client.start_run("Order", model="demo", max_cost_usd=0.008).id
    drain(client.store, make_executor(model))

    (event,) = client.events(run_id)
    assert (event.data["cost_usd"], event.data["added_cost_usd"]) == (0.009, pytest.approx(0.005))
    run = client.run(run_id)
    # $0.004 saved (counted when the call was made again) + $0.005 after it + $0.001 again.
    assert run.cost_usd == pytest.approx(0.010)
    assert run.usage == Usage(1000 + 100, 500 + 20)
    # The budget sees it: over $0.008 after the call made again, the run waits.
    assert (run.status, run.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    assert run.status_message == (
        "Budget reached: spent $0.0100 of $0.0080; extend the budget or stop"
    )
    (wait,) = [s for s in client.steps(run_id) if s.kind == StepKind.BUDGET]
    assert wait.input["spent"]["cost_usd"] == pytest.approx(0.010)


@pytest.mark.parametrize("how", ["cancel", "stop"])
def test_a_call_left_open_keeps_what_it_saved_when_the_run_ends_without_it(
    client: Client, make_executor: MakeExecutor, how: str
) -> None:
    run = client.start_run("Summarise", model="demo")
    # A worker started a model call, saved what it had spent so far, and died.
    client.store.commit(
        run.id,
        intents=[StepIntent(1, StepKind.MODEL_CALL, "demo", {"model": "demo", "messages": 1})],
        patch=RunPatch(status=RunStatus.RUNNING, started_at=time.time()),
    )
    client.store.save_partial(run.id, 1, "Half an ans", Usage(800, 40), 0.006)
    getattr(client, how)(run.id)
    drain(client.store, make_executor(config=EngineConfig()))

    ended = client.run(run.id)
    assert ended.status == (RunStatus.CANCELLED if how == "cancel" else RunStatus.STOPPED)
    assert ended.cost_usd == pytest.approx(0.006)
    assert ended.usage == Usage(800, 40)
    step = client.store.get_step(run.id, 1)
    assert (step.status, step.cost_usd, step.usage) == (StepStatus.FAILED, 0.006, Usage(800, 40))
