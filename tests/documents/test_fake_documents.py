"""The contract fake's Files API, document blocks and citations, through the real SDK."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import anthropic
import httpx2
import pytest

from tests.documents.pdfs import make_pdf
from tests.helpers import claude_contract as contract
from tests.helpers.fake_anthropic import Cited, FakeAnthropic, Stream, Text
from tests.llm.conftest import KEY

FILES = [contract.BETA_FILES]
MODEL = "claude-sonnet-5-5"
PDF = make_pdf(["Page one says hello.", "Page two says goodbye."])


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(
        [Stream([Text("ok")])], max_request_bytes=200_000, file_max_bytes=100_000
    ) as server:
        yield server


@pytest.fixture
def sdk(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=fake.url, max_retries=0)


def _pdf_block(data: bytes = PDF, **more: Any) -> dict[str, Any]:
    source = {"type": "base64", "media_type": "application/pdf"}
    return {
        "type": "document",
        "source": {**source, "data": base64.b64encode(data).decode()},
        "citations": {"enabled": True},
        **more,
    }


def _body(*blocks: dict[str, Any], model: str = MODEL) -> dict[str, Any]:
    content = [*blocks, {"type": "text", "text": "Summarize."}]
    return {"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": content}]}


def test_the_files_api_uploads_describes_lists_and_deletes(
    fake: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    meta = sdk.beta.files.upload(file=("a.pdf", PDF, "application/pdf"), betas=FILES)
    assert (meta.type, meta.filename, meta.mime_type, meta.size_bytes) == (
        "file",
        "a.pdf",
        "application/pdf",
        len(PDF),
    )
    assert meta.id.startswith("file_") and meta.expires_at is None
    second = sdk.beta.files.upload(file=("b.txt", b"hello", "text/plain"), betas=FILES)
    assert sdk.beta.files.retrieve_metadata(meta.id, betas=FILES).filename == "a.pdf"
    listed = [f.id for f in sdk.beta.files.list(limit=1, betas=FILES)]  # page by page
    assert sorted(listed) == sorted([meta.id, second.id])
    assert fake.uploads == ["a.pdf", "b.txt"]

    fake.expire_file(meta.id)
    expired = sdk.beta.files.retrieve_metadata(meta.id, betas=FILES).expires_at
    assert expired is not None
    deleted = sdk.beta.files.delete(second.id, betas=FILES)
    assert (deleted.id, deleted.type) == (second.id, "file_deleted")
    with pytest.raises(anthropic.NotFoundError) as gone:
        sdk.beta.files.retrieve_metadata(second.id, betas=FILES)
    assert gone.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


def test_the_files_api_needs_its_beta_header_and_refuses_large_files(
    fake: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=contract.BETA_FILES):
        sdk.beta.files.upload(file=("a.pdf", PDF, "application/pdf"))
    with pytest.raises(anthropic.APIStatusError) as large:
        sdk.beta.files.upload(file=("big.pdf", b"%PDF-" + b"0" * 150_000), betas=FILES)
    assert large.value.status_code == 413
    assert fake.uploads == []


def _refusal(
    body: dict[str, Any],
    files: dict[str, contract.FileRecord] | None = None,
    *,
    betas: tuple[str, ...] = (contract.BETA_FILES,),
    rules: Any = None,
) -> contract.ApiError | None:
    headers = {"anthropic-beta": ",".join(betas)}
    if rules is not None:
        return contract.check_documents(body, rules, frozenset(betas), files or {})
    return contract.validate(body, headers, files=files or {})


def _record(expired: bool = False, mime: str = "application/pdf") -> contract.FileRecord:
    return contract.FileRecord("file_x", "a.pdf", mime, PDF, "2026-11-27T00:00:00Z", expired)


@pytest.mark.parametrize(
    ("block", "files", "words", "code"),
    [
        (_pdf_block(), None, None, None),
        ({**_pdf_block(), "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}},
         None, "source.media_type: Input should be 'application/pdf'", None),
        (_pdf_block(b"not a pdf"), None, "The PDF specified was not valid", None),
        ({"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                         "data": "hi"}}, None, None, None),
        ({"type": "document", "source": {"type": "text", "media_type": "text/html",
                                         "data": "hi"}},
         None, "Input should be 'text/plain'", None),
        ({"type": "document"}, None, "source: Field required", None),
        ({"type": "document", "source": {"type": "file", "file_id": "file_x"}},
         {"file_x": _record()}, None, None),
        ({"type": "document", "source": {"type": "file", "file_id": "file_y"}},
         {"file_x": _record()}, "File not found: file_y", None),
        ({"type": "document", "source": {"type": "file", "file_id": "file_x"}},
         {"file_x": _record(expired=True)}, "has expired", "file_expired"),
        ({"type": "document", "source": {"type": "file", "file_id": "file_x"}},
         {"file_x": _record(mime="image/png")}, "must be application/pdf or text/plain", None),
        (_pdf_block(citations={"enabled": "yes"}), None, "citations: expected", None),
        (_pdf_block(title=""), None, "title: String should have", None),
    ],
)  # fmt: skip
def test_document_blocks_are_checked_as_the_api_checks_them(
    block: dict[str, Any],
    files: dict[str, contract.FileRecord] | None,
    words: str | None,
    code: str | None,
) -> None:
    error = _refusal(_body(block), files)
    if words is None:
        assert error is None
        return
    assert error is not None and error.status == 400 and error.type == "invalid_request_error"
    assert words in error.message and error.message.startswith("messages.0.content.0")
    assert error.error_code == code


def test_a_file_source_needs_the_files_beta_header() -> None:
    body = _body({"type": "document", "source": {"type": "file", "file_id": "file_x"}})
    error = _refusal(body, {"file_x": _record()}, betas=())
    assert error is not None and contract.BETA_FILES in error.message


def test_citations_are_all_or_none_and_documents_only_from_the_user() -> None:
    plain = {**_pdf_block(), "citations": {"enabled": False}}
    error = _refusal(_body(_pdf_block(), plain))
    assert error is not None and "all or none" in error.message
    body = _body(_pdf_block())
    body["messages"] = [{"role": "user", "content": "hi"},
                        {"role": "assistant", "content": [_pdf_block()]},
                        {"role": "user", "content": "go on"}]  # fmt: skip
    error = _refusal(body)
    assert error is not None and "only accepted in user messages" in error.message


@pytest.mark.parametrize("feature", ["pdf_input", "citations"])
def test_a_model_without_the_capability_refuses_the_document(feature: str) -> None:
    base = contract.MODELS[MODEL]
    rules = (
        replace(base, pdf_input=False) if feature == "pdf_input" else replace(base, citations=False)
    )
    error = _refusal(_body(_pdf_block()), rules=rules)
    assert error is not None and MODEL in error.message
    source = {"type": "text", "media_type": "text/plain", "data": "x"}
    text = {"type": "document", "source": source, "citations": {"enabled": True}}
    assert (_refusal(_body(text), rules=rules) is None) == (feature == "pdf_input")


def test_a_document_inside_a_tool_result_is_checked_and_counted() -> None:
    body = _body()
    body["messages"] = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": [_pdf_block(b"junk")]}]},
    ]  # fmt: skip
    error = _refusal(body)
    assert error is not None and error.message.startswith("messages.2.content.0.content.0")


def test_an_answer_cites_pages_of_a_pdf_and_characters_of_a_text(
    fake: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    fake.script = [Stream([Cited("Hello.", document=0, page=1), Text(" And "),
                           Cited("two", document=1, chars=(4, 7))])]  # fmt: skip
    text = {"type": "document", "source": {"type": "text", "media_type": "text/plain",
            "data": "Day two."}, "title": "notes.txt", "citations": {"enabled": True}}  # fmt: skip
    body = _body(_pdf_block(title="a.pdf"), text)
    with sdk.messages.stream(**body) as stream:
        message = stream.get_final_message()
    blocks = [b.model_dump(exclude_none=True) for b in message.content if b.type == "text"]
    assert blocks[0]["citations"] == [
        {
            "type": "page_location",
            "cited_text": "Page one says hello.",
            "document_index": 0,
            "document_title": "a.pdf",
            "start_page_number": 1,
            "end_page_number": 2,
        }
    ]
    assert "citations" not in blocks[1]
    assert blocks[2]["citations"] == [
        {
            "type": "char_location",
            "cited_text": "two",
            "document_index": 1,
            "document_title": "notes.txt",
            "start_char_index": 4,
            "end_char_index": 7,
        }
    ]


def test_without_citations_enabled_the_answer_cites_nothing(
    fake: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    fake.script = [Stream([Cited("Hello.", document=0, page=1)])]
    body = _body({**_pdf_block(), "citations": {"enabled": False}})
    message = sdk.messages.create(**body)
    assert message.content[0].type == "text" and message.content[0].citations is None


def test_a_request_larger_than_the_limit_is_refused_413(fake: FakeAnthropic) -> None:
    body = _body(_pdf_block(PDF + b"%" + b"0" * 200_000))
    answer = httpx2.post(
        f"{fake.url}/v1/messages",
        json=body,
        headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
    )
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "request_too_large"
