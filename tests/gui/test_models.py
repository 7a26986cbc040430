"""Every item model passes Qt's model tester, and updates in place."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.client.checks import RecoveryItem, RecoveryReport
from desktop_agent.client.views import PlanItem, RunRow, RunsDelta, StepEntry
from desktop_agent.domain import (
    AgentSpec,
    Approval,
    Run,
    RunStatus,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.gui.dialogs.recovery import RecoveryModel
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models.approvals import ApprovalListModel, ApprovalRow
from desktop_agent.gui.models.runs import (
    RunColumn,
    RunFilterProxy,
    RunListModel,
    RunRole,
    StatusFilter,
)
from desktop_agent.gui.models.steps import StepRole, StepTimelineModel

ModelTesterFixture = Any
"""pytest-qt's ``qtmodeltester`` (its module has no type hints)."""

pytestmark = pytest.mark.usefixtures("qapp")  # icons and fonts need the application


def run(i: int, status: RunStatus = RunStatus.RUNNING, **kw: Any) -> Run:
    now = time.time()
    return Run(
        id=f"run{i:03d}",
        goal=f"Goal number {i}",
        title=f"Goal number {i}",
        status=status,
        spec=AgentSpec(model="demo" if i % 2 else "claude-sonnet-4-5", system_prompt=""),
        workspace="/tmp/ws",
        created_at=now - 100 + i,
        updated_at=now - 50 + i,
        started_at=now - 90 + i,
        last_seq=i,
        cost_usd=0.01 * i,
        **kw,
    )


def entry(
    seq: int,
    kind: StepKind = StepKind.TOOL_CALL,
    status: StepStatus = StepStatus.COMPLETED,
    **kw: Any,
) -> StepEntry:
    base: dict[str, Any] = dict(
        run_id="run001",
        seq=seq,
        kind=kind,
        name="list_files" if kind == StepKind.TOOL_CALL else "demo",
        status=status,
        attempt=1,
        effect=None,
        started_at=1000.0 + seq,
        finished_at=None if status == StepStatus.STARTED else 1000.5 + seq,
        cost_usd=0.001,
        tokens=(100, 10, 0, 0),
        error=None,
        partial_text="",
        input_json='{"arguments": {"path": "."}}',
        output_json='{"content": "a.md"}' if status != StepStatus.STARTED else None,
        salvaged_json=None,
    )
    base.update(kw)
    return StepEntry(**base)


def test_run_list_model(qtmodeltester: ModelTesterFixture) -> None:
    model = RunListModel()
    rows = [RunRow(run(i), (PlanItem("a", True), PlanItem("b", False))) for i in range(5)]
    model.apply(rows, full=True)
    qtmodeltester.check(model)
    assert model.rowCount() == 5 and model.columnCount() == len(RunColumn)
    # A delta updates a row in place and appends a new one.
    changed = RunRow(run(2, RunStatus.COMPLETED))
    model.apply([changed, RunRow(run(7, RunStatus.WAITING, wait_reason=WaitReason.APPROVAL))])
    qtmodeltester.check(model)
    assert model.rowCount() == 6
    assert model.index(model.row_of("run002"), RunColumn.STATUS).data() == "Completed"
    assert model.index(model.row_of("run007"), RunColumn.STATUS).data() == "Waiting for approval"
    assert model.index(model.row_of("run001"), RunColumn.COST).data().endswith("sim.")
    assert model.index(model.row_of("run001"), RunColumn.MODEL).data() == "Demo (offline)"
    assert model.index(0, RunColumn.PROGRESS).data(RunRole.PROGRESS) == 0.5
    # A full refresh (e.g. after runs were archived) removes rows without a reset.
    resets: list[bool] = []
    model.modelReset.connect(lambda: resets.append(True))
    model.apply([RunRow(run(1)), changed], full=True)
    qtmodeltester.check(model)
    assert model.rowCount() == 2 and not resets
    assert model.row_of("run007") == -1 and model.row_of("run002") >= 0


def test_archived_runs_leave_the_list_one_span_at_a_time(
    qtmodeltester: ModelTesterFixture,
) -> None:
    model = RunListModel()
    model.apply([RunRow(run(i)) for i in range(50)], full=True)
    removed: list[tuple[int, int]] = []
    model.rowsRemoved.connect(lambda _parent, first, last: removed.append((first, last)))
    gone = {*range(10, 40), 45}
    model.apply([RunRow(run(i)) for i in range(50) if i not in gone], full=True)
    qtmodeltester.check(model)
    assert sorted(removed) == [(10, 39), (45, 45)]
    left = [model.index(i, 0).data(RunRole.RUN_ID) for i in range(model.rowCount())]
    assert left == [run(i).id for i in range(50) if i not in gone]


