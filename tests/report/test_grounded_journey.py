"""Grounded research end to end: attached documents, cited answers, the report everywhere.

One run on a current Claude model against the strict contract fake: the analyst attaches
two PDFs and a CSV; the scripted model reads the three files named in its first message,
cites each in an answer, writes ``report.md`` from those answers plus one claim it states
without a citation, and finishes. The same run's report is then read from the journal
(``run_report``), printed by ``show`` (text and ``--json``), served by the HTTP API, and
exported as HTML and Markdown.

What each check expects comes from the script (which file, page or characters each answer
cites, which sentences the report copies) and from the journal (the ``read_file`` step
that read each path, the model step that cited it), never from the report code itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.cli import main
from desktop_agent.client.api import Client
from desktop_agent.client.export import export
from desktop_agent.client.report import Report, run_report
from desktop_agent.domain import RunStatus, Step, StepKind
from desktop_agent.gui.mainwindow import MainWindow
from tests.conftest import MakeExecutor, drain
from tests.documents.pdfs import make_pdf
from tests.gui.conftest import open_window, select, window  # noqa: F401  (the window)
from tests.helpers import chromium
from tests.helpers.fake_anthropic import Cited, FakeAnthropic, Reply, Stream, Text, ToolUse
from tests.httpapi.test_api import Api, api  # noqa: F401  (the server fixture)
from tests.llm.conftest import MakeModel, StartFake, make_model, start_fake  # noqa: F401

MODEL = "claude-sonnet-5-5"
ALPHA_PAGES = ["Alpha: the market was flat in 2024.", "Alpha: revenue grew 4% in 2025."]
BETA_PAGES = [
    "Beta: methods and sample.",
    "Beta: survey of 300 firms.",
    "Beta: churn fell by a third in 2025.",
]
CSV = "region,revenue\nnorth,12\nsouth,7\n"
CSV_ROW = "north,12"


@dataclass(frozen=True)
class Claim:
    """A sentence the model says citing one source, copied into the report.

    Attributes:
        text: the sentence (the cited text block of the answer, and the report's sentence).
        file: the attached file's name (its copy is ``attachments/<file>``).
        page: the page cited (a PDF), else None.
        chars: the characters cited (a text document), else None.
    """

    text: str
    file: str
    page: int | None = None
    chars: tuple[int, int] | None = None


CLAIMS = (
    Claim("Revenue grew 4% across the market in 2025.", "alpha.pdf", page=2),
    Claim("Customer churn fell by a third over the same year.", "beta.pdf", page=3),
    Claim(
        "The north region brought in 12 of revenue.",
        "data.csv",
        chars=(CSV.index(CSV_ROW), CSV.index(CSV_ROW) + len(CSV_ROW)),
    ),
)
UNCITED_CLAIM = "Next year should bring more of the same."
HEADING = "What the sources say"
REPORT_MD = (
    f"# {HEADING}\n\n{CLAIMS[0].text} {CLAIMS[1].text}\n\n- {CLAIMS[2].text}\n\n{UNCITED_CLAIM}\n"
)
"""The report: the three cited sentences copied from the answers, one stated without one."""


def _attached_paths(body: dict[str, Any]) -> list[str]:
    """The workspace paths of the attachments, as the first user message names them."""
    first = body["messages"][0]["content"]
    texts = [b.get("text", "") for b in first if isinstance(b, dict)]
    return [m.group(1) for t in texts for m in re.finditer(r"^- (\S+) \(", t, re.M)]


class Researcher:
    """The scripted model: reads each attached file, citing the one read before each next step.

    Turn 1 reads the first attachment; turns 2 and 3 cite the file just read and read the
    next; turn 4 cites the CSV and writes the report; turn 5 says it is done. Documents are
    numbered in the order they were read (``document_index``), i.e. the attachments' order.
    """

    def __init__(self) -> None:
        self.turn = 0
        self.paths: list[str] = []

    def _cite(self, claim: Claim) -> Cited:
        index = [p.rsplit("/", 1)[-1] for p in self.paths].index(claim.file)
        if claim.page is not None:
            return Cited(claim.text, document=index, page=claim.page)
        return Cited(claim.text, document=index, chars=claim.chars)

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        self.turn += 1
        if self.turn == 1:
            self.paths = _attached_paths(body)
            return Stream([ToolUse("read_file", {"path": self.paths[0]})])
        if self.turn in (2, 3):
            read_next = ToolUse("read_file", {"path": self.paths[self.turn - 1]})
            return Stream([self._cite(CLAIMS[self.turn - 2]), read_next])
        if self.turn == 4:
            write = ToolUse("write_file", {"path": "report.md", "content": REPORT_MD})
            return Stream([self._cite(CLAIMS[2]), write])
        return Stream([Text("The report is in report.md.")])


@dataclass(frozen=True)
class Expected:
    """A reference as the script and the journal say it must be."""

    claim: Claim
    path: str
    """The workspace path the model read (``attachments/<file>``)."""
    passage: str
    """What the source says at the place cited."""
    source_seq: int
    """The ``read_file`` step that read the file."""
    cited_seq: int
    """The model step whose answer holds the claim's cited block."""


@dataclass(frozen=True)
class Journey:
    """The finished run and what its report must show."""

    run_id: str
    fake: FakeAnthropic
    steps: list[Step]
    expected: list[Expected]
    """One per claim, in the report's order."""
    write_seq: int
    """The ``write_file`` step that wrote ``report.md``."""


def _expected(steps: list[Step], paths: list[str]) -> list[Expected]:
    reads = {
        s.input["arguments"]["path"]: s.seq
        for s in steps
        if s.kind == StepKind.TOOL_CALL and s.name == "read_file"
    }
    answers = [s for s in steps if s.kind == StepKind.MODEL_CALL]
    texts = {"alpha.pdf": ALPHA_PAGES, "beta.pdf": BETA_PAGES}
    out = []
    for claim in CLAIMS:
        path = next(p for p in paths if p.rsplit("/", 1)[-1] == claim.file)
        (cited_seq,) = [
            s.seq
            for s in answers
            for b in s.output.get("content", [])
            if b.get("type") == "text" and b.get("text") == claim.text and b.get("citations")
        ]
        if claim.page is not None:
            passage = texts[claim.file][claim.page - 1]
        else:
            assert claim.chars is not None
            passage = CSV[claim.chars[0] : claim.chars[1]]
        out.append(Expected(claim, path, passage, reads[path], cited_seq))
    return out


@pytest.fixture
def journey(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,  # noqa: F811
    make_model: MakeModel,  # noqa: F811
    tmp_path: Path,
) -> Journey:
    """The run: attachments given at its start, read, cited, reported, finished."""
    folder = tmp_path / "analyst"
    folder.mkdir()
    alpha, beta, data = folder / "alpha.pdf", folder / "beta.pdf", folder / "data.csv"
    alpha.write_bytes(make_pdf(ALPHA_PAGES))
    beta.write_bytes(make_pdf(BETA_PAGES))
    data.write_text(CSV, encoding="utf-8")
    script = Researcher()
    fake = start_fake(script)
    run = client.start_run(
        "What happened to the market in 2025?",
        model=MODEL,
        workspace=tmp_path / "ws",
        attachments=[alpha, beta, data],
    )
    drain(client.store, make_executor(make_model(fake)))

    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    refused = [(r.status, r.error) for r in fake.requests if r.error is not None]
    assert refused == [], refused
    assert script.turn == 5 and len(script.paths) == 3
    assert (tmp_path / "ws" / "report.md").read_text(encoding="utf-8") == REPORT_MD
    steps = client.steps(run.id)
    (write,) = [s for s in steps if s.kind == StepKind.TOOL_CALL and s.name == "write_file"]
    return Journey(run.id, fake, steps, _expected(steps, script.paths), write.seq)


def _by_text(report: Report) -> dict[str, Any]:
    return {s.text: s for s in report.sentences}


# --------------------------------------------------------------------------- the journal


def test_the_model_read_each_attachment_as_a_document_and_the_csv_as_text(
    journey: Journey,
) -> None:
    """What the model got: the PDFs as PDF documents, the CSV as a text document."""
    sent = [
        part
        for m in journey.fake.requests[-1].body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b.get("content"), list)
        for part in b["content"]
        if part.get("type") == "document"
    ]
    paths = [e.path for e in journey.expected]
    assert [d["title"] for d in sent] == paths
    assert [d["source"]["type"] for d in sent] == ["base64", "base64", "text"]
    assert [d["source"]["media_type"] for d in sent] == [
        "application/pdf",
        "application/pdf",
        "text/plain",
    ]
    assert sent[2]["source"]["data"] == CSV
    assert all(d["citations"] == {"enabled": True} for d in sent)
    # Every answer keeps its request's documents in document_index order.
    for e in journey.expected:
        step = next(s for s in journey.steps if s.seq == e.cited_seq)
        known = [d["path"] for d in step.output["documents"]]
        assert known == paths[: len(known)] and e.path in known


