"""Regenerate the README screenshots of the desktop app.

    python docs/screenshots.py [OUT_DIR]        (default: the docs/ folder)

Runs offscreen unless ``QT_QPA_PLATFORM`` says otherwise (under ``xvfb-run`` set it to
``xcb``). It builds a realistic data folder in a temporary directory: demo runs executed
by an in-process worker, plus journals written directly for runs in the other statuses
(a streaming model call, a failure, a step in doubt after a crash, ...). Nothing outside the
temporary directory is touched; the API key shown is a fake kept in an in-memory keyring.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["DESKTOP_AGENT_DEMO_DELAY"] = "0"
os.environ.pop("ANTHROPIC_API_KEY", None)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import keyring
import keyring.backend
import psutil
from PySide6.QtWidgets import QApplication, QPlainTextEdit, QStyleFactory, QWidget

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.config import Settings
from desktop_agent.domain import (
    EffectClass,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
    WorkerInfo,
)
from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome, SystemClock
from desktop_agent.gui import theme
from desktop_agent.gui.app import create_app
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.persistence.schedules import ScheduleStore
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.scheduling import DbSchedulerPort
from desktop_agent.worker.worker import Worker, WorkerConfig

SOURCES = {
    "sources/market-2025.md": "# Market 2025\nThe segment grew 4.1% in 2025, led by mid-market "
    "buyers. Growth slowed in the second half.\n",
    "sources/churn-q3.txt": "Churn fell to 2.3% in Q3 after the onboarding redesign. Enterprise "
    "churn is flat.\n",
    "sources/vendors.md": "# Vendors\nThree vendors hold 71% of the market; the rest trail far "
    "behind.\n",
    "sources/interviews.md": "# Interviews\nTwelve customers interviewed; pricing transparency "
    "came up in nine.\n",
    "sources/pricing.csv": "vendor,list_price\nAcme,49\nBolt,55\nCirrus,39\n",
}


class _ShotKeyring(keyring.backend.KeyringBackend):
    """An in-memory keyring, so that the settings screenshot shows a stored (fake) key."""

    priority = 1

    def __init__(self) -> None:
        self.set_properties_from_env()  # what the (untyped) base __init__ does
        self.values: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.values.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.values[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.values.pop((service, username), None)


def wait_until(app: QApplication, check: Callable[[], bool], timeout: float = 15.0) -> None:
    """Let the event loop run until ``check()`` holds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError("the window did not reach the expected state")
        app.processEvents()
        time.sleep(0.02)
    app.processEvents()


def settle(app: QApplication, seconds: float = 0.4) -> None:
    """Let polls and paints finish."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


# --------------------------------------------------------------------------- the data


class Journal:
    """Writes a plausible journal for a run directly through the store."""

    def __init__(self, client: Client, run_id: str, model: str) -> None:
        self.client = client
        self.store = client._store
        self.run_id = run_id
        self.model = model
        self.seq = 0
        self.store.commit(run_id, patch=RunPatch(status=RunStatus.RUNNING, started_at=time.time()))

    def model_call(
        self,
        text: str,
        calls: list[tuple[str, dict[str, object]]] = (),  # type: ignore[assignment]
        *,
        tokens: tuple[int, int] = (2400, 180),
        open_text: str | None = None,
        fail: str | None = None,
    ) -> None:
        """Record a model call (open, failed or completed) and the tool calls it asked for."""
        self.seq += 1
        seq = self.seq
        self.store.commit(
            self.run_id,
            intents=[StepIntent(seq, StepKind.MODEL_CALL, self.model, {"model": self.model})],
        )
        if open_text is not None:
            self.store.save_partial(self.run_id, seq, open_text)
            return
        usage = Usage(tokens[0], tokens[1], 0, tokens[0] // 2)
        cost = (
            usage.input_tokens * 3 + usage.output_tokens * 15 + usage.cache_read_tokens * 0.3
        ) / 1e6
        if fail:
            self.store.commit(
                self.run_id,
                outcome=StepOutcome(
                    seq, StepStatus.FAILED, {"partial": text}, fail, usage=usage, cost_usd=cost
                ),
            )
            return
        content: list[dict[str, object]] = [{"type": "text", "text": text}]
        content += [
            {"type": "tool_use", "id": f"toolu_{seq}_{i}", "name": n, "input": a}
            for i, (n, a) in enumerate(calls)
        ]
        self.store.commit(
            self.run_id,
            outcome=StepOutcome(
                seq,
                StepStatus.COMPLETED,
                {"content": content, "stop_reason": "tool_use" if calls else "end_turn"},
                usage=usage,
                cost_usd=cost,
            ),
        )
        for i, (name, args) in enumerate(calls):
            self.tool(name, args, f"toolu_{seq}_{i}")

    def tool(
        self,
        name: str,
        args: dict[str, object],
        use_id: str,
        result: str = "",
        *,
        open_: bool = False,
        effect: EffectClass = EffectClass.READ_ONLY,
    ) -> None:
        """Record a tool call (open, or completed with a plausible result)."""
        self.seq += 1
        output = (
            None
            if open_
            else {
                "content": result or _tool_result(name, args),
                "is_error": False,
                "data": {"plan": args["items"]} if name == "update_plan" else None,
            }
        )
        self.store.commit(
            self.run_id,
            intents=[
                StepIntent(
                    self.seq,
                    StepKind.TOOL_CALL,
                    name,
                    {"tool_use_id": use_id, "arguments": args},
                    effect=effect,
                    status=StepStatus.STARTED if open_ else StepStatus.COMPLETED,
                    output=output,
                )
            ],
        )


def _tool_result(name: str, args: dict[str, object]) -> str:
    if name == "update_plan":
        items = args["items"]
        assert isinstance(items, list)
        return f"Plan saved ({sum(1 for i in items if i.get('done'))}/{len(items)} done)."
    if name == "read_file":
        return SOURCES.get(f"{args['path']}", "(text of the file)")
    if name == "list_files":
        return "\n".join(f"{p}  {len(t)} bytes" for p, t in SOURCES.items())
    if name == "web_fetch":
        return f"200 OK {args.get('url')}: 14,220 characters of text"
    if name == "append_note":
        return "appended 212 characters to notes.md"
    return "done"


def _plan(done: int, items: list[str]) -> list[dict[str, object]]:
    return [{"text": t, "done": i < done} for i, t in enumerate(items)]


def retime(client: Client, run_id: str, start: float, rng: random.Random) -> float:
    """Spread a run's steps over plausible durations from ``start``; returns the end."""
    t = start
    rows = client.steps(run_id)
    with client._store.db.write() as conn:
        for step in rows:
            if step.kind in (StepKind.MODEL_CALL, StepKind.COMPACTION):
                took = rng.uniform(3.0, 14.0)
            elif step.kind == StepKind.TOOL_CALL:
                took = rng.uniform(0.05, 1.6) if step.name != "web_fetch" else rng.uniform(1, 4)
            else:
                took = rng.uniform(0.5, 2.0)
            finished = None if step.status == StepStatus.STARTED else t + took
            conn.exec_driver_sql(
                "UPDATE steps SET started_at = ?, finished_at = ? WHERE run_id = ? AND seq = ?",
                (t, finished, run_id, step.seq),
            )
            t += took + rng.uniform(0.05, 0.4)
        conn.exec_driver_sql(
            "UPDATE runs SET created_at = ?, started_at = ?, updated_at = ?, "
            "active_seconds = ? WHERE id = ?",
            (start - 2, start, t, t - start, run_id),
        )
    return t


