"""``desktop-agent hook claude-code``: Claude Code's tool calls decided in desktop-agent's inbox.

The hook runs as Claude Code runs it: a child process given the documented ``PreToolUse``
JSON on standard input, whose standard output Claude Code reads. The test decides through
the client, as the inbox does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.claude_code import import_claude_code
from desktop_agent.domain import (
    Approval,
    ApprovalState,
    RunStatus,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.persistence.imported_sessions import ImportedSessions
from desktop_agent.worker.compose import build_executor
from tests.conftest import drain
from tests.helpers.claude_code_sessions import ClaudeCodeFolder, Transcript, research_session
from tests.helpers.polling import wait_for

REPO = Path(__file__).resolve().parents[2]


def _call(session: Transcript, tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps(
        {
            "session_id": session.session_id,
            "transcript_path": str(session.path),
            "cwd": str(session.cwd),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": arguments,
            "tool_use_id": "toolu_hook01",
        }
    )


def _hook(db: Path, claude_home: ClaudeCodeFolder, call: str, *args: str) -> subprocess.Popen[str]:
    """The hook started as Claude Code starts it, given ``call`` on its standard input."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESKTOP_AGENT_DB")}
    env["CLAUDE_CONFIG_DIR"] = str(claude_home.root)
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), "hook", "claude-code", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert proc.stdin is not None
    proc.stdin.write(call)
    proc.stdin.close()
    proc.stdin = None
    return proc


def _asked(client: Client, proc: subprocess.Popen[str]) -> str:
    """The id of the approval the hook opened (it waits for it)."""

    def asked() -> str | None:
        pending = client.approvals()
        if pending:
            return pending[0].id
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the hook ended without asking: {out!r} {err!r}")
        return None

    try:
        return wait_for(asked, 90, "the hook asked for an approval")
    except AssertionError:
        proc.kill()
        proc.communicate()
        raise


def _answer(proc: subprocess.Popen[str]) -> dict[str, Any] | None:
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    return json.loads(out) if out.strip() else None


@pytest.fixture
def session(claude_home: ClaudeCodeFolder, tmp_path: Path) -> Transcript:
    return research_session(claude_home, tmp_path / "proj")


def test_a_call_the_rules_let_through_ends_at_once_with_no_output(
    claude_home: ClaudeCodeFolder, session: Transcript, tmp_path: Path
) -> None:
    db = tmp_path / "fresh" / "desktop-agent.db"
    proc = _hook(db, claude_home, _call(session, "Read", {"file_path": str(session.cwd / "db.py")}))
    assert _answer(proc) is None
    assert not db.exists()  # no database opened, no run made: Claude Code's permissions apply
    # Set up under another event: said on standard error, exit 1 (Claude Code goes on).
    wrong = _hook(db, claude_home, json.dumps({"hook_event_name": "PostToolUse"}))
    out, err = wrong.communicate(timeout=90)
    assert (wrong.returncode, out) == (1, "")
    assert "configure it under PreToolUse" in err


