"""The three export formats of a run made through the store: what they hold, and never a key."""

from __future__ import annotations

import hashlib
import json
from html.parser import HTMLParser
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.client.export import BUNDLE_FORMAT, BUNDLE_VERSION, bundle_bytes
from desktop_agent.persistence.archive import ARCHIVE_FORMAT
from tests.conftest import MakeExecutor
from tests.export.conftest import (
    HOSTILE,
    bundle_members,
    cli,
    manifest_of,
    no_secret,
    secret_run,
)


class Page(HTMLParser):
    """The tags of a page, what it would fetch, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.fetches: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith("#"):
                self.fetches.append(value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_holds_the_run_timeline_steps_approvals_report_and_no_secret(
    client: Client, make_executor: MakeExecutor, workspace: Path, tmp_path: Path
) -> None:
    run_id = secret_run(client, make_executor, workspace)
    out = tmp_path / "run.html"
    result = cli(client.db_path, "export", run_id[:6], "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["path"] == str(out)
    page = out.read_text()
    parsed = Page()
    parsed.feed(page)
    text = "".join(parsed.text)
    assert parsed.fetches == [] and "script" not in parsed.tags  # self-contained, no script
    assert {"svg", "rect", "details", "table"} <= set(parsed.tags)
    assert "Summarise the Q3 vendor notes" in text and "☑ Read the notes" in text
    assert "Approvals and decisions" in text and "approved" in text and "fine, Bearer" in text
    assert "Vendors hold 71% of the market." in text and "findings.md" in text
    assert "Tool write_file: arguments" in text  # the inspector's sections, as in the app
    assert HOSTILE in text and "<b>" not in page  # shown as text, never as markup
    assert "characters in all; the first 2,000 shown" in text  # the long thought, clipped
    assert no_secret(page) and "[redacted]" in page
    again = cli(client.db_path, "export", run_id, "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr


def test_markdown_has_the_facts_plan_steps_approvals_report_and_no_secret(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run_id = secret_run(client, make_executor, workspace)
    result = cli(client.db_path, "export", run_id, "--format", "md", "--out", "-")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("# Summarise the Q3 vendor notes")
    assert f"| Run id | {run_id} |" in text and "- [x] Read the notes" in text
    assert "| # | step | what | status | time | tokens in/out | cost |" in text
    assert "## Approvals" in text and "| write_file | approved |" in text
    assert "## Report" in text and "Vendors hold 71%" in text
    assert no_secret(text) and "[redacted]" in text


def test_bundle_has_a_manifest_with_checksums_the_record_and_the_files_without_secrets(
    client: Client, make_executor: MakeExecutor, workspace: Path, tmp_path: Path
) -> None:
    run_id = secret_run(client, make_executor, workspace)
    out = tmp_path / "run.tar.gz"
    result = cli(client.db_path, "export", run_id, "--format", "bundle", "--out", str(out))
    assert result.returncode == 0, result.stderr
    members = bundle_members(out)
    manifest = manifest_of(members)
    assert (manifest["format"], manifest["version"]) == (BUNDLE_FORMAT, BUNDLE_VERSION)
    assert manifest["run_id"] == run_id and manifest["app_version"]
    assert set(members) == {"manifest.json", "run.jsonl", "files/findings.md", "files/report.md"}
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == hashlib.sha256(members[name]).hexdigest()
    (line,) = members["run.jsonl"].decode().splitlines()
    record = json.loads(line)
    assert record["format"] == ARCHIVE_FORMAT and record["run"]["id"] == run_id
    assert {"steps", "approvals", "commands", "events"} <= set(record)
    assert len(record["steps"]) == client.run(run_id).last_seq and record["approvals"]
    assert b"# Findings" in members["files/findings.md"]
    for data in members.values():
        assert no_secret(data.decode())


def test_a_file_over_the_cap_is_left_out_with_a_note(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run_id = secret_run(client, make_executor, workspace)
    info, _data = bundle_bytes(client, run_id, cap=60)  # report.md fits, findings.md not
    assert info.files == ("report.md",)
    assert info.left_out and info.left_out[0].startswith("findings.md: ")
    assert "more than the 60 a bundle carries" in info.left_out[0]


def test_a_forks_bundle_carries_the_steps_it_shares_with_its_parent(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    from desktop_agent.client.forks import fork

    parent = secret_run(client, make_executor, workspace)
    child = fork(client, parent, 2, note="Write the findings as a table")
    _info, data = bundle_bytes(client, child.id)
    out = workspace.parent / "fork.tar.gz"
    out.write_bytes(data)
    record = json.loads(bundle_members(out)["run.jsonl"])
    shared = [s for s in record["steps"] if s["seq"] <= 2]
    assert [s["seq"] for s in shared] == [1, 2] and shared[1]["name"] == "update_plan"
    assert {s["run_id"] for s in record["steps"]} == {child.id}
    assert record["run"]["forked_at_seq"] == 0 and record["shared_steps_copied"] == 2
    assert no_secret(json.dumps(record))