def build(root: Path) -> tuple[Client, dict[str, str]]:
    """A data folder with runs in every interesting state; returns the client and run ids."""
    db = root / "data" / "desktop-agent.db"
    settings = Settings(default_max_cost_usd=5.0, default_max_steps=200, durability="NORMAL")
    settings.save(db)
    client = Client(db, settings)
    ws = root / "research"
    for rel, text in SOURCES.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    ids: dict[str, str] = {}
    rng = random.Random(7)
    now = time.time()

    # Demo runs, executed by a real worker in this process.
    ids["demo"] = client.start_run(
        "Summarise the Q3 market research in sources/ and list the three biggest risks",
        model="demo",
        workspace=ws / "q3",
    ).id
    for rel, text in SOURCES.items():
        (ws / "q3" / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / "q3" / rel).write_text(text)
    ids["demo_done"] = client.start_run(
        "Draft a one-page brief on vendor concentration",
        model="demo",
        workspace=ws / "brief",
    ).id
    (ws / "brief").mkdir(exist_ok=True)
    (ws / "brief" / "vendors.md").write_text(SOURCES["sources/vendors.md"])
    worker = Worker(
        client._store,
        build_executor(client._store, settings),
        WorkerConfig(max_runs=2, until_idle=True, poll_s=0.01),
    )
    worker.run()
    done = [a for a in client.approvals() if a.run_id == ids["demo_done"]]
    for a in done:
        client.approve(a.id)
    Worker(
        client._store,
        build_executor(client._store, settings),
        WorkerConfig(max_runs=2, until_idle=True, poll_s=0.01),
    ).run()

    # A finished Claude run with a longer journal (the charts screenshot uses it).
    plan_items = [
        "Read the 12 interview notes",
        "Group churn drivers",
        "Check against Q3 data",
        "Write the comparison",
    ]
    r = client.start_run(
        "Compare churn drivers across the 2025 customer interviews",
        model="claude-sonnet-5-5",
        workspace=ws,
    ).id
    ids["claude_done"] = r
    j = Journal(client, r, "claude-sonnet-5-5")
    j.model_call(
        "I'll plan first, then read each interview.",
        [("update_plan", {"items": _plan(0, plan_items)}), ("list_files", {"path": "."})],
    )
    for i in range(1, 13):
        j.model_call(
            f"Reading interview {i} of 12 and noting churn reasons.",
            [
                ("read_file", {"path": "sources/interviews.md"}),
                ("append_note", {"path": "notes.md", "text": f"- interview {i}: pricing"}),
            ],
            tokens=(3000 + 900 * i, 220),
        )
    j.model_call(
        "Grouping the drivers.",
        [("update_plan", {"items": _plan(2, plan_items)})],
        tokens=(14500, 400),
    )
    j.model_call(
        "The Q3 numbers back the interview themes.",
        [
            ("read_file", {"path": "sources/churn-q3.txt"}),
            ("update_plan", {"items": _plan(4, plan_items)}),
        ],
        tokens=(15800, 520),
    )
    j.model_call(
        "Done. Pricing transparency drives most churn (9 of 12 interviews); "
        "onboarding matters less since the Q3 redesign.",
        tokens=(16900, 900),
    )
    client._store.commit(
        r,
        patch=RunPatch(
            status=RunStatus.COMPLETED,
            finished_at=time.time(),
            status_message="Done. Pricing transparency drives most churn.",
        ),
    )

    # Running now: a model call streaming its answer.
    r = client.start_run(
        "Draft a competitor pricing brief from the vendor notes",
        model="claude-opus-5-5",
        workspace=ws,
    ).id
    ids["streaming"] = r
    j = Journal(client, r, "claude-opus-5-5")
    pitems = ["Collect list prices", "Compare tiers", "Write the brief"]
    j.model_call(
        "Collecting list prices first.",
        [
            ("update_plan", {"items": _plan(0, pitems)}),
            ("read_file", {"path": "sources/pricing.csv"}),
        ],
    )
    j.model_call("Cirrus undercuts both rivals.", [("update_plan", {"items": _plan(2, pitems)})])
    j.model_call(
        "",
        open_text="## Competitor pricing\n\nCirrus lists at $39, ten dollars under "
        "Acme and sixteen under Bolt. Both rivals bundle onboarding, which Cirrus "
        "sells separately, so the gap narrows to",
    )

    # Paused by the analyst.
    r = client.start_run(
        "Weekly digest of analyst notes for the product team",
        model="claude-haiku-5-5",
        workspace=ws,
    ).id
    ids["paused"] = r
    j = Journal(client, r, "claude-haiku-5-5")
    j.model_call("Listing this week's notes.", [("list_files", {"path": "."})], tokens=(1800, 90))
    client._store.commit(
        r, patch=RunPatch(status=RunStatus.PAUSED, status_message="Paused by the analyst")
    )

    # Failed: a permanent API error.
    r = client.start_run(
        "Check that every source cited in the board memo still resolves",
        model="claude-sonnet-5-5",
        workspace=ws,
    ).id
    ids["failed"] = r
    j = Journal(client, r, "claude-sonnet-5-5")
    j.model_call(
        "Fetching the first citation.", [("web_fetch", {"url": "https://example.org/report-2025"})]
    )
    j.model_call("", fail="400 prompt is too long: 212,400 tokens > 200,000 maximum", tokens=(0, 0))
    client._store.commit(
        r,
        patch=RunPatch(
            status=RunStatus.FAILED,
            finished_at=time.time(),
            status_message="Model call failed: 400 prompt is too long",
        ),
    )

    # Needs attention: an e-mail may or may not have been sent when the worker died.
    r = client.start_run(
        "Email the Q3 summary to the research lead", model="claude-sonnet-5-5", workspace=ws
    ).id
    ids["attention"] = r
    j = Journal(client, r, "claude-sonnet-5-5")
    j.model_call("Sending the summary as asked.")
    j.tool(
        "send_email",
        {"to": "research-lead@example.com", "subject": "Q3 summary"},
        "toolu_x",
        open_=True,
        effect=EffectClass.UNSAFE,
    )
    client._store.commit(
        r,
        patch=RunPatch(
            status=RunStatus.NEEDS_ATTENTION,
            attention_seq=j.seq,
            status_message=f"Step {j.seq} (send_email) was in flight when the worker stopped, "
            "and its effect cannot be safely repeated: probe it, mark it done, retry or skip.",
        ),
    )

    # Interrupted: its worker was killed mid-run (the recovery summary lists it).
    r = client.start_run(
        "Extract the KPIs from the Q2 board deck", model="claude-sonnet-5-5", workspace=ws
    ).id
    ids["interrupted"] = r
    j = Journal(client, r, "claude-sonnet-5-5")
    j.model_call("Reading the deck.", [("read_file", {"path": "sources/market-2025.md"})])
    j.model_call("", open_text="The deck reports")

    # Cancelled and queued.
    r = client.start_run(
        "Collect 2024 vs 2025 revenue figures from the annual reports",
        model="claude-haiku-5-5",
        workspace=ws,
    ).id
    ids["cancelled"] = r
    j = Journal(client, r, "claude-haiku-5-5")
    j.model_call("Starting with the 2024 report.", [("list_files", {"path": "."})])
    client._store.commit(
        r,
        patch=RunPatch(
            status=RunStatus.CANCELLED,
            finished_at=time.time(),
            status_message="Cancelled by the analyst",
        ),
    )
    ids["queued"] = client.start_run(
        "Index the interview transcripts by theme", model="claude-haiku-5-5", workspace=ws
    ).id

    # Spread the runs over the day, oldest first.
    order = [
        "cancelled",
        "claude_done",
        "failed",
        "demo_done",
        "attention",
        "interrupted",
        "paused",
        "streaming",
        "demo",
        "queued",
    ]
    start = now - 6 * 3600
    for key in order:
        end = retime(client, ids[key], start, rng)
        start = max(start + 1800, end + 600)
    with client._store.db.write() as conn:
        conn.exec_driver_sql(
            "UPDATE runs SET updated_at = ? WHERE id = ?", (now - 3, ids["streaming"])
        )
        conn.exec_driver_sql(  # the streaming call started a few seconds ago
            "UPDATE steps SET started_at = ? WHERE run_id = ? AND status = 'started'",
            (now - 14, ids["streaming"]),
        )
        conn.exec_driver_sql(
            "UPDATE runs SET created_at = ?, started_at = NULL, updated_at = ? WHERE id = ?",
            (now - 60, now - 60, ids["queued"]),
        )

    # Workers: this process stands in for a live one; a dead one held the interrupted run.
    host = socket.gethostname()
    live = WorkerInfo(f"{host}:{os.getpid()}:live", host, os.getpid(), now - 3600, time.time())
    client._store.register_worker(live, psutil.Process().create_time())
    client._store.claim_run(ids["streaming"], live.id, time.time(), 3600)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(gone.stdout)
    dead = WorkerInfo(f"{host}:{dead_pid}:gone", host, dead_pid, now - 7200, now - 900)
    client._store.register_worker(dead, now - 7200)
    client._store.claim_run(ids["interrupted"], dead.id, now - 900, 3600)
    with client._store.db.write() as conn:
        conn.exec_driver_sql(
            "UPDATE runs SET status = 'running' WHERE id = ?", (ids["interrupted"],)
        )
    return client, ids