def test_an_approval_edited_in_the_inbox_lets_the_call_run_as_edited(
    client: Client, claude_home: ClaudeCodeFolder, session: Transcript
) -> None:
    proc = _hook(
        client.db_path,
        claude_home,
        _call(session, "Bash", {"command": "rm -rf build", "description": "Clean"}),
        "--timeout",
        "120",
    )
    approval_id = _asked(client, proc)
    approval = client.store.get_approval(approval_id)
    assert approval.tool == "Bash" and approval.arguments["command"] == "rm -rf build"
    assert approval.rule == "Bash acts on the outside world and cannot be undone"
    assert "time out under load" in approval.reason  # what the model said last
    run = client.run(approval.run_id)
    assert run.spec.session_id == session.session_id and len(client.steps(run.id)) == 11
    assert (run.status, run.wait_reason, run.wake_at) == (
        RunStatus.WAITING,
        WaitReason.APPROVAL,
        None,
    )
    assert "Claude Code asks to run Bash" in run.status_message
    step = client.step(run.id, approval.seq)
    assert (step.kind, step.status) == (StepKind.APPROVAL, StepStatus.STARTED)
    assert client.store.runnable_runs(time.time() + 3600) == []  # it waits for the analyst
    # No worker here: the waiting hook applies the decision itself.
    client.approve(approval_id, {"command": "rm -rf build/tmp"}, "only the temporary files")
    answer = _answer(proc)
    assert answer == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "Approved in desktop-agent with edited arguments: "
            "only the temporary files",
            "updatedInput": {"command": "rm -rf build/tmp"},
        }
    }
    decided = client.store.get_approval(approval_id)
    assert decided.state is ApprovalState.EDITED and decided.decided_arguments == {
        "command": "rm -rf build/tmp"
    }
    assert client.run(run.id).status is RunStatus.COMPLETED
    closed = client.step(run.id, approval.seq)
    assert closed.status is StepStatus.COMPLETED
    assert closed.output["decisions"][0]["state"] == "edited"
    assert not client.store.pending_commands(run.id)


def test_a_rejection_denies_the_call_with_the_analysts_reason(
    client: Client, claude_home: ClaudeCodeFolder, session: Transcript
) -> None:
    (session.cwd / "notes.md").write_text("old notes\n")
    proc = _hook(
        client.db_path,
        claude_home,
        _call(session, "Write", {"file_path": "notes.md", "content": "new notes\n"}),
    )
    approval_id = _asked(client, proc)
    assert client.store.get_approval(approval_id).rule == "would overwrite notes.md (10 bytes)"
    client.reject(approval_id, "keep my notes")
    answer = _answer(proc)
    assert answer is not None
    out = answer["hookSpecificOutput"]
    assert (out["permissionDecision"], out["permissionDecisionReason"]) == (
        "deny",
        "Rejected in desktop-agent: keep my notes",
    )
    assert "updatedInput" not in out
    assert client.store.get_approval(approval_id).state is ApprovalState.REJECTED


def test_no_decision_in_time_applies_the_default_and_a_disabled_tool_is_denied(
    client: Client, claude_home: ClaudeCodeFolder, session: Transcript
) -> None:
    proc = _hook(
        client.db_path,
        claude_home,
        _call(session, "Bash", {"command": "make deploy"}),
        "--timeout",
        "2",
    )
    answer = _answer(proc)
    assert answer is not None and answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert (
        "no decision before the deadline"
        in answer["hookSpecificOutput"]["permissionDecisionReason"]
    )
    (expired,) = client.approvals(ApprovalState.EXPIRED)
    assert client.run(expired.run_id).status is RunStatus.COMPLETED
    never = _hook(
        client.db_path,
        claude_home,
        _call(session, "WebFetch", {"url": "https://example.org"}),
        "--never",
        "WebFetch",
    )
    denied = _answer(never)
    assert denied is not None
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert (
        "disabled by the analyst's policy"
        in denied["hookSpecificOutput"]["permissionDecisionReason"]
    )


def test_a_hook_claude_code_ends_leaves_no_approval_waiting(
    client: Client, claude_home: ClaudeCodeFolder, session: Transcript
) -> None:
    proc = _hook(
        client.db_path, claude_home, _call(session, "Read", {"file_path": "db.py"}), "--ask", "Read"
    )
    approval_id = _asked(client, proc)
    proc.send_signal(signal.SIGTERM)
    out, _err = proc.communicate(timeout=60)
    assert out == ""
    gone = client.store.get_approval(approval_id)
    assert gone.state is ApprovalState.EXPIRED and "stopped waiting" in gone.decision_note
    assert client.run(gone.run_id).status is RunStatus.COMPLETED


