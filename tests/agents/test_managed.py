"""Managed Agents sessions as runs, against the local fake of the sessions API.

A session is listed and followed from the client; an in-thread worker (``drain``) with a
moved clock drives the run: its events become steps in the timeline, its usage is priced
and counted, its messages found by search; a tool confirmation (``requires_action``)
becomes an approval in the inbox, decided there, and the session goes on; the analyst's
pause interrupts it; the run's budget interrupts it and asks for more.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from desktop_agent.agents.managed import AGENT, ManagedAgents, run_id_for
from desktop_agent.client.api import Client
from desktop_agent.client.managed import ManagedSessions
from desktop_agent.client.views import step_summary, timeline_entries
from desktop_agent.domain import (
    ApprovalState,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.domain.errors import InvalidStateError, NotFoundError
from desktop_agent.engine.loop import RunExecutor
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.managed import CONTINUE, IDLE_POLL_S, ManagedDriver, list_price
from tests.conftest import drain
from tests.helpers.fake_managed_agents import KEY, FakeManagedAgents, FakeSession
from tests.helpers.fakes import FakeClock

TASK = "Summarise the third-quarter figures for the board"
FOUND = "Revenue grew twelve percent in the third quarter, led by the northern region."


@pytest.fixture
def fake() -> Iterator[FakeManagedAgents]:
    with FakeManagedAgents() as server:
        yield server


@pytest.fixture
def api(fake: FakeManagedAgents) -> Iterator[ManagedAgents]:
    client = ManagedAgents(lambda: KEY, base_url=fake.url)
    yield client
    client.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def driver(client: Client, api: ManagedAgents, clock: FakeClock) -> ManagedDriver:
    return ManagedDriver(client.store, api, client.settings, clock=clock)


@pytest.fixture
def executor(client: Client, driver: ManagedDriver, clock: FakeClock) -> RunExecutor:
    return build_executor(client.store, client.settings, clock=clock, foreign={AGENT: driver})


@pytest.fixture
def sessions(client: Client, api: ManagedAgents) -> ManagedSessions:
    return ManagedSessions(client, api)


def drive(client: Client, executor: RunExecutor, clock: FakeClock, seconds: float = 0.0) -> None:
    """Move the clock on (past the run's wake time), then run a worker until it is idle."""
    clock.advance(seconds)
    drain(client.store, executor, clock=clock)


def research(session: FakeSession) -> list[str]:
    """The task, a model request that asks to run a tool; the tool use ids."""
    session.user_message(TASK)
    session.running()
    return session.model_request(
        "I will read the quarterly file first.",
        [("bash", {"command": "cat q3.csv"})],
        usage=(2000, 300, 500, 1000),
    )


def report(session: FakeSession) -> None:
    """The agent's last request and the end of its turn."""
    session.model_request(FOUND, usage=(3000, 400, 0, 2500))
    session.usage_snapshot()
    session.idle()


def kinds(steps: list[Step]) -> list[tuple[StepKind, str, StepStatus]]:
    return [(s.kind, s.name, s.status) for s in steps]


def test_a_followed_session_is_a_run_with_steps_usage_and_search(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session("Board pack")
    ids = research(session)
    session.tool_result(ids[0], "region,revenue\nnorth,120")
    report(session)

    listed = sessions.sessions()
    assert [(r.session.id, r.session.name, r.followed) for r in listed] == [
        (session.id, "Board pack", False)
    ]
    assert listed[0].session.model == "claude-opus-4-8"
    run = sessions.follow(session.id, max_cost_usd=5.0)
    assert (run.spec.agent, run.spec.session_id, run.status) == (
        AGENT,
        session.id,
        RunStatus.QUEUED,
    )
    assert run.goal == TASK and "Board pack" in run.title
    with pytest.raises(InvalidStateError, match="already followed"):
        sessions.follow(session.id)

    drive(client, executor, clock)
    steps = client.steps(run.id)
    model = "claude-opus-4-8"
    assert kinds(steps) == [
        (StepKind.STEER, "message", StepStatus.COMPLETED),
        (StepKind.MODEL_CALL, model, StepStatus.COMPLETED),
        (StepKind.TOOL_CALL, "bash", StepStatus.COMPLETED),
        (StepKind.MODEL_CALL, model, StepStatus.COMPLETED),
    ]
    first, tool, last = steps[1], steps[2], steps[3]
    assert first.output["content"][1] == {
        "type": "tool_use",
        "id": ids[0],
        "name": "bash",
        "input": {"command": "cat q3.csv"},
    }
    assert tool.input["arguments"] == {"command": "cat q3.csv"}
    assert tool.output["content"] == "region,revenue\nnorth,120"
    assert (first.usage.input_tokens, first.usage.cache_read_tokens) == (2000, 1000)
    assert first.cost_usd == pytest.approx(list_price(model, first.usage)) and first.cost_usd > 0
    done = client.run(run.id)
    assert done.cost_usd == pytest.approx(first.cost_usd + last.cost_usd)
    assert done.usage.input_tokens == 5000
    # The session finished its turn: the run waits for the analyst's next message.
    assert (done.status, done.wait_reason) == (RunStatus.WAITING, WaitReason.HUMAN_INPUT)
    assert "finished its turn" in done.status_message and "Revenue grew" in done.status_message

    # The timeline, search and usage read it as any run.
    lines = [step_summary(e) for e in timeline_entries(client, run.id)]
    assert any("Revenue grew twelve percent" in line for line in lines)
    assert any(line.startswith("bash") or "cat q3.csv" in line for line in lines), lines
    hits = client.search("northern region")
    assert (run.id, last.seq) in [(h.run_id, h.seq) for h in hits]
    usage = client.usage(since=0.0)
    assert usage.total.input_tokens == 5000
    assert usage.by_model[model].cost_usd == pytest.approx(done.cost_usd)
    assert [r.followed for r in sessions.sessions()] == [True]

    # Read again (the idle session is read every IDLE_POLL_S): nothing is taken twice.
    drive(client, executor, clock, IDLE_POLL_S + 1)
    assert len(client.steps(run.id)) == len(steps)


def test_a_tool_confirmation_is_an_approval_and_the_session_goes_on_once_approved(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    ids = research(session)
    session.ask(ids, {ids[0]: "north,120"}, then=report)
    run = sessions.follow(session.id)
    drive(client, executor, clock)

    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.APPROVAL)
    [pending] = client.approvals()
    assert (pending.run_id, pending.tool, pending.arguments) == (
        run.id,
        "bash",
        {"command": "cat q3.csv"},
    )
    assert "Managed Agents session waits for your confirmation" in pending.reason
    assert "always_ask" in pending.rule
    assert fake.received(session.id) == []

    client.approve(pending.id, note="fine")
    drive(client, executor, clock)
    assert fake.received(session.id) == [
        {"type": "user.tool_confirmation", "tool_use_id": ids[0], "result": "allow"}
    ]
    assert client.approvals() == []
    steps = client.steps(run.id)
    by_name = {s.name: s for s in steps}
    assert by_name["approval"].output["decisions"][0]["state"] == "approved"
    assert by_name["session.confirm"].status == StepStatus.COMPLETED
    assert by_name["bash"].output["content"] == "north,120"
    assert steps[-1].output["content"][0]["text"] == FOUND
    assert client.run(run.id).wait_reason == WaitReason.HUMAN_INPUT

    drive(client, executor, clock, IDLE_POLL_S + 1)
    assert len(fake.received(session.id, "user.tool_confirmation", refused=True)) == 1


def test_a_rejected_call_is_denied_with_the_analysts_reason(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    ids = research(session)
    session.ask(ids, then=report)
    run = sessions.follow(session.id)
    drive(client, executor, clock)
    [pending] = client.approvals()
    client.reject(pending.id, "read the summary sheet instead")
    drive(client, executor, clock)

    assert fake.received(session.id) == [
        {
            "type": "user.tool_confirmation",
            "tool_use_id": ids[0],
            "result": "deny",
            "deny_message": "read the summary sheet instead",
        }
    ]
    tool = next(s for s in client.steps(run.id) if s.name == "bash")
    assert tool.output == {
        "content": "read the summary sheet instead",
        "is_error": True,
        "event": tool.output["event"],
    }
    assert client.store.get_approval(pending.id).state == ApprovalState.REJECTED


def _crash_at(point: str) -> Any:
    class Crash(BaseException):
        pass

    def hook(name: str) -> None:
        if name == point:
            raise Crash(name)

    return hook, Crash


@pytest.mark.parametrize("point", ["managed_before_send", "managed_after_send"])
def test_a_worker_stopped_around_the_send_confirms_exactly_once(
    client: Client,
    fake: FakeManagedAgents,
    api: ManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
    point: str,
) -> None:
    session = fake.add_session()
    ids = research(session)
    session.ask(ids, then=report)
    run = sessions.follow(session.id)
    drive(client, executor, clock)
    [pending] = client.approvals()
    client.approve(pending.id)

    hook, crash = _crash_at(point)
    dying = ManagedDriver(client.store, api, client.settings, clock=clock, crash_hook=hook)
    with pytest.raises(crash):
        dying.execute(client.run(run.id), _token(), None)
    sent = 1 if point == "managed_after_send" else 0
    assert len(fake.received(session.id, "user.tool_confirmation")) == sent
    step = next(s for s in client.steps(run.id) if s.name == "session.confirm")
    assert step.status == StepStatus.STARTED  # the intent is on disk, the outcome is not

    drive(client, executor, clock)
    assert fake.received(session.id, "user.tool_confirmation", refused=True) == [
        {"type": "user.tool_confirmation", "tool_use_id": ids[0], "result": "allow"}
    ]
    closed = client.step(run.id, step.seq)
    assert closed.status == StepStatus.COMPLETED
    if sent:
        assert "found in the session's events" in closed.output["content"]
    assert client.steps(run.id)[-1].output["content"][0]["text"] == FOUND


def _token() -> Any:
    from desktop_agent.engine.ports import CancelToken

    return CancelToken()


def test_pause_interrupts_the_session_and_resume_follows_it_again(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    session.user_message(TASK)
    session.running()
    session.model_request("Reading the sources, one by one.")
    run = sessions.follow(session.id)
    drive(client, executor, clock)
    running = client.run(run.id)
    assert (running.status, running.wait_reason) == (RunStatus.WAITING, WaitReason.TIMER)
    assert running.status_message.startswith("Running on Managed Agents")

    client.pause(run.id)
    drive(client, executor, clock)
    assert fake.received(session.id) == [{"type": "user.interrupt"}]
    assert client.run(run.id).status == RunStatus.PAUSED
    assert session.status == "idle"

    client.resume(run.id)
    drive(client, executor, clock)
    assert client.run(run.id).wait_reason == WaitReason.HUMAN_INPUT
    client.answer(run.id, "Only the northern region, please.")
    drive(client, executor, clock)
    assert fake.received(session.id, "user.message") == [
        {
            "type": "user.message",
            "content": [{"type": "text", "text": "Only the northern region, please."}],
        }
    ]
    notes = [s for s in client.steps(run.id) if s.kind == StepKind.STEER]
    assert [s.input["text"] for s in notes] == [TASK]  # the run's own message is its send step
    assert client.steps(run.id)[-1].output["content"][0]["text"].startswith("Noted:")


def test_cancel_interrupts_the_session_and_ends_the_run(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    session.running()
    ids = session.model_request("Running the long job.", [("bash", {"command": "make"})], ask=False)
    run = sessions.follow(session.id)
    drive(client, executor, clock)
    client.cancel(run.id)
    drive(client, executor, clock)
    assert fake.received(session.id) == [{"type": "user.interrupt"}]
    ended = client.run(run.id)
    assert ended.status == RunStatus.CANCELLED
    tool = next(s for s in client.steps(run.id) if s.name == "bash")
    assert (tool.status, tool.error) == (StepStatus.FAILED, "no longer followed")
    assert ids


def test_the_runs_budget_interrupts_the_session_and_asks_for_more(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    session.user_message(TASK)
    session.running()
    session.model_request("Reading everything there is.", usage=(400_000, 20_000, 0, 0))
    run = sessions.follow(session.id, max_cost_usd=0.5)
    drive(client, executor, clock)

    assert fake.received(session.id) == [{"type": "user.interrupt"}]
    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    assert waiting.status_message.startswith("Budget reached: spent")
    budget = client.steps(run.id)[-1]
    assert (budget.kind, budget.name, budget.status) == (
        StepKind.BUDGET,
        "cost",
        StepStatus.STARTED,
    )
    assert budget.input["spent"]["cost_usd"] == pytest.approx(waiting.cost_usd)
    assert waiting.needs_analyst

    client.extend_budget(run.id, cost_usd=5.0)
    drive(client, executor, clock)
    assert fake.received(session.id, "user.message") == [
        {"type": "user.message", "content": [{"type": "text", "text": CONTINUE}]}
    ]
    closed = client.step(run.id, budget.seq)
    assert closed.output["action"] == "extend"
    assert client.run(run.id).wait_reason == WaitReason.HUMAN_INPUT


def test_a_terminated_session_completes_the_run_and_its_errors_are_steps(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    session.running()
    session.model_request(FOUND)
    session.error("model_overloaded_error", "The model is overloaded")
    session.terminate()
    run = sessions.follow(session.id)
    drive(client, executor, clock)
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED
    assert "The model is overloaded" in done.status_message
    error = next(s for s in client.steps(run.id) if s.kind == StepKind.ERROR)
    assert error.name == "model_overloaded_error"


def test_following_an_unknown_session_is_refused(client: Client, sessions: ManagedSessions) -> None:
    with pytest.raises(NotFoundError):
        sessions.follow("sesn_unknown")
    with pytest.raises(NotFoundError):
        client.run(run_id_for("sesn_unknown"))


def test_a_long_history_read_a_page_at_a_time_gives_the_same_journal(
    client: Client,
    fake: FakeManagedAgents,
    api: ManagedAgents,
    sessions: ManagedSessions,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    ids = research(session)
    session.ask(ids)  # an old stop, answered since (by another client)
    session.emit("user.tool_confirmation", tool_use_id=ids[0], result="allow")
    session.running()
    session.tool_result(ids[0], "north,120")
    report(session)
    small = ManagedDriver(client.store, api, client.settings, clock=clock, read_limit=8)
    executor = build_executor(client.store, client.settings, clock=clock, foreign={AGENT: small})
    run = sessions.follow(session.id)
    drive(client, executor, clock)

    # No approval was opened for the stop answered later in the history.
    assert client.store.list_run_approvals(run.id) == []
    assert kinds(client.steps(run.id)) == [
        (StepKind.STEER, "message", StepStatus.COMPLETED),
        (StepKind.MODEL_CALL, "claude-opus-4-8", StepStatus.COMPLETED),
        (StepKind.TOOL_CALL, "bash", StepStatus.COMPLETED),
        (StepKind.MODEL_CALL, "claude-opus-4-8", StepStatus.COMPLETED),
    ]
    assert client.run(run.id).wait_reason == WaitReason.HUMAN_INPUT
    pages = [r for r in fake.requests if r.path.endswith("/events") and r.method == "GET"]
    assert len(pages) > 2  # read in several activations


def test_the_sessions_running_time_counts_against_the_time_budget(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    session.running()
    session.model_request("Still working through the files.")
    session.active_seconds = 3600.0
    run = sessions.follow(session.id, max_time_s=1800.0)
    drive(client, executor, clock)
    assert fake.received(session.id) == [{"type": "user.interrupt"}]
    waiting = client.run(run.id)
    assert waiting.wait_reason == WaitReason.BUDGET
    assert waiting.status_message.startswith("Budget reached: worked 1h")
    assert client.steps(run.id)[-1].name == "time"


def test_a_session_waiting_for_its_own_custom_tool_says_so_and_asks_nothing(
    client: Client,
    fake: FakeManagedAgents,
    sessions: ManagedSessions,
    executor: RunExecutor,
    clock: FakeClock,
) -> None:
    session = fake.add_session()
    session.running()
    custom = session.emit("agent.custom_tool_use", name="render_chart", input={"kind": "bar"})
    session.idle("requires_action", event_ids=[custom["id"]])
    run = sessions.follow(session.id)
    drive(client, executor, clock)
    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.HUMAN_INPUT)
    assert "its own tools (render_chart)" in waiting.status_message
    assert client.approvals() == []
    tool = client.steps(run.id)[-1]
    assert (tool.name, tool.status, tool.input["kind"]) == (
        "render_chart",
        StepStatus.STARTED,
        "custom",
    )