def test_run_filter_proxy(qtmodeltester: ModelTesterFixture) -> None:
    model = RunListModel()
    model.apply(
        [
            RunRow(run(1, RunStatus.RUNNING)),
            RunRow(run(2, RunStatus.COMPLETED)),
            RunRow(run(3, RunStatus.NEEDS_ATTENTION, status_message="decide")),
            RunRow(run(4, RunStatus.WAITING, wait_reason=WaitReason.APPROVAL)),
        ],
        full=True,
    )
    proxy = RunFilterProxy()
    proxy.setSourceModel(model)
    qtmodeltester.check(proxy)
    proxy.set_preset(StatusFilter.ACTIVE)
    assert proxy.rowCount() == 3
    proxy.set_preset(StatusFilter.NEEDS_ME)
    assert proxy.rowCount() == 2
    proxy.set_status(RunStatus.COMPLETED)
    assert proxy.rowCount() == 1
    proxy.set_status(None)
    proxy.set_text("NUMBER 3")
    assert proxy.rowCount() == 1
    qtmodeltester.check(proxy)


def test_step_timeline_model(qtmodeltester: ModelTesterFixture) -> None:
    model = StepTimelineModel()
    model.reset(
        "run001",
        [entry(1, StepKind.MODEL_CALL, StepStatus.FAILED), entry(2, StepKind.MODEL_CALL), entry(3)],
    )
    qtmodeltester.check(model)
    assert model.retried(0) and not model.retried(1)
    assert model.index(0).data(StepRole.RETRIED) is True
    assert model.resume_seq() == 4
    # An open model call streams: it is the row to read again and the one to show live.
    added = model.merge([entry(4, StepKind.MODEL_CALL, StepStatus.STARTED, partial_text="Think")])
    assert added == 1 and model.resume_seq() == 4
    streaming = model.streaming()
    assert streaming is not None and streaming.partial_text == "Think"
    assert model.index(3).data(StepRole.SUMMARY) == "Think"
    model.merge([entry(4, StepKind.MODEL_CALL, StepStatus.STARTED, partial_text="Thinking more")])
    assert model.index(3).data(StepRole.SUMMARY) == "Thinking more"
    model.merge([replace(entry(4, StepKind.MODEL_CALL), output_json='{"content": []}'), entry(5)])
    assert model.streaming() is None and model.resume_seq() == 6
    qtmodeltester.check(model)


def test_approval_list_model(qtmodeltester: ModelTesterFixture) -> None:
    model = ApprovalListModel()
    a = Approval(
        id="r.2.1",
        run_id="r",
        seq=2,
        tool="write_file",
        arguments={"path": "report.md", "content": "x" * 500},
        rule="would overwrite",
        created_at=time.time() - 30,
        deadline=time.time() + 600,
    )
    b = replace(a, id="r.5.1", seq=5)
    model.set_rows([ApprovalRow(a, "Run"), ApprovalRow(b, "Run")])
    qtmodeltester.check(model)
    assert model.index(0, 5).data().endswith("left")
    assert "…" in model.index(0, 2).data()
    model.set_rows([ApprovalRow(b, "Run")])
    assert model.rowCount() == 1 and model.approval_at(0).id == "r.5.1"
    qtmodeltester.check(model)


def test_recovery_model(qtmodeltester: ModelTesterFixture) -> None:
    before = run(1, RunStatus.RUNNING, lease_owner="host:1:dead")
    report = RecoveryReport(
        (),
        (
            RecoveryItem(before, True, "worker pid 1 stopped while it held this run"),
            RecoveryItem(
                run(2, RunStatus.NEEDS_ATTENTION, status_message="decide"), False, "decide"
            ),
        ),
    )
    model = RecoveryModel(report)
    qtmodeltester.check(model)
    assert model.index(0, 2).data() == "waiting for a worker"
    model.update_runs([RunRow(replace(before, lease_owner="host:2:new"))])
    assert model.index(0, 2).data() == "resumed"
    assert model.index(1, 2).data() == "needs you"
    qtmodeltester.check(model)


def test_the_window_forgets_the_notice_state_of_runs_gone_from_the_list(
    qtbot: QtBot, window: MainWindow
) -> None:
    """Left open for weeks, the window must not keep something for every run it ever saw."""
    window.poller.stop()
    qtbot.waitUntil(lambda: not window.poller.busy, timeout=10_000)
    seen = [RunRow(run(i)) for i in range(1, 6)]
    window._on_poller_runs_changed(RunsDelta((1, 0.0, 5, 0), tuple(seen), True, ()))
    # Runs 2-5 finish and are archived: the next full poll lists run 1 only.
    window._on_poller_runs_changed(RunsDelta((2, 0.0, 1, 0), tuple(seen[:1]), True, ()))
    assert window.runs_model.rowCount() == 1
    assert set(window.notices.states or {}) == {"run001"}
