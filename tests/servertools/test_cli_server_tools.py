"""The `run` command's --server-web-fetch and --code-execution, and the HTTP API's fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.httpapi.inputs import run_options
from tests.cli.test_cli import cli


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "agent.db"
    Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
    return path


def test_the_flags_reach_the_run(db: Path) -> None:
    queued = cli(
        db, "run", "Sum it", "--model", "claude-sonnet-5-5", "--server-web-fetch",
        "--code-execution", "--search-domain", "example.com", "--detach", "--json",
    )  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    assert "takes the place of the run's own web_fetch" in queued.stderr
    run_id = json.loads(queued.stdout)["id"]
    client = Client(db, Settings.load(db))
    try:
        spec = client.run(run_id).spec
    finally:
        client.close()
    assert spec.server_web_fetch is True and spec.code_execution is True
    assert {"server_web_fetch", "code_execution"} <= set(spec.tool_names)
    assert "web_fetch" not in spec.tool_names
    assert spec.search_domains == ("example.com",)


def test_code_execution_in_economy_mode_is_refused_in_one_line(db: Path) -> None:
    result = cli(
        db, "run", "Sum it", "--model", "claude-sonnet-5-5", "--code-execution", "--economy",
        "--detach",
    )  # fmt: skip
    assert result.returncode == 2
    assert "economy mode" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_http_api_reads_the_server_tool_fields() -> None:
    options = run_options(
        {
            "web_search": True,
            "search_blocked_domains": ["spam.test"],
            "server_web_fetch": True,
            "code_execution": True,
        }
    )
    assert options["web_search"] is True
    assert options["search_blocked_domains"] == ["spam.test"]
    assert options["search_domains"] == []
    assert options["server_web_fetch"] is True and options["code_execution"] is True
    assert run_options({})["web_search"] is None
    with pytest.raises(InvalidInputError, match="code_execution"):
        run_options({"code_execution": "yes"})
    with pytest.raises(InvalidInputError, match="search_domains"):
        run_options({"search_domains": "example.com"})
