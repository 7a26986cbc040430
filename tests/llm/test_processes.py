"""Claude runs in real child processes: crashes (SIGKILL), the CLI end to end, the API key.

The worker is ``python -m desktop_agent --db DB worker --until-idle``; it reaches the fake API
through ``ANTHROPIC_BASE_URL`` and a test keyring file through ``PYTHON_KEYRING_BACKEND``, so
the real OS keyring is never touched. Every process started here is killed by its pid at the
end of the test if it is still running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from desktop_agent.cli import commands as cli
from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus, StepKind, StepStatus, WaitReason
from desktop_agent.engine.compaction import SUMMARY_PROMPT
from desktop_agent.secrets import SERVICE, USERNAME
from tests.helpers.fake_anthropic import Reply, Status, Stream, Text, ToolUse
from tests.llm.conftest import KEY, StartFake

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
SONNET = "claude-sonnet-4-5"


class Procs:
    """Child processes of a test, killed by pid at teardown if still running."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[subprocess.Popen[bytes]] = []

    def env(self, fake_url: str, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "DESKTOP_AGENT_", "PYTHON_KEYRING"))
        }
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            ANTHROPIC_BASE_URL=fake_url,
            PYTHON_KEYRING_BACKEND="tests.helpers.file_keyring.FileKeyring",
            DESKTOP_AGENT_TEST_KEYRING=str(self.tmp / "keyring.json"),
            PYTHONWARNINGS="ignore::DeprecationWarning",
        )
        env.update(extra)
        return env

    def worker(self, db: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log_dir = db.parent / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / "worker.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "desktop_agent", "--db", str(db), "worker", "--until-idle"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.tmp,
            )
        self.started.append(proc)
        return proc

    def cli(
        self, args: list[str], env: dict[str, str], stdin: str = "", timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "desktop_agent", *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.tmp,
            timeout=timeout,
        )

    def kill_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    yield p
    p.kill_all()


def _kill_spawned_workers(db: Path) -> None:
    """Kill workers the CLI started for ``db`` (detached, so not our direct children)."""
    c = Client(db)
    try:
        workers = c.store.list_workers(include_stopped=True)
    finally:
        c.close()
    for info, _ in workers:
        try:
            proc = psutil.Process(info.pid)
            if str(db) in proc.cmdline():
                proc.kill()
                proc.wait(timeout=10)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def _summarizing(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]["content"]
    return isinstance(last, list) and str(last[-1].get("text", "")).startswith(SUMMARY_PROMPT)


# --------------------------------------------------------------------------- crashes


def test_crash_mid_stream_salvages_the_partial_text_and_reissues_the_call(
    client: Client, start_fake: StartFake, procs: Procs, workspace: Path
) -> None:
    long_answer = "Salvage me: " + "lorem ipsum " * 80
    fake = start_fake(
        lambda body, i: (
            Stream([Text(long_answer, chunk=6)], delay=0.02)
            if i == 0
            else Stream([Text("Recovered answer.")], input_tokens=400, output_tokens=30)
        )
    )
    run = client.start_run("Crash while streaming", model=SONNET, workspace=workspace)
    env = procs.env(fake.url, ANTHROPIC_API_KEY=KEY)

    first = procs.worker(client.db_path, {**env, "DESKTOP_AGENT_CRASH_AT": "mid_stream"})
    assert first.wait(timeout=30) == -signal.SIGKILL
    (open_step,) = client.steps(run.id)
    assert open_step.status == StepStatus.STARTED
    partial = open_step.partial_text
    assert partial and long_answer.startswith(partial) and len(partial) < len(long_answer)

    second = procs.worker(client.db_path, env)
    assert second.wait(timeout=30) == 0
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    (step,) = client.steps(run.id)
    assert step.attempt == 2
    assert step.salvaged == (partial,)  # kept, marked salvaged
    assert step.output["content"] == [{"type": "text", "text": "Recovered answer."}]
    first_call, reissued = fake.bodies()
    assert reissued["messages"] == first_call["messages"]  # the same call, issued again
    # The interrupted call was paid for: the prompt the API counted at message_start (100
    # tokens) stays in the run's totals, on top of the call that completed.
    assert step.salvaged_usage.input_tokens == 100
    assert step.salvaged_cost_usd == pytest.approx(
        (100 * 3 + step.salvaged_usage.output_tokens * 15) / 1e6, abs=1e-12
    )
    assert step.cost_usd == pytest.approx((400 * 3 + 30 * 15) / 1e6, abs=1e-12)
    assert done.cost_usd == pytest.approx(step.cost_usd + step.salvaged_cost_usd, abs=1e-12)
    assert done.usage.input_tokens == 500


