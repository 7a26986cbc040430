"""The plan is working memory: journaled, restored, kept through compaction, and shown."""

from __future__ import annotations

from desktop_agent.client.api import Client
from desktop_agent.client.views import RunsTracker
from desktop_agent.domain import RunStatus, StepKind, Usage
from desktop_agent.engine.compaction import SUMMARY_PROMPT
from desktop_agent.engine.loop import EngineConfig, restore_state
from desktop_agent.engine.ports import ModelRequest
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel

PLAN = [{"text": "Collect sources", "done": True}, {"text": "Write the memo"}]


def decide(request: ModelRequest) -> Reply:
    last = request.messages[-1]["content"]
    if any(b.get("text") == SUMMARY_PROMPT for b in last if isinstance(b, dict)):
        return Reply("Summary: three sources were collected.", usage=Usage(50, 10))
    turns = sum(1 for m in request.messages if m["role"] == "assistant")
    if "Summary of the work so far" in str(request.messages[0]["content"]):
        return Reply("Memo written.", usage=Usage(10, 5))
    if turns == 0:
        return Reply("Planning.", [("update_plan", {"items": PLAN})], usage=Usage(150, 20))
    return Reply("Working.", [("list_files", {})], usage=Usage(150, 20))


def test_the_plan_survives_restarts_and_compaction_and_is_shown(
    client: Client, make_executor: MakeExecutor
) -> None:
    model = ScriptedModel(decide)
    model.window = 200  # every call comes close to the window: compaction follows soon
    run = client.start_run("Memo", model="claude-haiku-4-5")
    cfg = EngineConfig(settings=client.settings, snapshot_every=2)
    drain(client.store, make_executor(model, config=cfg))
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    kinds = [s.kind for s in client.steps(run.id)]
    assert StepKind.COMPACTION in kinds
    # After compaction the older turns are gone, but the model still sees its plan.
    first = str(model.requests[-1].messages[0]["content"])
    assert "Summary of the work so far" in first
    assert "- [x] Collect sources" in first and "- [ ] Write the memo" in first
    # Restored from snapshot + journal, the plan is the same working memory.
    state, _open = restore_state(client.store, client.run(run.id))
    assert state.scalars.plan == [
        {"text": "Collect sources", "done": True},
        {"text": "Write the memo", "done": False},
    ]
    assert client.store.load_snapshot(run.id) is not None
    # What the run header reads.
    delta = RunsTracker(client).poll()
    assert delta is not None
    (row,) = delta.rows
    assert [(i.text, i.done) for i in row.plan] == [
        ("Collect sources", True),
        ("Write the memo", False),
    ]
