"""An unsafe effect in flight when a worker child process is SIGKILLed is never repeated.

The worker children load a test-only plugin (:mod:`tests.crash.unsafe_plugin`) that makes
``append_note`` unsafe and blind: executed twice, it would write its note twice. The crash
hits the first note, either after its effect (it happened; its outcome is lost) or before
it (it never happened). Either way, recovery must not execute it: the run waits for the
analyst (``needs_attention``), however many workers start. The analyst's decision then
closes it exactly once, and the run ends with one note per source.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_agent.domain import EffectClass, RunStatus, StepStatus
from desktop_agent.tools.registry import ToolRegistry, builtin_tools
from tests.crash import unsafe_plugin
from tests.crash.harness import (
    SOURCES_3,
    Lab,
    Reference,
    assert_notes_once_per_source,
    comparable,
    compare_journal,
    make_workspace,
    workspace_files,
)

pytestmark = pytest.mark.crash

PLUGIN = {"DESKTOP_AGENT_TEST_TOOLS": "tests.crash.unsafe_plugin:tools"}


@pytest.fixture
def unsafe_lab(lab: Lab) -> Lab:
    lab.env.update(PLUGIN)
    lab.client._tools = ToolRegistry([*builtin_tools(), *unsafe_plugin.tools()])
    return lab


def _note_lines(ws: Path) -> list[str]:
    notes = ws / "notes.md"
    return notes.read_text(encoding="utf-8").splitlines() if notes.exists() else []


def _crash_on_first_note(lab: Lab, ref: Reference, point: str) -> tuple[str, Path, int]:
    ws = make_workspace(lab.root / "ws", SOURCES_3)
    run_id = lab.start(ws)
    n = ref.nth("append_note", 1)
    lab.crash_at(point, n)
    seq = ref.protocol_steps[n - 1].seq
    step = lab.client.store.get_step(run_id, seq)
    assert (step.name, step.status, step.effect) == (
        "append_note",
        StepStatus.STARTED,
        EffectClass.UNSAFE,
    )
    return run_id, ws, seq


def _assert_held_for_the_analyst(lab: Lab, run_id: str, seq: int, ws: Path, notes: int) -> None:
    for _ in range(2):  # a second worker does not execute it either
        assert lab.run_worker() == 0, lab.last_log()
        run = lab.run(run_id)
        assert run.status == RunStatus.NEEDS_ATTENTION, run.status_message
        assert run.attention_seq == seq
        assert "may or may not have happened" in run.status_message
        assert lab.client.store.get_step(run_id, seq).status == StepStatus.STARTED
        assert len(_note_lines(ws)) == notes


def test_unsafe_effect_done_before_the_crash_is_not_repeated_and_probe_confirms_it(
    unsafe_lab: Lab, reference_3: Reference
) -> None:
    lab = unsafe_lab
    run_id, ws, seq = _crash_on_first_note(lab, reference_3, "after_effect")
    assert len(_note_lines(ws)) == 1  # the effect happened; its outcome was lost

    _assert_held_for_the_analyst(lab, run_id, seq, ws, notes=1)
    lab.client.resolve(run_id, "probe")
    lab.finish([run_id])

    step = lab.client.store.get_step(run_id, seq)
    assert step.attempt == 1  # never executed again
    assert isinstance(step.output, dict) and "already happened" in str(step.output["content"])
    final = lab.steps(run_id)
    others = [comparable(s) for s in final if s.seq != seq]
    assert others == [comparable(s) for s in reference_3.steps if s.seq != seq]
    files = workspace_files(ws)
    assert files == reference_3.files
    assert_notes_once_per_source(files, SOURCES_3)


def test_unsafe_effect_not_started_before_the_crash_runs_once_on_retry(
    unsafe_lab: Lab, reference_3: Reference
) -> None:
    lab = unsafe_lab
    run_id, ws, seq = _crash_on_first_note(lab, reference_3, "after_intent")
    assert _note_lines(ws) == []  # killed before the effect

    _assert_held_for_the_analyst(lab, run_id, seq, ws, notes=0)
    lab.client.resolve(run_id, "retry")
    lab.finish([run_id])

    final = lab.steps(run_id)
    assert final[seq - 1].attempt == 2
    assert [s.seq for s in final if s.attempt > 1] == [seq]
    compare_journal(final, reference_3.steps)
    files = workspace_files(ws)
    assert files == reference_3.files
    assert_notes_once_per_source(files, SOURCES_3)
