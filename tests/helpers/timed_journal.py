"""A journal that looks like a real run on a time axis: minutes of work, waits, a sleep.

The store stamps steps with its clock; a store over the same database with a clock the
test moves writes steps spread over an afternoon (an approval answered half an hour later,
a rate limit, a timer, a crash that a second attempt salvaged) in milliseconds.
"""

from __future__ import annotations

from desktop_agent.client.api import Client
from desktop_agent.domain import EffectClass, RunStatus, StepKind, StepStatus, Usage
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome
from desktop_agent.persistence.store import SqlStore


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def timed_store(client: Client, clock: Clock) -> SqlStore:
    """A store over the client's database stamping steps with ``clock``."""
    return SqlStore(client.store.db, clock=clock)


def model_call(
    store: SqlStore,
    clock: Clock,
    run_id: str,
    seq: int,
    seconds: float,
    *,
    failed: str | None = None,
    salvaged: bool = False,
) -> None:
    """A model call that took ``seconds`` (``failed``: its error code)."""
    store.commit(run_id, intents=[StepIntent(seq, StepKind.MODEL_CALL, "demo", {"model": "demo"})])
    if salvaged:
        store.restart_step(run_id, seq, salvaged="Half a thought before the crash")
    clock.advance(seconds)
    if failed:
        outcome = StepOutcome(
            seq, StepStatus.FAILED, {"partial": "", "error_code": failed}, f"{failed} (429)"
        )
    else:
        content = [
            {"type": "text", "text": f"Looking at part {seq} of the sources."},
            {"type": "tool_use", "id": f"tu{seq}", "name": "read_file", "input": {"path": "a"}},
        ]
        outcome = StepOutcome(
            seq, StepStatus.COMPLETED, {"content": content}, usage=Usage(900, 40), cost_usd=0.002
        )
    store.commit(run_id, outcome=outcome)


def tool_call(
    store: SqlStore,
    clock: Clock,
    run_id: str,
    seq: int,
    name: str,
    seconds: float,
    *,
    failed: bool = False,
) -> None:
    """A tool call that took ``seconds``."""
    store.commit(
        run_id,
        intents=[
            StepIntent(
                seq,
                StepKind.TOOL_CALL,
                name,
                {"tool_use_id": f"tu{seq - 1}", "arguments": {"path": "a.md"}},
                effect=EffectClass.READ_ONLY,
            )
        ],
    )
    clock.advance(seconds)
    status = StepStatus.FAILED if failed else StepStatus.COMPLETED
    output = {"content": "connection reset" if failed else "alpha " * 10, "is_error": failed}
    store.commit(run_id, outcome=StepOutcome(seq, status, output))


def wait_step(
    store: SqlStore, clock: Clock, run_id: str, seq: int, kind: StepKind, seconds: float | None
) -> None:
    """A wait (approval, sleep, question, budget) that lasted ``seconds`` (None: still open)."""
    inputs = {
        StepKind.APPROVAL: {"requests": [{"name": "write_file", "rule": "ask"}]},
        StepKind.SLEEP: {"until": clock.now + (seconds or 600), "from": clock.now},
        StepKind.QUESTION: {"question": "Which year?"},
        StepKind.BUDGET: {},
    }[kind]
    store.commit(
        run_id,
        intents=[StepIntent(seq, kind, kind.value, inputs)],
        patch=RunPatch(status=RunStatus.WAITING),
    )
    if seconds is None:
        return
    clock.advance(seconds)
    store.commit(
        run_id,
        outcome=StepOutcome(seq, StepStatus.COMPLETED, {"decisions": [], "content": "ok"}),
        patch=RunPatch(status=RunStatus.RUNNING),
    )


def write_afternoon(client: Client, run_id: str, clock: Clock, *, finish: bool = True) -> int:
    """An afternoon's run: work, an approval, a rate limit, a timer, a crash; its last seq."""
    store = timed_store(client, clock)
    store.commit(run_id, patch=RunPatch(status=RunStatus.RUNNING, started_at=clock.now))
    model_call(store, clock, run_id, 1, 4.2)
    tool_call(store, clock, run_id, 2, "read_file", 0.4)
    model_call(store, clock, run_id, 3, 6.0)
    tool_call(store, clock, run_id, 4, "web_fetch", 2.5, failed=True)
    tool_call(store, clock, run_id, 5, "web_fetch", 1.8)
    model_call(store, clock, run_id, 6, 5.1)
    wait_step(store, clock, run_id, 7, StepKind.APPROVAL, 1500.0)
    tool_call(store, clock, run_id, 8, "write_file", 0.3)
    model_call(store, clock, run_id, 9, 1.0, failed="rate_limited")
    clock.advance(240.0)
    model_call(store, clock, run_id, 10, 7.5)
    wait_step(store, clock, run_id, 11, StepKind.SLEEP, 900.0)
    model_call(store, clock, run_id, 12, 9.0, salvaged=True)
    tool_call(store, clock, run_id, 13, "read_file", 0.6)
    model_call(store, clock, run_id, 14, 3.0)
    wait_step(store, clock, run_id, 15, StepKind.QUESTION, 300.0)
    model_call(store, clock, run_id, 16, 12.0)
    tool_call(store, clock, run_id, 17, "write_file", 0.5)
    if finish:
        model_call(store, clock, run_id, 18, 4.0)
        store.commit(run_id, patch=RunPatch(status=RunStatus.COMPLETED, finished_at=clock.now))
        return 18
    return 17
