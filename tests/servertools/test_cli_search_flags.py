"""The `run` command's web search flags: domains reach the run; both lists are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from tests.cli.test_cli import cli


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "agent.db"
    Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
    return path


def test_search_domains_reach_the_run(db: Path) -> None:
    queued = cli(
        db, "run", "Look", "--model", "claude-sonnet-5-5", "--web-search",
        "--search-domain", "example.com", "--search-domain", "example.org",
        "--detach", "--json",
    )  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    run_id = json.loads(queued.stdout)["id"]
    client = Client(db, Settings.load(db))
    try:
        spec = client.run(run_id).spec
    finally:
        client.close()
    assert spec.web_search is True
    assert spec.search_domains == ("example.com", "example.org")
    assert "web_search" in spec.tool_names


def test_both_domain_lists_are_refused_in_one_line(db: Path) -> None:
    result = cli(
        db, "run", "Look", "--model", "claude-sonnet-5-5",
        "--search-domain", "a.test", "--block-domain", "b.test", "--detach",
    )  # fmt: skip
    assert result.returncode == 2
    assert "not both" in result.stderr
    assert "Traceback" not in result.stderr
