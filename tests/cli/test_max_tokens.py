"""``--max-tokens N``: the run's token budget, as the New run dialog's "Tokens" field sets it.

The same option on every command that defines runs and takes ``--max-cost`` (``run``,
``rerun``, ``schedule add``, ``batch start``, ``watch add``), checked alike (a whole number
above zero, at most the dialog's 2,000,000,000), and reaching the run: ``show`` and its
``--json`` carry it, and the engine stops the run on it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop_agent.cli import main
from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.domain import RunStatus, WaitReason
from tests.conftest import MakeExecutor, drain


def cli(client: Client, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--db", str(client.db_path), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_run_takes_a_token_budget_that_show_and_json_carry(
    client: Client, capsys: pytest.CaptureFixture[str], workspace: Path
) -> None:
    code, out, err = cli(
        client, capsys, "run", "Survey", "--model", "demo", "--workspace", str(workspace),
        "--max-tokens", "250_000", "--detach", "--json",
    )  # fmt: skip
    assert code == 0, err
    run = json.loads(out)
    assert run["budget"]["max_tokens"] == 250_000
    assert client.run(run["id"]).budget.max_tokens == 250_000
    code, out, _ = cli(client, capsys, "show", run["id"])
    assert code == 0
    (line,) = [x for x in out.splitlines() if x.startswith("  budget:")]
    assert "250,000 tokens" in line
    code, out, _ = cli(client, capsys, "show", run["id"], "--json")
    assert json.loads(out)["budget"]["max_tokens"] == 250_000


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0", "0 is not above zero"),
        ("-5", "-5 is not above zero"),
        ("1.5", "'1.5' is not a whole number of tokens"),
        ("lots", "'lots' is not a whole number of tokens"),
        ("2000000001", "2,000,000,001 tokens is more than 2,000,000,000"),
    ],
)
def test_a_bad_token_budget_is_refused_and_starts_nothing(
    client: Client, capsys: pytest.CaptureFixture[str], value: str, says: str
) -> None:
    for command in (
        ("run", "Survey", "--model", "demo", "--detach"),
        ("schedule", "add", "Survey", "--every", "1d", "--model", "demo", "--no-worker"),
    ):
        code, out, err = cli(client, capsys, *command, f"--max-tokens={value}")
        assert code == 2 and out == ""
        assert f"argument --max-tokens: {says}" in err
    assert client.runs() == [] and Scheduling(client).schedules() == []


def test_rerun_keeps_the_token_budget_or_takes_another(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    first = client.start_run("Survey", model="demo", max_tokens_budget=40_000)
    code, out, err = cli(client, capsys, "rerun", first.id, "--json")
    assert code == 0, err
    assert json.loads(out)["budget"]["max_tokens"] == 40_000
    code, out, err = cli(client, capsys, "rerun", first.id, "--max-tokens", "90000", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["budget"]["max_tokens"] == 90_000
    assert client.run(again["id"]).forked_from == first.id


def test_schedule_batch_and_watch_templates_carry_the_token_budget(
    client: Client, capsys: pytest.CaptureFixture[str], workspace: Path, tmp_path: Path
) -> None:
    sched = Scheduling(client)
    code, out, err = cli(
        client, capsys, "schedule", "add", "Survey", "--every", "1d", "--model", "demo",
        "--max-tokens", "30000", "--no-worker", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert sched.schedule(json.loads(out)["id"]).template.budget.max_tokens == 30_000

    code, out, err = cli(
        client, capsys, "batch", "start", "Summarise {item}", "--folder", str(workspace),
        "--model", "demo", "--max-tokens", "31000", "--no-worker", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert sched.batch(json.loads(out)["id"]).template.budget.max_tokens == 31_000

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    code, out, err = cli(
        client, capsys, "watch", "add", str(inbox), "Summarise {name}", "--model", "demo",
        "--max-tokens", "32000", "--no-worker", "--json",
    )  # fmt: skip
    assert code == 0, err
    (watch,) = sched.watches()
    assert watch.template.budget.max_tokens == 32_000


def test_the_run_stops_on_its_token_budget(
    client: Client, capsys: pytest.CaptureFixture[str], make_executor: MakeExecutor, workspace: Path
) -> None:
    code, out, err = cli(
        client, capsys, "run", "Survey the notes", "--model", "demo", "--workspace",
        str(workspace), "--max-tokens", "1", "--detach", "--json",
    )  # fmt: skip
    assert code == 0, err
    run_id = json.loads(out)["id"]
    drain(client.store, make_executor())
    run = client.run(run_id)
    assert (run.status, run.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    assert "tokens" in run.status_message