def test_an_approval_whose_hook_was_killed_expires_at_the_next_import(
    client: Client, claude_home: ClaudeCodeFolder, session: Transcript
) -> None:
    proc = _hook(
        client.db_path, claude_home, _call(session, "Glob", {"pattern": "*.py"}), "--ask", "Glob"
    )
    approval_id = _asked(client, proc)
    proc.kill()
    proc.communicate()
    import_claude_code(client)
    assert client.store.get_approval(approval_id).state is ApprovalState.EXPIRED
    assert ImportedSessions(client.store.db).waiting_approvals("cc-") == []


def test_install_adds_the_hook_to_a_project_and_keeps_what_was_there(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi"}]}
    settings.write_text(json.dumps({"model": "opus", "hooks": {"PreToolUse": [mine]}}))
    for _ in range(2):  # installed twice: one entry
        done = subprocess.run(
            [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path), "hook",
             "claude-code", "--install", "--project", str(project), "--ask", "Read"],
            capture_output=True, text=True, cwd=REPO, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    written = json.loads(settings.read_text())
    assert written["model"] == "opus"
    first, ours = written["hooks"]["PreToolUse"]
    assert first == mine
    hook = ours["hooks"][0]
    assert hook["command"].endswith(f"--db {client.db_path} hook claude-code --ask Read")
    assert hook["timeout"] == 630
    matcher = re.compile(ours["matcher"])  # a JavaScript regular expression; Python's reads it
    assert [
        t for t in ("Bash", "Write", "mcp__x__y", "Read", "Grep", "Task") if matcher.search(t)
    ] == [
        "Bash",
        "Write",
        "mcp__x__y",
        "Read",  # asked about with --ask
    ]


def test_a_worker_never_executes_an_imported_session(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    research_session(claude_home, tmp_path / "proj")
    (imported,) = import_claude_code(client).sessions
    run_id = imported.run_id
    client.steer(run_id, "please go on")  # a note sent by mistake wakes a worker
    executor = build_executor(client.store, client.settings)
    drain(client.store, executor)
    run = client.run(run_id)
    assert run.status is RunStatus.COMPLETED, run.status_message
    assert "cannot drive" not in run.status_message
    assert len(client.steps(run_id)) == 10
    assert not client.store.pending_commands(run_id)
    assert client.store.runnable_runs(time.time() + 3600) == []


def test_a_worker_woken_by_the_decision_applies_it_for_the_waiting_hook(
    client: Client, claude_home: ClaudeCodeFolder, tmp_path: Path
) -> None:
    from desktop_agent.client.claude_code import _answer_of

    research_session(claude_home, tmp_path / "proj")
    (imported,) = import_claude_code(client).sessions
    journal = ImportedSessions(client.store.db)
    asked = Approval(
        id="",
        run_id=imported.run_id,
        seq=0,
        tool="Bash",
        arguments={"command": "make release"},
        rule="Bash acts on the outside world and cannot be undone",
        created_at=time.time(),
    )
    request = {"tool_use_id": "toolu_r1", "name": "Bash", "arguments": {"command": "make release"}}
    approval = journal.open_approval(asked, request, {}, "Claude Code asks to run Bash")
    assert approval.id == f"{imported.run_id}.11.1"
    client.approve(approval.id, {"command": "make release-dry-run"}, "dry run first")
    # The decision woke a worker (as in the app): its driver applies it, and runs nothing.
    assert client.store.runnable_runs(time.time()) == [imported.run_id]
    drain(client.store, build_executor(client.store, client.settings))
    decided = client.store.get_approval(approval.id)
    assert decided.state is ApprovalState.EDITED and decided.decision_note == "dry run first"
    run = client.run(imported.run_id)
    assert (run.status, run.wait_reason) == (RunStatus.COMPLETED, None)
    assert not client.store.pending_commands(run.id)
    assert client.step(run.id, approval.seq).output["decisions"][0]["state"] == "edited"
    assert len(client.steps(run.id)) == 11  # nothing executed
    # The hook, still waiting, reads the decision from the approval's row.
    assert _answer_of(client, approval.id)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "permissionDecisionReason": "Approved in desktop-agent with edited arguments: "
        "dry run first",
        "updatedInput": {"command": "make release-dry-run"},
    }
