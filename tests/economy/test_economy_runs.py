"""Economy mode end to end: real worker processes, the contract fake's Message Batches.

Each run's model turns go to the fake as requests of Message Batches (checked by the same
contract rules as streamed calls), the fake holds the batches until the test releases
them, and workers (``python -m desktop_agent worker --until-idle``) are killed with SIGKILL
while requests are queued in the API, right after a batch was created and before its id was
recorded, and right after results were applied and before the batch was marked read. The
fake counts how often each ``custom_id`` was submitted and each batch's results fetched.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.economy import batch_wait
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus, StepKind, StepStatus, WaitReason
from desktop_agent.engine.ports import batch_custom_id
from desktop_agent.llm.pricing import model_info
from tests.helpers.claude_contract import ApiError
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Stream, Text, ToolUse
from tests.helpers.polling import wait_until
from tests.llm.conftest import KEY
from tests.llm.test_processes import Procs

pytestmark = pytest.mark.crash

SONNET = "claude-sonnet-5-5"
ITEMS = 50


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """Worker processes of the test, killed by pid at teardown if still running."""
    p = Procs(tmp_path)
    yield p
    p.kill_all()


def _script(body: dict[str, Any], _index: int) -> Reply:
    """First turn of a run: look at the workspace; second: answer."""
    if len(body["messages"]) == 1:
        return Stream(
            [Text("Looking at the file."), ToolUse("list_files", {"path": "."})],
            input_tokens=3000,
            output_tokens=40,
        )
    return Stream(
        [Text("Summary: the file says what it says.")], input_tokens=3100, output_tokens=60
    )


def _settings(db: Path) -> Settings:
    settings = Settings(
        default_max_cost_usd=None,
        default_max_steps=None,
        batch_window_s=0.3,
        batch_poll_s=0.2,
        batch_doubt_s=1.0,
        workers=16,
    )
    settings.save(db)
    return settings


def _folder(tmp: Path, n: int) -> Path:
    folder = tmp / "inbox"
    folder.mkdir()
    for i in range(n):
        (folder / f"note{i:02d}.md").write_text(f"# Note {i}\nFigure {i * 7}.\n", encoding="utf-8")
    return folder


def _model_calls(client: Client, run_id: str) -> list[Any]:
    return [s for s in client.steps(run_id) if s.kind == StepKind.MODEL_CALL]


def _check_done(client: Client, run_ids: list[str], fake: FakeAnthropic) -> None:
    """Every run completed with two model calls, each sent once, at the batch price."""
    submitted = fake.batch_submissions
    assert submitted and max(submitted.values()) == 1, submitted.most_common(3)
    info = model_info(SONNET)
    for run_id in run_ids:
        run = client.run(run_id)
        assert run.status == RunStatus.COMPLETED, (run_id, run.status, run.status_message)
        calls = _model_calls(client, run_id)
        assert [c.status for c in calls] == [StepStatus.COMPLETED] * 2
        assert all(c.input.get("mode") == "economy" for c in calls)
        assert all(c.attempt == 1 for c in calls)
        for call in calls:
            streamed = info.cost(call.usage)
            assert call.cost_usd == pytest.approx(streamed / 2, rel=1e-9)
            assert call.cost_usd > 0
    # Two turns of every run went through batches, never through a streamed call.
    assert sum(submitted.values()) == 2 * len(run_ids)
    paths = Counter(r.path for r in fake.requests)
    assert paths == Counter({"/v1/messages/batches": 2 * len(run_ids)}), paths


def _serving(procs: Procs, db: Path, fake: FakeAnthropic) -> subprocess.Popen[bytes]:
    """A worker that keeps serving until killed (waits with a wake time keep it busy)."""
    log = db.parent / "logs"
    log.mkdir(parents=True, exist_ok=True)
    with open(log / "worker.log", "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "desktop_agent", "--db", str(db), "worker"],
            env=procs.env(fake.url, ANTHROPIC_API_KEY=KEY),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=procs.tmp,
        )
    procs.started.append(proc)
    return proc


def _worker(procs: Procs, db: Path, fake: FakeAnthropic, **env: str) -> subprocess.Popen[bytes]:
    return procs.worker(db, procs.env(fake.url, ANTHROPIC_API_KEY=KEY, **env))


def test_a_folder_batch_in_economy_mode_completes_through_delayed_batches_and_a_kill(
    tmp_path: Path, procs: Procs
) -> None:
    db = tmp_path / "data" / "desktop-agent.db"
    client = Client(db, _settings(db))
    sched = Scheduling(client)
    with FakeAnthropic(_script, hold_batches=True) as fake:
        try:
            batch = sched.start_batch(
                "Summarise the note",
                folder=_folder(tmp_path, ITEMS),
                pattern="*.md",
                concurrency=ITEMS,
                options=RunOptions(model=SONNET, economy=True),
            )
            worker = _worker(procs, db, fake)
            # Every run's first turn is in a batch the fake holds: the runs hibernate.
            wait_until(
                lambda: sum(fake.batch_submissions.values()) == ITEMS,
                timeout=120,
                what="the first turn of every item in a batch",
            )
            items = sched.batch_items(batch.id)
            run_ids = [i.run_id for i in items if i.run_id]
            assert len(run_ids) == ITEMS
            waiting = [client.run(r) for r in run_ids]
            wait_until(
                lambda: all(client.run(r).wait_reason == WaitReason.BATCH for r in run_ids),
                what="every run waiting for its batch",
            )
            where = batch_wait(client, run_ids[0])
            assert where is not None and where.state == "submitted" and where.batch_id
            assert all(r.status != RunStatus.COMPLETED for r in waiting)
            # Turns that were ready together went in few batches, not one each.
            assert fake.batches_created <= 10, fake.batches_created
            # The worker dies while every first turn is queued in the API; a new one goes on.
            worker.send_signal(signal.SIGKILL)
            assert worker.wait(timeout=60) == -signal.SIGKILL
            fake.hold_batches(False)
            fake.release_batches()
            worker = _worker(procs, db, fake)
            assert worker.wait(timeout=240) == 0
            _check_done(client, run_ids, fake)
            assert max(fake.results_fetches.values()) == 1
        finally:
            client.close()


@pytest.mark.parametrize("crash_at", ["", "batch_created", "results_applied"])
def test_a_worker_killed_while_requests_are_in_batches_sends_and_applies_each_once(
    tmp_path: Path, procs: Procs, crash_at: str
) -> None:
    runs = 8
    db = tmp_path / "data" / "desktop-agent.db"
    client = Client(db, _settings(db))
    with FakeAnthropic(_script, hold_batches=True) as fake:
        try:
            ids = [
                client.start_run(f"Summarise note {i}", model=SONNET, economy=True).id
                for i in range(runs)
            ]
            extra = {"DESKTOP_AGENT_CRASH_AT": crash_at} if crash_at == "batch_created" else {}
            first = _worker(procs, db, fake, **extra)
            if crash_at == "batch_created":
                # Killed by itself right after the API made its first batch: the batch's id
                # is nowhere. On a busy machine not every turn was ready for that batch:
                # those left wait queued, never sent.
                assert first.wait(timeout=120) == -signal.SIGKILL
                sent = sum(fake.batch_submissions.values())
                waits = [batch_wait(client, r) for r in ids]
                states = [w.state if w is not None else "not queued yet" for w in waits]
                assert sent >= 1 and states.count("submitting") == sent, (sent, states)
                assert set(states) <= {"submitting", "queued", "not queued yet"}, states
            else:
                wait_until(
                    lambda: sum(fake.batch_submissions.values()) == runs,
                    timeout=120,
                    what="every run's first turn sent",
                )
                wait_until(
                    lambda: all(batch_wait(client, r).state == "submitted" for r in ids),  # type: ignore[union-attr]
                    what="the batch recorded",
                )
                first.send_signal(signal.SIGKILL)  # requests queued in the API
                assert first.wait(timeout=60) == -signal.SIGKILL
            fake.release_batches()
            fake.hold_batches(False)
            extra = {"DESKTOP_AGENT_CRASH_AT": crash_at} if crash_at == "results_applied" else {}
            second = _worker(procs, db, fake, **extra)
            if crash_at == "results_applied":
                # Killed after writing the first batch's results, before marking it read:
                # the next worker reads them again and applies none twice.
                assert second.wait(timeout=120) == -signal.SIGKILL
                second = _worker(procs, db, fake)
            assert second.wait(timeout=240) == 0, (tmp_path / "data" / "logs").as_posix()
            _check_done(client, ids, fake)
            fetched = fake.results_fetches
            if crash_at == "results_applied":
                assert max(fetched.values()) == 2  # read twice, applied once (checked above)
            if crash_at == "batch_created":
                # The lost batch was found in the API's list and read; nothing was resent.
                log = (db.parent / "logs" / "worker.log").read_text(encoding="utf-8")
                assert "lost their answer" in log and "may hold them" in log, log[-2000:]
        finally:
            client.close()


def test_an_expired_or_failed_request_is_tried_again_and_a_refused_one_asks_the_analyst(
    tmp_path: Path, procs: Procs
) -> None:
    db = tmp_path / "data" / "desktop-agent.db"
    client = Client(db, _settings(db))
    with FakeAnthropic(_script) as fake:
        try:
            expired, overloaded, refused = (
                client.start_run(f"Summarise note {i}", model=SONNET, economy=True).id
                for i in range(3)
            )
            fake.batch_outcome(batch_custom_id(expired, 1, 1), "expired")
            fake.batch_outcome(
                batch_custom_id(overloaded, 1, 1), ApiError(529, "overloaded_error", "Overloaded")
            )
            fake.batch_outcome(
                batch_custom_id(refused, 1, 1),
                ApiError(400, "invalid_request_error", "max_tokens: too large for this model"),
            )
            # A worker that stays (not --until-idle): the retries wait a few seconds first.
            worker = _serving(procs, db, fake)
            wait_until(
                lambda: client.run(refused).status == RunStatus.NEEDS_ATTENTION,
                timeout=120,
                what="the refused turn to reach the analyst",
            )
            for run_id in (expired, overloaded):
                wait_until(
                    lambda r=run_id: client.run(r).status == RunStatus.COMPLETED,  # type: ignore[misc]
                    timeout=120,
                    what="the run to finish after its turn was tried again",
                )
                calls = _model_calls(client, run_id)
                assert [c.status for c in calls] == [
                    StepStatus.FAILED,
                    StepStatus.COMPLETED,
                    StepStatus.COMPLETED,
                ]
                assert all(c.input.get("mode") == "economy" for c in calls)
            message = client.run(refused).status_message
            assert "output limit" in message and "max_tokens: too large" in message, message
            submitted = fake.batch_submissions
            assert max(submitted.values()) == 1  # each attempt is a request of its own
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=60)
        finally:
            client.close()


def test_cancel_withdraws_a_runs_batch_and_pause_keeps_a_result_for_the_resume(
    tmp_path: Path, procs: Procs
) -> None:
    db = tmp_path / "data" / "desktop-agent.db"
    client = Client(db, _settings(db))
    with FakeAnthropic(_script, hold_batches=True) as fake:
        try:
            worker = _serving(procs, db, fake)
            cancelled = client.start_run("Summarise note 1", model=SONNET, economy=True).id
            wait_until(lambda: fake.batches_created == 1, timeout=120, what="the first batch")
            paused = client.start_run("Summarise note 2", model=SONNET, economy=True).id
            wait_until(lambda: fake.batches_created == 2, timeout=120, what="the second batch")
            first, second = fake.batch_ids

            # Cancelled: its batch holds nothing else, so the worker cancels the batch.
            client.cancel(cancelled)
            wait_until(
                lambda: fake.batch(first)["cancel_initiated_at"] is not None,
                timeout=60,
                what="the cancelled run's batch canceled",
            )
            assert client.run(cancelled).status == RunStatus.CANCELLED
            assert fake.batch(second)["cancel_initiated_at"] is None

            # Paused: the result that comes meanwhile waits for the resume, unsent again.
            client.pause(paused)
            wait_until(lambda: client.run(paused).status == RunStatus.PAUSED, what="the pause")
            fake.hold_batches(False)
            fake.release_batches()
            wait_until(
                lambda: batch_wait(client, paused).state == "succeeded",  # type: ignore[union-attr]
                timeout=60,
                what="the paused run's result read",
            )
            assert client.run(paused).status == RunStatus.PAUSED
            client.resume(paused)
            wait_until(
                lambda: client.run(paused).status == RunStatus.COMPLETED,
                timeout=120,
                what="the resumed run's end",
            )
            assert fake.batch(first)["request_counts"]["canceled"] == 1
            assert max(fake.batch_submissions.values()) == 1
            assert len(_model_calls(client, paused)) == 2
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=60)
        finally:
            client.close()
