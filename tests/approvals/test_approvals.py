"""Approvals on a real journal with real tools: several at once, edits, expiry, re-checks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import (
    ApprovalState,
    EffectClass,
    RunStatus,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.engine.loop import EngineConfig
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.tools.servers import HttpServer, KeyedEndpoint
from tests.tools.servers import Reply as HttpReply


@pytest.fixture
def server() -> Iterator[HttpServer]:
    srv = HttpServer()
    srv.routes["/orders"] = HttpReply(201, b'{"ok": true}', {"Content-Type": "application/json"})
    yield srv
    srv.close()


@pytest.fixture
def local_http(client: Client) -> Client:
    """The client, with settings that let tools reach the test server on 127.0.0.1."""
    client.settings.allow_private_fetch = True
    return client


def last_results(model: ScriptedModel) -> list[dict[str, object]]:
    return [b for b in model.requests[-1].messages[-1]["content"] if b["type"] == "tool_result"]


def test_two_calls_share_one_approval_step_and_only_the_edited_call_runs(
    local_http: Client, make_executor: MakeExecutor, server: HttpServer
) -> None:
    client = local_http
    url = server.url("/orders")
    model = ScriptedModel(
        [
            Reply(
                "Placing both orders.",
                [
                    ("http_post", {"url": url, "body": {"sku": "A1", "qty": 100}}),
                    ("http_post", {"url": url, "body": {"sku": "B2", "qty": 1}}),
                ],
            ),
            Reply("Done."),
        ]
    )
    run = client.start_run("Order", model="claude-haiku-4-5", tools=["http_post"])
    executor = make_executor(model)
    worker = drain(client.store, executor)
    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.APPROVAL)
    assert not worker._in_flight  # waiting holds no thread
    (step,) = [s for s in client.steps(run.id) if s.kind == StepKind.APPROVAL]
    assert step.status == StepStatus.STARTED and len(step.input["requests"]) == 2
    first, second = client.approvals()
    assert (first.seq, second.seq) == (step.seq, step.seq)
    assert "acts on the outside world" in first.rule
    assert first.reason == "Placing both orders."
    assert server.requests == []  # nothing happens before a decision

    client.approve(first.id, {"url": url, "body": {"sku": "A1", "qty": 10}})
    client.reject(second.id, "B2 is discontinued")
    drain(client.store, executor)

    assert client.run(run.id).status == RunStatus.COMPLETED
    assert [json.loads(r.body) for r in server.requests] == [{"sku": "A1", "qty": 10}]
    assert server.requests[0].headers["idempotency-key"] == f"{run.id}:{step.seq + 1}"
    assert client.store.get_approval(first.id).state == ApprovalState.EDITED
    assert client.store.get_approval(second.id).state == ApprovalState.REJECTED
    by_id = {r["tool_use_id"]: r for r in last_results(model)}
    uses = [b for b in model.requests[-1].messages[-2]["content"] if b["type"] == "tool_use"]
    ran, rejected = by_id[uses[0]["id"]], by_id[uses[1]["id"]]
    assert "HTTP 201" in str(ran["content"]) and not ran["is_error"]
    assert rejected["is_error"] and "B2 is discontinued" in str(rejected["content"])
    calls = [s for s in client.steps(run.id) if s.kind == StepKind.TOOL_CALL]
    assert len(calls) == 1 and calls[0].input["arguments"]["body"] == {"sku": "A1", "qty": 10}


@pytest.mark.parametrize("default", ["reject", "approve"])
def test_an_expired_approval_applies_its_default(
    local_http: Client, make_executor: MakeExecutor, server: HttpServer, default: str
) -> None:
    client = local_http
    client.settings = client.settings.updated(
        {"approval_deadline_s": 600, "approval_default": default}
    )
    clock = FakeClock()
    url = server.url("/orders")
    model = ScriptedModel(
        [Reply("Ordering.", [("http_post", {"url": url, "body": {"sku": "A1"}})]), Reply("ok")]
    )
    run = client.start_run("Order", model="claude-haiku-4-5", tools=["http_post"])
    executor = make_executor(model, clock=clock)
    drain(client.store, executor, clock=clock)
    (approval,) = client.approvals()
    assert approval.deadline == pytest.approx(clock.now() + 600)
    assert client.run(run.id).wake_at == approval.deadline
    clock.advance(599)
    drain(client.store, executor, clock=clock)
    assert client.run(run.id).status == RunStatus.WAITING  # not yet
    clock.advance(2)
    drain(client.store, executor, clock=clock)

    assert client.run(run.id).status == RunStatus.COMPLETED
    record = client.store.get_approval(approval.id)
    assert record.state == ApprovalState.EXPIRED
    assert f"default action ({default})" in record.decision_note
    (result,) = last_results(model)
    if default == "reject":
        assert server.requests == []
        assert result["is_error"] and "no decision before the deadline" in str(result["content"])
    else:
        assert len(server.requests) == 1
        assert "HTTP 201" in str(result["content"])


def test_a_decision_before_the_deadline_wins(
    local_http: Client, make_executor: MakeExecutor, server: HttpServer
) -> None:
    client = local_http
    client.settings.approval_deadline_s = 60
    clock = FakeClock()
    url = server.url("/orders")
    model = ScriptedModel([Reply("Ordering.", [("http_post", {"url": url})]), Reply("ok")])
    run = client.start_run("Order", model="claude-haiku-4-5", tools=["http_post"])
    executor = make_executor(model, clock=clock)
    drain(client.store, executor, clock=clock)
    (approval,) = client.approvals()
    client.reject(approval.id, "not today")
    clock.advance(3600)  # the worker only gets to it after the deadline
    drain(client.store, executor, clock=clock)
    assert client.store.get_approval(approval.id).state == ApprovalState.REJECTED
    assert "not today" in str(last_results(model)[0]["content"])
    assert client.run(run.id).status == RunStatus.COMPLETED


def test_an_approved_write_is_checked_again_before_it_runs(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    ws = tmp_path / "ws-check"
    ws.mkdir()
    (ws / "plan.md").write_text("v1\n")
    sha = hashlib.sha256(b"v1\n").hexdigest()[:16]
    model = ScriptedModel(
        [
            Reply(
                "Rewriting.",
                [("write_file", {"path": "plan.md", "content": "v2\n", "expected_sha256": sha})],
            ),
            Reply("I will re-read it first."),
        ]
    )
    run = client.start_run("Edit", model="claude-haiku-4-5", workspace=ws)
    executor = make_executor(model)
    drain(client.store, executor)
    (approval,) = client.approvals()
    assert "would overwrite plan.md" in approval.rule
    (ws / "plan.md").write_text("v1 edited by a colleague\n")  # the world moved on
    client.approve(approval.id)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert (ws / "plan.md").read_text() == "v1 edited by a colleague\n"
    (result,) = last_results(model)
    assert result["is_error"] and "check before running failed" in str(result["content"])
    assert "changed since it was read" in str(result["content"])


def test_policies_ask_and_never(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    model = ScriptedModel(
        [
            Reply("look", [("list_files", {}), ("search_files", {"query": "market"})]),
            Reply("done"),
        ]
    )
    run = client.start_run(
        "Look",
        model="claude-haiku-4-5",
        workspace=workspace,
        approval_overrides={"list_files": "ask", "search_files": "never"},
    )
    executor = make_executor(model)
    drain(client.store, executor)
    (approval,) = client.approvals()
    assert approval.tool == "list_files" and "policy for list_files is to ask" in approval.rule
    client.approve(approval.id)
    drain(client.store, executor)
    assert client.run(run.id).status == RunStatus.COMPLETED
    listed, refused = last_results(model)
    assert "alpha.md" in str(listed["content"])
    assert refused["is_error"] and "disabled by the analyst's policy" in str(refused["content"])


def test_malformed_tool_calls_become_errors_the_model_sees(
    local_http: Client, make_executor: MakeExecutor, workspace: Path, server: HttpServer
) -> None:
    client = local_http
    huge = "y" * 2_000_001
    calls: list[tuple[str, dict[str, object]]] = [
        ("read_file", {}),
        ("read_file", {"path": 12}),
        ("read_file", {"path": "alpha.md", "offset": -5}),
        ("list_files", {"path": ".", "recursive": "yes"}),
        ("write_file", {"path": "x.md", "content": huge}),
        ("web_fetch", {"url": ["http://a"]}),
        ("http_post", {"url": server.url("/orders"), "body": "not an object"}),
        ("send_email", {"to": "ceo@example.test", "subject": 7}),
        ("update_plan", {"items": "do everything"}),
        ("wait", {"seconds": "soon"}),
        ("ask_user", {}),
        ("rm_rf", {"path": "/"}),
        ("read_file", ["alpha.md"]),  # type: ignore[list-item]
    ]
    model = ScriptedModel([Reply("Trying things.", calls), Reply("I see my mistakes.")])
    run = client.start_run(
        "Try",
        model="claude-haiku-4-5",
        workspace=workspace,
        tools=[
            "read_file",
            "list_files",
            "write_file",
            "web_fetch",
            "http_post",
            "send_email",
            "update_plan",
            "wait",
            "ask_user",
        ],
    )
    drain(client.store, make_executor(model))
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    assert client.approvals(None) == []  # nothing malformed was put to the analyst
    results = last_results(model)
    assert len(results) == len(calls)
    assert all(r["is_error"] for r in results), [r for r in results if not r["is_error"]]
    texts = [str(r["content"]) for r in results]
    assert "path: Field required" in texts[0]
    assert "path: Input should be a valid string" in texts[1]
    assert "offset: Input should be greater than or equal to 0" in texts[2]
    assert "recursive: Extra inputs are not permitted" in texts[3]
    assert "content: String should have at most 2000000 characters" in texts[4]
    assert "rm_rf" in texts[11] and "not available" in texts[11]
    assert "expected a JSON object" in texts[12]
    assert all(len(t) < 2000 for t in texts)  # errors do not echo huge values back
    assert not (workspace / "x.md").exists()
    assert server.requests == []


class _Crash(BaseException):
    """Stands for the process dying at a crash point (in-process variant)."""


def test_a_post_to_an_endpoint_honouring_keys_is_still_asked_and_repeated_after_a_crash(
    local_http: Client, make_executor: MakeExecutor
) -> None:
    client = local_http
    srv = HttpServer()
    endpoint = KeyedEndpoint()
    srv.routes["/api/orders"] = endpoint
    client.settings.idempotent_post_prefixes = [srv.url("/api")]
    model = ScriptedModel(
        [Reply("Ordering.", [("http_post", {"url": srv.url("/api/orders")})]), Reply("ok")]
    )
    try:
        run = client.start_run("Order", model="claude-haiku-4-5", tools=["http_post"])
        drain(client.store, make_executor(model))
        (approval,) = client.approvals()  # idempotent is not harmless: still asked
        client.approve(approval.id)

        def crash_after_post(point: str) -> None:
            if point == "after_effect" and srv.requests:
                raise _Crash(point)

        cfg = EngineConfig(settings=client.settings, crash_hook=crash_after_post)
        with pytest.raises(_Crash):
            make_executor(model, config=cfg).execute(run.id)
        (post,) = [s for s in client.steps(run.id) if s.kind == StepKind.TOOL_CALL]
        assert (post.status, post.effect) == (StepStatus.STARTED, EffectClass.IDEMPOTENT)
        drain(client.store, make_executor(model))  # repeated at once, with the same key
        assert client.run(run.id).status == RunStatus.COMPLETED
        assert endpoint.keys == [f"{run.id}:{post.seq}"] * 2 and len(endpoint.effects) == 1
        assert client.store.get_step(run.id, post.seq).attempt == 2
    finally:
        srv.close()
