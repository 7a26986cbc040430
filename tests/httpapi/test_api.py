"""The local HTTP API through a real uvicorn server on loopback and a real HTTP client."""

from __future__ import annotations

import json
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from desktop_agent.client.api import Client
from desktop_agent.domain import ApprovalState, RunStatus
from desktop_agent.httpapi.app import create_app
from desktop_agent.httpapi.auth import TOKEN_FILE, load_token, token_for
from desktop_agent.httpapi.openapi import DESCRIPTION
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Api:
    """The server's address and an authenticated client."""

    url: str
    token: str
    http: httpx.Client

    def anonymous(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10)


@pytest.fixture
def api(client: Client) -> Iterator[Api]:
    """A real server on 127.0.0.1 (a free port), in a thread; no worker is started."""
    token = token_for(client.db_path)
    app = create_app(client.db_path, token, start_workers=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 20, "the API server")
    port = server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    yield Api(url, token, http)
    http.close()
    server.should_exit = True
    thread.join(timeout=10)


def test_start_a_run_get_202_then_poll_it_to_the_end(
    api: Api, client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    started = api.http.post("/v1/runs", json={"goal": "Summarise", "model": "demo",
                                              "workspace": str(workspace)})  # fmt: skip
    assert started.status_code == 202, started.text
    body = started.json()
    assert body["status_url"] == f"/v1/runs/{body['id']}" == started.headers["location"]
    assert api.http.get(body["status_url"]).json()["status"] == "queued"
    client.settings.ask_overwrite = False
    drain(client.store, make_executor())
    run = api.http.get(body["status_url"]).json()
    assert run["status"] in ("completed", "waiting") and run["steps"] > 3
    first = api.http.get(f"/v1/runs/{body['id']}/steps", params={"limit": 2}).json()
    assert [s["seq"] for s in first["steps"]] == [1, 2] and first["next_after_seq"] == 2
    rest = api.http.get(f"/v1/runs/{body['id']}/steps", params={"after_seq": 2}).json()
    assert rest["steps"][0]["seq"] == 3
    listed = api.http.get("/v1/runs", params={"search": "Summarise"}).json()
    assert [r["id"] for r in listed] == [body["id"]]


def test_approve_with_edited_arguments_and_the_edited_call_is_what_ran(
    api: Api, client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    (workspace / "report.md").write_text("old\n")
    run = client.start_run("Rewrite", model="demo", workspace=workspace)
    write = Reply("Writing.", [("write_file", {"path": "report.md", "content": "draft\n"})])
    executor = make_executor(ScriptedModel([write, Reply("Done.")]))
    drain(client.store, executor)
    (pending,) = api.http.get("/v1/approvals").json()
    assert pending["tool"] == "write_file" and pending["run_id"] == run.id
    edited = {"path": "report.md", "content": "edited through the API\n"}
    decided = api.http.post(f"/v1/approvals/{pending['id']}/approve", json={"arguments": edited})
    assert decided.status_code == 202 and decided.json()["decision"] == "approve"
    drain(client.store, executor)
    assert (workspace / "report.md").read_text() == "edited through the API\n"
    assert client.run(run.id).status == RunStatus.COMPLETED


def test_commands_reject_and_errors_are_json_4xx(
    api: Api, client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    run = client.start_run("Post it", model="demo", workspace=workspace,
                           approval_overrides={"write_file": "ask"})  # fmt: skip
    write = Reply("W.", [("write_file", {"path": "a.md", "content": "x\n"})])
    executor = make_executor(ScriptedModel([write, Reply("Ok.")]))
    drain(client.store, executor)
    (pending,) = client.approvals(ApprovalState.PENDING)
    no_reason = api.http.post(f"/v1/approvals/{pending.id}/reject", json={})
    assert no_reason.status_code == 400 and no_reason.json()["code"] == "invalid_input"
    rejected = api.http.post(f"/v1/approvals/{pending.id}/reject", json={"reason": "not now"})
    assert rejected.status_code == 202 and rejected.json()["queued"]
    drain(client.store, executor)  # the worker carries the decision out
    assert client.store.list_approvals(None, run.id)[0].state == ApprovalState.REJECTED
    assert not (workspace / "a.md").exists()
    finished = api.http.post(f"/v1/runs/{run.id}/pause")
    assert finished.status_code == 409 and finished.json()["code"] == "conflict"  # it ended
    run = client.start_run("Queued", model="demo", workspace=workspace)
    assert api.http.post(f"/v1/runs/{run.id}/pause").status_code == 202
    steer = api.http.post(f"/v1/runs/{run.id}/steer", json={"text": "be brief"})
    assert steer.status_code == 202 and steer.json()["queued"]
    unknown = api.http.get("/v1/runs/nosuchrun")
    assert unknown.status_code == 404 and "no run" in unknown.json()["error"]
    bad = api.http.post(
        "/v1/runs", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert bad.status_code == 400 and bad.json()["error"] == "the body is not JSON"
    no_goal = api.http.post("/v1/runs", json={"model": "demo"})
    assert no_goal.status_code == 400 and "'goal' is required" in no_goal.json()["error"]
    assert api.http.post(f"/v1/runs/{run.id}/explode").status_code == 404
    assert api.http.get("/v1/nothing").json()["code"] == "not_found"
    answer = api.http.post(f"/v1/runs/{run.id}/answer", json={"text": "yes"})
    assert answer.status_code == 409 and answer.json()["code"] == "conflict"


def test_no_token_a_wrong_token_or_a_browser_is_refused(api: Api) -> None:
    with api.anonymous() as anonymous:
        missing = anonymous.get("/v1/runs")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        wrong = anonymous.get("/v1/runs", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
    browser = api.http.get("/v1/runs", headers={"Origin": "https://evil.example"})
    assert browser.status_code == 403 and browser.json()["code"] == "origin"
    assert not [h for h in browser.headers if h.lower().startswith("access-control-")]
    preflight = api.http.options("/v1/runs", headers={"Origin": "https://evil.example"})
    assert preflight.status_code == 403
    rebinding = api.http.get("/v1/runs", headers={"Host": "evil.example"})
    assert rebinding.status_code == 400


def test_the_event_stream_sends_steps_and_ends_with_the_run(
    api: Api, client: Client, make_executor: MakeExecutor
) -> None:
    run = client.start_run("Stream me", model="demo")
    drain(client.store, make_executor(ScriptedModel([Reply("One."), Reply("Two.")])))
    events: list[str] = []
    with api.http.stream("GET", f"/v1/runs/{run.id}/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                events.append(line.removeprefix("event: "))
    assert events[-1] == "end" and "status" in events
    assert events.count("step") == client.run(run.id).last_seq


def test_the_served_description_is_the_checked_in_one_and_names_every_route(api: Api) -> None:
    served = api.http.get("/v1/openapi.json").json()
    assert served == json.loads((REPO / "docs" / "openapi.json").read_text()) == DESCRIPTION
    from desktop_agent.httpapi.app import create_app as make

    app = make(Path("unused.db"), "t")
    paths = {getattr(r, "path", "") for r in app.routes}
    assert paths == set(served["paths"])


def test_the_token_is_kept_in_a_private_file_without_a_keyring(tmp_path: Path) -> None:
    import keyring
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())  # type: ignore[no-untyped-call]
    try:
        db = tmp_path / "data" / "desktop-agent.db"
        token = token_for(db)
        path = db.parent / TOKEN_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == token
        assert load_token(db) == token
    finally:
        keyring.set_keyring(previous)
    with_keyring = tmp_path / "other" / "desktop-agent.db"
    assert token_for(with_keyring) and not (with_keyring.parent / TOKEN_FILE).exists()


def test_serve_as_a_user_runs_it_and_the_token_stays_in_the_keyring(
    client: Client, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    import psutil

    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "tests.helpers.file_keyring.FileKeyring",
        "DESKTOP_AGENT_TEST_KEYRING": str(tmp_path / "keyring.json"),
        "DESKTOP_AGENT_AUTOSTART_WORKER": "0",
    }
    argv = [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path)]
    proc = subprocess.Popen(
        [*argv, "serve", "--port", "0"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("listening on http://127.0.0.1:"), line
        url = line.split()[2]
        shown = subprocess.run(
            [*argv, "api-token", "show"], env=env, capture_output=True, text=True, timeout=60
        )
        token = shown.stdout.strip()
        assert shown.returncode == 0 and len(token) > 30
        ok = httpx.get(f"{url}/v1/runs", headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert ok.status_code == 200
        assert not any(token in arg for arg in psutil.Process(proc.pid).cmdline())
        assert not (client.db_path.parent / TOKEN_FILE).exists()  # in the keyring, not a file
        assert token in (tmp_path / "keyring.json").read_text()  # (the tests' keyring file)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert token not in err and token not in line


def test_a_webhook_starts_a_run_from_a_schedules_template(api: Api, client: Client) -> None:
    from desktop_agent.client.schedules import RunOptions, Scheduling

    schedule = Scheduling(client).add_schedule(
        "Summarise {item}", every_s=86400, options=RunOptions(model="demo", max_steps=30)
    )
    hook = f"/v1/schedules/{schedule.id}/trigger"
    assert api.http.post(hook, json={}).status_code == 400  # the goal takes an item
    started = api.http.post(hook, json={"item": "the Q3 memo"})
    assert started.status_code == 202, started.text
    run = client.run(started.json()["id"])
    assert run.goal == "Summarise the Q3 memo" and run.model == "demo"
    assert run.budget.max_steps == 30
    assert api.http.post("/v1/schedules/nosuch/trigger", json={}).status_code == 404


def test_a_run_is_started_with_the_effort_and_thinking_asked_for(api: Api, client: Client) -> None:
    asked = {"goal": "Summarise", "model": "claude-sonnet-5-5", "effort": "low", "thinking": True}
    started = api.http.post("/v1/runs", json=asked)
    assert started.status_code == 202, started.text
    assert "notice" not in started.json()
    run = api.http.get(started.json()["status_url"]).json()
    assert (run["effort"], run["thinking"], run["model_default_effort"]) == ("low", True, "high")
    spec = client.run(run["id"]).spec
    assert spec.effort == "low" and spec.thinking_budget > 0
    default = api.http.post("/v1/runs", json={"goal": "Again", "model": "claude-sonnet-5-5"})
    run = api.http.get(default.json()["status_url"]).json()
    assert (run["effort"], run["thinking"]) == (None, False)
    old = api.http.post("/v1/runs", json={"goal": "Old", "model": "claude-sonnet-4-5"})
    assert old.status_code == 202
    assert old.json()["notice"].startswith("claude-sonnet-4-5 is deprecated, retires 2026-11-30")


def test_a_run_is_started_in_economy_mode_when_asked(api: Api, client: Client) -> None:
    asked = {"goal": "Summarise", "model": "claude-sonnet-5-5", "economy": True}
    started = api.http.post("/v1/runs", json=asked)
    assert started.status_code == 202, started.text
    run = api.http.get(started.json()["status_url"]).json()
    assert run["economy"] is True and client.run(run["id"]).spec.economy
    plain = api.http.post("/v1/runs", json={"goal": "Again", "model": "claude-sonnet-5-5"})
    assert api.http.get(plain.json()["status_url"]).json()["economy"] is False
    for bad, why in (
        ({"model": "claude-sonnet-5-5", "economy": "yes"}, "'economy' must be true or false"),
        ({"model": "demo", "economy": True}, "cannot be sent in a Message Batch"),
    ):
        wrong = api.http.post("/v1/runs", json={"goal": "X", **bad})
        assert wrong.status_code == 400 and why in wrong.json()["error"], wrong.text
    assert len(client.runs()) == 2


def test_an_effort_or_a_model_that_cannot_work_answers_400_with_why(
    api: Api, client: Client
) -> None:
    unknown = api.http.post("/v1/runs", json={"goal": "X", "model": "demo", "effort": "extreme"})
    assert unknown.status_code == 400 and unknown.json()["code"] == "invalid_input"
    assert unknown.json()["error"] == (
        "unknown effort 'extreme': use one of low, medium, high, xhigh, max"
    )
    not_taken = api.http.post(
        "/v1/runs", json={"goal": "X", "model": "claude-haiku-4-5", "effort": "high"}
    )
    assert not_taken.status_code == 400
    assert "claude-haiku-4-5 does not take effort 'high'" in not_taken.json()["error"]
    retired = api.http.post("/v1/runs", json={"goal": "X", "model": "claude-opus-4-1"})
    assert retired.status_code == 400 and "use claude-opus-5-5 instead" in retired.json()["error"]
    for bad in ({"effort": 3}, {"thinking": "yes"}):
        wrong = api.http.post("/v1/runs", json={"goal": "X", "model": "demo", **bad})
        assert wrong.status_code == 400, bad
    assert client.runs() == []


def test_the_models_are_listed_with_their_efforts(api: Api) -> None:
    listed = api.http.get("/v1/models").json()
    models = {m["id"]: m for m in listed["models"]}
    assert models["claude-opus-5-5"]["default_effort"] == "medium"
    assert "xhigh" in models["claude-opus-5-5"]["efforts"]
    assert models["claude-sonnet-4-5"]["lifecycle"] == "deprecated"
    assert "claude-opus-4-1" not in models
    every = api.http.get("/v1/models", params={"all": "true"}).json()
    assert "claude-opus-4-1" in {m["id"] for m in every["models"]}
