"""The CLI says what really happened: where the API key went, and why a list is empty."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail, null

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.secrets import SERVICE, USERNAME, KeyStore
from tests.helpers.fakes import MemoryKeyring

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-ant-api03-say-what-happened-0123456789"


def _key(db: Path, *args: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
    try:
        code = cli.main(["--db", str(db), "key", *args])
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("backend", [null.Keyring, fail.Keyring], ids=["null", "fail"])
def test_key_set_without_a_keyring_saves_nothing_and_says_so(
    client: Client, backend: type[keyring.backend.KeyringBackend]
) -> None:
    keyring.set_keyring(backend())  # restored by the autouse memory_keyring fixture
    code, out, err = _key(client.db_path, "set", stdin=KEY + "\n")
    assert code == 2 and out == ""
    assert "no secure store (OS keyring) exists here" in err
    assert "the key was not saved" in err and "set ANTHROPIC_API_KEY" in err
    assert "saved in the OS keyring" not in err and KEY not in err
    assert KeyStore().get() is None  # nothing kept behind the message's back

    code, out, _ = _key(client.db_path, "status")
    assert code == 0
    assert out.startswith("no API key set; no secure store (OS keyring) exists here")
    assert "`desktop-agent key set` cannot keep a key: set ANTHROPIC_API_KEY" in out
    assert "kept for this session" not in out
    code, out, _ = _key(client.db_path, "status", "--json")
    status = json.loads(out)
    assert (status["present"], status["secure_store"], status["source"]) == (False, False, "none")


def test_key_set_in_a_process_with_the_fail_backend(client: Client) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    argv = [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path), "key"]
    done = subprocess.run(
        [*argv, "set", "--json"], input=KEY + "\n", capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    error = json.loads(done.stdout)
    assert error["code"] == "key_not_saved" and "the key was not saved" in error["error"]
    status = subprocess.run([*argv, "status"], capture_output=True, text=True, env=env)
    assert status.returncode == 0
    assert "no API key set" in status.stdout and "cannot keep a key" in status.stdout


def test_key_set_with_a_keyring_saves_it_there(
    client: Client, memory_keyring: MemoryKeyring
) -> None:
    code, out, _ = _key(client.db_path, "set", stdin=KEY + "\n")
    assert code == 0 and out.strip() == "key saved in the OS keyring"
    assert memory_keyring.store[(SERVICE, USERNAME)] == KEY
    code, out, _ = _key(client.db_path, "status")
    assert out.startswith("key stored in the OS keyring") and KEY not in out


def test_a_search_that_matches_nothing_says_so(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(client.db_path)
    assert cli.main(["--db", db, "runs", "--search", "quarterly"]) == 0
    assert capsys.readouterr().out.strip() == "no run matching the search 'quarterly'"
    client.start_run("Summarise the notes", model="demo")
    assert cli.main(["--db", db, "runs", "--search", "quarterly"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == "no run matching the search 'quarterly'" and "no runs yet" not in out
    assert cli.main(["--db", db, "runs", "--status", "failed", "--search", "notes"]) == 0
    assert capsys.readouterr().out.strip() == (
        "no run with status failed and matching the search 'notes'"
    )
    assert cli.main(["--db", db, "runs", "--search", "notes"]) == 0
    assert "Summarise the notes" in capsys.readouterr().out


def test_no_runs_at_all_says_how_to_start_one(
    client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--db", str(client.db_path), "runs"]) == 0
    assert capsys.readouterr().out.startswith("no runs yet")


def test_run_refuses_yes_with_detach_and_starts_nothing(client: Client) -> None:
    """--yes is carried out by the following command: detached, nobody would approve."""
    err = io.StringIO()
    old = sys.stderr
    sys.stderr = err
    try:
        code = cli.main(
            [
                "--db",
                str(client.db_path),
                "run",
                "Summarise",
                "--model",
                "demo",
                "--yes",
                "--detach",
            ]
        )
    finally:
        sys.stderr = old
    assert code == 2
    assert "--yes approves requests while `run` follows the run" in err.getvalue()
    assert client.runs() == []  # nothing was started, nor a worker for it