# --------------------------------------------------------------------------- run_report


def test_run_report_cites_each_copied_sentence_from_its_file_page_and_reading_step(
    client: Client, journey: Journey
) -> None:
    report = run_report(client, journey.run_id)
    assert report is not None
    assert (report.path, report.seq, report.markdown) == ("report.md", journey.write_seq, REPORT_MD)
    by_text = _by_text(report)
    assert set(by_text) >= {c.text for c in CLAIMS} | {UNCITED_CLAIM, HEADING}
    assert not by_text[HEADING].claim  # a heading is not a claim: neither cited nor marked
    for number, e in enumerate(journey.expected, start=1):
        sentence = by_text[e.claim.text]
        assert sentence.refs == (number,), (e.claim.text, sentence.refs)  # first-cited order
        ref = report.reference(number)
        assert ref is not None
        assert (ref.path, ref.source_seq, ref.cited_seq, ref.step) == (
            e.path,
            e.source_seq,
            e.cited_seq,
            e.source_seq,
        )
        assert " ".join(ref.passage.split()) == e.passage
        if e.claim.page is not None:
            assert (ref.pages, ref.chars) == ((e.claim.page, e.claim.page), None)
        else:  # the CSV is a text document: cited by characters, no page
            assert (ref.pages, ref.chars) == (None, e.claim.chars)
    assert len(report.references) == len(CLAIMS)
    assert [s.text for s in report.uncited] == [UNCITED_CLAIM]
    assert by_text[UNCITED_CLAIM].uncited and by_text[UNCITED_CLAIM].refs == ()
    # The source step is the read of that path, and the citing step a model call.
    kinds = {s.seq: (s.kind, s.name) for s in journey.steps}
    for e in journey.expected:
        assert kinds[e.source_seq] == (StepKind.TOOL_CALL, "read_file")
        assert kinds[e.cited_seq][0] == StepKind.MODEL_CALL
        assert e.cited_seq > e.source_seq


