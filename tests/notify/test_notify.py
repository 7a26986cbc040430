"""Notifications: a real worker posts JSON to a local webhook server as runs change."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import PermanentError
from desktop_agent.engine.loop import RunExecutor
from desktop_agent.engine.ports import RunPatch
from desktop_agent.worker.notify import Notification, Notifier, build_notifier
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.conftest import MakeExecutor
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.helpers.polling import wait_until
from tests.tools.servers import HttpServer
from tests.tools.servers import Reply as HttpReply
from tests.tools.servers import Request as HttpRequest


@pytest.fixture
def hook() -> Iterator[HttpServer]:
    server = HttpServer()
    server.routes["/hooks/T0KEN-abc"] = HttpReply(200, b"ok")
    yield server
    server.close()


def events(server: HttpServer) -> list[dict[str, object]]:
    return [json.loads(r.body) for r in server.hits("/hooks/T0KEN-abc")]


def work(client: Client, executor: RunExecutor, notifier: Notifier) -> None:
    """A worker that runs until idle, then delivers what it has to tell."""
    worker = Worker(
        client.store,
        executor,
        WorkerConfig(until_idle=True, poll_s=0.01),
        notifier=notifier,
    )
    worker.run()


def test_needs_you_then_finished_reach_the_webhook(
    client: Client, make_executor: MakeExecutor, workspace: Path, hook: HttpServer
) -> None:
    url = hook.url("/hooks/T0KEN-abc")
    executor = make_executor()
    run = client.start_run("Summarise the sources", model="demo", workspace=workspace)
    work(client, executor, build_notifier(client.store, webhook_url=url, stall_minutes=30))
    (needs,) = events(hook)
    assert needs["event"] == "needs_you" and needs["run_id"] == run.id
    assert needs["status"] == "waiting" and needs["wait_reason"] == "approval"
    assert "needs you" in str(needs["text"]) and "write_file" in str(needs["message"])
    assert hook.requests[0].headers["content-type"] == "application/json"

    # A new worker (as after a restart) does not tell again what was already told.
    work(client, executor, build_notifier(client.store, webhook_url=url, stall_minutes=30))
    client.steer(run.id, "keep it short")  # wakes the run; it still waits for the decision
    work(client, executor, build_notifier(client.store, webhook_url=url, stall_minutes=30))
    assert len(events(hook)) == 1

    (approval,) = client.approvals()
    client.approve(approval.id)
    work(client, executor, build_notifier(client.store, webhook_url=url, stall_minutes=30))
    finished = events(hook)[-1]
    assert finished["event"] == "finished" and finished["status"] == "completed"
    assert finished["title"] == "Summarise the sources"


def test_a_failed_run_is_told_and_listeners_hear_everything(
    client: Client, make_executor: MakeExecutor, hook: HttpServer
) -> None:
    model = ScriptedModel([Reply(raises=PermanentError("the model was retired"))])
    run = client.start_run("Fail", model="claude-haiku-4-5")
    heard: list[Notification] = []
    notifier = build_notifier(
        client.store, webhook_url=hook.url("/hooks/T0KEN-abc"), stall_minutes=None
    )
    notifier.add_listener(heard.append)

    def broken(_n: Notification) -> None:
        raise ZeroDivisionError

    notifier.add_listener(broken)  # a broken listener changes nothing
    work(client, make_executor(model), notifier)
    assert client.run(run.id).status == RunStatus.FAILED
    (failed,) = events(hook)
    assert failed["event"] == "failed" and "the model was retired" in str(failed["message"])
    assert [n.event for n in heard] == ["failed"]


def test_a_slow_or_broken_webhook_never_blocks_and_is_only_logged(
    client: Client, hook: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def held(_req: HttpRequest) -> HttpReply:
        release.wait(30)  # the hook answers only once the test lets it
        return HttpReply(500, b"boom")

    hook.routes["/hooks/T0KEN-abc"] = held
    run = client.start_run("Slow hook", model="demo")
    client.store.commit(run.id, patch=RunPatch(status=RunStatus.COMPLETED))
    url = hook.url("/hooks/T0KEN-abc")
    notifier = Notifier(client.store, webhook_url=url, timeout_s=30)
    slow = Notifier(client.store, webhook_url=url, timeout_s=0.2)
    with caplog.at_level(logging.WARNING, logger="desktop_agent.worker.notify"):
        try:
            notifier.on_activation_end(run.id)
            # Posted from a background thread: the call is back, the post is at the hook,
            # and the hook has not answered it yet.
            wait_until(lambda: hook.hits("/hooks/T0KEN-abc"), what="the webhook post")
            assert notifier.webhook is not None and notifier.webhook.failed == 0
            slow.on_activation_end(run.id)
            slow.close(timeout_s=30)  # its post gives up after 0.2 s
        finally:
            release.set()
        notifier.close(timeout_s=30)
    assert notifier.webhook.failed == 1  # the 500
    assert slow.webhook is not None and slow.webhook.failed == 1  # the timeout
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "webhook at 127.0.0.1 failed" in logged and "T0KEN" not in logged
    unreachable = Notifier(client.store, webhook_url="http://127.0.0.1:9/x", timeout_s=0.2)
    unreachable.on_activation_end(run.id)
    unreachable.close()
    assert unreachable.webhook is not None and unreachable.webhook.failed == 1


def test_no_progress_for_n_minutes_is_told_once(client: Client, hook: HttpServer) -> None:
    clock = FakeClock()
    run = client.start_run("Stuck", model="demo")
    client.store.commit(run.id, patch=RunPatch(status=RunStatus.RUNNING))
    heard: list[Notification] = []
    notifier = build_notifier(client.store, webhook_url="", stall_minutes=30, clock=clock)
    notifier.add_listener(heard.append)
    t0 = clock.now()
    notifier.tick(t0)
    notifier.tick(t0 + 29 * 60)
    assert heard == []
    notifier.tick(t0 + 31 * 60)
    assert [n.event for n in heard] == ["stalled"]
    assert "no new step for 31m" in heard[0].message
    notifier.tick(t0 + 90 * 60)
    assert len(heard) == 1  # told once, not every poll
