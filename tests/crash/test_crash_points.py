"""SIGKILL at each named point of the durability protocol, in a real worker process.

Each case starts the demo over three sources, runs a worker child that kills itself the
n-th time it reaches a crash point (n chosen from an uninterrupted reference run so that
the crash hits the intended step), then runs a fresh worker to the end and checks:

- no completed step lost: every step completed at the crash is still there, unchanged
  (same output, same timestamps, attempt 1);
- at most the in-flight step executed again: exactly the step left open by the crash has
  attempt 2, every other step attempt 1;
- the final journal equals the reference run's by (seq, kind, name, status, output, input),
  exactly (an idempotent effect repeated after it had happened reports what it did, like
  the attempt that died);
- the workspace is byte-identical to the reference run's, with one note per source;
- text a model call had streamed before the crash is kept as salvage of its retry.

Each crash point also shows its own mark at the kill: no snapshot yet before_snapshot,
the snapshot present after_snapshot, the streamed text persisted mid_stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from desktop_agent.domain import Step, StepStatus
from tests.crash.harness import (
    SOURCES_3,
    Lab,
    Reference,
    assert_notes_once_per_source,
    compare_journal,
    make_workspace,
    workspace_files,
)

pytestmark = pytest.mark.crash

SNAPSHOTS = {"DESKTOP_AGENT_SNAPSHOT_EVERY": "4"}


@dataclass(frozen=True)
class Case:
    """One crash: where, which occurrence, and which step it must leave open.

    Attributes:
        point: the crash point.
        target: (step name, occurrence) whose protocol step the crash is aimed at, or None
            for the first time the point is reached; occurrence -1 is the last one.
        open_step: which step the crash leaves open: ``target``, ``previous`` (the step
            before the target: its outcome was still buffered), ``next`` (its intent
            shared the target's outcome commit), ``none``, or ``any``.
        crash_env: extra environment of the crashing worker.
        env: extra environment of both workers.
    """

    point: str
    target: tuple[str, int] | None
    open_step: str
    crash_env: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def nth(self, ref: Reference) -> int:
        if self.target is None:
            return 1
        name, occurrence = self.target
        if occurrence == -1:
            occurrence = sum(s.name == name for s in ref.protocol_steps)
        return ref.nth(name, occurrence)

    def open_seqs(self, ref: Reference, n: int) -> set[int] | None:
        protocol = ref.protocol_steps
        index = {"target": n - 1, "previous": n - 2, "next": n}.get(self.open_step)
        if index is not None:
            return {protocol[index].seq}
        return set() if self.open_step == "none" else None


CASES = {
    "before-intent-first-model-call": Case("before_intent", ("demo", 1), "none"),
    "before-intent-read": Case("before_intent", ("read_file", 1), "previous"),
    "after-intent-model-call": Case("after_intent", ("demo", 2), "target"),
    "after-intent-append": Case("after_intent", ("append_note", 1), "target"),
    "after-effect-model-call": Case("after_effect", ("demo", 3), "target"),
    "after-effect-append": Case("after_effect", ("append_note", 2), "target"),
    "after-effect-overwrite": Case("after_effect", ("write_file", 2), "target"),
    "after-outcome-append": Case("after_outcome", ("append_note", 1), "next"),
    "after-outcome-final-answer": Case("after_outcome", ("demo", -1), "none"),
    "before-snapshot": Case("before_snapshot", None, "any", env=SNAPSHOTS),
    "after-snapshot": Case("after_snapshot", None, "any", env=SNAPSHOTS),
    "mid-stream": Case("mid_stream", None, "target", crash_env={"DESKTOP_AGENT_DEMO_DELAY": "0.6"}),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_crash_point(lab: Lab, reference_3: Reference, case: Case) -> None:
    ws = make_workspace(lab.root / "ws", SOURCES_3)
    run_id = lab.start(ws)
    n = case.nth(reference_3)

    lab.crash_at(case.point, n, **{**case.env, **case.crash_env})

    at_crash = lab.steps(run_id)
    done = {s.seq: s for s in at_crash if s.status != StepStatus.STARTED}
    open_steps = {s.seq: s for s in at_crash if s.status == StepStatus.STARTED}
    open_seqs = set(open_steps)
    assert len(open_seqs) <= 1
    expected_open = case.open_seqs(reference_3, n)
    if expected_open is not None:
        assert open_seqs == expected_open
    _check_at_crash(lab, reference_3, run_id, case, done, open_seqs)

    lab.finish([run_id], **case.env)

    final = lab.steps(run_id)
    by_seq = {s.seq: s for s in final}
    for seq, before in done.items():
        assert by_seq[seq] == before, f"completed step {seq} changed after the crash"
    rerun = compare_journal(final, reference_3.steps)
    assert rerun == open_seqs, "only the step in flight at the crash may run again"
    assert all(s.attempt <= 2 for s in final)
    files = workspace_files(ws)
    assert files == reference_3.files
    assert_notes_once_per_source(files, SOURCES_3)
    run = lab.run(run_id)
    assert run.last_seq == reference_3.steps[-1].seq
    assert run.cost_usd == pytest.approx(sum(s.cost_usd + s.salvaged_cost_usd for s in final))
    for seq, was_open in open_steps.items():
        # Text streamed before the crash is kept and shown (salvage), never lost.
        expected = (was_open.partial_text,) if was_open.partial_text else ()
        assert by_seq[seq].salvaged == expected


def _check_at_crash(
    lab: Lab,
    reference_3: Reference,
    run_id: str,
    case: Case,
    done: dict[int, Step],
    open_seqs: set[int],
) -> None:
    """What the crash point itself promises about the database at the moment of the kill."""
    if case.point in ("before_snapshot", "after_snapshot"):
        snap = lab.client.store.load_snapshot(run_id)
        if case.point == "before_snapshot":
            assert snap is None, "killed before the snapshot's commit: none may exist"
        else:
            assert snap is not None, "killed after the snapshot's commit: it must exist"
            assert snap.seq == max(done)
    if case.point == "mid_stream":
        (seq,) = open_seqs
        partial = lab.client.store.get_step(run_id, seq).partial_text
        assert partial, "text streamed before the crash is persisted"
        answer = _answer_text(reference_3.steps[seq - 1])
        assert answer.startswith(partial) and answer != partial, "a true prefix of the answer"
    if case.point == "after_outcome" and case.open_step == "none":
        assert lab.run(run_id).status.is_terminal


def _answer_text(step: Step) -> str:
    output = step.output if isinstance(step.output, dict) else {}
    blocks = output.get("content")
    if not isinstance(blocks, list):
        return ""
    return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))
