"""The report where it is read: ``show`` (text and JSON), the HTTP API, HTML and Markdown."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.client.export import export
from tests.export.conftest import cli
from tests.httpapi.test_api import Api, api  # noqa: F401  (the server fixture)
from tests.report.journals import cited_run


def test_show_prints_the_report_with_references_and_uncited_sentences_marked(
    client: Client, workspace: Path
) -> None:
    run = cited_run(client, workspace)
    result = cli(client.db_path, "show", run.run_id)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    report = text[text.index("Report: report.md, written at step 5 · 3 of 5 sentences cited") :]
    assert "  The market grew 4% in 2025, says Alpha. [1] Churn fell by a third" in report
    assert "  Three vendors lead the field. [?]" in report
    assert "  [1] alpha.pdf, pp. 3–4: “The market grew 4% in 2025.” (read at step 2;" in report
    assert "  [?] a sentence no citation supports (2)" in report
    assert text.index("Report: ") > text.index("read_file")  # after the journal


def test_show_json_carries_the_report(client: Client, workspace: Path) -> None:
    run = cited_run(client, workspace, report=None)
    result = cli(client.db_path, "show", run.run_id, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["report"]
    assert report["origin"] == "answer" and report["seq"] == run.answer
    assert [r["source_seq"] for r in report["references"]] == [2, 3]
    assert report["references"][0]["pages"] == [3, 4]
    assert [s["refs"] for s in report["sentences"]] == [[1], [2], []]
    assert report["uncited"] == 1 and report["annotated"].endswith("the field. [?]")
    empty = client.start_run("Not started", model="demo")
    none = json.loads(cli(client.db_path, "show", empty.id, "--json").stdout)
    assert none["report"] is None


def test_the_api_serves_the_report_and_says_when_there_is_none(
    api: Api,  # noqa: F811
    client: Client,
    workspace: Path,
) -> None:
    run = cited_run(client, workspace)
    got = api.http.get(f"/v1/runs/{run.run_id[:8]}/report")
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["run_id"] == run.run_id and body["path"] == "report.md"
    assert body["seq"] == run.write and body["cited"] == 3 and body["uncited"] == 2
    assert body["references"][1]["chars"] == [120, 142]
    empty = client.start_run("Not started", model="demo")
    none = api.http.get(f"/v1/runs/{empty.id}/report")
    assert none.status_code == 404 and none.json()["code"] == "no_report"
    assert api.http.get("/v1/runs/nosuchrun/report").json()["code"] == "not_found"


class Anchors(HTMLParser):
    """Ids, links, and the text inside ``.uncited`` spans, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.uncited: list[str] = []
        self._depth = 0
        self.order: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        if tag == "a" and found.get("href"):
            self.links.append(str(found["href"]))
        if tag == "span" and found.get("class") == "uncited":
            self._depth += 1
            self.uncited.append("")
        if tag in ("h2", "table"):
            self.order.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self._depth:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._depth:
            self.uncited[-1] += data
        if self.order and self.order[-1] == "h2":
            self.order[-1] = f"h2:{data}"


def test_html_export_opens_with_the_rendered_report_linking_to_the_steps(
    client: Client, workspace: Path
) -> None:
    run = cited_run(client, workspace)
    _, page = export(client, run.run_id, "html")
    parsed = Anchors()
    parsed.feed(page)
    assert parsed.order[0] == "h2:Report"  # before the facts' table and every section
    assert "<h3>Q3 market</h3>" in page and "<pre>" not in page.split("h2>Report")[1][:200]
    assert "#ref-1" in parsed.links and "ref-1" in parsed.ids
    for link in ("#step-2", "#step-3", "#step-4"):
        assert link in parsed.links and link[1:] in parsed.ids  # each reference reaches a step
    assert parsed.uncited[:2] == ["Drafted from the notes.", "Three vendors lead the field."]
    assert "Tinted" in page and "rest on no citation" in page


def test_markdown_export_keeps_the_references_and_the_marks(
    client: Client, workspace: Path
) -> None:
    run = cited_run(client, workspace)
    _, text = export(client, run.run_id, "md")
    report = text[text.index("## Report") : text.index("| | |")]
    assert "### Q3 market" in report  # its headings under the page's
    assert "The market grew 4% in 2025, says Alpha. [1]" in report
    assert "Three vendors lead the field. [?]" in report
    assert re.search(
        r"- \[1\] alpha\.pdf, pp\. 3–4: .* \(read at step 2; cited at step 4\)", report
    )
    assert "- [?] a sentence no citation supports (2)" in report
