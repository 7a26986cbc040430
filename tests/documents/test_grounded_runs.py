"""Runs whose tools read files: documents with citations, uploads, their journal.

Every run here goes through the engine, the Claude adapter and the contract fake (which
refuses what the API refuses, answers citations, and counts uploads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, Step, StepKind
from desktop_agent.engine.compaction import SUMMARY_PROMPT
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.llm import documents as docs
from desktop_agent.llm.catalogue import Catalogue, snapshot_models
from desktop_agent.llm.claude import ClaudeModel
from tests.conftest import MakeExecutor, drain
from tests.documents.pdfs import make_pdf
from tests.helpers.claude_contract import canonical
from tests.helpers.fake_anthropic import (
    Cited,
    Compaction,
    FakeAnthropic,
    Reply,
    Stream,
    Text,
    Thinking,
    ToolUse,
)
from tests.llm.conftest import MakeModel, StartFake

MODEL = "claude-sonnet-5-5"
PAGES = ["Revenue grew 4% in 2025.", "Costs fell by 2% in 2025."]


class Reader:
    """A scripted agent: reads each of ``paths`` in turn, then answers citing ``cite``.

    ``on_turn`` (if given) is called with the turn number before each answer.
    """

    def __init__(self, paths: list[str], cite: Cited | None = None, on_turn: Any = None) -> None:
        self.paths = paths
        self.cite = cite or Cited("Revenue grew 4%.", document=0, page=1)
        self.on_turn = on_turn
        self.turn = 0

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        self.turn += 1
        if self.on_turn is not None:
            self.on_turn(self.turn)
        if self.turn <= len(self.paths):
            return Stream([ToolUse("read_file", {"path": self.paths[self.turn - 1]})])
        return Stream([Text("Findings: "), self.cite])


def _steps(client: Client, run_id: str, kind: StepKind) -> list[Step]:
    return [s for s in client.steps(run_id) if s.kind == kind]


def _no_refusal(fake: FakeAnthropic) -> None:
    refused = [(r.status, r.error) for r in fake.requests if r.error is not None]
    assert refused == [], refused


def _documents_sent(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b.get("content"), list)
        for part in b["content"]
        if part.get("type") == "document"
    ]


def _start(client: Client, workspace: Path, model: str = MODEL) -> str:
    return client.start_run("What happened in 2025?", model=model, workspace=workspace).id


@pytest.fixture
def report(workspace: Path) -> Path:
    (workspace / "report.pdf").write_bytes(make_pdf(PAGES))
    return workspace


@pytest.fixture
def big(workspace: Path) -> Path:
    data = make_pdf(PAGES, pad_to=docs.INLINE_MAX_BYTES + 50_000)
    assert len(data) > docs.INLINE_MAX_BYTES
    (workspace / "big.pdf").write_bytes(data)
    return workspace


def test_a_pdf_read_reaches_the_model_as_a_cited_document(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    report: Path,
) -> None:
    fake = start_fake(Reader(["report.pdf"]))
    run_id = _start(client, report)
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(run_id).status == RunStatus.COMPLETED, client.run(run_id).status_message
    _no_refusal(fake)
    sent = _documents_sent(fake.requests[1].body)
    assert len(sent) == 1
    assert sent[0]["source"]["type"] == "base64"
    assert sent[0]["source"]["media_type"] == "application/pdf"
    assert sent[0]["citations"] == {"enabled": True}
    assert sent[0]["title"] == "report.pdf"
    result = fake.requests[1].body["messages"][-1]["content"][0]
    assert "document" not in result  # the descriptor's key is never sent
    # The step that answered keeps the documents it was sent, in document_index order.
    read = _steps(client, run_id, StepKind.TOOL_CALL)[0]
    last = _steps(client, run_id, StepKind.MODEL_CALL)[-1]
    documents = last.output["documents"]
    shown = ("seq", "path", "title", "media_type", "file_id")
    assert [{k: d[k] for k in shown} for d in documents] == [
        {
            "seq": read.seq,
            "path": "report.pdf",
            "title": "report.pdf",
            "media_type": "application/pdf",
            "file_id": None,
        }
    ]
    # The answer's citation resolves through that list to the step that read the file.
    cited = [b for b in last.output["content"] if b.get("citations")]
    assert len(cited) == 1
    citation = cited[0]["citations"][0]
    assert citation["type"] == "page_location"
    assert citation["cited_text"] == PAGES[0]
    assert (citation["start_page_number"], citation["end_page_number"]) == (1, 2)
    assert documents[citation["document_index"]]["seq"] == read.seq
    # What a model without documents reads is still the tool's text.
    assert PAGES[0] in str(read.output["content"])


def test_a_text_file_is_a_document_cited_by_characters(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    workspace: Path,
) -> None:
    (workspace / "notes.md").write_text("Sales rose. Margins held.\n")
    fake = start_fake(Reader(["notes.md"], Cited("Sales rose.", document=0, chars=(0, 11))))
    run_id = _start(client, workspace)
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(run_id).status == RunStatus.COMPLETED
    _no_refusal(fake)
    sent = _documents_sent(fake.requests[1].body)
    assert sent[0]["source"] == {
        "type": "text",
        "media_type": "text/plain",
        "data": "Sales rose. Margins held.\n",
    }
    last = _steps(client, run_id, StepKind.MODEL_CALL)[-1]
    citation = next(b for b in last.output["content"] if b.get("citations"))["citations"][0]
    assert citation["type"] == "char_location"
    assert citation["cited_text"] == "Sales rose."
    assert last.output["documents"][0]["media_type"] == "text/plain"


def _without(feature: str, model: str = MODEL) -> Catalogue:
    models = snapshot_models()
    for entry in models:
        if entry["id"] == model:
            entry["capabilities"][feature] = {"supported": False}
    return Catalogue(models)


@pytest.mark.parametrize("feature", ["citations", "pdf_input"])
def test_a_model_without_documents_reads_the_text_as_before(
    feature: str,
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    report: Path,
) -> None:
    fake = start_fake(Reader(["report.pdf"], Cited("Revenue grew 4%.")))
    claude = ClaudeModel(
        lambda: "sk-ant-test", base_url=fake.url, catalogue=_without(feature), timeout=20.0
    )
    run_id = _start(client, report)
    drain(client.store, make_executor(claude))

    assert client.run(run_id).status == RunStatus.COMPLETED
    _no_refusal(fake)
    result = fake.requests[1].body["messages"][-1]["content"][0]
    read = _steps(client, run_id, StepKind.TOOL_CALL)[0]
    assert result["content"] == read.output["content"]  # today's text extraction, unchanged
    assert set(result) == {"type", "tool_use_id", "content", "is_error", "cache_control"}
    assert "documents" not in _steps(client, run_id, StepKind.MODEL_CALL)[-1].output
    assert fake.uploads == []


def test_a_large_pdf_is_uploaded_once_and_named_by_its_file_id(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    big: Path,
) -> None:
    fake = start_fake(Reader(["big.pdf", "big.pdf"]))
    run_id = _start(client, big)
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(run_id).status == RunStatus.COMPLETED, client.run(run_id).status_message
    _no_refusal(fake)
    assert len(fake.uploads) == 1
    (file_id,) = fake.files
    for request in fake.requests[1:]:
        sent = _documents_sent(request.body)
        assert sent and all(d["source"] == {"type": "file", "file_id": file_id} for d in sent)
        assert docs.FILES_BETA in request.headers.get("anthropic-beta", "")
    last = _steps(client, run_id, StepKind.MODEL_CALL)[-1]
    reads = [s.seq for s in _steps(client, run_id, StepKind.TOOL_CALL)]
    assert [(d["seq"], d["file_id"]) for d in last.output["documents"]] == [
        (reads[0], file_id),
        (reads[1], file_id),
    ]
    # Each request after the first names the file exactly as the one before it did.
    bodies = [[canonical(m) for m in r.body["messages"]] for r in fake.requests[1:]]
    assert bodies[1][: len(bodies[0])] == bodies[0]


def test_an_expired_file_is_uploaded_again_once_and_the_request_retried(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    big: Path,
) -> None:
    holder: list[FakeAnthropic] = []

    def expire(turn: int) -> None:
        if turn == 2:  # named by request 2, the file expires: request 3 is refused
            fake = holder[0]
            for file_id in fake.files:
                fake.expire_file(file_id)

    fake = start_fake(Reader(["big.pdf", "notes.md"], on_turn=expire))
    (big / "notes.md").write_text("a note\n")
    holder.append(fake)
    run_id = _start(client, big)
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(run_id).status == RunStatus.COMPLETED, client.run(run_id).status_message
    refused = [r for r in fake.requests if r.error is not None]
    assert len(refused) == 1 and refused[0].error is not None
    assert refused[0].error.error_code == "file_expired"
    assert len(fake.uploads) == 2
    live = [f for f in fake.files.values() if not f.expired]
    assert len(live) == 1
    last = _steps(client, run_id, StepKind.MODEL_CALL)[-1]
    pdfs = [d for d in last.output["documents"] if d["media_type"] == "application/pdf"]
    assert [d["file_id"] for d in pdfs] == [live[0].id]
    assert _documents_sent(fake.requests[-1].body)[0]["source"]["file_id"] == live[0].id


class _Crash(BaseException):
    pass


def test_a_crash_after_an_upload_does_not_upload_again(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    big: Path,
) -> None:
    fake = start_fake(Reader(["big.pdf"]))

    def crash(point: str) -> None:
        # Inside the model call that sent the uploaded file: its outcome is never written.
        if point == "mid_stream" and len(fake.requests) == 2:
            raise _Crash(point)

    run_id = _start(client, big)
    config = EngineConfig(crash_hook=crash, partial_flush_s=0.0, settings=client.settings)
    with pytest.raises(_Crash):
        make_executor(make_model(fake), config=config).execute(run_id)
    assert len(fake.uploads) == 1
    # A new process: a new adapter that remembers nothing of the first.
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(run_id).status == RunStatus.COMPLETED, client.run(run_id).status_message
    _no_refusal(fake)
    assert len(fake.uploads) == 1
    (file_id,) = fake.files
    assert _documents_sent(fake.requests[-1].body)[0]["source"]["file_id"] == file_id


def test_a_fork_names_the_file_its_parent_uploaded(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    big: Path,
) -> None:
    from desktop_agent.client.forks import fork

    fake = start_fake(Reader(["big.pdf"]))
    run_id = _start(client, big)
    executor = make_executor(make_model(fake))
    drain(client.store, executor)
    assert client.run(run_id).status == RunStatus.COMPLETED
    answer = _steps(client, run_id, StepKind.MODEL_CALL)[-1].seq
    child = fork(client, run_id, answer, note="Check the costs too")
    fake.script = Reader([], Cited("Costs fell.", document=0, page=2))
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(child.id).status == RunStatus.COMPLETED, client.run(child.id).status_message
    _no_refusal(fake)
    assert len(fake.uploads) == 1
    (file_id,) = fake.files
    last = _steps(client, child.id, StepKind.MODEL_CALL)[-1]
    assert last.output["documents"][0]["file_id"] == file_id
    citation = next(b for b in last.output["content"] if b.get("citations"))["citations"][0]
    assert citation["cited_text"] == PAGES[1]


class CompactingReader(Reader):
    """A :class:`Reader` that thinks, whose prompt grows past the compaction threshold."""

    def __init__(self, paths: list[str], high_at: int) -> None:
        super().__init__(paths)
        self.high_at = high_at

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        if "compaction" in body:
            return Stream([Compaction("SUMMARY: the report says revenue grew 4%.")])
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and str(last[-1].get("text", "")).startswith(SUMMARY_PROMPT):
            return Stream([Text("SUMMARY: the report says revenue grew 4%.")])
        reply = super().__call__(body, index)
        assert isinstance(reply, Stream)
        tokens = 850_000 if self.turn == self.high_at else 2_000
        return Stream([Thinking(f"turn {self.turn}"), *reply.blocks], input_tokens=tokens)


@pytest.mark.parametrize("mode", ["server", "client"])
def test_a_compaction_keeps_documents_and_every_request_valid(
    mode: str,
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    big: Path,
) -> None:
    (big / "notes.md").write_text("Costs fell.\n")
    reads = ["big.pdf", "notes.md", "notes.md", "notes.md", "notes.md", "notes.md", "notes.md"]
    fake = start_fake(CompactingReader(reads, high_at=5))
    claude = make_model(fake)
    if mode == "client":
        models = snapshot_models()
        for entry in models:
            if entry["id"] == MODEL:
                entry["capabilities"]["compaction"] = {
                    "supported": False,
                    "summarize": {"supported": False},
                }
                entry["capabilities"]["context_management"]["compact_20260112"] = {
                    "supported": False
                }
        claude.catalogue = Catalogue(models)
    run_id = _start(client, big)
    drain(client.store, make_executor(claude))

    assert client.run(run_id).status == RunStatus.COMPLETED, client.run(run_id).status_message
    _no_refusal(fake)  # thinking blocks sent back after the documents stay bound
    assert _steps(client, run_id, StepKind.COMPACTION)
    assert len(fake.uploads) == 1
    (file_id,) = fake.files
    named = [
        d["source"].get("file_id")
        for r in fake.requests
        for d in _documents_sent(r.body)
        if d["source"]["type"] == "file"
    ]
    assert named and set(named) == {file_id}
    last = _steps(client, run_id, StepKind.MODEL_CALL)[-1]
    # The answer's documents are those its own request held, in that request's order.
    assert [d["title"] for d in last.output["documents"]] == [
        d["title"] for d in _documents_sent(fake.requests[-1].body)
    ]
