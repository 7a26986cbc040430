"""A worker frozen past its lease while an idempotent POST is in flight.

The endpoint honours idempotency keys (the setting says so: http_post to it is
``idempotent``) and fencing tokens. Worker A's POST reaches it; the test holds the
response and freezes A (SIGSTOP) waiting for it. A's lease runs out; worker B claims the
run, repeats the POST with the same key (and its own, larger token): the endpoint acts
once, and B completes the run. Then A gets its response and goes on (SIGCONT).

A must not write over B's journal nor touch the finished run (before fencing it wrote its
outcome over B's, hit a duplicate step and set the finished run to needs attention with
"Internal error"); what it got back is shown as an event on the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.domain import EffectClass, RunEventKind, RunStatus, StepStatus
from tests.fencing.harness import FenceLab, fence_lab, journal, lab_settings
from tests.fencing.sinks import GATE_TIMEOUT_S, KeyedEndpoint
from tests.helpers.polling import wait_lease_expired

pytestmark = pytest.mark.crash

POST_SEQ = 2  # 1: the model call, 2: http_post


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[FenceLab]:
    with fence_lab(tmp_path, "post") as lab:
        yield lab


@pytest.fixture
def endpoint() -> Iterator[KeyedEndpoint]:
    server = KeyedEndpoint(hold=True)
    yield server
    server.close()


def test_a_frozen_worker_cannot_write_its_late_response_over_the_new_owner(
    lab: FenceLab, endpoint: KeyedEndpoint
) -> None:
    url = endpoint.url("/orders")
    lab.open(lab_settings(idempotent_post_prefixes=[endpoint.url("/orders")]))
    run_id = lab.c.start_run(f"POST {url}", model="claude-haiku-4-5", tools=["http_post"]).id
    key = f"{run_id}:{POST_SEQ}"

    a = lab.start()
    assert endpoint.gate.reached.wait(GATE_TIMEOUT_S), f"A never posted:\n{lab.tail()}"
    lab.freeze(a)
    step = lab.c.store.get_step(run_id, POST_SEQ)
    assert (step.status, step.effect) == (StepStatus.STARTED, EffectClass.IDEMPOTENT)
    wait_lease_expired(lab.c, run_id)

    lab.run_worker()  # B: repeats the POST with the same key, completes the run
    done = lab.c.run(run_id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert done.lease_epoch == 2
    before = journal(lab.steps(run_id))
    assert '"replayed": true' in lab.c.store.get_step(run_id, POST_SEQ).output["content"]

    endpoint.gate.opened.set()  # A's response goes out while A is still frozen
    assert endpoint.gate.answered.wait(GATE_TIMEOUT_S)
    lab.wake(a)
    lab.finish(a)

    after = lab.c.run(run_id)
    assert (after.status, after.status_message, after.finished_at) == (
        RunStatus.COMPLETED,
        done.status_message,
        done.finished_at,
    )
    assert journal(lab.steps(run_id)) == before  # A wrote nothing over B's journal
    # The endpoint acted once; both requests carried the same key and their token.
    assert len(endpoint.effects) == 1
    assert [(p.key, p.token, p.status) for p in endpoint.posts] == [
        (key, "1", 201),
        (key, "2", 200),
    ]
    (event,) = lab.events(run_id)
    assert event.kind == RunEventKind.LATE_EFFECT and event.seq == POST_SEQ
    assert "finished http_post (step 2) after the run moved on: HTTP 201" in event.message
    assert event.data["epoch"] == 1 and event.data["status"] == "completed"
