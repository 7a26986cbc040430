"""The chaos lab: one database, two worker processes, a scripted model, mail and HTTP sinks.

Everything is real except the model: SQLite files, worker child processes
(:mod:`tests.chaos.child_worker`, production wiring with a short lease), the real
anthropic SDK talking to the fake Messages API (:mod:`tests.helpers.fake_anthropic`), the
real ``send_email`` over SMTP and ``http_post`` over HTTP to sinks on 127.0.0.1
(:mod:`tests.tools.servers`) that count what they receive.

Each run follows a plan of actions; every action carries a unique marker (in the e-mail's
subject, the POST's path, the written file's name) so that the sinks count deliveries per
effect. The model reads the run's plan from its goal and asks for the next action until
the plan is done (:class:`AgentScript`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import Run, RunStatus
from tests.chaos import audit
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Stream, Text, ToolUse
from tests.tools.servers import HttpServer, Mail, Request, SmtpServer
from tests.tools.servers import Reply as HttpReply

REPO = Path(__file__).resolve().parents[2]
MODEL = "claude-haiku-4-5"
API_KEY = "sk-ant-api03-chaos-0123456789abcdef"
SENDER = "analyst@example.test"
TOOLS = ["send_email", "http_post", "write_file"]

_PLAN = re.compile(r"Chaos plan (\S+?):")
_SUBJECT = re.compile(rb"^Subject: chaos (\S+)\r?$", re.MULTILINE)


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Action:
    """One tool call of a plan.

    Attributes:
        kind: ``mail``, ``post`` or ``write``.
        marker: unique across the test; names the effect at the sinks.
        args: the tool's arguments.
    """

    kind: str
    marker: str
    args: dict[str, Any]

    @property
    def tool(self) -> str:
        """The tool the model asks for."""
        return {"mail": "send_email", "post": "http_post", "write": "write_file"}[self.kind]

    @property
    def use_id(self) -> str:
        """The tool_use id the model gives this call (stable across repeats)."""
        return f"toolu_{self.marker}"


def mail(marker: str) -> Action:
    """An e-mail whose subject names ``marker``."""
    return Action(
        "mail",
        marker,
        {"to": ["ops@example.test"], "subject": f"chaos {marker}", "body": f"{marker}\n"},
    )


def post(marker: str, sink: HttpServer) -> Action:
    """A POST to the sink's path for ``marker``."""
    return Action("post", marker, {"url": sink.url(f"/sink/{marker}"), "body": {"m": marker}})


def write(marker: str, content: str, path: str | None = None) -> Action:
    """A whole-file write of ``content`` (to ``path``, default ``MARKER.txt``)."""
    return Action("write", marker, {"path": path or f"{marker}.txt", "content": content})


def file_content(marker: str, lines: int = 200) -> str:
    """A few kilobytes of text that name ``marker`` on every line (torn writes show)."""
    return "".join(f"{marker} line {i:04d} of {lines}\n" for i in range(lines))


