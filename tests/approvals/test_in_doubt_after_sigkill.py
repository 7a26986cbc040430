"""An unsafe POST left in doubt by a SIGKILL: needs attention, then the analyst decides.

Real worker child processes (``tests.approvals.child_worker``: production wiring, scripted
model) kill themselves with SIGKILL right after a POST reached the server and before its
outcome was written (``DESKTOP_AGENT_CRASH_AT=after_effect:2``). One database holds one
run per decision; each crashing child first recovers the run its predecessor left, then
leaves the next one in doubt. Every child is killed if still alive and always reaped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import EffectClass, RunStatus, StepStatus
from tests.tools.servers import HttpServer, KeyedEndpoint, Reply

REPO = Path(__file__).resolve().parents[2]
CRASH_AFTER_POST = "after_effect:2"  # 1: the model call, 2: the POST


@pytest.fixture
def server() -> Iterator[HttpServer]:
    srv = HttpServer()
    yield srv
    srv.close()


def run_child(argv: list[str], log: Path, **env: str) -> int:
    """Run a child to its end; kill and reap it whatever happens."""
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    full.pop("ANTHROPIC_API_KEY", None)
    if "DESKTOP_AGENT_CRASH_AT" not in env:
        full.pop("DESKTOP_AGENT_CRASH_AT", None)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=full, cwd=REPO
        )
    try:
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        proc.wait()


def settings(**more: object) -> Settings:
    return Settings(
        default_max_cost_usd=None,
        default_max_steps=None,
        ask_unsafe=False,  # the crash is the subject here, not the approval
        allow_private_fetch=True,
        **more,
    )


def test_an_unsafe_post_in_doubt_after_sigkill_is_decided_by_the_analyst(
    tmp_path: Path, server: HttpServer
) -> None:
    db = tmp_path / "data" / "agent.db"
    settings().save(db)
    client = Client(db)
    log = tmp_path / "children.log"

    def worker(**env: str) -> int:
        return run_child(
            [sys.executable, "-m", "tests.approvals.child_worker", str(db)], log, **env
        )

    def resolve(run_id: str, action: str) -> None:
        argv = [sys.executable, "-m", "desktop_agent", "--db", str(db), "resolve", run_id, action]
        assert run_child(argv, log) == 0, log.read_text()[-2000:]

    decisions = ["retry", "skip", "probe", "probe_honoured"]
    honoured = KeyedEndpoint()
    runs: dict[str, str] = {}
    for name in decisions:
        path = f"/orders/{name}"
        server.routes[path] = honoured if name == "probe_honoured" else Reply(201, b'{"id": 7}')
        runs[name] = client.start_run(
            f"POST {server.url(path)}", model="claude-haiku-4-5", tools=["http_post"]
        ).id
    try:
        # 1. Each POST reaches the server; each worker dies before writing the outcome.
        for name in decisions:
            code = worker(DESKTOP_AGENT_CRASH_AT=CRASH_AFTER_POST)
            assert code == -signal.SIGKILL, log.read_text()[-3000:]
            assert len(server.hits(f"/orders/{name}")) == 1
            step = client.store.get_step(runs[name], 2)
            assert (step.status, step.effect) == (StepStatus.STARTED, EffectClass.UNSAFE)
        # After the fact, the user says the last endpoint honours idempotency keys.
        settings(idempotent_post_prefixes=[server.url("/orders/probe_honoured")]).save(db)

        # 2. A new worker finds the last step in doubt; none is repeated blindly.
        assert worker() == 0, log.read_text()[-3000:]
        for name, run_id in runs.items():
            run = client.run(run_id)
            assert run.status == RunStatus.NEEDS_ATTENTION, (name, run.status_message)
            assert run.attention_seq == 2 and "may or may not have happened" in run.status_message
            assert len(server.hits(f"/orders/{name}")) == 1

        # 3. The analyst decides from the command line; one worker applies it all.
        for name, run_id in runs.items():
            resolve(run_id, name.removesuffix("_honoured"))
        assert worker() == 0, log.read_text()[-3000:]
        probed = client.run(runs["probe"])
        assert probed.status == RunStatus.NEEDS_ATTENTION  # a plain endpoint cannot tell
        assert "could not tell" in probed.status_message
        resolve(runs["probe"], "mark_done")
        assert worker() == 0, log.read_text()[-3000:]

        for name, run_id in runs.items():
            run = client.run(run_id)
            assert run.status == RunStatus.COMPLETED, (name, run.status_message)
        keys = {
            name: [r.headers["idempotency-key"] for r in server.hits(f"/orders/{name}")]
            for name in decisions
        }
        assert keys["skip"] == [f"{runs['skip']}:2"]  # the effect happened once
        assert keys["probe"] == [f"{runs['probe']}:2"]
        assert keys["retry"] == [f"{runs['retry']}:2"] * 2  # twice only on an explicit retry
        # Probing an endpoint that honours keys re-sends with the same key: it acts once.
        assert keys["probe_honoured"] == [f"{runs['probe_honoured']}:2"] * 2
        assert len(honoured.effects) == 1

        out = {name: client.store.get_step(run_id, 2).output for name, run_id in runs.items()}
        assert out["skip"]["is_error"] and "may or may not have happened" in out["skip"]["content"]
        assert "confirmed this effect had already happened" in out["probe"]["content"]
        assert "HTTP 201" in out["retry"]["content"]
        assert '"replayed": true' in out["probe_honoured"]["content"]
    finally:
        client.close()
