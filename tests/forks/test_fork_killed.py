"""A fork whose worker is killed (SIGKILL) mid-effect and resumed: the prefix is not redone.

The parent sends an e-mail (send_email, unsafe) to a local SMTP sink in its prefix. A fork
from the model's turn with edited arguments sends another; its worker child is killed
while the sink holds its send. The next worker finds the fork's own send in doubt (never
the parent's), the analyst retries it, and in total the sink got the parent's mail once and
the fork's once.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.forks import fork
from desktop_agent.domain import RunStatus
from tests.fencing.child_worker import MAIL
from tests.fencing.harness import FenceLab, fence_lab, lab_settings
from tests.fencing.sinks import GATE_TIMEOUT_S, Gate, GatedSmtp
from tests.helpers.polling import wait_lease_expired

pytestmark = pytest.mark.crash


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[FenceLab]:
    with fence_lab(tmp_path, "mail") as lab:
        yield lab


def test_a_killed_fork_resumes_without_redoing_the_prefix(lab: FenceLab) -> None:
    smtp = GatedSmtp("rcpt")
    smtp.gate.used = True  # the parent's send is not held
    lab.open(
        lab_settings(
            smtp_host="127.0.0.1",
            smtp_port=smtp.port,
            smtp_security="none",
            smtp_from="agent@example.com",
        )
    )
    try:
        parent = lab.c.start_run("Mail the figures", model="claude-haiku-4-5", tools=["send_email"])
        lab.run_worker()
        assert lab.c.run(parent.id).status == RunStatus.COMPLETED
        assert [m.recipients for m in smtp.mails] == [["boss@example.com"]]

        smtp.gate = Gate()  # hold the fork's send
        edited = {**MAIL, "to": ["cfo@example.com"]}
        child = fork(lab.c, parent.id, 1, edited_arguments=edited)
        a = lab.start()
        assert smtp.gate.reached.wait(GATE_TIMEOUT_S), lab.tail()
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
        smtp.gate.opened.set()
        wait_lease_expired(lab.c, child.id)

        lab.run_worker()
        held = lab.c.run(child.id)
        assert held.status == RunStatus.NEEDS_ATTENTION, held.status_message
        assert held.attention_seq == 3  # the fork's own send, not the parent's step 2
        lab.c.resolve(child.id, "retry")
        lab.run_worker()
        done = lab.c.run(child.id)
        assert done.status == RunStatus.COMPLETED, done.status_message
        assert sorted(r for m in smtp.mails for r in m.recipients) == [
            "boss@example.com",
            "cfo@example.com",
        ]
    finally:
        smtp.close()
