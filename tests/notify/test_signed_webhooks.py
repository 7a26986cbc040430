"""Signed webhooks: the real sender signs each post, real receivers check it.

The receivers are ``http.server`` servers in threads: the tests' recording server, and the
standalone receiver of ``docs/webhooks.md`` itself, run as documented against a real
worker's posts. The secret lives in the tests' in-memory keyring, or (a broken keyring, no
keyring) in the private file beside the database.
"""

from __future__ import annotations

import json
import logging
import re
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import keyring
import keyring.backend
import keyring.errors
import pytest
from keyring.backends import fail

from desktop_agent.client.api import Client
from desktop_agent.secrets import (
    SERVICE,
    WEBHOOK_FILE,
    rotate_webhook_secret,
    webhook_secret,
)
from desktop_agent.webhooks import HEADER, SignatureError, sign, verify
from desktop_agent.worker.notify import Notification, WebhookSender, build_notifier, folder_secret
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.conftest import MakeExecutor
from tests.helpers.fakes import MemoryKeyring
from tests.helpers.polling import wait_until
from tests.tools.servers import HttpServer
from tests.tools.servers import Reply as HttpReply

REPO = Path(__file__).resolve().parents[2]

NOTE = Notification(
    event="finished",
    run_id="R1",
    title="Summarise the sources — über alles",
    status="completed",
    wait_reason=None,
    message="done",
    cost_usd=0.25,
    at=1_700_000_000.0,
)