# --------------------------------------------------------------------------- scheduling


def _finish(client: Client, run_id: str, status: RunStatus, message: str, at: float) -> None:
    """End a run made by the scheduler (a short journal, then its final status)."""
    j = Journal(client, run_id, "claude-sonnet-5-5")
    j.model_call("Reading the file.", [("list_files", {"path": "."})], tokens=(2100, 120))
    if status == RunStatus.FAILED:
        j.model_call("", fail=message, tokens=(0, 0))
    else:
        j.model_call("Done: summary written to summary.md.", tokens=(3900, 420))
    client._store.commit(
        run_id, patch=RunPatch(status=status, finished_at=at, status_message=message)
    )


def build_scheduling(client: Client, root: Path) -> dict[str, str]:
    """Schedules that fired, two batches and watched folders, as a worker leaves them."""
    sched = Scheduling(client)
    port = DbSchedulerPort(client._store, SystemClock(), client.db_path.parent)
    store = ScheduleStore(client._db)
    opts = RunOptions(model="claude-sonnet-5-5", workspace=root / "research")
    now = time.time()
    ids: dict[str, str] = {}

    rng = random.Random(11)

    def fire(schedule_id: str, at: float, status: RunStatus, message: str) -> str:
        s = sched.schedule(schedule_id)
        result = store.fire_schedule(s, at, 1, at, port.make_run)
        assert result.run_id is not None
        if status.is_terminal:
            _finish(client, result.run_id, status, message, at + 240)
        else:
            Journal(client, result.run_id, "claude-sonnet-5-5").model_call(
                "Checking the newest rulings.", [("web_fetch", {"url": "https://example.org/news"})]
            )
        end = retime(client, result.run_id, at + 1, rng)
        if status.is_terminal:
            with client._store.db.write() as conn:
                conn.exec_driver_sql(
                    "UPDATE runs SET finished_at = ? WHERE id = ?", (end, result.run_id)
                )
        return result.run_id

    daily = sched.add_schedule(
        "Check the three competitors' pricing pages and note what changed since yesterday",
        cron="0 9 * * 1-5",
        name="Competitor pricing check",
        options=opts,
    )
    morning = time.localtime(now)
    nine = time.mktime((*morning[:3], 9, 0, 0, 0, 0, -1))
    last = nine if nine < now else nine - 86400
    while time.localtime(last).tm_wday >= 5:  # the newest weekday 09:00
        last -= 86400
    ids["pricing"] = fire(daily.id, last, RunStatus.COMPLETED, "")
    ids["pricing_schedule"] = daily.id
    churn = sched.add_schedule(
        "Refresh the churn notes from the newest support tickets",
        every_s=6 * 3600,
        name="Churn notes refresh",
        options=opts,
    )
    ids["churn"] = fire(
        churn.id, now - 2 * 3600, RunStatus.FAILED, "Model call failed: 529 overloaded"
    )
    rulings = sched.add_schedule(
        "Scan the regulator's news page for new rulings on data retention",
        every_s=30 * 60,
        name="Regulator news scan",
        overlap="skip",
        options=opts,
    )
    ids["rulings"] = fire(rulings.id, now - 12 * 60, RunStatus.RUNNING, "")
    digest = sched.add_schedule(
        "Weekly digest of analyst notes for the product team",
        cron="0 17 * * 5",
        name="Weekly digest",
        overlap="queue",
        options=opts,
    )
    sched.pause_schedule(digest.id)
    with client._store.db.write() as conn:  # made days ago, not just now
        for days, s in enumerate((rulings, churn, daily, digest), start=2):
            conn.exec_driver_sql(
                "UPDATE schedules SET created_at = ? WHERE id = ?", (now - days * 86400, s.id)
            )

    # A finished batch of 1000 companies whose runs were archived since (items keep their
    # status), and a batch over a folder of reports that is under way.
    lines = root / "research" / "companies.txt"
    lines.write_text("".join(f"Company {i:04d}\n" for i in range(1000)))
    big = sched.start_batch(
        "Profile {item}: products, size, last funding round", lines=lines, options=opts
    )
    with client._store.db.write() as conn:
        conn.exec_driver_sql(
            "UPDATE batch_items SET status = 'completed', attempts = 1 WHERE batch_id = ?",
            (big.id,),
        )
        conn.exec_driver_sql(
            "UPDATE batch_items SET status = 'failed' WHERE batch_id = ? AND idx IN (?, ?, ?)",
            (big.id, 211, 587, 904),
        )
        conn.exec_driver_sql(
            "UPDATE batches SET created_at = ? WHERE id = ?", (now - 30 * 3600, big.id)
        )
    reports = root / "research" / "quarterly-reports"
    reports.mkdir(parents=True)
    names = [
        f"{v}-{y}-q{q}.pdf"
        for v in ("acme", "bolt", "cirrus", "delta", "echo", "fjord")
        for y in (2024, 2025)
        for q in (1, 2, 3, 4)
    ]
    for name in names:
        (reports / name).write_text(f"report {name}")
    batch = sched.start_batch(
        "Summarise {name}: revenue, margin and guidance, with page numbers",
        folder=reports,
        concurrency=4,
        options=RunOptions(model="claude-sonnet-5-5"),
    )
    ids["batch"] = batch.id
    failed = {"bolt-2024-q3.pdf": "Model call failed: 400 the PDF has no text layer"}
    done = 0
    while done < 31:
        started = port.pump(time.time())
        assert started, "the batch should start items"
        for run_id in started:
            run = client.run(run_id)
            item = next(f for f in names if f in run.goal)
            if item in failed:
                _finish(client, run_id, RunStatus.FAILED, failed[item], time.time())
            else:
                _finish(client, run_id, RunStatus.COMPLETED, "", time.time())
            done += 1
    running = port.pump(time.time())  # four running now
    for run_id in running:
        j = Journal(client, run_id, "claude-sonnet-5-5")
        j.model_call(
            "Reading the report.",
            [("read_file", {"path": next(f for f in names if f in client.run(run_id).goal)})],
        )
        j.model_call("", open_text="Revenue grew 6% year on year, to $41.2M; the operating")
        retime(client, run_id, now - 50, rng)
    ids["batch_running"], stuck = running[-1], running[0]
    # One of them hangs in a model call: the worker's scheduler flagged it.
    retime(client, stuck, now - 44 * 60, rng)
    with client._store.db.write() as conn:
        conn.exec_driver_sql("UPDATE runs SET updated_at = ? WHERE id = ?", (now - 41 * 60, stuck))
        conn.exec_driver_sql(
            "UPDATE steps SET started_at = ? WHERE run_id = ? AND status = 'started'",
            (now - 41 * 60, stuck),
        )
    store.flag_stuck(now, 30 * 60)
    with client._store.db.write() as conn:  # (the interrupted run waits for recovery instead)
        conn.exec_driver_sql("DELETE FROM run_alerts WHERE run_id <> ?", (stuck,))

    invoices = root / "research" / "invoices"
    invoices.mkdir(parents=True)
    for i in range(9):
        (invoices / f"invoice-{2400 + i}.pdf").write_text(f"invoice {i}")
    watch = sched.add_watch(
        invoices, "Extract the totals from {name} into totals.csv", pattern="*.pdf", options=opts
    )
    for i in range(9, 14):
        path = invoices / f"invoice-{2400 + i}.pdf"
        path.write_text(f"invoice {i}")
        os.utime(path, (now - 3600 + i * 60, now - 3600 + i * 60))
    for run_id in port.scan_watch(watch.id, time.time()):
        _finish(client, run_id, RunStatus.COMPLETED, "", time.time())
    scans = root / "research" / "scanner"
    scans.mkdir(parents=True)
    paused = sched.add_watch(
        scans, "File the scanned letter {name} under the right client", every_s=60, options=opts
    )
    sched.pause_watch(paused.id)
    return ids


