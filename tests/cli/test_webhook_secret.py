"""``desktop-agent webhook-secret show|rotate``: the secret a receiver checks signatures with.

The command runs as the analyst runs it, in its own process, over the tests' keyring file;
the posts are signed in this process by the sender the worker uses, over the same keyring.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest

from desktop_agent.client.api import Client
from desktop_agent.secrets import WEBHOOK_FILE
from desktop_agent.webhooks import SignatureError, verify
from desktop_agent.worker.notify import Notification, WebhookSender, folder_secret
from tests.helpers.file_keyring import ENV, FileKeyring
from tests.tools.servers import HttpServer
from tests.tools.servers import Reply as HttpReply

REPO = Path(__file__).resolve().parents[2]

NOTE = Notification("needs_you", "R1", "A run", "waiting", "approval", "", 0.0, 1.0)


@pytest.fixture
def hook() -> Iterator[HttpServer]:
    server = HttpServer()
    server.routes["/hook"] = HttpReply(200, b"ok")
    yield server
    server.close()


def test_show_gives_the_secret_the_worker_signs_with_and_rotate_replaces_it(
    client: Client, tmp_path: Path, hook: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    ring = tmp_path / "keyring.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "tests.helpers.file_keyring.FileKeyring",
        ENV: str(ring),
    }
    monkeypatch.setenv(ENV, str(ring))
    keyring.set_keyring(FileKeyring())  # type: ignore[no-untyped-call]
    argv = [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path)]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done

    def posted() -> tuple[dict[str, str], bytes]:
        sender = WebhookSender(hook.url("/hook"), secret=folder_secret(client.db_path.parent))
        sender.send(NOTE)
        sender.close()
        hit = hook.hits("/hook")[-1]
        return hit.headers, hit.body

    shown = cli("webhook-secret", "show")
    secret = shown.stdout.strip()
    assert len(secret) >= 40 and shown.stderr == ""  # in the keyring: nothing to say
    assert cli("webhook-secret", "show").stdout.strip() == secret
    assert secret in ring.read_text(encoding="utf-8")
    assert not (client.db_path.parent / WEBHOOK_FILE).exists()
    verify(secret, *posted())

    rotated = cli("webhook-secret", "rotate")
    new = rotated.stdout.strip()
    assert new != secret and "give it to the receiver" in rotated.stderr
    assert json.loads(cli("--json", "webhook-secret", "show").stdout) == {
        "secret": new,
        "stored": "keyring",
        "note": "",
    }
    headers, body = posted()
    verify(new, headers, body)
    with pytest.raises(SignatureError):
        verify(secret, headers, body)


def test_without_a_keyring_show_says_where_the_secret_is_kept(client: Client) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
    }
    argv = [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path)]
    done = subprocess.run(
        [*argv, "webhook-secret", "show"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    secret = done.stdout.strip()
    assert "no secure store (OS keyring)" in done.stderr and WEBHOOK_FILE in done.stderr
    assert secret not in done.stderr
    kept = (client.db_path.parent / WEBHOOK_FILE).read_text(encoding="utf-8").strip()
    assert kept == secret
