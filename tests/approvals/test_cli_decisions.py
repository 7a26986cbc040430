"""Deciding from the command line: real `python -m desktop_agent` processes on the test DB.

The engine runs in this process (with a scripted model); the CLI only writes command rows,
exactly as it does against a real worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, WaitReason
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.tools.servers import HttpServer
from tests.tools.servers import Reply as HttpReply

REPO = Path(__file__).resolve().parents[2]


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ANTHROPIC_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.fixture
def server() -> Iterator[HttpServer]:
    srv = HttpServer()
    srv.routes["/orders"] = HttpReply(201, b'{"ok": true}')
    yield srv
    srv.close()


def two_orders(client: Client, server: HttpServer) -> tuple[ScriptedModel, str]:
    client.settings.allow_private_fetch = True
    url = server.url("/orders")
    model = ScriptedModel(
        [
            Reply(
                "Two orders.",
                [
                    ("http_post", {"url": url, "body": {"sku": "A1"}}),
                    ("http_post", {"url": url, "body": {"sku": "B2"}}),
                ],
            ),
            Reply("Done."),
        ]
    )
    run = client.start_run("Order", model="claude-haiku-4-5", tools=["http_post"])
    return model, run.id


def test_approve_several_in_one_go(
    client: Client, make_executor: MakeExecutor, server: HttpServer
) -> None:
    model, run_id = two_orders(client, server)
    executor = make_executor(model)
    drain(client.store, executor)
    listed = json.loads(cli(client.db_path, "approvals", "--json").stdout)
    assert [a["tool"] for a in listed] == ["http_post", "http_post"]
    ids = [a["id"] for a in listed]

    mixed = cli(client.db_path, "approve", ids[0], "nosuch.1.1")
    assert_one_line_error(mixed, "no approval 'nosuch.1.1'")
    assert len(client.approvals()) == 2  # all or nothing: the good one was not queued either
    edit_two = cli(client.db_path, "approve", *ids, "--edit", "{}")
    assert_one_line_error(edit_two, "--edit applies to one approval at a time")

    result = cli(client.db_path, "approve", *ids)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("approved") == 2
    drain(client.store, executor)
    assert client.run(run_id).status == RunStatus.COMPLETED
    assert sorted(json.loads(r.body)["sku"] for r in server.requests) == ["A1", "B2"]
    again = cli(client.db_path, "approve", ids[0])
    assert_one_line_error(again, "was already approved")


def test_reject_several_with_one_reason(
    client: Client, make_executor: MakeExecutor, server: HttpServer
) -> None:
    model, run_id = two_orders(client, server)
    executor = make_executor(model)
    drain(client.store, executor)
    ids = [a.id for a in client.approvals()]
    no_reason = cli(client.db_path, "reject", *ids)
    assert_one_line_error(no_reason, "the following arguments are required: --reason")
    blank = cli(client.db_path, "reject", *ids, "--reason", "  ")
    assert_one_line_error(blank, "give a reason")
    result = cli(client.db_path, "reject", *ids, "--reason", "orders are frozen")
    assert result.returncode == 0 and result.stdout.count("rejected") == 2
    drain(client.store, executor)
    assert client.run(run_id).status == RunStatus.COMPLETED
    assert server.requests == []
    results = model.requests[-1].messages[-1]["content"]
    assert [r["is_error"] for r in results] == [True, True]
    assert all("orders are frozen" in r["content"] for r in results)


def test_answer_and_budget_from_the_cli(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel(
        [
            Reply("Need input.", [("ask_user", {"question": "Which year?"})]),
            Reply("Listing.", [("list_files", {})]),
            Reply("Done."),
        ]
    )
    run = client.start_run("Ask", model="claude-haiku-4-5", workspace=workspace, max_steps=3)
    executor = make_executor(model)
    drain(client.store, executor)
    assert client.run(run.id).wait_reason == WaitReason.HUMAN_INPUT
    early = cli(client.db_path, "budget", run.id, "--add-steps", "-3")
    assert_one_line_error(early, "give a positive amount")
    answered = cli(client.db_path, "answer", run.id, "2025, please")
    assert answered.returncode == 0, answered.stderr
    drain(client.store, executor)
    assert any("2025, please" in str(m["content"]) for m in model.requests[1].messages)
    held = client.run(run.id)
    assert held.wait_reason == WaitReason.BUDGET and "steps" in held.status_message
    assert_one_line_error(cli(client.db_path, "answer", run.id, "x"), "not waiting for an answer")
    assert_one_line_error(
        cli(client.db_path, "resolve", run.id, "probe"), "does not need attention"
    )

    for bad, message in (
        (("--add-cost", "abc"), "invalid float value: 'abc'"),
        (("--add-cost", "nan"), "must be finite"),
        (("--add-time", "soon"), "invalid duration 'soon'"),
    ):
        assert_one_line_error(cli(client.db_path, "budget", run.id, *bad), message)
    shown = cli(client.db_path, "budget", run.id)
    assert shown.returncode == 0, shown.stderr
    assert "limit reached: steps" in shown.stdout and "burn rate" in shown.stdout
    assert "claude-haiku-4-5" in shown.stdout
    extended = cli(
        client.db_path,
        "budget",
        run.id,
        "--add-steps",
        "5",
        "--add-time",
        "1h",
        "--add-tokens",
        "9",
    )
    assert extended.returncode == 0, extended.stderr
    drain(client.store, executor)
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED and done.budget.max_steps == 8