def open_scheduling_window(app: QApplication, client: Client) -> MainWindow:
    """A window with a taller top pane, once the scheduling views are read."""
    live = f"{socket.gethostname()}:{os.getpid()}:live"
    client._store.heartbeat(live, time.time(), 3600)
    window = MainWindow(client, spawn_workers=False, poll_ms=100)
    window.resize(1280, 800)
    window.show()
    views = window.scheduling
    wait_until(app, lambda: views.batch_model.rowCount() == 2)
    wait_until(
        app, lambda: views.schedule_model.rowCount() == 4 and views.watch_model.rowCount() == 2
    )
    wait_until(app, lambda: window.worker_status is not None)
    if window.recovery_dialog is not None:
        window.recovery_dialog.close()
    return window


def shoot_compare(app: QApplication, root: Path, out: Path) -> None:
    """A brief and its re-run with one more source, in a data folder of their own, compared."""
    db = root / "compare-data" / "desktop-agent.db"
    settings = Settings(durability="NORMAL")
    settings.save(db)
    client = Client(db, settings)
    goal = "Draft a one-page brief on vendor concentration"
    ids: dict[str, str] = {}
    for key, rels, text in (
        ("first", ("sources/vendors.md",), goal),
        ("again", ("sources/vendors.md", "sources/pricing.csv"), goal + ", with list prices"),
    ):
        ws = root / "compare" / key
        ws.mkdir(parents=True)
        for rel in rels:
            (ws / Path(rel).name).write_text(SOURCES[rel])
        ids[key] = client.start_run(text, model="demo", workspace=ws).id
        for _ in range(4):  # run, approve what it asks, until it ends
            Worker(
                client._store,
                build_executor(client._store, settings),
                WorkerConfig(max_runs=1, until_idle=True, poll_s=0.01),
            ).run()
            for approval in client.approvals():
                client.approve(approval.id)
        time.sleep(0.05)  # the second run starts later: it is run B
    again = ids["again"]
    window = MainWindow(client, spawn_workers=False, poll_ms=100)
    window.resize(1280, 800)
    window.show()
    wait_until(app, lambda: window.runs_model.get(again) is not None)
    if window.recovery_dialog is not None:
        window.recovery_dialog.close()
    window.run_list.select_runs([ids["first"], again])
    window.acts["compare"].trigger()
    view = window.compare_windows[-1]
    view.resize(1280, 800)
    wait_until(app, lambda: view.model.rowCount() > 0)
    changed = next(i for i, r in enumerate(view.model.rows) if r.arguments_differ)
    view.table.setCurrentIndex(view.proxy.mapFromSource(view.model.index(changed, 1)))
    wait_until(app, lambda: "Argument" in view.diff.toPlainText())
    settle(app)
    shoot(view, out / "screenshot-compare.png")
    view.close()
    window.shutdown()
    window.close()
    client.close()


