"""The data folder after real runs: the API key is nowhere, and everything is private.

A worker child process runs with ``ANTHROPIC_API_KEY`` set, verbose logging on and a
permissive umask (0): one offline demo run and one Claude run (the real adapter and SDK,
talking to a fake Messages API on 127.0.0.1). Afterwards every file of the data folder
(database, WAL, settings, logs, backups), the workspaces, an export (archive) of the runs
and the CLI's JSON output are searched for the key; the folder must be 0700 and the
database 0600 even though the umask allowed anything.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus
from desktop_agent.persistence.archive import Archiver, read_archive
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Stream, Text, ToolUse

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-ant-api03-SECURITYCHECK-" + uuid.uuid4().hex


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    script: list[Reply] = [
        Stream([Text("Reading the source."), ToolUse("read_file", {"path": "alpha.md"})]),
        Stream([Text("Alpha says the market grew 4%.")]),
    ]
    with FakeAnthropic(script) as server:
        yield server


def _env(tmp: Path, fake_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "DESKTOP_AGENT_", "PYTHON_KEYRING"))
    }
    env.update(
        PYTHONPATH=str(REPO),
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=fake_url,
        DESKTOP_AGENT_LOG="DEBUG",
        DESKTOP_AGENT_DEMO_DELAY="0",
        PYTHON_KEYRING_BACKEND="tests.helpers.file_keyring.FileKeyring",
        DESKTOP_AGENT_TEST_KEYRING=str(tmp / "keyring.json"),
        PYTHONWARNINGS="ignore::DeprecationWarning",
    )
    return env


def _child(args: list[str], env: dict[str, str], log: Path | None = None) -> int:
    """Run ``desktop-agent ARGS`` with umask 0; always reaped, killed by pid on timeout."""
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "desktop_agent", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
            umask=0,
            cwd=REPO,
        )
        try:
            return proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        if log:
            out.close()  # type: ignore[union-attr]


def test_key_is_nowhere_and_the_data_folder_is_private(tmp_path: Path, fake: FakeAnthropic) -> None:
    data = tmp_path / "data"
    db = data / "desktop-agent.db"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "alpha.md").write_text("# Alpha\nAlpha says the market grew 4%.\n")
    old = os.umask(0)
    try:
        settings = Settings(default_max_cost_usd=None, default_max_steps=None, ask_overwrite=False)
        settings.save(db)
        client = Client(db, settings)
        demo = client.start_run("Summarise the sources", model="demo", workspace=ws)
        claude = client.start_run("Read alpha", model="claude-sonnet-5-5", workspace=ws)
    finally:
        os.umask(old)
    env = _env(tmp_path, fake.url)
    log = data / "logs" / "worker.log"
    log.parent.mkdir(mode=0o700, exist_ok=True)
    assert _child(["--db", str(db), "worker", "--until-idle"], env, log) == 0
    assert client.run(demo.id).status == RunStatus.COMPLETED, client.run(demo.id).status_message
    assert client.run(claude.id).status == RunStatus.COMPLETED, client.run(claude.id)
    assert fake.requests and all(r.key == KEY for r in fake.requests)  # the key was used
    assert "DEBUG" in log.read_text()  # verbose logging really happened

    # Exports: the CLI's JSON views of everything, and an archive of the finished runs.
    shown = subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), "show", claude.id, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert KEY not in shown.stdout + shown.stderr
    archive = Archiver(client.store.db, data / "archives").archive(time.time() + 60)
    assert archive.path is not None and len(archive.run_ids) == 2
    assert KEY not in json.dumps(read_archive(archive.path))
    client.close()

    searched = []
    for folder in (data, ws):
        for path in folder.rglob("*"):
            if path.is_file():
                searched.append(path.relative_to(tmp_path).as_posix())
                body = path.read_bytes()
                assert KEY.encode() not in body, f"the API key is in {path}"
                assert KEY[-16:].encode() not in body, f"part of the API key is in {path}"
    assert {"data/desktop-agent.db", "data/settings.json", "data/logs/worker.log"} <= set(searched)

    # Private even under umask 0: the folder 0700, the database and its side files 0600.
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    for side in (Path(f"{db}-wal"), Path(f"{db}-shm"), data / "settings.json"):
        if side.exists():
            assert stat.S_IMODE(side.stat().st_mode) & 0o077 == 0, side
    for sub in (p for p in data.iterdir() if p.is_dir()):
        assert stat.S_IMODE(sub.stat().st_mode) & 0o077 == 0, sub
