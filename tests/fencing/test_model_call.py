"""A worker frozen past its lease in the middle of a model call (the real SDK, a fake API).

Worker A streams the first model call from the fake Messages API, which holds the stream
after a few words; the test freezes A (SIGSTOP). A's lease runs out; worker B claims the
run, issues the call again (what A's attempt had spent is salvaged) and completes the run.
Then the stream goes on and A is continued (SIGCONT): the answer it receives asks for a
POST. A must drop that answer (no POST, nothing written to the run) and its cost must not
vanish: it is recorded as an event on the run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.domain import RunEventKind, RunStatus, StepKind, Usage
from desktop_agent.llm.pricing import model_info
from tests.fencing.harness import FenceLab, fence_lab, journal, lab_settings
from tests.fencing.sinks import KeyedEndpoint
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Stream, Text, Thinking, ToolUse
from tests.helpers.polling import wait_lease_expired, wait_until

pytestmark = pytest.mark.crash

MODEL = "claude-haiku-4-5"


@pytest.fixture
def endpoint() -> Iterator[KeyedEndpoint]:
    server = KeyedEndpoint(hold=False)
    yield server
    server.close()


def test_a_frozen_worker_drops_its_late_model_answer_and_its_cost_is_recorded(
    tmp_path: Path, endpoint: KeyedEndpoint
) -> None:
    gate = threading.Event()
    url = endpoint.url("/orders")

    def script(body: dict[str, Any], index: int) -> Reply:
        if index == 0:  # A's call: held after two pieces of text
            return Stream(
                [
                    Text("Placing the order now, as asked.", chunk=8),
                    ToolUse("http_post", {"url": url}),
                ],
                input_tokens=1200,
                output_tokens=60,
                hold_after=2,
                gate=gate,
            )
        return Stream([Text("Nothing more to do.")], input_tokens=1300, output_tokens=10)

    with (
        FakeAnthropic(script) as fake,
        fence_lab(tmp_path, "claude", ANTHROPIC_BASE_URL=fake.url) as lab,
    ):
        lab.open(lab_settings())
        run_id = lab.c.start_run(f"Order from {url}", model=MODEL, tools=["http_post"]).id
        a = lab.start()
        # A streams: the prompt's usage is saved as soon as the call starts.
        wait_until(
            lambda: (s := lab.c.steps(run_id)) and s[0].usage.input_tokens == 1200,
            what="A's model call to start streaming",
        )
        _freeze_until_b_completed(lab, a, run_id)
        done = lab.c.run(run_id)
        before = journal(lab.steps(run_id))
        first = lab.c.store.get_step(run_id, 1)
        assert (first.kind, first.attempt) == (StepKind.MODEL_CALL, 2)
        assert first.salvaged_usage.input_tokens == 1200  # A's spend so far, kept by B

        gate.set()  # the rest of A's answer (a tool use) goes out
        lab.wake(a)
        lab.finish(a)

        after = lab.c.run(run_id)
        assert (after.status, after.status_message, after.cost_usd) == (
            RunStatus.COMPLETED,
            done.status_message,
            done.cost_usd,
        )
        assert journal(lab.steps(run_id)) == before  # A's answer went nowhere
        assert endpoint.posts == []  # and A did not act on it
        assert len(fake.requests) == 2  # A's call and B's; A asked nothing more
        (event,) = lab.events(run_id)
        assert event.kind == RunEventKind.LATE_EFFECT and event.seq == 1
        assert "went on with a model call (claude-haiku-4-5) (step 1)" in event.message
        assert "its answer was dropped. It spent $" in event.message
        assert event.data["status"] == "dropped" and event.data["cost_usd"] > 0
        assert event.data["usage"]["input_tokens"] == 1200 and event.data["epoch"] == 1


def test_what_a_frozen_worker_spent_after_its_last_save_is_added_to_the_run_once(
    tmp_path: Path,
) -> None:
    """The run's cost counts the whole call: what A saved (kept by B), then the rest.

    A saves the prompt's usage when its call starts, and is frozen. When it goes on, the
    rest of its answer (the thinking's signature: nothing A saves as it streams) and the
    answer's final usage arrive before A's next save, which finds the run taken: what the answer
    cost beyond that last save is known to A alone, and goes to the run's totals with
    the event. The prompt, already counted through B's salvage, is not counted twice.
    """
    gate = threading.Event()

    def script(body: dict[str, Any], index: int) -> Reply:
        if index == 0:  # A's call: its thinking streamed in one piece, then held
            # The thinking follows the prompt's save at once (inside the 0.25 s that A keeps
            # between saves of its live text, unless the machine is slow) and nothing
            # follows it until the gate opens: A saves it all the same, when that interval
            # ends (a trailing save), or at once if it arrived after it.
            return Stream(
                [Thinking("Weighing the options. " * 8, chunk=10_000)],
                input_tokens=1200,
                output_tokens=900,
                hold_after=1,
                gate=gate,
            )
        return Stream([Text("Nothing more to do.")], input_tokens=1300, output_tokens=10)

    with (
        FakeAnthropic(script) as fake,
        fence_lab(tmp_path, "claude", ANTHROPIC_BASE_URL=fake.url) as lab,
    ):
        lab.open(lab_settings())
        run_id = lab.c.start_run("Think it over", model=MODEL, tools=[], thinking_budget=2048).id
        a = lab.start()
        wait_until(
            lambda: (
                (s := lab.c.steps(run_id))
                and s[0].usage.input_tokens == 1200
                and "Weighing the options. " * 8 in s[0].partial_text
            ),
            what="A's model call to stream and save its thinking",
        )
        _freeze_until_b_completed(lab, a, run_id)
        done = lab.c.run(run_id)
        before = journal(lab.steps(run_id))
        kept = lab.c.store.get_step(run_id, 1)  # B kept what A had saved: the prompt
        assert kept.salvaged_usage == Usage(1200, 1)

        gate.set()
        lab.wake(a)
        lab.finish(a)

        (event,) = lab.events(run_id)
        price = model_info(MODEL)
        assert event.data["usage"] == Usage(1200, 900).to_json()  # the whole call
        assert event.data["cost_usd"] == pytest.approx(price.cost(Usage(1200, 900)))
        assert event.data["added_usage"] == Usage(0, 899).to_json()  # beyond A's last save
        added = price.cost(Usage(0, 899))
        assert event.data["added_cost_usd"] == pytest.approx(added)
        assert "counted in the run's cost" in event.message
        after = lab.c.run(run_id)
        assert after.cost_usd == pytest.approx(done.cost_usd + added)
        assert after.cost_usd == pytest.approx(
            price.cost(Usage(1200, 900)) + price.cost(Usage(1300, 10))
        )
        assert after.usage == done.usage + Usage(0, 899)  # the prompt counted once
        assert journal(lab.steps(run_id)) == before  # B's journal stands
        assert after.status == RunStatus.COMPLETED and after.last_seq == done.last_seq


def _freeze_until_b_completed(lab: FenceLab, a: Any, run_id: str) -> None:
    lab.freeze(a)
    wait_lease_expired(lab.c, run_id)
    lab.run_worker()  # B: issues the call again and completes the run
    done = lab.c.run(run_id)
    assert done.status == RunStatus.COMPLETED, f"{done.status_message}\n{lab.tail()}"
    assert done.lease_epoch == 2