def shoot_economy(app: QApplication, root: Path, out: Path) -> None:
    """A run whose turn waits in a Message Batch, and New run's forecast in economy mode."""
    from desktop_agent.engine.ports import BatchEntry, batch_custom_id
    from desktop_agent.persistence.batches import BatchBook, SqlBatchQueue
    from tests.forecast.history import past_run
    from tests.helpers.timed_journal import Clock, timed_store

    db = root / "economy-data" / "desktop-agent.db"
    settings = Settings(durability="NORMAL", default_model="claude-sonnet-5-5")
    settings.save(db)
    client = Client(db, settings)
    now = time.time()
    clock = Clock(now - 30 * 86400)
    rng = random.Random(5)
    for i in range(9):  # the history the forecast reads: streamed and economy runs
        cost = round(rng.uniform(0.30, 0.90), 2)
        past_run(client, clock, economy=i % 3 == 0, cost=cost if i % 3 else cost / 2,
                 duration=rng.uniform(240, 900) if i % 3 else rng.uniform(1800, 4000))  # fmt: skip
    ws = root / "economy" / "q3"
    ws.mkdir(parents=True)
    for rel, text in SOURCES.items():
        (ws / Path(rel).name).write_text(text)
    run = client.start_run(
        "Summarise the Q3 notes and list the vendors' market shares, with sources",
        model="claude-sonnet-5-5",
        workspace=ws,
        economy=True,
    )
    started = now - 47 * 60
    clock = Clock(started)
    store = timed_store(client, clock)
    store.commit(run.id, patch=RunPatch(status=RunStatus.RUNNING, started_at=started))
    economy_call = {"model": "claude-sonnet-5-5", "mode": "economy"}
    seq = 0
    for name in ("market-2025.md", "churn-q3.txt"):
        seq += 1
        intent = StepIntent(seq, StepKind.MODEL_CALL, "claude-sonnet-5-5", economy_call)
        store.commit(run.id, intents=[intent])
        clock.advance(rng.uniform(600, 1000))  # the turn waited in a batch
        content = [
            {"type": "text", "text": f"Reading {name} next."},
            {"type": "tool_use", "id": f"tu{seq}", "name": "read_file", "input": {"path": name}},
        ]
        output = {"content": content, "stop_reason": "tool_use"}
        usage = Usage(900, 120, 5200, 21000 * seq)
        done = StepOutcome(seq, StepStatus.COMPLETED, output, usage=usage, cost_usd=0.011 * seq)
        store.commit(run.id, outcome=done)
        seq += 1
        read = StepIntent(
            seq, StepKind.TOOL_CALL, "read_file", {"path": name}, EffectClass.READ_ONLY
        )
        store.commit(run.id, intents=[read])
        clock.advance(0.05)
        result = {"content": SOURCES["sources/" + name]}
        store.commit(run.id, outcome=StepOutcome(seq, StepStatus.COMPLETED, result))
    seq += 1
    intent = StepIntent(seq, StepKind.MODEL_CALL, "claude-sonnet-5-5", economy_call)
    store.commit(run.id, intents=[intent])
    queued_at = clock()
    custom_id = batch_custom_id(run.id, seq, 1)
    SqlBatchQueue(client.store.db).enqueue(
        BatchEntry(custom_id, run.id, seq, 1, "queued", queued_at), "claude-sonnet-5-5", {}
    )
    waiting = RunPatch(
        status=RunStatus.WAITING,
        wait_reason=WaitReason.BATCH,
        status_message="In economy mode: in a batch",
    )
    store.commit(run.id, patch=waiting)
    book = BatchBook(client.store.db)
    claim = book.claim(now - 12 * 60, 100, 10_000_000)  # sent 12 minutes ago
    assert claim is not None
    batch_id = "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d"
    book.submitted(claim, batch_id, queued_at + 10, now - 12 * 60, now + 60)
    window = MainWindow(client, spawn_workers=False, poll_ms=100)
    window.resize(1280, 800)
    window.show()
    wait_until(app, lambda: window.runs_model.get(run.id) is not None)
    if window.recovery_dialog is not None:
        window.recovery_dialog.close()
    select(app, window, run.id, client)
    status = window.detail.header.status
    wait_until(app, lambda: "submitted 12 min ago" in status.text())
    settle(app)
    shoot(window, out / "screenshot-economy.png")

    new_run = window.open_new_run()
    new_run.goal.setPlainText("Summarise each vendor report and flag price changes")
    new_run.model.setCurrentIndex(new_run.model.findData("claude-sonnet-5-5"))
    new_run.economy.setChecked(True)
    wait_until(app, lambda: "from 9 runs" in new_run.forecast_line.text())
    settle(app, 0.2)
    shoot(new_run, out / "screenshot-forecast.png")
    new_run.close()
    window.shutdown()
    window.close()
    client.close()


