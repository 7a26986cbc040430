"""``desktop-agent api-token rotate`` takes effect on a running ``desktop-agent serve`` at once.

The server is a real ``desktop-agent serve`` process and the rotation another process, as
an analyst does it; the token is kept in the tests' keyring file, or (no keyring) in the
private file beside the database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from desktop_agent.client.api import Client
from desktop_agent.httpapi.app import create_app
from desktop_agent.httpapi.auth import STAMP_FILE, TOKEN_FILE, CurrentToken, make_token
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]

BACKENDS = {
    "keyring": "tests.helpers.file_keyring.FileKeyring",
    "no keyring": "keyring.backends.fail.Keyring",
}


def get(url: str, token: str) -> httpx.Response:
    return httpx.get(f"{url}/v1/runs", headers={"Authorization": f"Bearer {token}"}, timeout=10)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_rotated_token_is_refused_by_the_running_server_at_once(
    client: Client, tmp_path: Path, backend: str
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": BACKENDS[backend],
        "DESKTOP_AGENT_TEST_KEYRING": str(tmp_path / "keyring.json"),
        "DESKTOP_AGENT_AUTOSTART_WORKER": "0",
    }
    argv = [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path)]

    def token(action: str) -> str:
        done = subprocess.run(
            [*argv, "api-token", action], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    proc = subprocess.Popen(
        [*argv, "serve", "--port", "0"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("listening on http://127.0.0.1:"), line
        url = line.split()[2]
        old = token("show")
        assert get(url, old).status_code == 200

        new = token("rotate")  # the server is told nothing: it finds out by itself

        assert new != old
        refused = get(url, old)
        assert refused.status_code == 401 and refused.json()["code"] == "token"
        assert refused.headers["www-authenticate"] == "Bearer"
        assert get(url, new).status_code == 200
        assert token("show") == new
        assert get(url, old).status_code == 401  # and it stays refused

        stamp = (client.db_path.parent / STAMP_FILE).read_text(encoding="utf-8")
        assert old not in stamp and new not in stamp  # the stamp tells only that it changed
        assert (client.db_path.parent / TOKEN_FILE).exists() == (backend == "no keyring")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert old not in err and new not in err


@pytest.fixture
def served(client: Client) -> Iterator[str]:
    """A real server in a thread following the data folder's current token."""
    app = create_app(client.db_path, CurrentToken(client.db_path), start_workers=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 20, "the API server")
    yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)


def test_an_event_stream_opened_with_the_old_token_is_closed_by_a_rotation(
    client: Client, served: str, workspace: Path
) -> None:
    from desktop_agent.httpapi.auth import load_token

    old = load_token(client.db_path)
    assert old is not None
    run = client.start_run("Summarise the sources", model="demo", workspace=workspace)
    headers = {"Authorization": f"Bearer {old}"}
    events: list[str] = []
    with httpx.stream(
        "GET", f"{served}/v1/runs/{run.id}/events", headers=headers, timeout=10
    ) as stream:
        lines = stream.iter_lines()
        for line in lines:  # the run waits for a worker: the stream would go on
            if line.startswith("event: "):
                events.append(line)
                break
        new = make_token(client.db_path)
        events.extend(line for line in lines if line.startswith("event: "))  # until it closes
    assert events == ["event: status"]  # closed without an `end`: the run has not ended
    assert get(served, old).status_code == 401
    assert get(served, new).status_code == 200
