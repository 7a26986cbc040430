"""Search finds the passages a model's answer cites (kind ``citation``), on both databases."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.search import SearchFilters
from desktop_agent.domain import RunStatus, StepKind
from tests.conftest import MakeExecutor, drain
from tests.documents.pdfs import make_pdf
from tests.documents.test_grounded_runs import MODEL, Reader
from tests.helpers import postgres
from tests.helpers.fake_anthropic import Cited
from tests.llm.conftest import MakeModel, StartFake

pytestmark = pytest.mark.parametrize("backend", postgres.BACKENDS)


def test_a_cited_passage_is_found_as_a_citation_of_its_model_step(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    workspace: Path,
) -> None:
    pages = ["Introduction.", "The wombat census counted nine burrows."]
    (workspace / "census.pdf").write_bytes(make_pdf(pages))
    fake = start_fake(Reader(["census.pdf"], Cited("Nine burrows were found.", page=2)))
    run = client.start_run("Count the burrows", model=MODEL, workspace=workspace)
    drain(client.store, make_executor(make_model(fake)))
    assert client.run(run.id).status == RunStatus.COMPLETED

    answer = [s for s in client.steps(run.id) if s.kind == StepKind.MODEL_CALL][-1]
    hits = client.search('"wombat census"', SearchFilters(kinds=("citation",)))
    assert [(h.run_id, h.seq, h.kind) for h in hits] == [(run.id, answer.seq, "citation")]
    # Only the cited page is the citation's passage; the uncited one is not found as one.
    assert client.search("introduction", SearchFilters(kinds=("citation",))) == []
    # The document's title is part of it.
    titled = client.search('"census.pdf" burrows', SearchFilters(kinds=("citation",)))
    assert [h.seq for h in titled] == [answer.seq]
