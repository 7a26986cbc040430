"""`approve --edit` says what it did: an edit that will not run is refused before it is recorded.

Every refusal is one line on stderr with exit 2 (a JSON error under ``--json``), records no
decision, and leaves the approval pending; the worker then runs nothing the analyst did not
approve. A decision on an approval that is no longer pending (or already has a decision
queued) is refused the same way, never reported as "edited and approved".
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from desktop_agent.domain import Approval, ApprovalState, RunStatus
from desktop_agent.domain.errors import InvalidStateError
from desktop_agent.engine.ports import ToolContext
from tests.decisions.conftest import EDITED, PROPOSED, Waiting, cli, cli_main, edit

BAD_EDITS = {
    "wrong type": (
        edit({**PROPOSED, "to": "team@example.test"}),
        "to: 'team@example.test' is not of type 'array'",
    ),
    "a bad item of a list": (
        edit({**PROPOSED, "to": ["team@example.test", 7]}),
        "to[1]: 7 is not of type 'string'",
    ),
    "extra field": (
        edit({**PROPOSED, "bcc": ["x@example.test"]}),
        "Additional properties are not allowed ('bcc' was unexpected)",
    ),
    "empty object": (
        "{}",
        "'to' is a required property; 'subject' is a required property; "
        "'body' is a required property",
    ),
    "null": ("null", "the edited arguments are null"),
    "a list": (edit([PROPOSED]), "must be a JSON object, not a list"),
    "CRLF in the subject": (
        edit({**PROPOSED, "subject": "Q3\r\nBcc: leak@evil.test"}),
        "the subject must be one line",
    ),
    "RCPT TO in the address": (
        edit({**PROPOSED, "to": ["team@example.test>\r\nRCPT TO:<leak@evil.test"]}),
        "not a plain e-mail address",
    ),
    "NaN": ('{"to": ["a@example.test"], "subject": "s", "body": NaN}', "not finite"),
    "lone surrogate": (
        '{"to": ["a@example.test"], "subject": "\\ud800", "body": "b"}',
        "the string at subject contains a lone surrogate (U+D800, character 1)",
    ),
    "deep nesting": ("[" * 50_000 + "]" * 50_000, "--edit is nested too deeply"),
    "nesting past the argument depth": (
        edit({**PROPOSED, "body": json.loads("[" * 40 + "]" * 40)}),
        "nested deeper than 32 levels",
    ),
}


def _assert_refused(code: int, out: str, err: str, message: str) -> None:
    assert code == 2, (out, err)
    assert out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("desktop-agent: error: ")
    assert message in line
    for leak in ("internal error", "Error:", "Traceback", "edited and approved"):
        assert leak not in line


@pytest.mark.parametrize("bad", BAD_EDITS.values(), ids=list(BAD_EDITS))
def test_an_edit_that_will_not_run_is_refused_in_one_line_and_not_recorded(
    waiting: Waiting, capsys: pytest.CaptureFixture[str], bad: tuple[str, str]
) -> None:
    text, message = bad
    code, out, err = cli_main(
        capsys, waiting.client.db_path, "approve", waiting.approval.id, "--edit", text
    )
    _assert_refused(code, out, err, message)
    assert waiting.queued() == []
    assert waiting.client.store.get_approval(waiting.approval.id).state == ApprovalState.PENDING

    code, out, err = cli_main(
        capsys, waiting.client.db_path, "approve", waiting.approval.id, "--edit", text, "--json"
    )
    assert code == 2 and err == ""
    answer = json.loads(out)
    assert message in answer["error"] and answer["code"] in ("edit_refused", "invalid_input")
    assert waiting.queued() == []


def test_refused_edits_send_nothing_and_the_right_edit_sends_only_itself(
    waiting: Waiting, capsys: pytest.CaptureFixture[str]
) -> None:
    db, approval_id = waiting.client.db_path, waiting.approval.id
    for text, _message in BAD_EDITS.values():
        code, _out, _err = cli_main(capsys, db, "approve", approval_id, "--edit", text)
        assert code == 2
    waiting.drain()  # a worker finds nothing to apply: the run still waits, nothing was sent
    assert waiting.client.run(waiting.run_id).status == RunStatus.WAITING
    assert waiting.recipients() == []

    code, out, err = cli_main(capsys, db, "approve", approval_id, "--edit", edit(EDITED))
    assert code == 0, err
    assert out.startswith(f"edited and approved {approval_id} (send_email)")
    waiting.drain()
    assert waiting.client.run(waiting.run_id).status == RunStatus.COMPLETED
    assert waiting.recipients() == [["team@example.test"]]
    assert waiting.client.store.get_approval(approval_id).state == ApprovalState.EDITED


def test_after_edit_null_later_decisions_say_they_are_not_pending_and_the_original_never_goes(
    waiting: Waiting,
) -> None:
    """The reported sequence: `--edit null`, then several edits, each said to be recorded."""
    db, approval_id = waiting.client.db_path, waiting.approval.id
    null = cli(db, "approve", approval_id, "--edit", "null")
    assert null.returncode == 2 and "the edited arguments are null" in null.stderr
    first = cli(db, "approve", approval_id, "--edit", edit(EDITED))
    assert first.returncode == 0, first.stderr
    assert "edited and approved" in first.stdout
    for n in range(6):
        again = cli(db, "approve", approval_id, "--edit", edit({**EDITED, "subject": f"v{n}"}))
        assert again.returncode == 2, again.stdout
        assert again.stdout == ""
        (line,) = again.stderr.strip().splitlines()
        assert f"approval {approval_id} was already edited and approved" in line
    assert len(waiting.queued()) == 1

    waiting.drain()
    assert waiting.recipients() == [["team@example.test"]]  # never the original recipient
    after = cli(db, "approve", approval_id, "--edit", edit(EDITED))
    assert after.returncode == 2
    assert f"approval {approval_id} was already edited" in after.stderr
    rejected = cli(db, "reject", approval_id, "--reason", "too late")
    assert rejected.returncode == 2 and "was already edited" in rejected.stderr


def _reject_from_another_terminal(waiting: Waiting) -> None:
    other = cli(waiting.client.db_path, "reject", waiting.approval.id, "--reason", "hold it")
    assert other.returncode == 0, other.stderr


def test_a_decision_made_elsewhere_after_the_approval_was_read_is_not_overridden(
    waiting: Waiting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pending when read, decided in another terminal before this decision is recorded."""
    client, approval_id = waiting.client, waiting.approval.id
    read = client.store.get_approval

    def read_then_decided_elsewhere(approval_id: str) -> Approval:
        found = read(approval_id)
        _reject_from_another_terminal(waiting)
        monkeypatch.setattr(client.store, "get_approval", read)
        return found

    monkeypatch.setattr(client.store, "get_approval", read_then_decided_elsewhere)
    with pytest.raises(InvalidStateError, match="was already rejected"):
        client.approve(approval_id, EDITED)
    assert [p.get("reason") for p in waiting.queued()] == ["hold it"]
    waiting.drain()
    assert waiting.recipients() == []
    assert client.store.get_approval(approval_id).state == ApprovalState.REJECTED