# --------------------------------------------------------------------------- CLI


def _cli(client: Client, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = main(["--db", str(client.db_path), *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _reference_line(lines: list[str], number: int) -> str:
    (line,) = [x.strip() for x in lines if x.strip().startswith(f"[{number}] ")]
    return line


def test_show_prints_markers_the_uncited_mark_and_references_with_file_page_and_step(
    client: Client, journey: Journey, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _cli(client, capsys, "show", journey.run_id)
    report = text[text.index("Report: ") :]
    lines = report.splitlines()
    assert f"report.md, written at step {journey.write_seq}" in lines[0]
    assert f"{len(CLAIMS)} of {len(CLAIMS) + 1} sentences cited" in lines[0]
    for number, e in enumerate(journey.expected, start=1):
        assert f"{e.claim.text} [{number}]" in report
        line = _reference_line(lines, number)
        assert line.startswith(f"[{number}] {e.path}")
        assert f"read at step {e.source_seq}" in line and f"cited at step {e.cited_seq}" in line
        assert e.passage in line
        if e.claim.page is not None:
            assert re.search(rf"\bp\. {e.claim.page}\b", line), line
        else:
            assert e.claim.chars is not None
            assert f"{e.claim.chars[0]}–{e.claim.chars[1]}" in line and "p." not in line
    assert f"{UNCITED_CLAIM} [?]" in report
    assert f"{HEADING} [" not in report
    assert sum(x.strip().startswith("[?] ") for x in lines) == 1  # the legend, once


def _json_refs(references: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (r["number"], r["path"], r["pages"], r["chars"], r["source_seq"], r["cited_seq"])
        for r in references
    ]


def _expected_refs(journey: Journey) -> list[tuple[Any, ...]]:
    return [
        (
            n,
            e.path,
            [e.claim.page, e.claim.page] if e.claim.page is not None else None,
            list(e.claim.chars) if e.claim.chars is not None else None,
            e.source_seq,
            e.cited_seq,
        )
        for n, e in enumerate(journey.expected, start=1)
    ]


def _check_sentences(sentences: list[dict[str, Any]]) -> None:
    by_text = {s["text"]: s for s in sentences}
    for n, claim in enumerate(CLAIMS, start=1):
        assert by_text[claim.text]["refs"] == [n] and not by_text[claim.text]["uncited"]
    assert by_text[UNCITED_CLAIM]["refs"] == [] and by_text[UNCITED_CLAIM]["uncited"]
    assert [s["text"] for s in sentences if s["uncited"]] == [UNCITED_CLAIM]


def test_show_json_has_the_same_references(
    client: Client, journey: Journey, capsys: pytest.CaptureFixture[str]
) -> None:
    report = json.loads(_cli(client, capsys, "show", journey.run_id, "--json"))["report"]
    assert (report["path"], report["seq"]) == ("report.md", journey.write_seq)
    assert _json_refs(report["references"]) == _expected_refs(journey)
    _check_sentences(report["sentences"])
    assert (report["cited"], report["uncited"]) == (len(CLAIMS), 1)


# --------------------------------------------------------------------------- HTTP API


def test_the_api_serves_the_same_report(
    api: Api,  # noqa: F811
    journey: Journey,
) -> None:
    got = api.http.get(f"/v1/runs/{journey.run_id}/report")
    assert got.status_code == 200, got.text
    body = got.json()
    assert (body["run_id"], body["path"], body["seq"]) == (
        journey.run_id,
        "report.md",
        journey.write_seq,
    )
    assert _json_refs(body["references"]) == _expected_refs(journey)
    for r, e in zip(body["references"], journey.expected, strict=True):
        assert " ".join(r["passage"].split()) == e.passage
    _check_sentences(body["sentences"])
    assert body["annotated"].rstrip().endswith(f"{UNCITED_CLAIM} [?]")


# --------------------------------------------------------------------------- exports


class Page(HTMLParser):
    """The exported page: element ids (and the tag, text of each), links, uncited spans.

    ``links_in[id]`` lists the links inside the element of that id; ``text_of[id]`` its
    text; ``first`` the first ``h2`` or ``table`` of the page (the facts' table, a section).
    """

    VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "col", "wbr"})

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, str] = {}
        self.text_of: dict[str, str] = {}
        self.links_in: dict[str, list[str]] = {}
        self.links: list[str] = []
        self.uncited: list[str] = []
        self.first: list[str] = []
        self._open: list[tuple[str, str | None, bool]] = []  # (tag, id, is uncited span)
        self._h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        ident = found.get("id")
        if ident:
            assert ident not in self.tags, f"id {ident!r} twice"
            self.tags[ident] = tag
            self.text_of[ident] = ""
            self.links_in[ident] = []
        if tag == "a" and found.get("href"):
            href = str(found["href"])
            self.links.append(href)
            for _, open_id, _ in self._open:
                if open_id:
                    self.links_in[open_id].append(href)
        uncited = tag == "span" and "uncited" in str(found.get("class") or "").split()
        if uncited:
            self.uncited.append("")
        if tag in ("h2", "table") and len(self.first) < 2:
            self.first.append(tag)
            self._h2 = tag == "h2"
        if tag not in self.VOID:
            self._open.append((tag, ident, uncited))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                del self._open[i:]
                break
        if tag == "h2":
            self._h2 = False

    def handle_data(self, data: str) -> None:
        for _, open_id, _ in self._open:
            if open_id:
                self.text_of[open_id] += data
        if any(u for _, _, u in self._open):
            self.uncited[-1] += data
        if self._h2 and self.first and self.first[-1] == "h2":
            self.first[-1] = f"h2:{data.strip()}"


def test_html_export_opens_with_the_report_and_its_references_reach_the_reading_steps(
    client: Client, journey: Journey
) -> None:
    _, html = export(client, journey.run_id, "html")
    page = Page()
    page.feed(html)
    page.close()
    assert page.first and page.first[0] == "h2:Report", page.first  # before any other section
    report_at = html.index(">Report</h2>")
    assert html.index(HEADING) > report_at and html.index(CLAIMS[0].text) > report_at
    for number, e in enumerate(journey.expected, start=1):
        # The sentence's [n] links to its reference, which is in the page...
        assert f"#ref-{number}" in page.links
        ref_id = f"ref-{number}"
        assert page.tags.get(ref_id) is not None, ref_id
        text = " ".join(page.text_of[ref_id].split())
        assert e.path in text and e.passage in text, text
        if e.claim.page is not None:
            assert re.search(rf"\bp\. {e.claim.page}\b", text), text
        # ...whose links reach the step that read the source and the one that cited it.
        links = page.links_in[ref_id]
        assert f"#step-{e.source_seq}" in links and f"#step-{e.cited_seq}" in links, links
        for seq in (e.source_seq, e.cited_seq):
            assert page.tags.get(f"step-{seq}") == "tr", f"no row step-{seq}"
        row = page.text_of[f"step-{e.source_seq}"]
        assert "read_file" in row and e.path in row, row
    # Every in-page link of the report lands on an element of the page.
    missing = [h for h in page.links if h.startswith("#") and h[1:] not in page.tags]
    assert missing == []
    assert UNCITED_CLAIM in page.uncited
    cited_texts = {c.text for c in CLAIMS}
    assert not any(u.strip() in cited_texts for u in page.uncited)
    assert not any(HEADING in u for u in page.uncited)


UNCITED_TINT = (0xFF, 0xE9, 0xA8)  # the export's style sheet: .uncited { background: #ffe9a8 }


def _tinted_pixels(png: Path) -> tuple[int, int]:
    """How many pixels of the screenshot have the uncited tint, and how many colours it has."""
    from PySide6.QtGui import QImage

    image = QImage(str(png))
    assert not image.isNull(), png
    tinted, colours = 0, set()
    for y in range(0, image.height(), 2):
        for x in range(0, image.width(), 2):
            c = image.pixelColor(x, y)
            rgb = (c.red(), c.green(), c.blue())
            colours.add(rgb)
            tinted += rgb == UNCITED_TINT
    return tinted, len(colours)


def test_the_html_export_in_headless_chromium_keeps_links_and_shows_the_uncited_claim(
    client: Client, journey: Journey, tmp_path: Path
) -> None:
    _, html = export(client, journey.run_id, "html")
    page_file = tmp_path / "run.html"
    page_file.write_text(html, encoding="utf-8")
    # The DOM Chromium built: the report comes first, every reference is there with its
    # file and passage, and every in-page link lands on an element.
    page = Page()
    page.feed(chromium.rendered_dom(page_file))
    page.close()
    assert page.first and page.first[0] == "h2:Report", page.first
    for number, e in enumerate(journey.expected, start=1):
        text = " ".join(page.text_of[f"ref-{number}"].split())
        assert e.path in text and e.passage in text, text
        assert page.tags.get(f"step-{e.source_seq}") == "tr"
    assert [h for h in page.links if h.startswith("#") and h[1:] not in page.tags] == []
    assert UNCITED_CLAIM in page.uncited
    # What it drew: the top of the page (the report) is not blank, and the uncited claim
    # is tinted where a reader sees it.
    shot = chromium.screenshot(page_file, tmp_path / "run.png", width=1200, height=1400)
    tinted, colours = _tinted_pixels(shot)
    assert colours > 8, "the page drew next to nothing"
    assert tinted > 200, f"the uncited claim's tint is not on the page ({tinted} pixels)"


def _selected_seq(detail: Any) -> int | None:
    entry = detail.current_entry()
    return None if entry is None else int(entry.seq)


def test_the_report_tab_links_each_cited_sentence_to_the_step_that_read_its_source(
    qtbot: QtBot,
    window: MainWindow,  # noqa: F811
    client: Client,
    journey: Journey,
) -> None:
    from desktop_agent.gui.widgets.report_view import uncited_tint
    from tests.report.test_report_gui import _fragment

    select(qtbot, window, journey.run_id)
    detail = window.detail
    view = detail.report_view
    detail.inspector.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.report is not None and view.run_id == journey.run_id)
    doc = view.browser.document()
    text = doc.toPlainText()
    tint = uncited_tint(view.palette()).name()
    assert _fragment(doc, UNCITED_CLAIM, href=False)[1] == tint  # marked at a glance
    for number, e in enumerate(journey.expected, start=1):
        assert f"{e.claim.text} [{number}]" in text
        assert _fragment(doc, e.claim.text, href=False)[1] != tint
        # A click on the reference's link selects the step that read the source.
        detail.select_step(journey.write_seq)
        position, _ = _fragment(doc, f"ref:{number}", href=True)
        cursor = QTextCursor(doc)
        cursor.setPosition(position)
        view.browser.ensureCursorVisible()
        at = view.browser.cursorRect(cursor).center()
        QTest.mouseClick(
            view.browser.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at
        )
        source = e.source_seq
        qtbot.waitUntil(lambda: _selected_seq(detail) == source)  # noqa: B023 (waited for now)


def test_markdown_export_keeps_the_references(client: Client, journey: Journey) -> None:
    _, text = export(client, journey.run_id, "md")
    start = text.index("## Report")
    rest = text[start + len("## Report") :]
    section = rest[: m.start()] if (m := re.search(r"^## ", rest, re.M)) else rest
    lines = section.splitlines()
    for number, e in enumerate(journey.expected, start=1):
        assert f"{e.claim.text} [{number}]" in section
        (line,) = [x for x in lines if x.lstrip("- ").startswith(f"[{number}] ")]
        assert e.path in line and e.passage in line
        assert f"read at step {e.source_seq}" in line and f"cited at step {e.cited_seq}" in line
        if e.claim.page is not None:
            assert re.search(rf"\bp\. {e.claim.page}\b", line), line
    assert f"{UNCITED_CLAIM} [?]" in section
