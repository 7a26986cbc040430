"""Effort and thinking as run options of the CLI, and ``desktop-agent models``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.client.views import THINKING_ON_BUDGET

REPO = Path(__file__).resolve().parents[2]

Capture = pytest.CaptureFixture[str]


def run_cli(client: Client, capsys: Capture, *args: str) -> tuple[int, str, str]:
    """``desktop-agent --db DB ARGS`` in this process: exit code, stdout, stderr."""
    capsys.readouterr()
    code = cli.main(["--db", str(client.db_path), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def started(client: Client, capsys: Capture, *args: str) -> dict[str, Any]:
    """``run GOAL --detach --json ARGS``, then the run as ``show --json`` prints it."""
    code, out, err = run_cli(client, capsys, "run", "Summarise", "--detach", "--json", *args)
    assert code == 0, err
    run_id = json.loads(out)["id"]
    code, out, err = run_cli(client, capsys, "show", run_id, "--json")
    assert code == 0, err
    shown: dict[str, Any] = json.loads(out)
    return shown


def test_run_records_the_effort_and_thinking_asked_for(client: Client, capsys: Capture) -> None:
    run = started(client, capsys, "--model", "demo", "--effort", "high", "--thinking", "off")
    assert (run["effort"], run["thinking"], run["thinking_budget"]) == ("high", False, 0)
    assert client.run(run["id"]).spec.effort == "high"

    run = started(
        client, capsys, "--model", "claude-sonnet-5-5", "--effort", "low", "--thinking", "on"
    )
    assert (run["effort"], run["thinking"]) == ("low", True)
    assert run["thinking_budget"] == THINKING_ON_BUDGET
    spec = client.run(run["id"]).spec
    assert (spec.effort, spec.thinking_budget) == ("low", THINKING_ON_BUDGET)
    code, out, _ = run_cli(client, capsys, "show", run["id"])
    assert code == 0
    assert "claude-sonnet-5-5 · effort low · thinking on" in out

    # Left out: the model's default, named as such.
    run = started(client, capsys, "--model", "claude-sonnet-5-5")
    assert (run["effort"], run["model_default_effort"], run["thinking"]) == (None, "high", False)
    code, out, _ = run_cli(client, capsys, "show", run["id"])
    assert "effort high (model default) · thinking off" in out


def test_an_effort_or_a_model_that_cannot_work_is_refused_plainly(
    client: Client, capsys: Capture
) -> None:
    code, out, err = run_cli(client, capsys, "run", "X", "--model", "demo", "--effort", "extreme")
    assert code != 0 and out == ""
    assert err.strip() == (
        "desktop-agent: error: unknown effort 'extreme': use one of low, medium, high, xhigh, max"
    )
    code, _, err = run_cli(
        client, capsys, "run", "X", "--model", "claude-haiku-4-5", "--effort", "high"
    )
    assert code != 0 and "claude-haiku-4-5 does not take effort 'high'" in err
    code, _, err = run_cli(
        client, capsys, "run", "X", "--model", "claude-opus-4-5", "--effort", "max"
    )
    assert code != 0 and "it takes: low, medium, high" in err
    assert client.runs() == []
    # The same through the JSON output: one line, the client's message.
    code, out, _ = run_cli(client, capsys, "run", "X", "--model", "demo", "--effort", "x", "--json")
    assert code != 0 and "unknown effort 'x'" in json.loads(out)["error"]


def test_a_retired_model_is_refused_with_its_replacement_by_a_real_process(
    client: Client,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DESKTOP_AGENT_AUTOSTART_WORKER": "0"}
    argv = [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path)]
    result = subprocess.run(
        [*argv, "run", "Summarise", "--model", "claude-opus-4-1", "--detach"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "desktop-agent: error: claude-opus-4-1 is retired: requests to it fail; "
        "use claude-opus-5-5 instead (see `desktop-agent models`)"
    )
    assert "Traceback" not in result.stderr
    assert client.runs() == []


def test_a_deprecated_model_starts_with_a_notice_on_stderr(client: Client, capsys: Capture) -> None:
    code, out, err = run_cli(
        client, capsys, "run", "Summarise", "--model", "claude-sonnet-4-5", "--detach", "--json"
    )
    assert code == 0
    assert json.loads(out)["model"] == "claude-sonnet-4-5"  # stdout stays machine-readable
    assert err.splitlines()[0] == (
        "desktop-agent: note: claude-sonnet-4-5 is deprecated, retires 2026-11-30; "
        "use claude-sonnet-5-5 instead"
    )
    code, _, err = run_cli(client, capsys, "run", "Summarise", "--model", "demo", "--detach")
    assert code == 0 and "note:" not in err


def test_rerun_changes_the_effort_and_keeps_the_rest(client: Client, capsys: Capture) -> None:
    first = client.start_run(
        "Summarise", model="claude-sonnet-5-5", effort="max", thinking_budget=16000, max_steps=7
    )
    # Opus 4.5 does not take max: changing the model alone is refused, with the effort too not.
    code, _, err = run_cli(client, capsys, "rerun", first.id, "--model", "claude-opus-4-5")
    assert code != 0 and "does not take effort 'max'" in err
    code, out, err = run_cli(
        client, capsys, "rerun", first.id, "--model", "claude-opus-4-5", "--effort", "low", "--json"
    )
    assert code == 0, err
    again = client.run(json.loads(out)["id"])
    assert (again.model, again.spec.effort, again.spec.thinking_budget) == (
        "claude-opus-4-5",
        "low",
        16000,
    )
    assert again.forked_from == first.id and again.budget.max_steps == 7
    code, out, err = run_cli(
        client, capsys, "rerun", first.id, "--effort", "default", "--thinking", "off", "--json"
    )
    assert code == 0, err
    again = client.run(json.loads(out)["id"])
    assert (again.spec.effort, again.spec.thinking_budget, again.goal) == ("", 0, "Summarise")


def test_templates_take_the_effort_and_thinking(client: Client, capsys: Capture) -> None:
    code, out, err = run_cli(
        client,
        capsys,
        *("schedule", "add", "Check the prices", "--every", "1d", "--model", "demo"),
        *("--effort", "medium", "--thinking", "on", "--no-worker", "--json"),
    )
    assert code == 0, err
    made = json.loads(out)
    assert (made["effort"], made["thinking"]) == ("medium", True)
    template = Scheduling(client).schedule(made["id"]).template
    assert (template.spec.effort, template.spec.thinking_budget) == ("medium", THINKING_ON_BUDGET)
    run = Scheduling(client).trigger(made["id"])
    assert (run.spec.effort, run.spec.thinking_budget) == ("medium", THINKING_ON_BUDGET)
    code, _, err = run_cli(
        client,
        capsys,
        *("schedule", "add", "Check", "--every", "1d", "--model", "claude-haiku-4-5"),
        *("--effort", "low", "--no-worker"),
    )
    assert code != 0 and "does not take effort 'low'" in err


def test_batch_start_takes_the_effort(client: Client, capsys: Capture, workspace: Path) -> None:
    code, out, err = run_cli(
        client,
        capsys,
        *("batch", "start", "Summarise {item}", "--folder", str(workspace), "--model", "demo"),
        *("--effort", "xhigh", "--no-worker", "--json"),
    )
    assert code == 0, err
    batch = Scheduling(client).batch(json.loads(out)["id"])
    assert batch.total == 3 and batch.template.spec.effort == "xhigh"


def test_models_json_lists_current_models_with_their_efforts(
    client: Client, capsys: Capture
) -> None:
    code, out, err = run_cli(client, capsys, "models", "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert listed["source"] == "snapshot"
    models = {m["id"]: m for m in listed["models"]}
    sonnet = models["claude-sonnet-5-5"]
    assert sonnet["lifecycle"] == "active" and sonnet["default_effort"] == "high"
    assert sonnet["efforts"] == ["low", "medium", "high", "xhigh", "max"]
    assert sonnet["price"] == "$2 / $10 per million tokens"
    assert models["claude-haiku-4-5"]["efforts"] == []
    old = models["claude-sonnet-4-5"]
    assert old["lifecycle"] == "deprecated" and old["retires_at"] == "2026-11-30"
    assert old["replacement"] == "claude-sonnet-5-5" and "deprecated" in old["notice"]
    assert "claude-opus-4-1" not in models  # retired: only with --all
    order = [m["lifecycle"] for m in listed["models"]]
    assert order == sorted(order, key=["active", "deprecated"].index)

    code, out, _ = run_cli(client, capsys, "models", "--json", "--all")
    every = {m["id"]: m for m in json.loads(out)["models"]}
    retired = every["claude-opus-4-1"]
    assert retired["lifecycle"] == "retired" and retired["replacement"] == "claude-opus-5-5"
    assert retired["notice"].startswith("claude-opus-4-1 is retired")


def test_models_prints_a_table_with_its_source(client: Client, capsys: Capture) -> None:
    code, out, _ = run_cli(client, capsys, "models")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Models shipped with this version")
    header = lines[1].split()
    assert header[:3] == ["ID", "NAME", "STATUS"]
    assert "CONTEXT" in header and "THINKING" in header
    assert "EFFORTS" in header and "PRICE" in header
    rows = {line.split()[0]: line for line in lines[2:]}
    sonnet = rows["claude-sonnet-5-5"]
    assert "Claude Sonnet 5.5" in sonnet and " active " in sonnet
    assert "1M" in sonnet and "128k" in sonnet and "adaptive,between_tools" in sonnet
    assert "low,medium,high*,xhigh,max" in sonnet and "$2 / $10 per million tokens" in sonnet
    deprecated = rows["claude-sonnet-4-5"]
    assert "deprecated, retires 2026-11-30 → use claude-sonnet-5-5" in deprecated
    assert "claude-opus-4-1" not in rows
    code, out, _ = run_cli(client, capsys, "models", "--all")
    assert "retired → use claude-opus-5-5" in out


def test_models_refresh_without_a_key_says_why_and_exits_with_1(
    client: Client, capsys: Capture
) -> None:
    code, out, err = run_cli(client, capsys, "models", "--refresh")
    assert code == 1 and out == ""
    assert err.strip() == (
        "desktop-agent: error: no API key: set one with `desktop-agent key set` "
        "or ANTHROPIC_API_KEY"
    )
    code, out, _ = run_cli(client, capsys, "models", "--refresh", "--json")
    assert code == 1 and json.loads(out)["error"].startswith("no API key")


def test_economy_is_a_run_option_and_a_batch_default_where_the_model_can_batch(
    client: Client, capsys: Capture, workspace: Path
) -> None:
    run = started(client, capsys, "--model", "claude-sonnet-5-5", "--economy")
    assert run["economy"] is True and client.run(run["id"]).spec.economy
    code, out, _ = run_cli(client, capsys, "show", run["id"])
    assert code == 0 and "economy (batches, half price)" in out
    plain = started(client, capsys, "--model", "claude-sonnet-5-5")
    assert plain["economy"] is False

    # rerun keeps the mode unless told otherwise.
    code, out, err = run_cli(client, capsys, "rerun", run["id"], "--json")
    assert code == 0, err
    assert client.run(json.loads(out)["id"]).spec.economy
    code, out, err = run_cli(client, capsys, "rerun", run["id"], "--streamed", "--json")
    assert code == 0, err
    assert not client.run(json.loads(out)["id"]).spec.economy

    def batch(*extra: str) -> Any:
        code, out, err = run_cli(
            client,
            capsys,
            *("batch", "start", "Summarise {item}", "--folder", str(workspace)),
            *(*extra, "--no-worker", "--json"),
        )
        assert code == 0, err
        return Scheduling(client).batch(json.loads(out)["id"])

    economy = batch("--model", "claude-sonnet-5-5")
    assert economy.template.spec.economy and economy.concurrency == 3  # every item at once
    streamed = batch("--model", "claude-sonnet-5-5", "--streamed")
    assert not streamed.template.spec.economy and streamed.concurrency == 4
    demo = batch("--model", "demo")  # runs on this machine: no batches to wait in
    assert not demo.template.spec.economy

    code, _, err = run_cli(client, capsys, "run", "Look", "--model", "demo", "--economy")
    assert code != 0 and "cannot be sent in a Message Batch" in err
    code, _, err = run_cli(client, capsys, "run", "Look", "--economy", "--streamed")
    assert code != 0 and "not allowed with argument" in err