def test_the_record_itself_is_conditional_on_nothing_else_deciding_first(
    waiting: Waiting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decided elsewhere while the edit was being checked: the write itself refuses."""
    client, approval_id = waiting.client, waiting.approval.id
    checked = client.tool_context

    def decided_while_checking(approval: Approval) -> ToolContext | None:
        _reject_from_another_terminal(waiting)
        return checked(approval)

    monkeypatch.setattr(client, "tool_context", decided_while_checking)
    with pytest.raises(InvalidStateError, match="was already rejected"):
        client.approve(approval_id, EDITED)
    assert [p.get("reason") for p in waiting.queued()] == ["hold it"]


def test_concurrent_terminals_record_exactly_one_decision(waiting: Waiting) -> None:
    db, approval_id = waiting.client.db_path, waiting.approval.id
    edits = [edit({**EDITED, "subject": f"from terminal {n}"}) for n in range(4)]
    with ThreadPoolExecutor(len(edits)) as pool:
        results = list(pool.map(lambda e: cli(db, "approve", approval_id, "--edit", e), edits))
    told = [r for r in results if r.returncode == 0]
    assert len(told) == 1, [r.stderr for r in results]
    assert all("was already edited and approved" in r.stderr for r in results if r not in told)
    (queued,) = waiting.queued()
    waiting.drain()
    (mail,) = waiting.smtp.mails
    subject = json.loads(edits[results.index(told[0])])["subject"]
    assert queued["arguments"]["subject"] == subject  # type: ignore[index]
    assert f"Subject: {subject}".encode() in mail.data
