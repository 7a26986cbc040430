"""The batch queue's protocol on a real SQLite file: claimed once, applied once, never lost.

No API here: these are the database's halves of the steps in ``persistence/batches.py``
(queue, claim, record, settle a doubt, apply results, wake). The pump against the contract
fake, and a worker killed while requests are queued, are in ``test_economy_runs.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus, WaitReason
from desktop_agent.engine.ports import BatchEntry, RunPatch, batch_custom_id
from desktop_agent.persistence.batches import BatchBook, SqlBatchQueue

PARAMS = {"model": "claude-sonnet-5-5", "max_tokens": 100, "messages": []}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    c = Client(tmp_path / "data" / "desktop-agent.db", Settings())
    yield c
    c.close()


def _waiting_run(client: Client, status: RunStatus = RunStatus.WAITING) -> str:
    run = client.start_run("read the notes", model="demo")
    patch = (
        RunPatch(status=status, wait_reason=WaitReason.BATCH)
        if status == RunStatus.WAITING
        else RunPatch(status=status)
    )
    client.store.commit(run.id, patch=patch)
    return run.id


def _queue(client: Client, run_id: str, seq: int = 2, at: float = 100.0, **params: object) -> str:
    custom_id = batch_custom_id(run_id, seq, 1)
    SqlBatchQueue(client.store.db).enqueue(
        BatchEntry(custom_id, run_id, seq, 1, "queued", at),
        "claude-sonnet-5-5",
        {**PARAMS, **params},
    )
    return custom_id


def test_queuing_twice_keeps_one_request_and_its_state(client: Client) -> None:
    run_id = _waiting_run(client)
    queue = SqlBatchQueue(client.store.db)
    cid = _queue(client, run_id)
    book = BatchBook(client.store.db)
    claim = book.claim(200.0, 10, 10_000_000)
    assert claim is not None and [c for c, _ in claim.requests] == [cid]
    again = queue.enqueue(BatchEntry(cid, run_id, 2, 1, "queued", 300.0), "m", PARAMS)
    assert again.state == "submitting"  # not queued a second time
    assert book.claim(400.0, 10, 10_000_000) is None


def test_betas_group_requests_and_are_kept_out_of_the_params(client: Client) -> None:
    a, b, c = (_waiting_run(client) for _ in range(3))
    _queue(client, a, at=1.0)
    _queue(client, b, at=2.0, betas=["compact-2026-01-12"])
    _queue(client, c, at=3.0)
    book = BatchBook(client.store.db)
    first = book.claim(10.0, 10, 10_000_000)
    assert first is not None and first.betas == ()
    assert [cid.split("-")[0] for cid, _ in first.requests] == [a, c]
    second = book.claim(10.0, 10, 10_000_000)
    assert second is not None and second.betas == ("compact-2026-01-12",)
    assert "betas" not in second.requests[0][1]


def test_only_runs_that_wait_for_the_batch_are_sent_and_ended_runs_are_withdrawn(
    client: Client,
) -> None:
    paused = _waiting_run(client, RunStatus.PAUSED)
    cancelled = _waiting_run(client, RunStatus.CANCELLED)
    waiting = _waiting_run(client)
    for run_id in (paused, cancelled, waiting):
        _queue(client, run_id)
    book = BatchBook(client.store.db)
    assert book.oldest_queued() == (100.0, 1)
    assert book.withdraw_ended() == 1
    claim = book.claim(200.0, 10, 10_000_000)
    assert claim is not None and [c.split("-")[0] for c, _ in claim.requests] == [waiting]
    queue = SqlBatchQueue(client.store.db)
    assert queue.entry(batch_custom_id(cancelled, 2, 1)).state == "withdrawn"  # type: ignore[union-attr]
    assert queue.entry(batch_custom_id(paused, 2, 1)).state == "queued"  # type: ignore[union-attr]


def test_a_result_read_twice_is_applied_once_and_wakes_its_run_once(client: Client) -> None:
    run_id = _waiting_run(client)
    cid = _queue(client, run_id)
    book = BatchBook(client.store.db)
    claim = book.claim(200.0, 10, 10_000_000)
    assert claim is not None
    book.submitted(claim, "msgbatch_1", 200.0, 201.0, 230.0)
    result = {"type": "succeeded", "message": {"id": "msg_1"}}
    applied, woken = book.apply_results("msgbatch_1", [(cid, "succeeded", result)], 300.0)
    assert (applied, woken) == (1, [run_id])
    assert client.run(run_id).wake_at == 300.0
    again = book.apply_results(
        "msgbatch_1", [(cid, "errored", {"type": "errored"}), ("other-1-1", "succeeded", {})], 400.0
    )
    assert again == (0, [])
    entry = SqlBatchQueue(client.store.db).entry(cid)
    assert entry is not None and entry.state == "succeeded" and entry.result == result


def test_a_submission_in_doubt_is_requeued_only_when_no_suspect_holds_it(client: Client) -> None:
    runs = [_waiting_run(client) for _ in range(3)]
    cids = [_queue(client, r) for r in runs]
    book = BatchBook(client.store.db)
    claim = book.claim(200.0, 10, 10_000_000)
    assert claim is not None
    # The worker died after the create call and before recording the id.
    assert book.in_doubt(older_than=150.0) == []  # too recent to be in doubt
    (doubt,) = book.in_doubt(older_than=900.0)
    assert (doubt.requests, doubt.suspects) == (3, ())
    book.suspect(doubt, [("msgbatch_lost", 205.0)], 900.0)
    assert book.unread_suspects()
    assert book.settled_doubts() == []  # its batch has not been read yet
    # The suspect held two of the three: they are applied; the third was never sent.
    book.apply_results(
        "msgbatch_lost", [(c, "succeeded", {"type": "succeeded"}) for c in cids[:2]], 1000.0
    )
    book.read_done("msgbatch_lost", 1000.0)
    assert book.settled_doubts() == [claim.submission]
    assert book.requeue(claim.submission) == 1
    queue = SqlBatchQueue(client.store.db)
    states = [queue.entry(c).state for c in cids]  # type: ignore[union-attr]
    assert states == ["succeeded", "succeeded", "queued"]


def test_a_result_that_came_while_its_run_was_busy_wakes_it_later(client: Client) -> None:
    run_id = _waiting_run(client, RunStatus.RUNNING)
    cid = _queue(client, run_id)
    client.store.commit(
        run_id, patch=RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.BATCH)
    )
    book = BatchBook(client.store.db)
    claim = book.claim(200.0, 10, 10_000_000)
    assert claim is not None
    book.submitted(claim, "msgbatch_2", 200.0, 200.0, 230.0)
    client.store.commit(run_id, patch=RunPatch(status=RunStatus.RUNNING))  # a command woke it
    assert book.apply_results("msgbatch_2", [(cid, "succeeded", {})], 300.0) == (1, [])
    # It hibernates again without the result (the activation read the entry before).
    client.store.commit(
        run_id, patch=RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.BATCH)
    )
    assert book.wake_missed(310.0) == [run_id]
    assert client.run(run_id).wake_at == 310.0
    SqlBatchQueue(client.store.db).consumed(run_id, 320.0)
    client.store.commit(
        run_id, patch=RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.BATCH)
    )
    assert book.wake_missed(330.0) == []  # taken: it wakes the run no more
    assert not book.active()


def test_without_a_key_queued_turns_end_refused_and_their_runs_are_woken(
    client: Client,
) -> None:
    from desktop_agent.domain.errors import AuthenticationError
    from desktop_agent.llm.batches import BatchApi
    from desktop_agent.llm.claude import ClaudeModel
    from desktop_agent.worker.batches import BatchPump

    run_id = _waiting_run(client)
    cid = _queue(client, run_id)
    pump = BatchPump(BatchBook(client.store.db), lambda: BatchApi(lambda: None), lambda: 500.0)
    report = pump.run_pass()
    assert report.problem == "no API key" and report.woken == [run_id]
    entry = SqlBatchQueue(client.store.db).entry(cid)
    assert entry is not None and entry.state == "errored"
    assert client.run(run_id).wake_at == 500.0
    # The run's step reads it as a call without a key: it waits for one, as streamed runs do.
    with pytest.raises(AuthenticationError, match="no API key"):
        ClaudeModel(lambda: None).batch_response(None, entry.result)  # type: ignore[arg-type]
