"""Claude Code sessions imported as runs: timeline, usage, search, export, and growth.

The sessions are written in Claude Code's format by ``tests/helpers/claude_code_sessions``
and read through the Claude Agent SDK's own functions, as the import reads real ones.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from desktop_agent.agents.claude_code import SYNTHETIC_MODEL, run_ids_of
from desktop_agent.client.api import Client
from desktop_agent.client.claude_code import import_claude_code, price
from desktop_agent.client.compare import compare_runs
from desktop_agent.client.export import export
from desktop_agent.client.views import RunRow, step_summary, timeline_entries
from desktop_agent.domain import RunStatus, StepKind, StepStatus, Usage
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.gui.models.runs import RunColumn, RunListModel
from desktop_agent.gui.widgets.header import RunHeader
from desktop_agent.persistence.tables import run_events
from tests.helpers.claude_code_sessions import (
    ClaudeCodeFolder,
    research_session,
    text,
    tool_use,
    usage,
)


def _only_run(client: Client) -> str:
    runs = [r for r in client.runs() if r.spec.agent == "claude-code"]
    assert len(runs) == 1
    return runs[0].id


def test_a_session_is_a_read_only_run_of_its_own_kind_with_its_steps_in_order(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    session = research_session(claude_home, tmp_path / "proj")
    summary = import_claude_code(client)
    assert (summary.count("new"), summary.steps_added) == (1, 10)
    run = client.run(_only_run(client))
    assert run.id == run_ids_of(session.session_id)[0] and len(run.id) == 10
    assert (run.spec.agent, run.spec.session_id) == ("claude-code", session.session_id)
    assert run.status is RunStatus.COMPLETED and run.lease_owner is None
    assert run.goal == "Find out why the integration tests are flaky and summarise it"
    assert run.workspace == str((tmp_path / "proj").resolve())
    assert run.model == "claude-sonnet-4-5-20250929"
    assert run.created_at == pytest.approx(1_790_000_003.0)
    assert run.finished_at == pytest.approx(session.clock)
    steps = client.steps(run.id)
    assert [(s.kind, s.name) for s in steps] == [
        (StepKind.MODEL_CALL, "claude-sonnet-4-5-20250929"),
        (StepKind.TOOL_CALL, "Grep"),
        (StepKind.MODEL_CALL, "claude-sonnet-4-5-20250929"),
        (StepKind.TOOL_CALL, "Bash"),
        (StepKind.MODEL_CALL, "claude-sonnet-4-5-20250929"),
        (StepKind.TOOL_CALL, "Task"),
        (StepKind.MODEL_CALL, "claude-haiku-4-5-20251001"),  # the Explore subagent
        (StepKind.TOOL_CALL, "Read"),
        (StepKind.MODEL_CALL, "claude-haiku-4-5-20251001"),
        (StepKind.MODEL_CALL, "claude-sonnet-4-5-20250929"),
    ]
    assert [s.seq for s in steps] == list(range(1, 11))
    starts = [s.started_at for s in steps]
    assert starts == sorted(starts)
    assert all(s.status is StepStatus.COMPLETED for s in steps)
    first = steps[0].output
    assert [b["type"] for b in first["content"]] == ["thinking", "text", "tool_use"]
    assert "signature" not in first["content"][0]
    assert steps[1].input == {
        "tool_use_id": "toolu_grep01",
        "arguments": {"pattern": "retry", "path": "tests"},
    }
    assert steps[3].output["content"].startswith("2 failed, 40 passed")
    # The subagent's steps say whose they are; the Task call spans them.
    assert steps[6].input["agent"] == "Explore" and steps[7].input["agent_id"] == "a1b2c3"
    task, sub_first, sub_last = steps[5], steps[6], steps[8]
    assert task.finished_at is not None and sub_last.finished_at is not None
    assert task.started_at <= sub_first.started_at <= sub_last.finished_at <= task.finished_at
    # The timeline's lines: what each call was about, and whose a subagent's steps are.
    lines = [step_summary(e) for e in timeline_entries(client, run.id)]
    assert (
        lines[3] == "Bash pytest -q tests/integration → 2 failed, 40 passed: fourteen flaky "
        "assertions in test_sync.py"
    )
    assert lines[6] == "Explore ›  → Read" and lines[7].startswith("Explore › Read /")
    # Nothing waits for a worker: no command, no wake time, no lease.
    assert client.store.runnable_runs(time.time() + 3600) == []


def test_usage_sums_the_reported_tokens_and_prices_them(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    research_session(claude_home, tmp_path / "proj")
    import_claude_code(client)
    run = client.run(_only_run(client))
    steps = client.steps(run.id)
    first = steps[0]
    assert first.usage == Usage(10, 120, 2048, 0)
    assert first.output["api"] == {"cache_write_1h": 2048, "cache_write_5m": 0}
    assert first.cost_usd == pytest.approx(
        price(first.name, first.usage, 2048, first.finished_at or 0)
    )
    assert first.cost_usd > price(first.name, first.usage, 0, first.finished_at or 0)  # 1h writes
    total = Usage()
    for s in steps:
        total = total + s.usage
    assert run.usage == total == Usage(99, 345, 2048, 7368)
    assert run.cost_usd == pytest.approx(sum(s.cost_usd for s in steps))
    spent = client.usage(0.0)
    assert spent.total.cost_usd == pytest.approx(run.cost_usd)
    assert set(spent.by_model) == {run.model}  # usage groups a run under its model


def test_search_export_and_compare_read_an_imported_session(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    research_session(claude_home, tmp_path / "proj")
    research_session(claude_home, tmp_path / "other", start=1_790_100_000.0)
    import_claude_code(client)
    hits = client.search('"fourteen flaky assertions"')
    assert [(h.kind, h.tool) for h in hits] == [("tool_call", "Bash")] * 2
    assert client.search('"connection pool of eight"')  # a subagent's tool result
    a, b = sorted(r.id for r in client.runs())
    _run, html = export(client, a, "html")
    assert "fourteen flaky assertions" in html and "Grep" in html
    _run, md = export(client, a, "md")
    assert "Find out why the integration tests are flaky" in md
    same = compare_runs(client, a, b)
    assert len(same.rows) == 10


def test_a_session_that_grew_adds_only_what_is_new(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    session = research_session(claude_home, tmp_path / "proj")
    import_claude_code(client)
    run_id = _only_run(client)
    before = client.steps(run_id)
    session.user("Now fix the pool size")
    session.assistant(
        text("Raising it."),
        tool_use("Edit", {"file_path": "db.py", "old_string": "8", "new_string": "32"}, "toolu_e1"),
        spent=usage(20, 50, 0, 2400),
    )
    grown = import_claude_code(client)
    assert (grown.count("grown"), grown.steps_added, grown.steps_completed) == (1, 3, 0)
    steps = client.steps(run_id)
    assert steps[: len(before)] == before
    added = steps[len(before) :]
    assert [(s.kind, s.name, s.status) for s in added] == [
        (StepKind.STEER, "prompt", StepStatus.COMPLETED),
        (StepKind.MODEL_CALL, "claude-sonnet-4-5-20250929", StepStatus.COMPLETED),
        (StepKind.TOOL_CALL, "Edit", StepStatus.STARTED),  # Claude Code is running it
    ]
    assert added[0].input["text"] == "Now fix the pool size"
    lines = [step_summary(e) for e in timeline_entries(client, run_id, added[0].seq)]
    assert lines == [
        "prompt: Now fix the pool size",
        "Raising it.  → Edit",
        "Edit db.py → running…",
    ]
    # The result arrives: the open call gets its outcome, nothing is appended.
    session.result("toolu_e1", "The file db.py has been updated.")
    again = import_claude_code(client)
    assert (again.steps_added, again.steps_completed) == (0, 1)
    edit = client.step(run_id, added[2].seq)
    assert edit.status is StepStatus.COMPLETED and edit.output["content"].startswith("The file")
    assert client.search('"has been updated"')  # indexed again once completed
    assert client.run(run_id).last_seq == len(steps)


def test_a_compacted_session_keeps_what_came_before_and_adds_the_summary(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    session = research_session(claude_home, tmp_path / "proj")
    import_claude_code(client)
    run_id = _only_run(client)
    session.compact("Summary: the integration tests share a pool of eight connections.")
    session.user("Go on with the fix")
    session.assistant(text("Fixing."), spent=usage(10, 5, 0, 900))
    (grown,) = import_claude_code(client).sessions
    assert (grown.outcome, grown.steps_added) == ("grown", 3)
    steps = client.steps(run_id)
    assert len(steps) == 13  # the steps before the compaction stay
    summary, prompt, answer = steps[10:]
    assert (summary.kind, summary.output["mode"]) == (StepKind.COMPACTION, "client")
    assert summary.output["summary"].startswith("Summary: the integration tests")
    assert (prompt.kind, prompt.input["text"]) == (StepKind.STEER, "Go on with the fix")
    assert answer.kind is StepKind.MODEL_CALL
    assert (
        client.run(run_id).goal == "Find out why the integration tests are flaky and summarise it"
    )


def test_an_unchanged_session_writes_nothing_and_its_files_are_never_touched(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    research_session(claude_home, tmp_path / "proj")
    files = claude_home.files()
    import_claude_code(client)
    assert claude_home.files() == files  # bytes and modification times
    run_id = _only_run(client)
    token = client.store.change_token()
    row = client.run(run_id)
    with client.store.db.read() as conn:
        events = conn.execute(run_events.select()).all()
    again = import_claude_code(client)
    assert (again.count("unchanged"), again.steps_added) == (1, 0)
    assert client.store.change_token() == token
    assert client.run(run_id) == row
    with client.store.db.read() as conn:
        assert conn.execute(run_events.select()).all() == events
    assert client.events(run_id) == []  # the import's cursor is bookkeeping, not an event
    assert claude_home.files() == files


def test_parallel_calls_a_reported_cost_and_a_title(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    s = claude_home.session(tmp_path / "proj")
    s.user("Read both files")
    s.assistant(
        tool_use("Read", {"file_path": "a.txt"}, "toolu_a"),
        tool_use("Read", {"file_path": "b.txt"}, "toolu_b"),
        cost_usd=0.25,
    )
    s.result("toolu_a", "alpha")
    s.result("toolu_b", "beta")
    s.assistant(text("Both read."), model=SYNTHETIC_MODEL, spent=usage(0, 0))
    s.title("Two files")
    import_claude_code(client)
    run = client.run(_only_run(client))
    assert run.title == "Two files"
    steps = client.steps(run.id)
    assert [(s.name, (s.output or {}).get("content")) for s in steps if s.kind == "tool_call"] == [
        ("Read", "alpha"),
        ("Read", "beta"),
    ]
    calls = [s for s in steps if s.kind == StepKind.MODEL_CALL]
    assert calls[0].cost_usd == pytest.approx(0.25)  # Claude Code's costUSD, not ours
    assert calls[1].cost_usd == 0.0 and run.model == "claude-sonnet-4-5-20250929"


def test_project_since_and_clear_errors(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    research_session(claude_home, tmp_path / "one")
    research_session(claude_home, tmp_path / "two")
    one = import_claude_code(client, project=tmp_path / "one")
    assert len(one.sessions) == 1
    assert client.run(one.sessions[0].run_id).workspace == str((tmp_path / "one").resolve())
    assert import_claude_code(client, since=time.time() + 3600).sessions == ()
    with pytest.raises(InvalidInputError, match="is not a folder"):
        import_claude_code(client, project=tmp_path / "nowhere")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "no-claude"))
    with pytest.raises(InvalidInputError, match="no Claude Code sessions folder at"):
        import_claude_code(client)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_home.root))
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)
    with pytest.raises(InvalidInputError, match=r"pip install 'desktop-agent\[agents\]'"):
        import_claude_code(client)


def test_the_run_list_and_the_header_say_it_is_a_read_only_claude_code_session(
    qtbot: QtBot, client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    session = research_session(claude_home, tmp_path / "proj")
    import_claude_code(client)
    row = RunRow(client.run(_only_run(client)))
    model = RunListModel()
    model.apply([row], full=True)
    shown = model.data(model.index(0, RunColumn.MODEL))
    assert shown.startswith("Claude Code · ")
    tip = model.data(model.index(0, RunColumn.GOAL), Qt.ItemDataRole.ToolTipRole)
    assert f"Claude Code session {session.session_id[:8]} · read-only" in tip
    header = RunHeader()
    qtbot.addWidget(header)
    header.show_row(row)
    assert "Claude Code session" in header.details.text() and "read-only" in header.details.text()
    assert header.model.text().startswith("Claude Code · ")
    assert "thinking" not in header.model.text()  # our loop's settings say nothing of it
