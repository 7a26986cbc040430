"""``desktop-agent managed list|follow`` against the fake Managed Agents API.

The key and the address come from the environment (``ANTHROPIC_API_KEY``,
``ANTHROPIC_BASE_URL``), as a worker child's would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from desktop_agent.agents.managed import AGENT, run_id_for
from desktop_agent.cli.commands import main
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from tests.helpers.fake_managed_agents import KEY, FakeManagedAgents


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeManagedAgents]:
    with FakeManagedAgents() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def cli(client: Client, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--db", str(client.db_path), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_then_follow_a_session_and_refuse_a_second_follow(
    client: Client, fake: FakeManagedAgents, capsys: pytest.CaptureFixture[str]
) -> None:
    session = fake.add_session("Board pack")
    session.user_message("Summarise Q3")
    session.model_request("Reading.", usage=(100_000, 0, 0, 0))

    code, out, _ = cli(client, capsys, "managed", "list")
    assert code == 0
    assert session.id in out and "Board pack" in out and "claude-opus-4-8" in out
    assert "$0.50" in out and "followed" not in out

    code, out, _ = cli(client, capsys, "managed", "follow", session.id, "--max-cost", "2", "--json")
    assert code == 0
    made = json.loads(out)
    assert made["id"] == run_id_for(session.id) and made["status"] == "queued"
    assert made["budget"]["max_cost_usd"] == 2.0 and made["goal"] == "Summarise Q3"
    run = client.run(made["id"])
    assert (run.spec.agent, run.spec.session_id) == (AGENT, session.id)

    code, out, err = cli(client, capsys, "managed", "follow", session.id)
    assert code == 2
    assert f"already followed by run {run.id} (queued)" in err

    code, out, _ = cli(client, capsys, "managed", "list", "--json")
    assert code == 0
    [listed] = json.loads(out)
    assert (listed["id"], listed["run"], listed["run_status"]) == (session.id, run.id, "queued")
    assert listed["cost_usd"] == 0.5
    assert client.run(run.id).status == RunStatus.QUEUED


def test_without_a_key_or_with_an_unknown_session_the_cli_says_why(
    client: Client,
    fake: FakeManagedAgents,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, _, err = cli(client, capsys, "managed", "follow", "sesn_nope")
    assert code == 2 and "not found" in err
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    code, _, err = cli(client, capsys, "managed", "list")
    assert code == 2 and "no API key is set" in err
