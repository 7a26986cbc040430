"""Long journals written straight into the store, for tests that need a big run quickly.

The steps cycle through what a real run records, so that painting them exercises every
branch of the timeline's delegate: finished model and tool calls, a failed and retried
tool call, a salvaged model call, a steer note, a sleep, and, last, an approval still open.
"""

from __future__ import annotations

import time

from desktop_agent.client.api import Client
from desktop_agent.domain import EffectClass, RunStatus, StepKind, StepStatus, Usage
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome


def _model_call(client: Client, run_id: str, seq: int, *, salvaged: bool = False) -> None:
    store = client.store
    content = [
        {"type": "text", "text": f"Looking at part {seq} of the sources."},
        {"type": "tool_use", "id": f"tu{seq}", "name": "read_file", "input": {"path": "a.md"}},
    ]
    store.commit(run_id, intents=[StepIntent(seq, StepKind.MODEL_CALL, "demo", {"model": "demo"})])
    if salvaged:  # a crash interrupted the first attempt: its text is kept
        store.restart_step(run_id, seq, salvaged="Half a thought before the crash")
    output = {"content": content, "stop_reason": "tool_use"}
    store.commit(
        run_id,
        outcome=StepOutcome(
            seq, StepStatus.COMPLETED, output, usage=Usage(1200, 40), cost_usd=0.0014
        ),
    )


def _tool_call(client: Client, intent: StepIntent, run_id: str) -> None:
    """A tool call recorded whole (intent and outcome in one record)."""
    client.store.commit(run_id, intents=[intent])


def write_long_run(client: Client, run_id: str, steps: int, *, open_approval: bool = True) -> None:
    """Give ``run_id`` a journal of ``steps`` steps of every kind the timeline draws.

    Args:
        client: the client whose store is written.
        run_id: a run that has no steps yet.
        steps: how many steps to write.
        open_approval: end with an approval that is still waiting (the run then waits).
    """
    store = client.store
    store.commit(run_id, patch=RunPatch(status=RunStatus.RUNNING, started_at=time.time()))
    last = steps - 1 if open_approval else steps
    for seq in range(1, last + 1):
        phase = seq % 10
        if phase in (1, 3, 5):
            _model_call(client, run_id, seq, salvaged=phase == 5)
        elif phase in (7, 8):  # a fetch that failed, then its retry that worked
            failed = phase == 7
            _tool_call(
                client,
                StepIntent(
                    seq,
                    StepKind.TOOL_CALL,
                    "web_fetch",
                    {"tool_use_id": f"tu{seq}", "arguments": {"url": "https://example.org"}},
                    effect=EffectClass.READ_ONLY,
                    attempt=1 if failed else 2,
                    status=StepStatus.FAILED if failed else StepStatus.COMPLETED,
                    output={
                        "content": "connection reset" if failed else "the page, second try",
                        "is_error": failed,
                    },
                ),
                run_id,
            )
        elif phase == 9:
            kind, name = (StepKind.STEER, "steer") if seq % 20 == 9 else (StepKind.SLEEP, "sleep")
            store.commit(
                run_id,
                intents=[StepIntent(seq, kind, name, {"text": "look at 2026", "seconds": 5})],
            )
            store.commit(run_id, outcome=StepOutcome(seq, StepStatus.COMPLETED, {}))
        else:
            _tool_call(
                client,
                StepIntent(
                    seq,
                    StepKind.TOOL_CALL,
                    "read_file",
                    {"tool_use_id": f"tu{seq - 1}", "arguments": {"path": "a.md"}},
                    effect=EffectClass.READ_ONLY,
                    status=StepStatus.COMPLETED,
                    output={"content": "alpha " * 20, "is_error": False},
                ),
                run_id,
            )
    if open_approval:
        store.commit(
            run_id,
            intents=[
                StepIntent(
                    steps,
                    StepKind.APPROVAL,
                    "write_file",
                    {"tool": "write_file", "arguments": {"path": "report.md"}},
                )
            ],
            patch=RunPatch(status=RunStatus.PAUSED, status_message="written by a test"),
        )
