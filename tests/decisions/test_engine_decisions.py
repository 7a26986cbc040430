"""The engine agrees with the client: an edit runs as edited or not at all.

Decision rows are written here straight into the commands table, as a client that does not
check (an older release, a script) would write them. The worker must refuse an edit that
cannot run and keep the approval pending; above all it must never read an edit of ``null``
as "approve the original call".
"""

from __future__ import annotations

from desktop_agent.domain import ApprovalState, CommandKind, RunStatus
from tests.decisions.conftest import EDITED, PROPOSED, Waiting


def _write_decision(waiting: Waiting, payload: dict[str, object]) -> int:
    return waiting.client.store.add_command(
        waiting.run_id, CommandKind.APPROVE, {"approval_id": waiting.approval.id, **payload}
    )


def test_unchecked_edits_are_refused_by_the_worker_and_the_original_is_never_sent(
    waiting: Waiting,
) -> None:
    bad = [
        None,
        [EDITED],
        {},
        {**EDITED, "bcc": ["leak@evil.test"]},
        {**EDITED, "to": "team@example.test"},
    ]
    ids = [_write_decision(waiting, {"arguments": args, "reason": ""}) for args in bad]
    waiting.drain()
    for command_id in ids:
        result = waiting.client.store.get_command(command_id).result
        assert result.startswith("refused: "), result
    assert waiting.client.store.get_approval(waiting.approval.id).state == ApprovalState.PENDING
    assert waiting.client.run(waiting.run_id).status == RunStatus.WAITING
    assert waiting.recipients() == []

    good = _write_decision(waiting, {"arguments": EDITED, "reason": "fixed"})
    waiting.drain()
    assert waiting.client.store.get_command(good).result == "edited"
    assert waiting.recipients() == [["team@example.test"]]
    assert waiting.client.run(waiting.run_id).status == RunStatus.COMPLETED


def test_an_edit_whose_header_check_fails_is_stopped_by_the_pre_run_check(
    waiting: Waiting,
) -> None:
    """Shape and schema pass, the pre-run check does not: no intent, no effect, the model reads why.

    Caught only at send time, the call would first be journaled as an unsafe effect started
    (in doubt after a crash at that point); the pre-run check stops it before that.
    """
    injected = {**PROPOSED, "subject": "Q3\r\nBcc: leak@evil.test"}
    _write_decision(waiting, {"arguments": injected, "reason": ""})
    waiting.drain()
    assert waiting.recipients() == []
    calls = [s for s in waiting.client.steps(waiting.run_id) if s.name == "send_email"]
    (call,) = calls
    content = call.output["content"]
    assert content.startswith("Not executed: the check before running failed"), content
    assert "the subject must be one line" in content and call.output["is_error"] is True
    assert call.effect is None  # answered without an effect step
