"""A run stopped by a limit: the hint names the exact command that lifts that limit.

For each limit (cost, steps, time, tokens, and the monthly spend cap) a run reaches it in
the engine; the end of ``run`` (what :func:`follow` prints), ``show`` (text and ``--json``)
and ``inbox`` name the same command, with a suggested amount (the limit again, more when
the run went past it; twice the monthly cap), and that command, run as printed, moves the
run on.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from desktop_agent.cli import main
from desktop_agent.cli.output import Out, follow
from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import JSON, RunStatus, StepKind, WaitReason
from desktop_agent.engine.ports import ModelRequest
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel

HAIKU = "claude-haiku-4-5"
LISTING: tuple[str, dict[str, JSON]] = ("list_files", {})


def cli(client: Client, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["--db", str(client.db_path), *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def hints(client: Client, capsys: pytest.CaptureFixture[str], run_id: str) -> list[str]:
    """What the end of ``run``, ``show``, ``show --json`` and ``inbox`` say to do next."""
    capsys.readouterr()
    follow(client, run_id, Out(False))
    ended = capsys.readouterr().out.splitlines()[-1]
    (shown,) = [x for x in cli(client, capsys, "show", run_id).splitlines() if "next:" in x]
    data = json.loads(cli(client, capsys, "show", run_id, "--json"))
    inbox = [x for x in cli(client, capsys, "inbox").splitlines() if x.startswith("  $ ")]
    return [ended, shown, str(data["hint"]), "\n".join(inbox)]


def check_hint(
    client: Client, capsys: pytest.CaptureFixture[str], run_id: str, command: str
) -> None:
    """Every place names ``command`` (and the stop), and the command works as printed."""
    run = client.run(run_id)
    assert (run.status, run.wait_reason) == (RunStatus.WAITING, WaitReason.BUDGET)
    stop = f"desktop-agent stop {run_id}"
    for said in hints(client, capsys, run_id):
        assert f"`{command}`" in said or f"$ {command}" in said, said
        assert stop in said, said
    argv = shlex.split(command)
    assert argv[0] == "desktop-agent"
    cli(client, capsys, *argv[1:])


def moved_on(client: Client, run_id: str) -> bool:
    """Whether the run's budget wait was closed (the limit was lifted)."""
    waits = [s for s in client.steps(run_id) if s.kind == StepKind.BUDGET]
    return bool(waits) and waits[0].output is not None


@pytest.fixture
def ws(workspace: Path) -> str:
    return str(workspace)


def test_cost(
    client: Client, make_executor: MakeExecutor, capsys: pytest.CaptureFixture[str], ws: str
) -> None:
    # The first call costs $0.05 against a $0.02 limit: past it, so the limit becomes half
    # again what it spent ($0.075, up to the cent) rather than twice the limit.
    run = client.start_run("Cost", model=HAIKU, workspace=ws, max_cost_usd=0.02)
    model = ScriptedModel([Reply("List.", [LISTING], cost=0.05), Reply("Done.")])
    drain(client.store, make_executor(model))
    assert client.run(run.id).status_message.startswith("Budget reached: spent $0.05")
    assert "its cost limit of $0.02" in hints(client, capsys, run.id)[0]
    check_hint(client, capsys, run.id, f"desktop-agent budget {run.id} --add-cost 0.06")
    drain(client.store, make_executor(model))
    assert client.run(run.id).budget.max_cost_usd == pytest.approx(0.08)
    assert not client.has_pending_commands(run.id)


def test_steps(
    client: Client, make_executor: MakeExecutor, capsys: pytest.CaptureFixture[str], ws: str
) -> None:
    run = client.start_run("Steps", model=HAIKU, workspace=ws, max_steps=1)
    model = ScriptedModel([Reply("List.", [LISTING]), Reply("Done.")])
    drain(client.store, make_executor(model))
    check_hint(client, capsys, run.id, f"desktop-agent budget {run.id} --add-steps 1")
    drain(client.store, make_executor(model))
    assert moved_on(client, run.id)
    assert client.run(run.id).budget.max_steps == 2


def test_time(
    client: Client, make_executor: MakeExecutor, capsys: pytest.CaptureFixture[str], ws: str
) -> None:
    clock = FakeClock()

    def slow(req: ModelRequest) -> Reply:
        clock.advance(90)  # the call takes a minute and a half of the 1-minute budget
        return Reply("List.", [LISTING]) if len(req.messages) == 1 else Reply("Done.")

    run = client.start_run("Time", model=HAIKU, workspace=ws, max_time_s=60)
    drain(client.store, make_executor(ScriptedModel(slow), clock=clock), clock=clock)
    assert client.run(run.id).status_message.startswith("Budget reached: worked")
    check_hint(client, capsys, run.id, f"desktop-agent budget {run.id} --add-time 1m")
    assert client.store.pending_commands(run.id)


def test_tokens(
    client: Client, make_executor: MakeExecutor, capsys: pytest.CaptureFixture[str], ws: str
) -> None:
    # 120 tokens spent against a budget of 50: the hint adds 130 (the budget becomes 180).
    run = client.start_run("Tokens", model=HAIKU, workspace=ws, max_tokens_budget=50)
    model = ScriptedModel([Reply("List.", [LISTING]), Reply("Done.")])
    drain(client.store, make_executor(model))
    check_hint(client, capsys, run.id, f"desktop-agent budget {run.id} --add-tokens 130")
    drain(client.store, make_executor(model))
    assert moved_on(client, run.id) and client.run(run.id).budget.max_tokens == 180


def test_the_monthly_cap_names_the_cap_command_not_the_run_budget(
    client: Client, make_executor: MakeExecutor, capsys: pytest.CaptureFixture[str], ws: str
) -> None:
    Settings(default_max_cost_usd=None, default_max_steps=None, monthly_spend_cap_usd=0.004).save(
        client.db_path
    )
    run = client.start_run("Capped", model=HAIKU, workspace=ws, max_cost_usd=10.0)
    model = ScriptedModel([Reply("Done.")])
    drain(client.store, make_executor(model))
    assert client.waits_for_monthly_cap(client.run(run.id))
    # Twice the cap ($0.008) leaves no room for the next call's worst case ($0.01): half
    # again that, up to the cent.
    check_hint(client, capsys, run.id, "desktop-agent usage --cap 0.02 --resume-held")
    for said in hints(client, capsys, run.id):
        assert "budget " not in said.replace("its own budget", ""), said
    assert Settings.load(client.db_path).monthly_spend_cap_usd == 0.02
    drain(client.store, make_executor(model))  # the resume applied, under the new cap
    assert not client.has_pending_commands(run.id)
    assert "of $0.02 spent this month" in client.run(run.id).status_message


def test_a_refused_resume_points_to_the_command_that_names_the_limit(
    client: Client, make_executor: MakeExecutor, capsys: pytest.CaptureFixture[str], ws: str
) -> None:
    """Resume cannot lift a budget: its refusal leads to ``budget RUN``, which names it."""
    from desktop_agent.domain.errors import InvalidStateError

    run = client.start_run("Steps", model=HAIKU, workspace=ws, max_steps=1)
    model = ScriptedModel([Reply("List.", [LISTING]), Reply("Done.")])
    drain(client.store, make_executor(model))
    with pytest.raises(InvalidStateError) as refused:
        client.resume(run.id)
    said = str(refused.value)
    assert f"`desktop-agent budget {run.id}`" in said and "--add-cost" not in said, said
    shown = cli(client, capsys, "budget", run.id)
    assert f"desktop-agent budget {run.id} --add-steps 1" in shown, shown
