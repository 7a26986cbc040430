"""``desktop-agent export``: a run as one self-contained HTML page or Markdown, never a key."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from desktop_agent.client.api import Client
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.search.test_cli_search import cli

SECRET = "sk-ant-api03-" + "Zq9w" * 8


class Tags(HTMLParser):
    """Every tag and the URLs a page would fetch."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.fetches: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith("#"):
                self.fetches.append(value)


def _run_with_a_secret(client: Client, make_executor: MakeExecutor, ws: Path) -> str:
    run = client.start_run("Note the Q3 vendor share", model="demo", workspace=ws)
    note = {"path": "notes.md", "text": f"token {SECRET} for later"}
    report = {"path": "report.md", "content": "# Q3\nVendors hold 71% of the market.\n"}
    replies = [
        Reply("Planning.", [("update_plan", {"items": [{"text": "Take notes", "done": True}]})]),
        Reply(f"Keeping {SECRET} aside.", [("append_note", note)]),  # a key in the text
        Reply("Reporting.", [("write_file", report)]),  # the report: the file the run wrote
        Reply("Done."),
    ]
    drain(client.store, make_executor(ScriptedModel(replies)))
    return run.id


def test_html_is_one_page_with_the_run_its_timeline_and_report_and_no_key(
    client: Client, make_executor: MakeExecutor, workspace: Path, tmp_path: Path
) -> None:
    run_id = _run_with_a_secret(client, make_executor, workspace)
    out = tmp_path / "run.html"
    result = cli(client.db_path, "export", run_id[:6], "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["path"] == str(out)
    page = out.read_text()
    tags = Tags()
    tags.feed(page)
    assert {"html", "svg", "rect", "table"} <= set(tags.tags)
    assert tags.fetches == []  # self-contained: nothing to fetch
    assert "Note the Q3 vendor share" in page and "Vendors hold 71% of the market." in page
    assert "☑ Take notes" in page and "append_note" in page
    assert SECRET not in page and "[redacted]" in page
    again = cli(client.db_path, "export", run_id, "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr


def test_markdown_has_the_facts_plan_steps_and_report_and_no_key(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run_id = _run_with_a_secret(client, make_executor, workspace)
    result = cli(client.db_path, "export", run_id, "--format", "md", "--out", "-")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("# Note the Q3 vendor share\n")
    assert "| Run id | " + run_id + " |" in text and "- [x] Take notes" in text
    assert "## Report" in text and "Vendors hold 71%" in text
    assert SECRET not in text and "Keeping [redacted] aside." in text
    missing = cli(client.db_path, "export", "nosuchrun")
    assert missing.returncode == 2 and "no run 'nosuchrun'" in missing.stderr