def test_compaction_survives_a_crash_like_any_step(
    client: Client, start_fake: StartFake, procs: Procs, workspace: Path
) -> None:
    Settings(default_max_cost_usd=None, default_max_steps=None, compaction_threshold=0.02).save(
        client.db_path
    )  # 2% of a 200k window: 4000 tokens
    summary = "SUMMARY: three sources in the workspace; " + "details " * 30
    summaries = []

    def script(body: dict[str, Any], i: int) -> Reply:
        if _summarizing(body):
            summaries.append(i)
            return Stream([Text(summary, chunk=8)], delay=0.02, input_tokens=4500, output_tokens=90)
        if "Summary of the work so far" in json.dumps(body["messages"][0]):
            return Stream([Text("Finished from the summary.")], input_tokens=900)
        return Stream(
            [Text(f"Turn {i + 1}."), ToolUse("list_files", {"path": "."})],
            input_tokens=5000 if i == 4 else 500,
        )

    fake = start_fake(script)
    run = client.start_run("Survey", model="claude-haiku-4-5", workspace=workspace)
    env = procs.env(fake.url, ANTHROPIC_API_KEY=KEY)
    # Ten steps finish first (five model calls, five tool calls): the 11th effect to end is
    # the compaction's summary call; the worker dies before its outcome is written.
    crashing = procs.worker(client.db_path, {**env, "DESKTOP_AGENT_CRASH_AT": "after_effect:11"})
    assert crashing.wait(timeout=30) == -signal.SIGKILL
    steps = client.steps(run.id)
    assert len(steps) == 11
    assert steps[10].kind == StepKind.COMPACTION and steps[10].status == StepStatus.STARTED
    partial = steps[10].partial_text
    assert partial and summary.startswith(partial)

    again = procs.worker(client.db_path, env)
    assert again.wait(timeout=30) == 0
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    steps = client.steps(run.id)
    assert [s.kind for s in steps[10:]] == [StepKind.COMPACTION, StepKind.MODEL_CALL]
    compaction = steps[10]
    assert compaction.status == StepStatus.COMPLETED and compaction.attempt == 2
    assert compaction.salvaged == (partial,)
    assert compaction.output["summary"] == summary.strip()
    assert len(summaries) == 2  # the summary call was issued again, not replayed blindly
    resumed = fake.bodies()[-1]
    assert summary.strip() in resumed["messages"][0]["content"][0]["text"]
    assert len(resumed["messages"]) == 7  # the summary, then the five recent turns verbatim


# --------------------------------------------------------------------------- the CLI


def test_cli_run_with_a_claude_model_completes_end_to_end(
    tmp_path: Path, start_fake: StartFake, procs: Procs
) -> None:
    fake = start_fake(
        [
            Stream(
                [Text("Listing the workspace."), ToolUse("list_files", {"path": "."})],
                input_tokens=2000,
                cache_write=1500,
                output_tokens=80,
            ),
            Stream(
                [Text("The workspace holds one file: sources.md.")],
                input_tokens=150,
                cache_read=3500,
                output_tokens=40,
            ),
        ]
    )
    db = tmp_path / "cli-data" / "desktop-agent.db"
    ws = tmp_path / "cli-ws"
    ws.mkdir()
    (ws / "sources.md").write_text("# Sources\n")
    env = procs.env(fake.url, ANTHROPIC_API_KEY=KEY)
    try:
        result = procs.cli(
            [
                "--db",
                str(db),
                "run",
                "List the workspace",
                "--model",
                SONNET,
                "--workspace",
                str(ws),
            ],
            env,
        )
    finally:
        _kill_spawned_workers(db)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "list_files" in result.stdout
    assert "completed · 3 steps · $0.01" in result.stdout
    assert "The workspace holds one file: sources.md." in result.stdout
    assert [b["model"] for b in fake.bodies()] == [SONNET, SONNET]
    check = Client(db)
    try:
        run = check.runs()[0]
        assert run.status == RunStatus.COMPLETED
        assert run.cost_usd == pytest.approx(
            (2000 * 3 + 80 * 15 + 1500 * 3.75 + 150 * 3 + 40 * 15 + 3500 * 0.3) / 1e6, abs=1e-12
        )
    finally:
        check.close()


# --------------------------------------------------------------------------- the API key


