"""Fork from step N and run again: the real engine and an in-thread worker on SQLite.

The parent sends a message (an unsafe effect logged to a file, keyed by its idempotency
key) in its prefix; forks after it never send it again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import select

from desktop_agent.client.api import Client
from desktop_agent.client.forks import fork, forks_of
from desktop_agent.domain import RunStatus, StepKind
from desktop_agent.domain.errors import InvalidInputError, NotFoundError
from desktop_agent.engine.ports import StepIntent
from desktop_agent.persistence import readmodels
from desktop_agent.persistence.archive import Archiver
from desktop_agent.persistence.db import Database, DbSettings, head_revision
from desktop_agent.persistence.tables import runs, steps
from desktop_agent.tools.registry import ToolRegistry, builtin_tools
from tests.conftest import MakeExecutor, drain
from tests.fencing.test_migration import _alembic
from tests.helpers.fakes import Reply, ScriptedModel, UnsafeTool
from tests.search.test_cli_search import cli

CALL = ("send_message", {"to": "ceo", "text": "hi"})


def _script(request: object) -> Reply:
    """Send once; once a result came back (or a note), finish."""
    msgs = getattr(request, "messages", [])
    answered = any(
        isinstance(b, dict) and b.get("type") in ("tool_result",)
        for m in msgs
        for b in m["content"]
    )
    return Reply("done") if answered else Reply("sending", [CALL])


@pytest.fixture
def setup(client: Client, make_executor: MakeExecutor, tmp_path: Path):  # type: ignore[no-untyped-def]
    outbox = tmp_path / "outbox.log"
    tools = ToolRegistry([*builtin_tools(), UnsafeTool(outbox)])
    client._tools = tools
    client.settings.ask_unsafe = False
    model = ScriptedModel(_script)
    executor = make_executor(model, tools=tools)
    parent = client.start_run("Send", model="claude-haiku-4-5", tools=["send_message"])
    drain(client.store, executor)
    done = client.run(parent.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    kinds = [s.kind for s in client.steps(parent.id)]
    assert kinds == [StepKind.MODEL_CALL, StepKind.TOOL_CALL, StepKind.MODEL_CALL]
    return client, executor, outbox, done


def _own_rows(client: Client, run_id: str) -> list[int]:
    with client.store.db.read() as conn:
        return [
            int(r)
            for r in conn.execute(select(steps.c.seq).where(steps.c.run_id == run_id)).scalars()
        ]


def test_a_fork_with_a_note_reads_the_prefix_and_never_repeats_its_effect(setup) -> None:  # type: ignore[no-untyped-def]
    client, executor, outbox, parent = setup
    child = fork(client, parent.id, 2, note="say it more kindly")
    assert (child.forked_from, child.forked_at_seq) == (parent.id, 2)
    assert [f.id for f in forks_of(client, parent.id)] == [child.id]
    drain(client.store, executor)
    done = client.run(child.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert outbox.read_text().count("\n") == 1  # the prefix's send happened once, in the parent
    journal = client.steps(child.id)
    assert [s.seq for s in journal] == list(range(1, len(journal) + 1))
    assert [s.run_id for s in journal[:2]] == [parent.id, parent.id]
    assert journal[2].kind == StepKind.STEER and journal[2].run_id == child.id
    assert min(_own_rows(client, child.id)) == 3  # no copied rows
    timeline = readmodels.timeline_rows(client.store.db, child.id)
    assert [r.seq for r in timeline] == [s.seq for s in journal]
    assert done.cost_usd == pytest.approx(sum(s.cost_usd for s in journal[2:]))


def test_a_fork_with_edited_arguments_runs_the_edited_call(setup) -> None:  # type: ignore[no-untyped-def]
    client, executor, outbox, parent = setup
    child = fork(client, parent.id, 1, edited_arguments={"to": "cfo", "text": "hello"})
    drain(client.store, executor)
    done = client.run(child.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    lines = outbox.read_text().splitlines()
    assert lines[0].startswith(f"{parent.id}:2 ceo hi")
    assert lines[1:] == [f"{child.id}:3 cfo hello"]
    assert _own_rows(client, child.id)[0] == 2


def test_invalid_fork_points_are_refused_and_nothing_is_made(setup) -> None:  # type: ignore[no-untyped-def]
    client, _executor, _outbox, parent = setup
    before = len(client.runs())
    with pytest.raises(
        InvalidInputError,
        match="step 1 is a model call whose model turn continues at step 2; fork from 2",
    ):
        fork(client, parent.id, 1, note="x")
    with pytest.raises(InvalidInputError, match="has 3 steps; fork from 1 to 3"):
        fork(client, parent.id, 9)
    with pytest.raises(InvalidInputError, match="step 3 is a model call"):
        fork(client, parent.id, 2, edited_arguments={"to": "x", "text": "y"})
    with pytest.raises(InvalidInputError, match="refused"):
        fork(client, parent.id, 1, edited_arguments={"to": 5})
    with pytest.raises(NotFoundError):
        fork(client, "nosuchrun", 1)
    assert len(client.runs()) == before


def test_a_fork_over_an_open_step_is_refused(client: Client) -> None:
    running = client.start_run("x", model="demo")
    waiting = client.start_run("y", model="demo")
    for run, kind in ((running, StepKind.TOOL_CALL), (waiting, StepKind.APPROVAL)):
        client.store.commit(
            run.id, intents=[StepIntent(seq=1, kind=kind, name=str(kind), input={})]
        )
    with pytest.raises(InvalidInputError, match=r"step 1 of run \S+ is still running"):
        fork(client, running.id, 1)
    with pytest.raises(InvalidInputError, match=r"is an open wait \(approval\)"):
        fork(client, waiting.id, 1)
    assert forks_of(client, running.id) == forks_of(client, waiting.id) == []


def test_cli_fork_and_show_and_rerun(setup) -> None:  # type: ignore[no-untyped-def]
    client, _executor, _outbox, parent = setup
    made = cli(client.db_path, "fork", parent.id, "--at", "2", "--note", "again", "--json")
    assert made.returncode == 0, made.stderr
    child_id = json.loads(made.stdout)["id"]
    bad = cli(client.db_path, "fork", parent.id, "--at", "1")
    assert bad.returncode == 2 and "fork from 2" in bad.stderr
    shown = cli(client.db_path, "show", child_id)
    assert f"from {parent.id} at step 2" in shown.stdout
    shown = cli(client.db_path, "show", parent.id)
    assert f"{child_id}  fork at step 2" in shown.stdout


def test_cli_rerun_records_the_original(client: Client) -> None:
    first = client.start_run("Summarise", model="demo", tools=["read_file"], max_cost_usd=1)
    again = cli(client.db_path, "rerun", first.id, "--max-cost", "3", "--json")
    assert again.returncode == 0, again.stderr
    again_run = client.run(json.loads(again.stdout)["id"])
    assert (again_run.forked_from, again_run.forked_at_seq) == (first.id, 0)
    assert again_run.budget.max_cost_usd == 3 and again_run.spec.tools == first.spec.tools
    shown = cli(client.db_path, "show", first.id)
    assert f"{again_run.id}  run again" in shown.stdout


def test_the_archiver_keeps_a_parent_that_a_fork_reads(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client, _executor, _outbox, parent = setup
    child = fork(client, parent.id, 2, note="n")
    result = Archiver(client.store.db, tmp_path / "archives").archive(before=float("inf"))
    assert result.kept_for_forks == [parent.id]
    assert client.run(parent.id).id == parent.id
    assert [s.seq for s in client.steps(child.id)] == [1, 2, 3]


def test_a_database_at_0005_with_runs_migrates_and_downgrades(tmp_path: Path) -> None:
    path = tmp_path / "previous.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        command.upgrade(_alembic(conn), "0005")
        conn.exec_driver_sql(
            "INSERT INTO runs (id, goal, status, spec, definition_hash, workspace, created_at, "
            "updated_at) VALUES ('r1', 'old goal', 'completed', '{}', 'h', '/w', 1, 2)"
        )
    db = Database(DbSettings.for_path(path))
    try:
        with db.read() as conn:
            assert db.current_revision(conn) == head_revision()
            row = conn.execute(select(runs.c.id, runs.c.forked_from, runs.c.forked_at_seq)).one()
        assert tuple(row) == ("r1", None, None)
    finally:
        db.dispose()
    with engine.begin() as conn:
        command.downgrade(_alembic(conn), "0005")
    assert "forked_from" not in {c["name"] for c in sa.inspect(engine).get_columns("runs")}
