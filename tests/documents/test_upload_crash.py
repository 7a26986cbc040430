"""A worker killed (SIGKILL) after an upload, before its step's outcome: no second upload."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus
from desktop_agent.llm import documents as docs
from tests.documents.pdfs import make_pdf
from tests.documents.test_grounded_runs import MODEL, PAGES, Reader
from tests.llm.conftest import KEY, StartFake
from tests.llm.test_processes import Procs


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    yield p
    p.kill_all()


@pytest.mark.crash
def test_a_worker_killed_after_the_upload_does_not_upload_again(
    client: Client, start_fake: StartFake, procs: Procs, workspace: Path
) -> None:
    (workspace / "big.pdf").write_bytes(make_pdf(PAGES, pad_to=docs.INLINE_MAX_BYTES + 50_000))
    fake = start_fake(Reader(["big.pdf"]))
    run = client.start_run("What happened in 2025?", model=MODEL, workspace=workspace)
    env = procs.env(fake.url, ANTHROPIC_API_KEY=KEY)
    # Effects: the first model call, the read, then the call that uploads the file and is
    # answered; the worker dies before that answer is written.
    first = procs.worker(client.db_path, {**env, "DESKTOP_AGENT_CRASH_AT": "after_effect:3"})
    assert first.wait(timeout=60) == -signal.SIGKILL
    assert len(fake.uploads) == 1
    open_step = client.steps(run.id)[-1]
    assert (open_step.kind, open_step.status) == (StepKind.MODEL_CALL, StepStatus.STARTED)

    second = procs.worker(client.db_path, env)
    assert second.wait(timeout=60) == 0

    assert client.run(run.id).status == RunStatus.COMPLETED, client.run(run.id).status_message
    assert len(fake.uploads) == 1  # found in the API's list, not uploaded again
    (file_id,) = fake.files
    answer = [s for s in client.steps(run.id) if s.kind == StepKind.MODEL_CALL][-1]
    assert answer.attempt == 2
    assert answer.output["documents"][0]["file_id"] == file_id
