"""Economy mode on the command line: refusals, batch defaults, and ``show`` while in a batch.

A model whose catalogue entry lists no Message Batches is refused economy mode and its batch
is streamed; ``show`` says where a waiting run's turn is in the batch queue.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from desktop_agent.cli import commands as cli
from desktop_agent.cli.output import batch_line, next_step_hint
from desktop_agent.client.api import Client
from desktop_agent.client.economy import BatchWait
from desktop_agent.client.schedules import Scheduling
from desktop_agent.domain import WaitReason
from tests.cli.test_models_and_effort import Capture, run_cli
from tests.economy.waits import NO_BATCH, send_batch, wait_in_batch, without_batches


def test_a_model_whose_entry_lists_no_batches_has_no_economy_mode(
    client: Client, capsys: Capture, workspace: Path
) -> None:
    assert client.can_batch(NO_BATCH) and not client.can_batch("demo")
    without_batches(client)
    assert not client.can_batch(NO_BATCH) and client.can_batch("claude-haiku-5-5")
    assert client.can_batch("claude-from-the-future")  # unknown: the API will say

    code, out, err = run_cli(client, capsys, "run", "Look", "--model", NO_BATCH, "--economy")
    assert code != 0 and out == "" and not client.runs()
    assert err.strip() == (
        f"desktop-agent: error: {NO_BATCH} does not take Message Batches (its catalogue entry "
        "does not list them): choose a model that does for economy mode, or run this one "
        "streamed"
    )
    code, out, err = run_cli(client, capsys, "run", "Look", "--model", NO_BATCH, "--detach")
    assert code == 0, err  # streamed, it runs

    # A batch of its runs is streamed by default, and refused if economy is asked for.
    code, out, err = run_cli(
        client,
        capsys,
        *("batch", "start", "Summarise {item}", "--folder", str(workspace)),
        *("--model", NO_BATCH, "--no-worker", "--json"),
    )
    assert code == 0, err
    batch = Scheduling(client).batch(json.loads(out)["id"])
    assert not batch.template.spec.economy and batch.concurrency == 4
    code, _, err = run_cli(
        client,
        capsys,
        *("batch", "start", "Summarise {item}", "--folder", str(workspace)),
        *("--model", NO_BATCH, "--economy", "--no-worker"),
    )
    assert code != 0 and "does not take Message Batches" in err


def help_of(capsys: Capture, *command: str) -> str:
    """What ``desktop-agent COMMAND --help`` prints, on one line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        cli.main([*command, "--help"])
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_batch_start_help_says_economy_is_its_default_and_how_to_opt_out(
    capsys: Capture,
) -> None:
    assert "start create a batch; in economy mode by default" in help_of(capsys, "batch")
    text = help_of(capsys, "batch", "start")
    assert "--economy economy mode: each model turn waits in a Message Batch" in text
    assert "the default here, where the model can batch" in text
    assert "--streamed stream every model call (full price, answers at once) instead of the " \
        "default economy mode" in text  # fmt: skip
    assert "the default here" not in help_of(capsys, "run")  # a single run is streamed


def test_batch_line_says_where_the_turn_is() -> None:
    queued = BatchWait("queued", 1_000.0, None, None, 3)
    assert batch_line(queued, 1_000.0 + 125) == "queued for the next batch (2 min ago)"
    sent = BatchWait("submitted", 1_000.0, 1_060.0, "msgbatch_01", 3)
    assert batch_line(sent, 1_060.0 + 12 * 60 + 30) == (
        "in a batch, submitted 12 min ago · msgbatch_01"
    )
    assert batch_line(None, 1_000.0) == "its turn is about to be queued for the next batch"


def test_show_says_where_a_run_waiting_in_a_batch_has_its_turn(
    client: Client, capsys: Capture
) -> None:
    run = client.start_run("Summarise", model="claude-sonnet-5-5", economy=True)
    now = time.time()
    wait_in_batch(client, run, now - 5 * 60)
    assert client.run(run.id).wait_reason == WaitReason.BATCH

    code, out, err = run_cli(client, capsys, "show", run.id)
    assert code == 0, err
    assert f"Run {run.id}  waiting(batch)" in out
    assert "  batch:     queued for the next batch (5 min ago)" in out
    assert "economy (batches, half price)" in out
    assert "Nothing to do: its model turn waits in a Message Batch" in out
    assert next_step_hint(client.run(run.id)).startswith("Nothing to do")

    send_batch(client, "msgbatch_01", now - 12 * 60)
    code, out, err = run_cli(client, capsys, "show", run.id)
    assert "  batch:     in a batch, submitted 12 min ago · msgbatch_01" in out
    code, out, err = run_cli(client, capsys, "show", run.id, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["economy"] is True and shown["wait_reason"] == "batch"
    assert shown["batch"]["state"] == "submitted" and shown["batch"]["batch_id"] == "msgbatch_01"
    assert shown["batch"]["seq"] == 1 and shown["batch"]["submitted_at"] is not None

    # A run that does not wait in a batch has no batch line, and null in JSON.
    plain = client.start_run("Other", model="claude-sonnet-5-5")
    code, out, _ = run_cli(client, capsys, "show", plain.id)
    assert "batch:" not in out
    code, out, _ = run_cli(client, capsys, "show", plain.id, "--json")
    assert json.loads(out)["batch"] is None


def test_schedules_and_watches_keep_economy_mode_in_their_template(
    client: Client, capsys: Capture, workspace: Path
) -> None:
    sched = Scheduling(client)
    code, _, err = run_cli(
        client,
        capsys,
        *("schedule", "add", "Digest the filings", "--every", "1d"),
        *("--model", "claude-sonnet-5-5", "--economy", "--no-worker", "--json"),
    )
    assert code == 0, err
    (schedule,) = sched.schedules()
    assert schedule.template.spec.economy
    code, _, err = run_cli(
        client,
        capsys,
        *("watch", "add", str(workspace), "Summarise {path}"),
        *("--model", "claude-sonnet-5-5", "--economy", "--no-worker", "--json"),
    )
    assert code == 0, err
    (watch,) = sched.watches()
    assert watch.template.spec.economy

    # Streamed unless asked, and refused where the model cannot batch.
    code, _, err = run_cli(
        client,
        capsys,
        *("schedule", "add", "Plain", "--every", "1d", "--model", "claude-sonnet-5-5"),
        "--no-worker",
    )
    assert code == 0, err
    assert [s.template.spec.economy for s in sched.schedules()].count(False) == 1
    code, _, err = run_cli(
        client,
        capsys,
        *("schedule", "add", "Demo", "--every", "1d", "--model", "demo", "--economy"),
        "--no-worker",
    )
    assert code != 0 and "cannot be sent in a Message Batch" in err
    assert len(sched.schedules()) == 2
