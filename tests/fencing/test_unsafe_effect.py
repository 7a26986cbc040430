"""A worker frozen past its lease in the middle of sending an e-mail (send_email, unsafe).

Worker A writes the intent of send_email and talks to the mail server; the test holds the
server's answer at a chosen moment and freezes A there (SIGSTOP): before the message is
handed over (the reply to RCPT is held: nothing has been sent) or after it (the server has
the message and holds its confirmation). A's lease runs out; worker B claims the run,
finds the send in doubt and asks the analyst (needs attention). The analyst decides
(``skip``, ``retry`` or ``mark_done``); another worker carries the decision out and
completes the run. Then A is continued (SIGCONT).

A must never send what the analyst skipped, never send twice, never write to the run
again (its journal and status are the new owner's), and what it did or gave up is shown
to the analyst as an event on the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from desktop_agent.domain import EffectClass, RunEventKind, RunStatus, StepStatus
from tests.fencing.harness import FenceLab, fence_lab, journal, lab_settings
from tests.fencing.sinks import GATE_TIMEOUT_S, GatedSmtp
from tests.helpers.polling import wait_lease_expired

pytestmark = pytest.mark.crash

SEND_SEQ = 2  # 1: the model call, 2: send_email


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[FenceLab]:
    with fence_lab(tmp_path, "mail") as lab:
        yield lab


@pytest.fixture
def gated_smtp() -> Iterator[Callable[[str], GatedSmtp]]:
    """Start mail servers holding their answer at a point; each is closed after the test."""
    servers: list[GatedSmtp] = []

    def start(hold: str) -> GatedSmtp:
        servers.append(GatedSmtp(hold))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _mail_settings(smtp: GatedSmtp) -> dict[str, object]:
    return {
        "smtp_host": "127.0.0.1",
        "smtp_port": smtp.port,
        "smtp_security": "none",
        "smtp_from": "agent@example.com",
    }


def _freeze_a_mid_send(lab: FenceLab, smtp: GatedSmtp) -> tuple[str, GatedSmtp, object]:
    """Start A, freeze it at ``smtp``'s held answer, let its lease expire; B puts it in doubt."""
    lab.open(lab_settings(**_mail_settings(smtp)))
    run_id = lab.c.start_run(
        "Mail the Q3 figures", model="claude-haiku-4-5", tools=["send_email"]
    ).id
    a = lab.start()
    assert smtp.gate.reached.wait(GATE_TIMEOUT_S), f"A never reached the mail server:\n{lab.tail()}"
    lab.freeze(a)
    step = lab.c.store.get_step(run_id, SEND_SEQ)
    assert (step.name, step.status, step.effect) == (
        "send_email",
        StepStatus.STARTED,
        EffectClass.UNSAFE,
    )
    held = wait_lease_expired(lab.c, run_id)
    assert held.lease_epoch == 1

    lab.run_worker()  # B: claims the run, finds the send in doubt
    run = lab.c.run(run_id)
    assert run.status == RunStatus.NEEDS_ATTENTION, run.status_message
    assert run.attention_seq == SEND_SEQ and run.lease_epoch == 2
    return run_id, smtp, a


def _decide_and_wake(lab: FenceLab, run_id: str, smtp: GatedSmtp, a: object, action: str) -> None:
    """The analyst decides, a worker carries it out; then A goes on and must end cleanly."""
    lab.c.resolve(run_id, action)
    lab.run_worker()
    done = lab.c.run(run_id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert done.lease_epoch == 3
    before = journal(lab.steps(run_id))

    smtp.gate.opened.set()  # the held answer goes out while A is still frozen
    assert smtp.gate.answered.wait(GATE_TIMEOUT_S)
    lab.wake(a)  # type: ignore[arg-type]
    lab.finish(a)  # type: ignore[arg-type]

    after = lab.c.run(run_id)
    assert (after.status, after.status_message, after.finished_at) == (
        RunStatus.COMPLETED,
        done.status_message,
        done.finished_at,
    )
    assert journal(lab.steps(run_id)) == before  # A wrote nothing
    assert "lost" in lab.tail() and "Internal error" not in lab.tail()


def test_a_frozen_worker_never_sends_the_mail_the_analyst_skipped(
    lab: FenceLab, gated_smtp: Callable[[str], GatedSmtp]
) -> None:
    run_id, smtp, a = _freeze_a_mid_send(lab, gated_smtp("rcpt"))
    assert smtp.mails == []  # frozen before the message was handed over

    _decide_and_wake(lab, run_id, smtp, a, "skip")

    assert smtp.mails == []  # skipped: never sent, not even by the worker that woke up
    step = lab.c.store.get_step(run_id, SEND_SEQ)
    assert step.output["resolved"] == "skipped"
    (event,) = lab.events(run_id)
    assert event.kind == RunEventKind.ABANDONED_EFFECT and event.seq == SEND_SEQ
    assert "gave up send_email (step 2)" in event.message
    assert event.data["epoch"] == 1


def test_after_a_retry_the_mail_goes_out_once_and_the_frozen_worker_gives_up(
    lab: FenceLab, gated_smtp: Callable[[str], GatedSmtp]
) -> None:
    run_id, smtp, a = _freeze_a_mid_send(lab, gated_smtp("rcpt"))

    _decide_and_wake(lab, run_id, smtp, a, "retry")

    assert len(smtp.mails) == 1  # the retry's, and only it
    step = lab.c.store.get_step(run_id, SEND_SEQ)
    assert step.attempt == 2 and "sent 'Q3 figures'" in step.output["content"]
    (event,) = lab.events(run_id)
    assert event.kind == RunEventKind.ABANDONED_EFFECT and event.seq == SEND_SEQ


def test_a_mail_sent_by_a_frozen_worker_is_reported_not_written_over_the_decision(
    lab: FenceLab, gated_smtp: Callable[[str], GatedSmtp]
) -> None:
    run_id, smtp, a = _freeze_a_mid_send(lab, gated_smtp("message"))
    assert len(smtp.mails) == 1  # A handed it over; the server holds its confirmation

    _decide_and_wake(lab, run_id, smtp, a, "mark_done")

    assert len(smtp.mails) == 1  # never twice
    step = lab.c.store.get_step(run_id, SEND_SEQ)
    assert step.output["resolved"] == "marked done"  # the analyst's word stands
    (event,) = lab.events(run_id)
    assert event.kind == RunEventKind.LATE_EFFECT and event.seq == SEND_SEQ
    assert "finished send_email (step 2) after the run moved on: sent 'Q3 figures'" in (
        event.message
    )
    assert event.data["status"] == "completed" and event.data["epoch"] == 1
