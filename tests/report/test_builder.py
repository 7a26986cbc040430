"""The report builder: which text is the report, citations resolved, sentences cited or not."""

from __future__ import annotations

from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.client.report import (
    UNCITED,
    BlockKind,
    Origin,
    is_report_path,
    matches,
    report_json,
    run_report,
)
from desktop_agent.client.report_html import Renderer
from tests.report.journals import ALPHA, BETA, GREW, cited_run


def test_a_written_report_file_is_the_report_and_its_sentences_match_cited_answers(
    client: Client, workspace: Path
) -> None:
    run = cited_run(client, workspace)
    report = run_report(client, run.run_id[:8])
    assert report is not None
    assert (report.origin, report.path, report.seq) == (Origin.FILE, "report.md", run.write)
    by_text = {s.text: s for s in report.sentences}
    assert by_text["The market grew 4% in 2025, says Alpha."].refs == (1,)
    assert by_text["Churn fell by a third over the year."].refs == (2,)
    assert by_text["The **market grew 4% in 2025**, again."].refs == (1,)  # marks ignored
    assert [s.text for s in report.uncited] == [
        "_Drafted from the notes._",
        "Three vendors lead the field.",  # the answer said it too, but cited nothing
    ]
    heading = report.blocks[0]
    assert heading.kind == BlockKind.HEADING and not heading.sentences[0].uncited
    assert report.coverage_words() == "3 of 5 sentences cited"


def test_citations_resolve_to_file_location_passage_and_the_step_that_read_it(
    client: Client, workspace: Path
) -> None:
    report = run_report(client, cited_run(client, workspace).run_id)
    assert report is not None
    first, second = report.references
    assert (first.number, first.path, first.source_seq, first.cited_seq) == (1, "alpha.pdf", 2, 4)
    assert first.pages == (3, 4) and first.where == "pp. 3–4"  # the API's end page is exclusive
    assert first.passage == GREW["cited_text"]
    assert (second.path, second.source_seq, second.chars) == ("beta.txt", 3, (120, 142))
    assert second.step == 3
    assert report.reference_lines()[0] == (
        "[1] alpha.pdf, pp. 3–4: “The market grew 4% in 2025.” (read at step 2; cited at step 4)"
    )


def test_the_last_answer_is_the_report_when_no_file_was_written_and_its_blocks_cite(
    client: Client, workspace: Path
) -> None:
    run = cited_run(client, workspace, report=None)
    report = run_report(client, run.run_id)
    assert report is not None
    assert (report.origin, report.seq, report.path) == (Origin.ANSWER, run.answer, "")
    assert report.annotated() == (
        "According to Alpha, the market grew 4% in 2025. [1] Beta adds that churn fell by a "
        f"third. [2] Three vendors lead the field. {UNCITED}"
    )
    assert [r.source_seq for r in report.references] == [2, 3]


def test_without_documents_a_citation_keeps_its_title_and_points_at_the_citing_step(
    client: Client, workspace: Path
) -> None:
    run = cited_run(client, workspace, report=None, documents=[])
    report = run_report(client, run.run_id)
    assert report is not None
    ref = report.references[0]
    assert (ref.path, ref.source_seq, ref.step) == ("alpha.pdf", None, run.answer)
    assert "read at" not in ref.line()


def test_a_report_without_any_citation_marks_every_claim_and_lists_no_reference(
    client: Client, workspace: Path
) -> None:
    plain = [{"type": "text", "text": "Nothing cited here. Nor here."}]
    run = cited_run(client, workspace, report=None, answer=plain)
    report = run_report(client, run.run_id)
    assert report is not None and report.references == ()
    assert report.annotated() == f"Nothing cited here. {UNCITED} Nor here. {UNCITED}"
    data = report_json(report)
    assert data is not None and data["uncited"] == 2 and data["cited"] == 0


def test_a_run_with_nothing_to_report_has_no_report(client: Client) -> None:
    run = client.start_run("Nothing yet", model="demo")
    assert run_report(client, run.id) is None
    assert report_json(None) is None


def test_the_matching_rule_words_not_marks_and_three_words_at_least() -> None:
    block = "the market grew 4% in 2025"
    assert matches("Studies show *the market grew 4%* in 2025.", block)  # contains the block
    assert matches("THE  market\ngrew 4% in 2025 [3]", block)  # case, spaces, markers
    assert matches("Market grew 4% in 2025.", "Alpha says the market grew 4% in 2025 too.")
    assert not matches("The market grew 45% in 2025.", block)  # whole words only
    assert not matches("Churn fell.", "Beta says churn fell sharply.")  # two words: no match
    assert not matches("Vendors lead.", block)
    assert is_report_path("report.md") and is_report_path("out/Final-Report.markdown")
    assert not is_report_path("notes.md") and not is_report_path("report.py")


def test_rendered_html_escapes_the_text_links_references_and_tints_uncited(
    client: Client, workspace: Path
) -> None:
    hostile = "# Title\n\nThe market grew 4% in 2025 <script>alert(1)</script>. Plain claim.\n"
    run = cited_run(client, workspace, report=hostile, documents=[ALPHA, BETA])
    report = run_report(client, run.run_id)
    assert report is not None
    page = Renderer(lambda n: f"#ref-{n}", lambda s: f"#step-{s}").fragment(report)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<a class='ref' href='#ref-1'>[1]</a>" in page
    assert "<p id='ref-1'>" in page and "href='#step-2'" in page
    assert "<ol" not in page  # the [n] is the number: a list would number them twice
    assert (
        "<span class='uncited' title='no citation supports this sentence'>Plain claim.</span>"
        in page
    )
    assert "<h1>Title</h1>" in page