# --------------------------------------------------------------------------- shots


def open_window(
    app: QApplication, client: Client, ids: dict[str, str], *, size: bool = True
) -> MainWindow:
    """Open the main window and wait for every run and the worker status.

    ``size``: at 1280×800 (else where and as large as the app opens it on this screen).
    """
    window = MainWindow(client, spawn_workers=False, poll_ms=100)
    if size:
        window.resize(1280, 800)
    window.show()
    wait_until(app, lambda: window.runs_model.rowCount() == len(ids))
    wait_until(app, lambda: window.worker_status is not None)
    return window


def select(app: QApplication, window: MainWindow, run_id: str, client: Client) -> None:
    """Select a run and wait until its whole timeline is shown."""
    window.select_run(run_id)
    wait_until(app, lambda: window.steps_model.rowCount() == client.run(run_id).last_seq)


def shoot(widget: QWidget, path: Path) -> None:
    """Save a PNG of ``widget``."""
    widget.grab().save(str(path))
    print(f"wrote {path}")


def main(out: Path) -> int:
    """Build the data folder and write every screenshot into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    ring = _ShotKeyring()
    keyring.set_keyring(ring)
    ring.set_password("desktop-agent", "anthropic-api-key", "sk-ant-api03-" + "x" * 60 + "Q3dm")
    app = create_app()
    app.setStyle(QStyleFactory.create("Fusion"))
    with tempfile.TemporaryDirectory(prefix="desktop-agent-shots-") as tmp:
        # The shots' folders live in a throwaway home, shown as ~/... like a user's own.
        os.environ["HOME"] = tmp
        client, ids = build(Path(tmp))
        window = open_window(app, client, ids)
        demo_steps = client.steps(ids["demo"])
        select(app, window, ids["demo"], client)
        revise = next(s.seq for s in reversed(demo_steps) if s.kind == StepKind.MODEL_CALL)
        window.detail.timeline.setCurrentIndex(window.steps_model.index(revise - 1))
        settle(app)
        if window.recovery_dialog is not None:
            shoot(window.recovery_dialog, out / "screenshot-recovery.png")
            window.recovery_dialog.close()
        shoot(window, out / "screenshot-main.png")

        approval = next(a for a in client.approvals() if a.run_id == ids["demo"])
        dialog = window.open_approval(approval)
        content = dialog.form.widget_for("content")
        assert isinstance(content, QPlainTextEdit)
        content.setPlainText(
            content.toPlainText().replace(
                "were reviewed.",
                "were reviewed. Top risks: slowing H2 growth, vendor "
                "concentration (71%), pricing opacity.",
            )
        )
        wait_until(app, lambda: "✔" in dialog.check.text() or "✘" in dialog.check.text())
        settle(app)
        shoot(dialog, out / "screenshot-approval.png")
        dialog.close()

        new_run = window.open_new_run()
        new_run.goal.setPlainText(
            "Summarise the reports in the workspace and list the three biggest risks, with sources."
        )
        settle(app, 0.2)
        shoot(new_run, out / "screenshot-new-run.png")
        new_run.close()

        settings = window.open_settings()
        wait_until(app, lambda: settings.key_status.text().startswith("Key: key stored"))
        shoot(settings, out / "screenshot-settings.png")
        settings.close()

        keys = window.keyboard.show_shortcuts()  # Help > Keyboard shortcuts (F1)
        settle(app)
        shoot(keys, out / "screenshot-shortcuts.png")
        keys.close()

        select(app, window, ids["claude_done"], client)
        window.detail.inspector.setCurrentWidget(window.detail.charts)
        settle(app)
        shoot(window, out / "screenshot-charts.png")

        search = window.open_search()  # every run's record, the match in bold
        search.query.setText("vendors")
        search.search()
        wait_until(app, lambda: bool(search.hits))
        search.resize(1100, 560)
        settle(app)
        shoot(search, out / "screenshot-search.png")
        search.close()

        # A run that read two documents, cited them and wrote its report (written straight
        # into the journal by the report tests' builder): its Report tab.
        from tests.report.journals import cited_run

        report_ws = Path(tmp) / "research" / "q3-market"
        report_ws.mkdir(parents=True)
        cited = cited_run(client, report_ws, model="claude-sonnet-5-5")
        ids["report"] = cited.run_id  # the windows opened later list it too
        wait_until(app, lambda: window.runs_model.get(cited.run_id) is not None)
        window.select_run(cited.run_id)
        steps = len(client.steps(cited.run_id))
        wait_until(app, lambda: window.steps_model.rowCount() == steps)
        view = window.detail.report_view
        window.detail.inspector.setCurrentWidget(view)
        wait_until(app, lambda: view.report is not None and view.run_id == cited.run_id)
        settle(app)
        shoot(window, out / "screenshot-report.png")
        window.shutdown()
        window.close()

        app.setPalette(theme.dark_palette())
        dark = open_window(app, client, ids)
        select(app, dark, ids["streaming"], client)
        dark.detail.timeline.setCurrentIndex(dark.steps_model.index(1))
        wait_until(app, lambda: dark.detail.stream.isVisible())
        settle(app)
        shoot(dark, out / "screenshot-dark.png")
        dark.shutdown()
        dark.close()
        if window.recovery_dialog is not None:
            window.recovery_dialog.close()
        if dark.recovery_dialog is not None:
            dark.recovery_dialog.close()

        app.setPalette(app.style().standardPalette())
        shoot_compare(app, Path(tmp), out)
        sched_ids = build_scheduling(client, Path(tmp))
        win = open_scheduling_window(app, client)
        views = win.scheduling
        win.side.setCurrentWidget(views.schedules)
        views.schedules.select(sched_ids["pricing_schedule"])
        win.select_run(sched_ids["pricing"])
        win.side.setCurrentWidget(views.schedules)
        win.split.setSizes([400, 400])
        settle(app)
        shoot(win, out / "screenshot-schedules.png")
        win.select_run(sched_ids["batch_running"])
        win.side.setCurrentWidget(views.batches)
        views.batches.select(sched_ids["batch"])
        wait_until(app, lambda: views.item_model.rowCount() == 48)
        win.resize(1280, 940)  # taller, for more of the items
        win.split.setSizes([800, 480])  # wide enough for the items' status, run and error
        items = views.item_model
        failed = next(i for i in range(items.rowCount()) if items.row_at(i).error)
        table = views.batches.item_table
        table.scrollTo(items.index(failed, 0), table.ScrollHint.PositionAtCenter)
        settle(app)
        shoot(win, out / "screenshot-batches.png")
        win.shutdown()
        win.close()
        client.close()
    return 0


def main_layout(out: Path) -> int:
    """The main window as it first opens on this screen, light and dark (``--layout``).

    Run under ``xvfb-run -s "-screen 0 1366x768x24"`` (and 1280x800, 1920x1080): the
    files are named for the screen.
    """
    out.mkdir(parents=True, exist_ok=True)
    app = create_app()
    app.setStyle(QStyleFactory.create("Fusion"))
    screen = app.primaryScreen().availableGeometry()
    name = f"{screen.width()}x{screen.height()}"
    with tempfile.TemporaryDirectory(prefix="desktop-agent-shots-") as tmp:
        os.environ["HOME"] = tmp
        client, ids = build(Path(tmp))
        for palette, suffix in (
            (app.style().standardPalette(), ""),
            (theme.dark_palette(), "-dark"),
        ):
            app.setPalette(palette)
            window = open_window(app, client, ids, size=False)
            if window.recovery_dialog is not None:
                window.recovery_dialog.close()
            select(app, window, ids["demo"], client)
            settle(app)
            shoot(window, out / f"screenshot-layout-{name}{suffix}.png")
            window.shutdown()
            window.close()
            (Path(client.db_path).parent / "layout.ini").unlink(missing_ok=True)  # first-time
        client.close()
    return 0


def shoot_export(root: Path, out: Path) -> None:
    """The cited run's HTML export as headless Chromium draws it (the report first)."""
    from desktop_agent.client.export import export
    from tests.helpers import chromium
    from tests.report.journals import cited_run

    db = root / "export-data" / "desktop-agent.db"
    settings = Settings(durability="NORMAL")
    settings.save(db)
    client = Client(db, settings)
    ws = root / "research" / "q3-market"
    ws.mkdir(parents=True)
    cited = cited_run(client, ws, model="claude-sonnet-5-5")
    _, html = export(client, cited.run_id, "html")
    page = root / "export.html"
    page.write_text(html, encoding="utf-8")
    chromium.screenshot(page, out / "screenshot-export.png", width=1100, height=1000)
    client.close()


def main_export(out: Path) -> int:
    """Only the export shot (``--export``): needs Chromium, not a display."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="desktop-agent-shots-") as tmp:
        shoot_export(Path(tmp), out)
    return 0


def main_economy(out: Path) -> int:
    """Only the economy-mode shots (``--economy``)."""
    out.mkdir(parents=True, exist_ok=True)
    app = create_app()
    app.setStyle(QStyleFactory.create("Fusion"))
    with tempfile.TemporaryDirectory(prefix="desktop-agent-shots-") as tmp:
        os.environ["HOME"] = tmp
        shoot_economy(app, Path(tmp), out)
    return 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    target = Path(args[0]) if args else Path(__file__).resolve().parent
    chosen = main_economy if "--economy" in sys.argv else main
    chosen = main_layout if "--layout" in sys.argv else chosen
    chosen = main_export if "--export" in sys.argv else chosen
    raise SystemExit(chosen(target))