class AgentScript:
    """Scripts the fake Messages API: each run's goal names its plan.

    The answer depends only on the conversation: the number of tool results so far is the
    number of actions done, so a model call repeated after a crash gets the same answer.
    """

    def __init__(self, delay: float = 0.002) -> None:
        self.plans: dict[str, list[Action]] = {}
        self.delay = delay

    def goal(self, key: str, actions: list[Action]) -> str:
        """Register a plan; returns the goal of the run that follows it."""
        self.plans[key] = actions
        return f"Chaos plan {key}: carry out {len(actions)} actions, one at a time."

    def __call__(self, body: dict[str, Any], _index: int) -> Reply:
        messages = body["messages"]
        match = _PLAN.search(_text(messages[0]["content"]))
        assert match, messages[0]
        plan = self.plans[match[1]]
        done = sum(
            1
            for msg in messages
            if msg["role"] == "user" and isinstance(msg["content"], list)
            for block in msg["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        )
        if done >= len(plan):
            return Stream([Text(f"Done: {len(plan)} actions carried out.")], delay=self.delay)
        action = plan[done]
        return Stream(
            [
                Text(f"Action {done + 1} of {len(plan)}: {action.kind} {action.marker}."),
                ToolUse(action.tool, action.args, id=action.use_id, chunk=400),
            ],
            delay=self.delay,
        )


def _first_line(message: str) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line[:160]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


def marker_of_mail(m: Mail) -> str | None:
    """The marker in a received e-mail's subject."""
    match = _SUBJECT.search(m.data)
    return match[1].decode() if match else None


# --------------------------------------------------------------------------- processes


def owner_pid(owner: str | None) -> int | None:
    """The process id in a worker id (``host:pid:suffix``)."""
    if not owner:
        return None
    parts = owner.rsplit(":", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


def pid_of_peer(peer: tuple[str, int] | None, pids: list[int]) -> int | None:
    """Which of ``pids`` owns the client end of a TCP connection from ``peer``."""
    if peer is None:
        return None
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(c.laddr and (c.laddr.ip, c.laddr.port) == peer for c in conns):
            return pid
    return None


class Workers:
    """Worker child processes in numbered slots; every one is killed and reaped at the end.

    Args:
        db: the database every worker serves.
        logs: folder of the workers' logs.
        env: the workers' environment.
        slots: how many workers at most at once.
        module: the worker program (``python -m MODULE DB``).
        slot_env: more environment per slot (a host id, say).
    """

    def __init__(
        self,
        db: Path,
        logs: Path,
        env: Mapping[str, str],
        slots: int = 2,
        *,
        module: str = "tests.chaos.child_worker",
        slot_env: Sequence[Mapping[str, str]] = (),
    ) -> None:
        self.db = db
        self.logs = logs
        self.env = dict(env)
        self.module = module
        self.slot_env = [dict(e) for e in slot_env]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * slots
        self.started = 0
        self.ended: set[int] = set()
        """Pids the test killed or stopped on purpose."""

    def start(self, slot: int) -> int:
        """Start a worker in ``slot``; returns its pid."""
        self.started += 1
        log = self.logs / f"worker-{self.started}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", self.module, str(self.db)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env={**self.env, **(self.slot_env[slot] if slot < len(self.slot_env) else {})},
                cwd=REPO,
            )
        self.procs[slot] = proc
        return proc.pid

    def alive(self) -> list[int]:
        """Pids of the workers not (yet) reaped."""
        return [p.pid for p in self.procs if p is not None and p.poll() is None]

    def slot_of(self, pid: int) -> int | None:
        """The slot of the worker with ``pid``."""
        for slot, proc in enumerate(self.procs):
            if proc is not None and proc.pid == pid:
                return slot
        return None

    def dead_slots(self) -> list[int]:
        """Slots without a live worker."""
        return [s for s, p in enumerate(self.procs) if p is None or p.poll() is not None]

    def signal(self, pid: int, sig: signal.Signals) -> bool:
        """Send ``sig`` to our worker ``pid``; whether it was still there."""
        slot = self.slot_of(pid)
        proc = self.procs[slot] if slot is not None else None
        if proc is None or proc.poll() is not None:
            return False
        with contextlib.suppress(ProcessLookupError):
            if sig == signal.SIGKILL:
                self.ended.add(pid)
            os.kill(pid, sig)
            if sig == signal.SIGKILL:
                proc.wait()
            return True
        return False

    def check(self) -> None:
        """Fail at once, with its log, if a worker exited without being told to."""
        for proc in self.procs:
            if proc is not None and proc.poll() is not None and proc.pid not in self.ended:
                raise AssertionError(
                    f"worker pid {proc.pid} exited by itself (code {proc.returncode}):\n"
                    f"{self.log_tails()}"
                )

    def stop_all(self, timeout: float = 20.0) -> dict[int, int]:
        """SIGTERM every worker (woken first) and reap it; returns exit codes by pid."""
        codes: dict[int, int] = {}
        self.ended.update(p.pid for p in self.procs if p is not None)
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                    os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            if proc is None:
                continue
            try:
                codes[proc.pid] = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                codes[proc.pid] = -signal.SIGKILL
        return codes

    def kill_all(self) -> None:
        """SIGKILL and reap whatever still runs (a test's ``finally``)."""
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                self.ended.add(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
            if proc is not None:
                proc.wait()

    def log_tails(self, chars: int = 1500) -> str:
        """The end of every worker's log, for failure messages."""
        out = []
        for path in sorted(self.logs.glob("worker-*.log")):
            out.append(f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(out)


def worker_env(api_url: str, root: Path, **more: str) -> dict[str, str]:
    """The environment of a worker child: this checkout, the fake API, a keyring file.

    Nothing of the caller's own ``ANTHROPIC_``, ``DESKTOP_AGENT_``, keyring or ``CHAOS_``
    settings goes through; ``more`` adds or overrides variables.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "DESKTOP_AGENT_", "PYTHON_KEYRING", "CHAOS_"))
    }
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        ANTHROPIC_BASE_URL=api_url,
        ANTHROPIC_API_KEY=API_KEY,
        DESKTOP_AGENT_AUTOSTART_WORKER="0",
        PYTHON_KEYRING_BACKEND="tests.helpers.file_keyring.FileKeyring",
        DESKTOP_AGENT_TEST_KEYRING=str(root / "keyring.json"),
        PYTHONWARNINGS="ignore::DeprecationWarning",
    )
    env.update(more)
    return env


# --------------------------------------------------------------------------- lab


@dataclass
class ChaosLab:
    """A database with the audit triggers, its client, the fake API, the sinks, two workers.

    Use as a context manager: on exit every child process is killed and reaped and every
    server stopped, whatever happened.
    """

    root: Path
    on_smtp_connect: Callable[[tuple[str, int]], None] | None = None
    on_delivery: Callable[[str, str, tuple[str, int] | None], None] | None = None
    worker_env: dict[str, str] = field(default_factory=dict)
    lease_s: float = 1.5

    def __post_init__(self) -> None:
        self.db = self.root / "data" / "agent.db"
        self.logs = self.root / "logs"
        self.logs.mkdir(parents=True)
        self.script = AgentScript()
        self.smtp = SmtpServer(on_connect=self._smtp_connect, on_mail=self._mail)
        self.http = HttpServer()
        self.settings = Settings(
            default_model=MODEL,
            default_max_cost_usd=None,
            default_max_steps=None,
            ask_unsafe=False,  # runs that want approvals ask for them per tool
            ask_overwrite=False,
            allow_private_fetch=True,  # the HTTP sink is on 127.0.0.1
            smtp_host="127.0.0.1",
            smtp_port=self.smtp.port,
            smtp_security="none",
            smtp_from=SENDER,
            # An effect keeps its run for its timeout (and a lease) even when frozen: keep
            # them short so that frozen workers lose their runs within the test.
            smtp_timeout_s=2.0,
            http_timeout_s=2.0,
        )
        self.settings.save(self.db)
        self.client = Client(self.db, self.settings)
        audit.install(self.db)
        self.fake = FakeAnthropic(self.script).__enter__()
        env = worker_env(self.fake.url, self.root, CHAOS_LEASE_S=str(self.lease_s))
        env.update(self.worker_env)
        self.cli_env = dict(env)
        self.workers = Workers(self.db, self.logs, env)
        self.markers: dict[str, str] = {}
        """Run id of each marker."""
        self.keys: dict[str, str] = {}
        """Plan key of each run id."""

    def __enter__(self) -> ChaosLab:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.workers.kill_all()
        finally:
            self.fake.__exit__(None, None, None)
            self.smtp.close()
            self.http.close()
            self.client.close()

    # ------------------------------------------------------------------ runs

    def start(self, key: str, actions: list[Action], *, ask: bool = False) -> str:
        """Queue a run following ``actions``; returns its id."""
        for action in actions:
            if action.kind == "post":
                self.http.routes[f"/sink/{action.marker}"] = self._post
        overrides = {"send_email": "ask", "http_post": "ask"} if ask else None
        workspace = self.root / "ws" / key
        run = self.client.start_run(
            self.script.goal(key, actions),
            workspace=workspace,
            tools=TOOLS,
            approval_overrides=overrides,
        )
        self.keys[run.id] = key
        for action in actions:
            self.markers[action.marker] = run.id
        return run.id

    def runs(self) -> list[Run]:
        """The runs of the test, oldest first."""
        return sorted(self.client.runs(), key=lambda r: r.created_at)

    def all_terminal(self) -> bool:
        """Whether every run reached a terminal status."""
        return all(r.status.is_terminal for r in self.runs())

    def describe_runs(self) -> str:
        """One line per run, for failure messages."""
        return "\n".join(
            f"  {self.keys.get(r.id, '?')} {r.id} {r.status}: {_first_line(r.status_message)}"
            for r in self.runs()
        )

    def plan_of(self, run_id: str) -> list[Action]:
        """The plan the run follows."""
        return self.script.plans[self.keys[run_id]]

    # ------------------------------------------------------------------ sinks

    def deliveries(self, marker: str) -> int:
        """How many times the effect named ``marker`` reached its sink."""
        mails = sum(1 for m in list(self.smtp.mails) if marker_of_mail(m) == marker)
        return mails + len(self.http.hits(f"/sink/{marker}"))

    def _smtp_connect(self, peer: tuple[str, int]) -> None:
        if self.on_smtp_connect is not None:
            self.on_smtp_connect(peer)

    def _mail(self, m: Mail) -> None:
        marker = marker_of_mail(m)
        if marker is not None and self.on_delivery is not None:
            self.on_delivery("mail", marker, m.peer)

    def _post(self, req: Request) -> HttpReply:
        marker = req.path.rsplit("/", 1)[-1]
        if self.on_delivery is not None:
            self.on_delivery("post", marker, req.peer)
        return HttpReply(201, json.dumps({"received": marker}).encode())

    # ------------------------------------------------------------------ analyst's CLI

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``desktop-agent --db DB ARGS`` as the analyst would."""
        return subprocess.run(
            [sys.executable, "-m", "desktop_agent", "--db", str(self.db), *args],
            env=self.cli_env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )


def run_status(lab: ChaosLab, run_id: str) -> RunStatus:
    """The run's current status."""
    return lab.client.run(run_id).status
