"""A followed Managed Agents session driven by real worker processes, one of them killed.

Each worker is ``python -m desktop_agent --db DB worker --until-idle`` (as in
``tests/crash``), reaching the fake API through ``ANTHROPIC_BASE_URL`` with the key in
``ANTHROPIC_API_KEY``. The tool confirmation the analyst approved is sent by a worker that
SIGKILLs itself just before or just after sending it (``DESKTOP_AGENT_CRASH_AT``); the next
worker finds the step it left open and the session receives the confirmation once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.agents.managed import ManagedAgents
from desktop_agent.client.managed import ManagedSessions
from desktop_agent.domain import RunStatus, StepStatus, WaitReason
from desktop_agent.worker.managed import AFTER_SEND, BEFORE_SEND
from tests.crash.harness import Lab
from tests.helpers.fake_managed_agents import KEY, FakeManagedAgents, FakeSession

FOUND = "Revenue grew twelve percent in the third quarter."


@pytest.fixture
def fake() -> Iterator[FakeManagedAgents]:
    with FakeManagedAgents() as server:
        yield server


@pytest.fixture
def lab(tmp_path: Path, fake: FakeManagedAgents) -> Iterator[Lab]:
    lab = Lab(tmp_path)
    lab.env.update({"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.url})
    yield lab
    lab.close()


def report(session: FakeSession) -> None:
    session.model_request(FOUND)
    session.idle()


@pytest.mark.parametrize("point", [BEFORE_SEND, AFTER_SEND])
def test_a_worker_killed_around_the_send_of_a_confirmation_does_not_send_it_twice(
    lab: Lab, fake: FakeManagedAgents, point: str
) -> None:
    session = fake.add_session()
    session.user_message("Summarise Q3")
    session.running()
    ids = session.model_request("Reading the file.", [("bash", {"command": "cat q3.csv"})])
    session.ask(ids, {ids[0]: "north,120"}, then=report)
    api = ManagedAgents(lambda: KEY, base_url=fake.url)
    try:
        run = ManagedSessions(lab.client, api).follow(session.id)
    finally:
        api.close()

    assert lab.run_worker() == 0, lab.last_log()
    waiting = lab.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.APPROVAL)
    [pending] = lab.client.approvals()
    lab.client.approve(pending.id)

    lab.crash_at(point)
    sent = 1 if point == AFTER_SEND else 0
    assert len(fake.received(session.id, "user.tool_confirmation")) == sent
    confirm = next(s for s in lab.steps(run.id) if s.name == "session.confirm")
    assert confirm.status == StepStatus.STARTED

    assert lab.run_worker() == 0, lab.last_log()
    assert fake.received(session.id, "user.tool_confirmation", refused=True) == [
        {"type": "user.tool_confirmation", "tool_use_id": ids[0], "result": "allow"}
    ]
    steps = lab.steps(run.id)
    assert next(s for s in steps if s.seq == confirm.seq).status == StepStatus.COMPLETED
    assert next(s for s in steps if s.name == "bash").output["content"] == "north,120"
    assert steps[-1].output["content"][0]["text"] == FOUND
    done = lab.run(run.id)
    assert (done.status, done.wait_reason) == (RunStatus.WAITING, WaitReason.HUMAN_INPUT)