class BrokenKeyring(keyring.backend.KeyringBackend):
    """A keyring whose every call raises (a D-Bus gone, a locked keyring...)."""

    priority = 1

    def get_password(self, service: str, username: str) -> str | None:
        raise keyring.errors.KeyringLocked("the keyring is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise keyring.errors.KeyringLocked("the keyring is locked")

    def delete_password(self, service: str, username: str) -> None:
        raise keyring.errors.KeyringLocked("the keyring is locked")


@pytest.fixture
def hook() -> Iterator[HttpServer]:
    server = HttpServer()
    server.routes["/hook"] = HttpReply(200, b"ok")
    yield server
    server.close()


def post(sender: WebhookSender, hook: HttpServer) -> tuple[dict[str, str], bytes]:
    """Send :data:`NOTE`; the headers and body the receiver got."""
    before = len(hook.hits("/hook"))
    sender.send(NOTE)
    sender.close()  # delivers what is queued
    hits = hook.hits("/hook")
    assert len(hits) == before + 1 and sender.failed == 0
    return hits[-1].headers, hits[-1].body


def test_a_post_verifies_with_the_right_secret_only_and_while_fresh(
    hook: HttpServer, tmp_path: Path
) -> None:
    folder = tmp_path / "data"
    secret = webhook_secret(folder).value
    headers, body = post(WebhookSender(hook.url("/hook"), secret=folder_secret(folder)), hook)

    assert headers["content-type"] == "application/json"
    assert json.loads(body) == NOTE.to_json()
    assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", headers[HEADER.lower()])
    signed_at = verify(secret, headers, body)
    assert verify(secret, headers[HEADER.lower()], body) == signed_at

    with pytest.raises(SignatureError, match="no signature matches"):
        verify(webhook_secret(tmp_path / "other").value, headers, body)  # a wrong secret
    changed = body.replace(b'"cost_usd":0.25', b'"cost_usd":0.01')
    assert changed != body
    with pytest.raises(SignatureError, match="no signature matches"):
        verify(secret, headers, changed)
    verify(secret, headers, body, now=signed_at + 300)  # still within the tolerance
    with pytest.raises(SignatureError, match="away from now"):
        verify(secret, headers, body, now=signed_at + 301)  # the same request, replayed
    with pytest.raises(SignatureError, match="away from now"):
        verify(secret, headers, body, now=signed_at + 100, tolerance_s=60)
    with pytest.raises(SignatureError, match="no X-Desktop-Agent-Signature header"):
        verify(secret, {"content-type": "application/json"}, body)
    with pytest.raises(SignatureError, match="no time"):
        verify(secret, headers[HEADER.lower()].split(",")[1], body)


def test_the_secret_is_kept_in_the_keyring_per_data_folder_and_rotates(
    memory_keyring: MemoryKeyring, tmp_path: Path, hook: HttpServer
) -> None:
    folder = tmp_path / "data"
    first = webhook_secret(folder)
    assert first.stored == "keyring" and first.note == "" and len(first.value) >= 40
    assert webhook_secret(folder) == first  # made once, then read
    assert memory_keyring.store[(SERVICE, f"webhook-secret:{folder.absolute()}")] == first.value
    assert not (folder / WEBHOOK_FILE).exists()
    assert first.value not in repr(first)
    assert webhook_secret(tmp_path / "other").value != first.value

    sender = WebhookSender(hook.url("/hook"), secret=folder_secret(folder))
    headers, body = post(sender, hook)
    verify(first.value, headers, body)

    second = rotate_webhook_secret(folder)
    assert second.value != first.value and webhook_secret(folder) == second
    headers, body = post(WebhookSender(hook.url("/hook"), secret=folder_secret(folder)), hook)
    verify(second.value, headers, body)  # the next post is signed with the new secret
    with pytest.raises(SignatureError):
        verify(first.value, headers, body)


@pytest.mark.parametrize("ring", ["broken", "none"])
def test_without_a_working_keyring_the_secret_is_a_private_file_and_that_is_said(
    ring: str, tmp_path: Path, hook: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    keyring.set_keyring(BrokenKeyring() if ring == "broken" else fail.Keyring())  # type: ignore[no-untyped-call]
    folder = tmp_path / "data"
    found = webhook_secret(folder)
    path = folder / WEBHOOK_FILE
    assert found.stored == "file" and path.read_text(encoding="utf-8").strip() == found.value
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    said = "the OS keyring failed (the keyring is locked)" if ring == "broken" else "no secure"
    assert said in found.note and WEBHOOK_FILE in found.note
    assert webhook_secret(folder) == found  # the same secret again, not a new one

    sender = WebhookSender(hook.url("/hook"), secret=folder_secret(folder))
    with caplog.at_level(logging.WARNING, logger="desktop_agent.worker.notify"):
        verify(found.value, *post(sender, hook))
        sender = WebhookSender(hook.url("/hook"), secret=folder_secret(folder))
        sender.send(NOTE)
        sender.send(NOTE)
        sender.close()
    assert sender.sent == 2 and sender.failed == 0
    notes = [r.getMessage() for r in caplog.records if "signing secret" in r.getMessage()]
    assert len(notes) == 2 and said in notes[0]  # once per sender (a worker has one)
    assert found.value not in caplog.text

    rotated = rotate_webhook_secret(folder)
    assert rotated.stored == "file" and rotated.value != found.value
    assert webhook_secret(folder).value == rotated.value


def test_a_secret_that_cannot_be_read_leaves_the_post_unsigned_with_a_warning(
    hook: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    def unreadable() -> Any:
        raise PermissionError("no")

    with caplog.at_level(logging.WARNING, logger="desktop_agent.worker.notify"):
        headers, body = post(WebhookSender(hook.url("/hook"), secret=unreadable), hook)
    assert HEADER.lower() not in headers and json.loads(body)["run_id"] == "R1"
    assert "this post goes unsigned" in caplog.text


def docs_receiver() -> dict[str, Any]:
    """The standalone receiver of docs/webhooks.md, loaded as a module would be."""
    text = (REPO / "docs" / "webhooks.md").read_text(encoding="utf-8")
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "class Receiver" in b]
    namespace: dict[str, Any] = {"__name__": "receiver"}
    exec(compile(code, "docs/webhooks.md", "exec"), namespace)
    return namespace


def test_the_documented_receiver_takes_a_real_workers_posts_and_refuses_the_rest(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    docs = docs_receiver()
    secret = webhook_secret(client.db_path.parent).value  # desktop-agent webhook-secret show
    statuses: list[int] = []

    def send_response(
        handler: BaseHTTPRequestHandler, code: int, message: str | None = None
    ) -> None:
        statuses.append(code)
        BaseHTTPRequestHandler.send_response(handler, code, message)

    def quiet(handler: BaseHTTPRequestHandler, format: str, *args: object) -> None:
        pass

    # The documented handler as it is, its answers recorded and its log quiet.
    receiver = type(
        "Receiver",
        (docs["Receiver"],),
        {"secret": secret, "send_response": send_response, "log_message": quiet},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), receiver)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        # A real worker with the notifier the worker builds: the data folder's secret.
        notifier = build_notifier(client.store, webhook_url=url, stall_minutes=30)
        client.start_run("Summarise the sources", model="demo", workspace=workspace)
        Worker(
            client.store,
            make_executor(),
            WorkerConfig(until_idle=True, poll_s=0.01),
            notifier=notifier,
        ).run()
        assert notifier.webhook is not None
        wait_until(lambda: statuses, what="the worker's post reached the receiver")
        assert statuses == [204] and notifier.webhook.sent == 1

        body = json.dumps({"event": "finished", "run_id": "R9", "text": "forged"}).encode()
        now = int(time.time())
        refused = {
            "unsigned": httpx.post(url, content=body),
            "a wrong secret": httpx.post(url, content=body, headers={HEADER: sign("x", body)}),
            "a changed body": httpx.post(
                url, content=body + b" ", headers={HEADER: sign(secret, body)}
            ),
            "replayed an hour on": httpx.post(
                url, content=body, headers={HEADER: sign(secret, body, now - 3600)}
            ),
        }
        assert {k: r.status_code for k, r in refused.items()} == dict.fromkeys(refused, 401)
        signed = httpx.post(url, content=body, headers={HEADER: sign(secret, body)})
        assert signed.status_code == 204
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

    # The documented check and the library's agree.
    header = sign(secret, body, 1_700_000_000)
    assert docs["valid"](secret, header, body, now=1_700_000_100)
    verify(secret, header, body, now=1_700_000_100)
    assert not docs["valid"](secret, header, body, now=1_700_000_301)
    assert not docs["valid"](secret, header, body + b"x", now=1_700_000_100)
    assert not docs["valid"]("wrong", header, body, now=1_700_000_100)