def test_rejected_key_resumes_after_key_set_in_another_process(
    client: Client, start_fake: StartFake, procs: Procs, tmp_path: Path
) -> None:
    good = "sk-ant-api03-GOOD-" + uuid.uuid4().hex
    bad = "sk-ant-api03-BAD-" + uuid.uuid4().hex
    (tmp_path / "keyring.json").write_text(json.dumps({f"{SERVICE}\n{USERNAME}": bad}))
    fake = start_fake([Stream([Text("Done with a valid key.")])], accept_keys={good})
    run = client.start_run("Needs a valid key", model=SONNET)
    env = procs.env(fake.url)  # no ANTHROPIC_API_KEY: the keyring is used

    assert procs.worker(client.db_path, env).wait(timeout=30) == 0
    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.CREDENTIALS)
    assert waiting.status_message.startswith("The API refused the API key: set a valid one")

    result = procs.cli(["--db", str(client.db_path), "key", "set"], env, stdin=good + "\n")
    assert result.returncode == 0, result.stderr
    assert "key saved in the OS keyring; resuming 1 run(s)" in result.stdout
    assert good not in result.stdout + result.stderr

    assert procs.worker(client.db_path, env).wait(timeout=30) == 0
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert [r.key for r in fake.requests] == [bad, good]


def test_the_key_appears_nowhere_it_must_not(
    client: Client,
    start_fake: StartFake,
    procs: Procs,
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = "sk-ant-api03-LEAKCHECK-" + uuid.uuid4().hex
    gate, first_gate = threading.Event(), threading.Event()
    fake = start_fake(
        [
            # A proxy that echoes the key in its error: the message must not carry it on.
            Status(401, "authentication_error", f"invalid x-api-key {key}", gate=first_gate),
            Stream(
                [
                    Text("Writing the report now."),
                    ToolUse(
                        "write_file", {"path": "report.md", "content": "# Report\nGrowth was 4%.\n"}
                    ),
                ],
                hold_after=2,
                gate=gate,
            ),
            Stream([Text("Report written to report.md.")]),
        ]
    )
    run = client.start_run("Write a report", model=SONNET, workspace=workspace)
    env = procs.env(
        fake.url, ANTHROPIC_API_KEY=key, DESKTOP_AGENT_LOG="DEBUG", ANTHROPIC_LOG="debug"
    )

    first = procs.worker(client.db_path, env)
    fake.wait_requests(1, timeout=30)  # held mid-call until first_gate: its argv is readable
    assert first.poll() is None
    argv_seen = [psutil.Process(first.pid).cmdline()]
    argv_seen.append(Path(f"/proc/{first.pid}/cmdline").read_bytes().decode().split("\0"))
    first_gate.set()
    assert first.wait(timeout=30) == 0
    waiting = client.run(run.id)
    assert waiting.wait_reason == WaitReason.CREDENTIALS
    assert "[redacted API key]" in waiting.status_message
    client.resume(run.id)

    second = procs.worker(client.db_path, env)
    fake.wait_requests(2, timeout=30)  # the worker is mid-call: its argv is readable now
    argv_seen.append(psutil.Process(second.pid).cmdline())
    argv_seen.append(Path(f"/proc/{second.pid}/cmdline").read_bytes().decode().split("\0"))
    gate.set()
    assert second.wait(timeout=30) == 0
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert (workspace / "report.md").read_text().startswith("# Report")
    assert all(r.key == key for r in fake.requests)  # the key was really used

    for argv in argv_seen:
        assert "worker" in argv and not any(key in arg for arg in argv), argv
    shown = procs.cli(["--db", str(client.db_path), "show", run.id, "--json"], env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "completed"
    assert key not in shown.stdout + shown.stderr
    capsys.readouterr()
    assert cli.main(["--db", str(client.db_path), "show", run.id, "--full"]) == 0
    assert key not in capsys.readouterr().out

    data_dir = client.db_path.parent
    log = data_dir / "logs" / "worker.log"
    logged = log.read_text()
    assert "DEBUG anthropic" in logged and "POST" in logged  # verbose logs were written
    searched = []
    for folder in (data_dir, workspace):
        for path in folder.rglob("*"):
            if path.is_file():
                searched.append(path.name)
                assert key.encode() not in path.read_bytes(), f"the key is in {path}"
    assert {"desktop-agent.db", "settings.json", "worker.log", "report.md"} <= set(searched)
    wal = data_dir / "desktop-agent.db-wal"
    if wal.exists():
        assert key.encode() not in wal.read_bytes()
