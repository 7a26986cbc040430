"""``desktop-agent search`` through the real command line, on a journal of real runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from tests.helpers import postgres
from tests.search.conftest import Corpus

pytestmark = pytest.mark.parametrize("backend", postgres.BACKENDS)

REPO = Path(__file__).resolve().parents[2]


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def test_text_output_marks_the_match_and_sums_up(client: Client, corpus: Corpus) -> None:
    result = cli(client.db_path, "search", "quokka", "--kind", "tool_call")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"run {corpus.reader[:8]} #2 tool_call read_file ")
    assert "[quokka]" in lines[1] and "\x1b" not in result.stdout  # not a terminal
    assert lines[2] == "  goal: Survey the island wildlife notes"
    assert lines[-1] == "1 match in 1 run (0 archived)"


def test_json_output_has_stable_keys(client: Client, corpus: Corpus) -> None:
    result = cli(client.db_path, "search", "embargoed", "--model", "claude-sonnet-4-5", "--json")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert hits and {h["run_id"] for h in hits} == {corpus.rejected}
    assert set(hits[0]) == {
        "run_id", "seq", "kind", "tool", "time", "snippet", "spans", "archived", "goal",
        "run_status",
    }  # fmt: skip
    start, end = hits[0]["spans"][0]
    assert hits[0]["snippet"][start:end] == "embargoed"


def test_no_match_is_a_helpful_line_and_exit_0(client: Client, corpus: Corpus) -> None:
    result = cli(client.db_path, "search", "quokka", "--since", "tomorrow-ish")
    assert result.returncode == 2 and "is not a date" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result = cli(client.db_path, "search", "zeppelin")
    assert result.returncode == 0 and result.stdout.startswith("no matches;")


def test_a_malformed_query_exits_2_with_one_line(client: Client, corpus: Corpus) -> None:
    result = cli(client.db_path, "search", 'quokka "open')
    assert result.returncode == 2
    assert result.stderr.strip() == (
        'desktop-agent: error: the search has an unmatched double quote (")'
    )
