"""Exactly-once effects under chaos: two workers SIGKILLed and frozen while runs send.

Eight runs each send two e-mails (SMTP sink), make two POSTs (HTTP sink) and write a file,
through the real tools, driven by a scripted model over the real anthropic SDK. Two
worker processes share one SQLite file with a 1.5 s lease. For a bounded time a driver
SIGKILLs workers (starting new ones) and freezes them with SIGSTOP, at random moments and
at chosen points of an effect, either briefly or until the other worker has taken their
runs over, then wakes them with SIGCONT. An analyst answers approvals (some runs ask for
each send) and decides about effects left in doubt with a random choice of skip, retry
and mark done, through the CLI and the client API. Then the chaos stops and the runs end.

What must hold (see :mod:`tests.chaos.verdict`): each e-mail and POST arrived at most
once, or once more per retry the analyst chose; none was sent by a worker that no longer
held its run, unless it was past its point of no return when it froze and the run shows
that as an event; whatever a frozen worker had in flight when its run was taken over is
on the run as an event; no worker wrote a run's status or journal after losing the run;
no run left a terminal status; every step ever seen closed is still there, unchanged;
every run completed; every written file is whole.

The seed fixes the order of the blows and every random choice (``DESKTOP_AGENT_CHAOS_SEED``
picks another), not the machine's timing: a failure message names the seed, what the
driver did, what the analyst decided and what the workers logged.

A second test kills a worker half-way through an idempotent write (a plugin stalls the
built-in ``write_file`` there) and lets the other worker redo it. A third freezes a worker
inside a write until the other worker has taken the run over and written the file anew,
then wakes it: its late write must not replace the newer file.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from desktop_agent.domain import RunStatus, Step, StepStatus
from tests.chaos import audit, verdict
from tests.chaos.analyst import Analyst
from tests.chaos.chaos import Driver, Observer, freeze_outside_writes
from tests.chaos.harness import ChaosLab, file_content, mail, post, run_status, write
from tests.crash.harness import stray_temp_files, workspace_files
from tests.helpers.polling import wait_for, wait_until

pytestmark = pytest.mark.crash

SEED_ENV = "DESKTOP_AGENT_CHAOS_SEED"
SEED = int(os.environ.get(SEED_ENV, "20261123"))
RUNS = 8
CHAOS_S = 10.0
"""How long the driver strikes (unless every run ended before)."""
FINISH_S = 30.0
"""How long the runs may take to end once the chaos stopped."""


def test_effects_happen_at_most_once_while_workers_are_killed_and_frozen(
    tmp_path: Path,
) -> None:
    with ChaosLab(tmp_path) as lab:
        observer = Observer(lab)
        driver = Driver(lab, observer, SEED)
        analyst = Analyst(lab, SEED)
        lab.on_smtp_connect = driver.on_smtp_connect
        lab.on_delivery = driver.on_delivery
        for i in range(RUNS):
            k = f"r{i}"
            plan = [
                mail(f"{k}-m1"),
                post(f"{k}-p1", lab.http),
                write(f"{k}-w1", file_content(f"{k}-w1")),
                mail(f"{k}-m2"),
                post(f"{k}-p2", lab.http),
            ]
            lab.start(k, plan, ask=i % 3 == 0)
        unfinished = _run_chaos(lab, driver, analyst)
        observer.sample()

        found = verdict.check_all(lab, observer, driver, analyst, unfinished)
        story = verdict.summary(lab, driver, analyst, observer)
        print(f"seed {SEED}\n{story}")  # shown with -s
        broken = {title: items for title, items in found.items() if items}
        if broken:
            report = "\n".join(
                f"{title}:\n" + "\n".join(f"  - {item}" for item in items[:12])
                for title, items in broken.items()
            )
            pytest.fail(
                f"chaos with seed {SEED} ({SEED_ENV}) broke {len(broken)} "
                f"propert{'y' if len(broken) == 1 else 'ies'}:\n{report}\n\n{story}\n\n"
                f"{lab.workers.log_tails()}",
                pytrace=False,
            )


def _run_chaos(lab: ChaosLab, driver: Driver, analyst: Analyst) -> list[str]:
    """Strike for :data:`CHAOS_S` (or until every run ended), then let the runs end.

    The chaos goes on for up to :data:`CHAOS_S` more until a frozen worker has lost a run
    to the other: that is what the test is about.

    Returns why the runs did not end, if they did not. The workers are stopped and the
    threads ended whatever happens.
    """
    driver.start()
    analyst.start()
    try:
        chaos_end = time.monotonic() + CHAOS_S
        while not lab.all_terminal() and not driver.failed:
            late = time.monotonic() - chaos_end
            if late >= 0 and (driver.took_over or late >= CHAOS_S):
                break  # the time is up (and a frozen worker lost a run, or twice the time)
            time.sleep(0.1)  # the chaos lasts a time: its length is the experiment, not a wait
        driver.calm()
        try:
            wait_until(
                lambda: driver.failed or analyst.stuck(),
                FINISH_S,
                "every run to end after the chaos",
            )
        except AssertionError as exc:
            return [str(exc)]
        return []
    finally:
        analyst.stop()
        driver.stop()
        lab.workers.stop_all()


def test_a_write_killed_half_way_is_redone_whole_by_the_other_worker(tmp_path: Path) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    env = {
        "DESKTOP_AGENT_TEST_TOOLS": "tests.chaos.slow_write:tools",
        "CHAOS_SLOW_WRITE": "v2 line",
        "CHAOS_FLAGS": str(flags),
    }
    with ChaosLab(tmp_path / "lab", worker_env=env) as lab:
        v1, v2 = file_content("v1"), file_content("v2", 600)
        run_id = lab.start("w", [write("w-1", v1, "report.md"), write("w-2", v2, "report.md")])
        ws = lab.root / "ws" / "w"
        lab.workers.start(0)
        lab.workers.start(1)

        half = flags / "half"

        def stalled() -> str | None:
            lab.workers.check()
            return _flag(half)

        pid = int(wait_for(stalled, what="a write stalled half-way"))
        assert lab.workers.signal(pid, signal.SIGKILL), f"worker {pid} was already gone"
        # Killed half-way: the file is the old one (or already the whole new one, if the
        # other worker was that quick), never a mixture.
        target = (ws / "report.md").read_text(encoding="utf-8")
        assert target in (v1, v2), f"report.md is torn after the kill ({len(target)} chars)"
        if target == v1:  # the kill landed inside the write: half of it sits in its temp file
            (tmp,) = stray_temp_files(workspace_files(ws))
            assert (ws / tmp).read_text(encoding="utf-8") == v2[: len(v2) // 2]

        def ended() -> bool:
            lab.workers.check()
            return run_status(lab, run_id).is_terminal

        wait_until(ended, what=f"the other worker to finish run {run_id}")
        assert lab.client.run(run_id).status == RunStatus.COMPLETED, lab.describe_runs()
        files = workspace_files(ws)
        assert stray_temp_files(files) == [], files.keys()
        assert files["report.md"] == v2.encode(), "report.md is not exactly the new content"

        steps = [s for s in lab.client.steps(run_id) if s.name == "write_file"]
        assert [(_use_id(s), s.status, s.attempt) for s in steps] == [
            ("toolu_w-1", StepStatus.COMPLETED, 1),
            ("toolu_w-2", StepStatus.COMPLETED, 2),  # in flight at the kill: redone once
        ]
        assert "wrote report.md" in str(steps[1].output)
        closes = [
            w
            for w in audit.writes(lab.db)
            if w.what == "step update" and w.seq == steps[1].seq and w.new_status != "started"
        ]
        assert len(closes) == 1, [w.describe() for w in closes]


def test_a_write_woken_after_its_run_moved_on_leaves_the_newer_file_alone(
    tmp_path: Path,
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    env = {
        "DESKTOP_AGENT_TEST_TOOLS": "tests.chaos.slow_write:tools",
        "CHAOS_SLOW_WRITE": "v1 line",
        "CHAOS_STALL_AT": "start",
        "CHAOS_FLAGS": str(flags),
    }
    with ChaosLab(tmp_path / "lab", worker_env=env) as lab:
        v1, v2 = file_content("v1"), file_content("v2")
        run_id = lab.start("w", [write("w-1", v1, "report.md"), write("w-2", v2, "report.md")])
        report = lab.root / "ws" / "w" / "report.md"
        lab.workers.start(0)
        lab.workers.start(1)

        def stalled() -> str | None:
            lab.workers.check()
            return _flag(flags / "stalled")

        # Frozen inside write_file of v1, before it touched the file; its lease runs out.
        pid = int(wait_for(stalled, what="write_file to stall before writing"))
        # Not inside a write transaction of its other threads: that would lock the other
        # worker out of the database, and no takeover could happen.
        assert freeze_outside_writes(lab.workers, lab.db, pid)

        def ended() -> bool:
            lab.workers.check()
            return run_status(lab, run_id).is_terminal

        wait_until(ended, 90, what=f"the other worker to take run {run_id} over and finish it")
        assert lab.client.run(run_id).status == RunStatus.COMPLETED, lab.describe_runs()
        assert report.read_text(encoding="utf-8") == v2
        seq = next(s.seq for s in lab.client.steps(run_id) if _use_id(s) == "toolu_w-1")

        # Woken, the stale worker goes on with its write of v1, finds the run gone and says
        # what it did (or gave up) as an event on the run.
        (flags / "go").touch()
        assert lab.workers.signal(pid, signal.SIGCONT)
        event = wait_for(
            lambda: [e for e in audit.events(lab.db) or [] if e.run_id == run_id and e.seq == seq],
            what="the woken worker to record what became of its write",
        )
        assert report.read_text(encoding="utf-8") == v2, (
            f"the stale write of step {seq} replaced the newer report.md: {event[0].message}"
        )


def _use_id(step: Step) -> str:
    """The tool_use id a tool step answers."""
    return str(step.input.get("tool_use_id", "")) if isinstance(step.input, dict) else ""


def _flag(path: Path) -> str | None:
    """The text of a flag file, once it exists and has some."""
    return (path.read_text(encoding="utf-8") or None) if path.exists() else None
