"""Chaos across workers on one PostgreSQL database: kill -9, SIGSTOP, and the server restarted.

Three worker processes (:mod:`tests.postgres.chaos_worker`: ``desktop-agent worker`` with a
2 s lease), two under host id ``chaos-a`` and one under ``chaos-b`` (a second machine: its
runs are taken over only once its lease expires, never by looking at its process), share a
database on a throwaway PostgreSQL server that this test starts and restarts. They execute
100 runs: half the offline demo model over a small workspace, half a scripted Claude (the
real anthropic SDK against the fake Messages API) that sends an e-mail, POSTs to an HTTP
sink and writes a file; and a schedule fires a demo run every 2 s. For a bounded time a
driver SIGKILLs workers (starting new ones), freezes them with SIGSTOP for up to twice the
lease, and once stops the server the hard way (``pg_ctl -m immediate``: a crash, recovery at
restart) for a few seconds while the workers are busy. Then the chaos stops and the runs
end.

What must hold:

- no journal step once closed (completed or failed) is changed or removed afterwards:
  triggers on the server record every such write, whoever made it;
- no e-mail or POST arrived twice (nobody answered for the analyst here: an effect left in
  doubt must wait for them, not be repeated), and a completed run delivered each of its
  effects exactly once and wrote its file whole;
- every schedule firing happened exactly once: each firing moved the schedule's count by
  one at a later firing time than the previous, and each run the schedule has is the run
  exactly one firing started;
- every run finished, or waits for the analyst (an effect in doubt): the demo runs and the
  scheduled runs, which have no effect that cannot be repeated, all completed;
- no worker exited by itself: the running workers rode out the server's restart.

The seed fixes the order of the blows (``DESKTOP_AGENT_CHAOS_SEED`` picks another), not the
machine's timing: a failure names the seed, what the driver did and the workers' logs.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import RunOptions, Scheduling
from desktop_agent.config import Settings
from desktop_agent.domain import Run, RunStatus
from tests.chaos.harness import (
    MODEL,
    SENDER,
    TOOLS,
    Action,
    AgentScript,
    Workers,
    file_content,
    mail,
    marker_of_mail,
    pid_of_peer,
    post,
    worker_env,
    write,
)
from tests.helpers import postgres
from tests.helpers.fake_anthropic import FakeAnthropic
from tests.helpers.polling import wait_until
from tests.tools.servers import HttpServer, Request, SmtpServer
from tests.tools.servers import Reply as HttpReply

pytestmark = pytest.mark.crash

REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("DESKTOP_AGENT_CHAOS_SEED", "20261125"))
DEMO_RUNS = 50
SCRIPTED_RUNS = 50
CHAOS_S = 30.0
"""How long the driver strikes."""
SETTLE_S = 240.0
"""How long the runs may take to end once the chaos stopped (a failing test waits this)."""
EVERY_S = 2.0
HOSTS = ("chaos-a", "chaos-a", "chaos-b")
"""The host id of each worker slot: two workers on one machine, one on another."""
LEASE_S = 2.0

AUDIT_SQL = """
CREATE TABLE chaos_step_writes (
    id serial PRIMARY KEY, op text, run_id text, seq integer, old_status text, new_status text
);
CREATE FUNCTION chaos_step_write() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO chaos_step_writes (op, run_id, seq, old_status)
        VALUES ('delete', OLD.run_id, OLD.seq, OLD.status);
        RETURN OLD;
    END IF;
    IF OLD.status <> 'started' AND (NEW.status, NEW.input, NEW.output, NEW.error)
            IS DISTINCT FROM (OLD.status, OLD.input, OLD.output, OLD.error) THEN
        INSERT INTO chaos_step_writes (op, run_id, seq, old_status, new_status)
        VALUES ('update', OLD.run_id, OLD.seq, OLD.status, NEW.status);
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER chaos_step_write BEFORE UPDATE OR DELETE ON steps
    FOR EACH ROW EXECUTE FUNCTION chaos_step_write();

