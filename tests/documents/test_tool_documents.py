"""What read_file and web_fetch add for documents: a descriptor, next to the same text."""

from __future__ import annotations

import hashlib
from pathlib import Path

from desktop_agent.engine.control import run_tool
from desktop_agent.tools.files import ReadFile
from desktop_agent.tools.web import WebFetch
from tests.documents.pdfs import make_pdf
from tests.tools.conftest import MakeCtx
from tests.tools.servers import HttpServer, Reply


def _kept(descriptor: object, data: bytes, ws: Path) -> None:
    assert isinstance(descriptor, dict)
    assert descriptor["sha256"] == hashlib.sha256(data).hexdigest()
    assert descriptor["size"] == len(data)
    blob = Path(str(descriptor["blob"]))
    assert not blob.is_absolute()  # the journal names no folder of this machine
    assert (ws / blob).read_bytes() == data  # the bytes the tool read, under the workspace


def test_read_file_of_a_pdf_keeps_its_text_and_describes_the_file(
    make_ctx: MakeCtx, ws: Path
) -> None:
    data = make_pdf(["Revenue grew 4% in 2025."])
    (ws / "docs").mkdir()
    (ws / "docs" / "report.pdf").write_bytes(data)
    res = run_tool(ReadFile(), {"path": "docs/report.pdf"}, make_ctx())
    assert not res.is_error and "Revenue grew 4% in 2025." in res.content
    assert isinstance(res.data, dict)
    document = res.data["document"]
    _kept(document, data, ws)
    assert isinstance(document, dict)
    assert (document["path"], document["title"], document["media_type"]) == (
        "docs/report.pdf",
        "docs/report.pdf",
        "application/pdf",
    )
    # The file changes later: the kept copy is still what was read.
    (ws / "docs" / "report.pdf").write_bytes(make_pdf(["Changed."]))
    _kept(document, data, ws)
    # A later part of the same file (offset) carries no document: it was given whole.
    more = run_tool(ReadFile(), {"path": "docs/report.pdf", "offset": 5}, make_ctx())
    assert isinstance(more.data, dict) and "document" not in more.data


def test_read_file_of_text_and_of_other_files(make_ctx: MakeCtx, ws: Path) -> None:
    (ws / "notes.md").write_text("Sales rose.\n")
    (ws / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    text = run_tool(ReadFile(), {"path": "notes.md"}, make_ctx())
    assert isinstance(text.data, dict)
    _kept(text.data["document"], b"Sales rose.\n", ws)
    assert isinstance(text.data["document"], dict)
    assert text.data["document"]["media_type"] == "text/plain"
    latin = run_tool(ReadFile(), {"path": "latin.txt"}, make_ctx())
    assert isinstance(latin.data, dict) and "document" not in latin.data  # not UTF-8


def test_web_fetch_of_a_pdf_describes_it_by_its_url_and_from_its_cache(
    http_server: HttpServer, make_ctx: MakeCtx, ws: Path
) -> None:
    data = make_pdf(["Churn fell to 3 percent."])
    http_server.routes["/paper.pdf"] = Reply(200, data, {"Content-Type": "application/pdf"})
    url = http_server.url("/paper.pdf")
    ctx = make_ctx(allow_private_fetch=True)
    first = run_tool(WebFetch(), {"url": url}, ctx)
    assert "Churn fell to 3 percent." in first.content
    assert isinstance(first.data, dict)
    document = first.data["document"]
    _kept(document, data, ws)
    assert isinstance(document, dict) and document["title"] == url
    again = run_tool(WebFetch(), {"url": url}, ctx)  # from the run's cache
    assert isinstance(again.data, dict) and again.data["cached"] is True
    assert again.data["document"] == document
    assert len(http_server.hits("/paper.pdf")) == 1


def test_web_fetch_of_a_page_carries_no_document(
    http_server: HttpServer, make_ctx: MakeCtx
) -> None:
    http_server.routes["/page"] = Reply(
        200, b"<html><body><p>Hello there.</p></body></html>", {"Content-Type": "text/html"}
    )
    res = run_tool(
        WebFetch(), {"url": http_server.url("/page")}, make_ctx(allow_private_fetch=True)
    )
    assert isinstance(res.data, dict) and "document" not in res.data