CREATE TABLE chaos_firings (
    id serial PRIMARY KEY, schedule_id text, fire_count integer, fire_at double precision,
    run_id text, result text
);
CREATE FUNCTION chaos_firing() RETURNS trigger AS $$
BEGIN
    INSERT INTO chaos_firings (schedule_id, fire_count, fire_at, run_id, result)
    VALUES (NEW.id, NEW.fire_count, NEW.last_fire_at,
            CASE WHEN NEW.last_run_id IS DISTINCT FROM OLD.last_run_id
                 THEN NEW.last_run_id END,
            NEW.last_result);
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER chaos_firing AFTER UPDATE ON schedules
    FOR EACH ROW WHEN (NEW.fire_count <> OLD.fire_count) EXECUTE FUNCTION chaos_firing();
"""
"""Triggers that record, on the server, every write a test property forbids or counts."""


# --------------------------------------------------------------------------- processes


class SinkStrikes:
    """SIGKILLs the worker sending an e-mail or a POST at the worst moments, while armed.

    Called by the sinks: when a worker connects to the mail server (the intent is in the
    journal, nothing sent yet), when a mail has arrived but is not yet confirmed, and
    when a POST has arrived but is not yet answered (the effect happened; its outcome
    cannot be recorded). Each such run must wait for the analyst, never send again.
    """

    def __init__(self, workers: Workers, seed: int, most: int = 8) -> None:
        self.workers = workers
        self.rng = random.Random(seed + 1)
        self.left = most
        self.armed = False
        self.log: list[str] = []
        self._lock = threading.Lock()

    def strike(self, where: str, peer: tuple[str, int] | None) -> None:
        with self._lock:
            if not self.armed or self.left <= 0 or self.rng.random() > 0.3:
                return
            pid = pid_of_peer(peer, self.workers.alive())
            slot = self.workers.slot_of(pid) if pid is not None else None
            if pid is None or slot is None or not self.workers.signal(pid, signal.SIGKILL):
                return
            self.left -= 1
            self.log.append(f"SIGKILL slot {slot} pid {pid} {where}")


# --------------------------------------------------------------------------- the lab


class Lab:
    """The server, the database folder, the sinks, the scripted model and the workers."""

    def __init__(self, root: Path) -> None:
        reason = postgres.unavailable()
        if reason is not None:
            pytest.skip(reason)
        self.root = root
        self.server = postgres.start_server()  # its own: this test restarts it
        self.name = self.server.create_database()
        self.folder = root / "data"
        self.folder.mkdir()
        (self.folder / "database.url").write_text(self.server.url(self.name) + "\n")
        self.db = self.folder / "desktop-agent.db"
        self.logs = root / "logs"
        self.logs.mkdir()
        self.script = AgentScript()
        self.smtp = SmtpServer(
            on_connect=lambda peer: self.strikes.strike("as it connected to send", peer),
            on_mail=lambda m: self.strikes.strike("once its mail had arrived", m.peer),
        )
        self.http = HttpServer()
        self.fake = FakeAnthropic(self.script).__enter__()
        self.shared = root / "shared"
        self.settings = Settings(
            default_model=MODEL,
            default_max_cost_usd=None,
            default_max_steps=None,
            ask_unsafe=False,
            ask_overwrite=False,  # the demo's revision of its report goes on alone
            allow_private_fetch=True,
            smtp_host="127.0.0.1",
            smtp_port=self.smtp.port,
            smtp_security="none",
            smtp_from=SENDER,
            shared_paths=[str(self.shared)],  # every worker reaches the workspaces
            smtp_timeout_s=2.0,
            http_timeout_s=2.0,
        )
        self.settings.save(self.db)
        self.client = Client(self.db, self.settings)
        import psycopg

        with psycopg.connect(self.server.dsn(self.name), autocommit=True) as conn:
            conn.execute(AUDIT_SQL)
        env = worker_env(
            self.fake.url, root, DESKTOP_AGENT_DEMO_DELAY="0.05", CHAOS_LEASE_S=str(LEASE_S)
        )
        self.workers = Workers(
            self.db,
            self.logs,
            env,
            len(HOSTS),
            module="tests.postgres.chaos_worker",
            slot_env=[{"DESKTOP_AGENT_HOST": host} for host in HOSTS],
        )
        self.strikes = SinkStrikes(self.workers, SEED)
        self.plans: dict[str, list[Action]] = {}
        """The plan of each scripted run, by run id."""
        self.demo: set[str] = set()

    def close(self) -> None:
        try:
            self.workers.kill_all()
        finally:
            self.fake.__exit__(None, None, None)
            self.smtp.close()
            self.http.close()
            self.client.close()
            self.server.close()

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.server.dsn(self.name)) as conn:
            return list(conn.execute(query))

    # ------------------------------------------------------------------ runs

    def start_demo(self, i: int) -> None:
        ws = self.shared / f"demo-{i}"
        ws.mkdir(parents=True)
        for n in range(2):
            (ws / f"source-{n}.md").write_text(f"# Source {n} of run {i}\n\nCobalt prices {n}.\n")
        run = self.client.start_run(f"Summarise the sources ({i})", model="demo", workspace=ws)
        assert run.placement == "any", run.placement  # a shared path: any worker may run it
        self.demo.add(run.id)

    def start_scripted(self, i: int) -> None:
        key = f"s{i}"
        plan = [
            mail(f"{key}-m"),
            post(f"{key}-p", self.http),
            write(f"{key}-w", file_content(f"{key}-w", lines=40)),
        ]
        self.http.routes[f"/sink/{key}-p"] = self._created
        run = self.client.start_run(
            self.script.goal(key, plan), workspace=self.shared / key, tools=TOOLS
        )
        self.plans[run.id] = plan

    def deliveries(self, marker: str) -> int:
        mails = sum(1 for m in list(self.smtp.mails) if marker_of_mail(m) == marker)
        return mails + len(self.http.hits(f"/sink/{marker}"))

    def runs(self) -> list[Run]:
        return self.client.runs()

    def _created(self, req: Request) -> HttpReply:
        self.strikes.strike("once its POST had arrived", req.peer)
        return HttpReply(201, b'{"received": true}')


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    the_lab = Lab(tmp_path)
    try:
        yield the_lab
    finally:
        the_lab.close()


# --------------------------------------------------------------------------- the driver


def _drive(lab: Lab, rng: random.Random, log: list[str]) -> None:
    """Strike for :data:`CHAOS_S`: SIGKILL and SIGSTOP workers, restart the server once."""
    t0 = time.monotonic()
    end = t0 + CHAOS_S
    restart_at = t0 + CHAOS_S * rng.uniform(0.3, 0.6)
    respawn: dict[int, float] = {}
    thaw: dict[int, float] = {}
    restarted = False

    def stamp(what: str) -> None:
        log.append(f"{time.monotonic() - t0:6.2f}s {what}")

    lab.strikes.armed = True
    while time.monotonic() < end:
        lab.workers.check()
        now = time.monotonic()
        for pid, at in list(thaw.items()):
            if at <= now:
                lab.workers.signal(pid, signal.SIGCONT)
                stamp(f"SIGCONT pid {pid}")
                del thaw[pid]
        for slot in lab.workers.dead_slots():  # killed by the driver or at a sink
            respawn.setdefault(slot, now + rng.uniform(0.0, 1.5))
        for slot, at in list(respawn.items()):
            if at <= now:
                stamp(f"start slot {slot} ({HOSTS[slot]}): pid {lab.workers.start(slot)}")
                del respawn[slot]
        if not restarted and now >= restart_at:
            restarted = True
            stamp(f"{_progress(lab)}; PostgreSQL stopped (immediate)")
            lab.server.stop("immediate")
            time.sleep(rng.uniform(1.0, 3.0))  # the outage: how long is chance, not a proof
            lab.server.start()
            stamp("PostgreSQL started again")
            continue
        candidates = [p for p in lab.workers.alive() if p not in thaw]
        if candidates:
            pid = rng.choice(candidates)
            struck = lab.workers.slot_of(pid)
            assert struck is not None
            if rng.random() < 0.5:
                lab.workers.signal(pid, signal.SIGKILL)
                respawn[struck] = time.monotonic() + rng.uniform(0.0, 1.5)
                stamp(f"SIGKILL slot {struck} pid {pid}")
            else:
                lab.workers.signal(pid, signal.SIGSTOP)
                thaw[pid] = time.monotonic() + rng.uniform(0.3, 2 * LEASE_S)
                stamp(f"SIGSTOP slot {struck} pid {pid}")
        time.sleep(rng.uniform(0.5, 1.8))  # the pace of the strikes: chance, not a wait
    lab.strikes.armed = False
    for pid in list(thaw):
        lab.workers.signal(pid, signal.SIGCONT)
    for slot in lab.workers.dead_slots():
        stamp(f"start slot {slot} ({HOSTS[slot]}): pid {lab.workers.start(slot)}")
    stamp(f"chaos over; {_progress(lab)}")
    log.extend(f"  at a sink: {line}" for line in lab.strikes.log)


def _progress(lab: Lab) -> str:
    rows = lab.sql("SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
    return "runs " + ", ".join(f"{status} {n}" for status, n in rows)


# --------------------------------------------------------------------------- the analyst


class Analyst:
    """Decides about each effect left in doubt: mark it done or send it again (seeded)."""

    def __init__(self, lab: Lab, seed: int) -> None:
        self.lab = lab
        self.rng = random.Random(seed + 2)
        self.decided: dict[tuple[str, int], tuple[str, str]] = {}
        """(run id, step) -> (marker, action)."""
        self.problems: list[str] = []

    def retries(self, marker: str) -> int:
        return sum(1 for m, a in self.decided.values() if m == marker and a == "retry")

    def marked_done(self, marker: str) -> bool:
        return any(m == marker and a == "mark_done" for m, a in self.decided.values())

    def decide(self) -> None:
        for run in self.lab.client.runs([RunStatus.NEEDS_ATTENTION]):
            seq = run.attention_seq
            if seq is None:
                if run.id not in {r for r, _ in self.decided}:
                    self.problems.append(f"run {run.id} parked, not in doubt: {run.status_message}")
                    self.decided[(run.id, -1)] = ("", "none")
                continue
            if (run.id, seq) in self.decided:
                continue  # our decision is not applied yet
            step = self.lab.client.store.get_step(run.id, seq)
            marker = next(
                (a.marker for a in self.lab.plans.get(run.id, []) if a.marker in str(step.input)),
                "",
            )
            if not marker or step.name not in ("send_email", "http_post"):
                self.problems.append(f"run {run.id} in doubt about {step.name} #{seq}")
            action = self.rng.choice(["mark_done", "retry"])
            self.lab.client.resolve(run.id, action)
            self.decided[(run.id, seq)] = (marker, action)


# --------------------------------------------------------------------------- the test


@pytest.mark.timeout(CHAOS_S + 60 + SETTLE_S + 60)  # each wait below is bounded; a load is slow
def test_three_workers_on_postgresql_lose_nothing_through_kills_freezes_and_a_restart(
    lab: Lab,
) -> None:
    rng = random.Random(SEED)
    for i in range(max(DEMO_RUNS, SCRIPTED_RUNS)):
        if i < DEMO_RUNS:
            lab.start_demo(i)
        if i < SCRIPTED_RUNS:
            lab.start_scripted(i)
    scheduling = Scheduling(lab.client)
    schedule = scheduling.add_schedule(
        "Digest every two seconds", every_s=EVERY_S, options=RunOptions(model="demo")
    )
    for slot in range(len(HOSTS)):
        lab.workers.start(slot)
    log: list[str] = [f"seed {SEED}"]
    analyst = Analyst(lab, SEED)
    try:
        _drive(lab, rng, log)
        chaos_over = time.time()

        def context() -> str:
            lines = "\n".join(log)
            return f"seed {SEED}; the driver:\n{lines}\n{lab.workers.log_tails()}"

        # The schedule still fires once the chaos is over; then it stops, and everything ends,
        # the analyst deciding about each effect left in doubt.
        wait_until(
            lambda: lab.sql(f"SELECT 1 FROM chaos_firings WHERE fire_at > {chaos_over}"),
            timeout=60,
            what=f"a firing after the chaos\n{context()}",
            poll=0.2,
        )
        scheduling.pause_schedule(schedule.id)

        def finished() -> bool:
            lab.workers.check()
            analyst.decide()
            runs = lab.runs()
            return all(r.status.is_terminal for r in runs) or bool(analyst.problems)

        wait_until(finished, timeout=SETTLE_S, what=f"every run ended\n{context()}", poll=0.5)
        runs = {r.id: r for r in lab.runs()}
        problems = list(analyst.problems)

        # No closed step changed or removed.
        for op, run_id, seq, old, new in lab.sql(
            "SELECT op, run_id, seq, old_status, new_status FROM chaos_step_writes"
        ):
            problems.append(f"closed step {run_id}#{seq} ({old}) was {op}d (now {new})")

        # No effect more often than the analyst allowed; one that completed happened once
        # (unless the analyst said it had happened); every written file whole.
        for run_id, plan in lab.plans.items():
            run = runs[run_id]
            for action in plan:
                if action.kind == "write":
                    path = lab.shared / run_id_key(lab, run_id) / action.args["path"]
                    if run.status == RunStatus.COMPLETED and (
                        not path.is_file() or path.read_text() != action.args["content"]
                    ):
                        problems.append(f"{path.name} of run {run_id} is not whole")
                    continue
                got = lab.deliveries(action.marker)
                allowed = 1 + analyst.retries(action.marker)
                if got > allowed:
                    problems.append(
                        f"{action.marker} of run {run_id} arrived {got} times, {allowed} allowed"
                    )
                if got == 0 and not analyst.marked_done(action.marker):
                    problems.append(f"{action.marker}: run {run_id} ended, nothing delivered")

        # Every firing once: the count moves by one, the firing time only forwards, and the
        # schedule's runs are exactly the runs its firings started.
        firings = lab.sql(
            "SELECT fire_count, fire_at, run_id FROM chaos_firings "
            f"WHERE schedule_id = '{schedule.id}' ORDER BY id"
        )
        counts = [int(f[0]) for f in firings]
        if counts != list(range(1, len(counts) + 1)):
            problems.append(f"the schedule's count moved {counts}, not one per firing")
        times = [float(f[1]) for f in firings]
        if any(b <= a for a, b in itertools.pairwise(times)):
            problems.append(f"a firing time came twice or went back: {times}")
        started = [str(f[2]) for f in firings if f[2] is not None]
        scheduled = sorted(r.id for r in runs.values() if r.schedule_id == schedule.id)
        if sorted(started) != scheduled or len(set(started)) != len(started):
            problems.append(f"firings started {sorted(started)}, the schedule has {scheduled}")
        if len(firings) < 2 or not scheduled:
            problems.append(f"the schedule fired {len(firings)} times, started {scheduled}")

        # Every run completed (what was in doubt once the analyst decided).
        for run in runs.values():
            if run.status != RunStatus.COMPLETED:
                problems.append(f"run {run.id} ended {run.status}: {run.status_message[:200]}")
        statuses = Counter(str(r.status) for r in runs.values())
        log.append(
            f"runs: {dict(statuses)}; firings {len(firings)}, scheduled runs {len(scheduled)}; "
            f"deliveries {len(lab.smtp.mails)} mails, {len(lab.http.requests)} POSTs; "
            f"in doubt {len(analyst.decided)}: {sorted(analyst.decided.values())}; "
            f"workers started {lab.workers.started}"
        )
        assert len(runs) == DEMO_RUNS + SCRIPTED_RUNS + len(scheduled)
        assert not problems, "\n".join(problems) + "\n" + context()
        lab.workers.check()
    finally:
        print("\n".join(log))


def run_id_key(lab: Lab, run_id: str) -> str:
    """The workspace folder name of a scripted run (its plan's key)."""
    return lab.plans[run_id][0].marker.split("-")[0]
