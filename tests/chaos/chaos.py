"""The chaos: a driver that kills and freezes workers, and an observer.

- :class:`Driver` SIGKILLs workers (and starts new ones), and freezes them with SIGSTOP,
  either briefly or until the other worker has taken their runs over (then SIGCONT). It
  strikes at random moments and, through the sinks' hooks, at chosen points of an effect:
  when a worker connects to the mail server (before the point of no return) and when an
  e-mail or POST has just arrived (after it, before the worker knows).
- :class:`Observer` samples every journal while all this happens, records every delivery
  with the process that made it and whether that process held the run at that instant.

The seed fixes the order of the driver's blows and each of its random draws (and, in
:mod:`tests.chaos.analyst`, every decision of the analyst): the machine's timing decides
the rest.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from desktop_agent.domain import Run, RunStatus, Step, StepStatus
from tests.chaos import audit
from tests.chaos.harness import ChaosLab, Workers, owner_pid, pid_of_peer
from tests.helpers.sqlite_locks import REFREEZE_TRIES, holds_write_lock, stop_outside_writes

TAKEOVER_BOUND_S = 25.0
"""Longest a worker stays frozen waiting for the other to take its runs over.

The takeover needs the lease (1.5 s) to run out and the other worker to poll, claim and
open the run: a second or two on a quiet machine, many more on a loaded one, where the
other worker may also be starting again after a kill. The freeze must outlast that, or
the chaos the test is about does not happen (the verdict's coverage check)."""


REPORT_BOUND_S = 5.0
"""Longest the driver holds its strikes while a woken worker records its lost effects."""


def rng_for(seed: int, *what: object) -> random.Random:
    """A random source for one decision, fixed by the seed and what is decided."""
    return random.Random(":".join(map(str, (seed, *what))))


def short(message: str) -> str:
    """The first line of a status message, cut to a readable length."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= 160 else line[:157] + "..."


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Delivery:
    """An e-mail or POST that reached its sink.

    Attributes:
        pid: the worker process that sent it (None: not found, e.g. already killed).
        owner: the run's lease owner at that instant.
        peer: the sender's end of the connection.
    """

    kind: str
    marker: str
    pid: int | None
    owner: str | None
    peer: tuple[str, int] | None = None

    @property
    def stale(self) -> bool:
        """Sent by a worker that did not hold the run at that instant."""
        return self.pid is not None and owner_pid(self.owner) != self.pid


@dataclass
class Freeze:
    """A worker stopped with SIGSTOP.

    Attributes:
        kind: the blow on the driver's agenda that froze it.
        runs: the runs whose takeover it waits for (until_takeover).
        in_flight: the e-mail or POST step each of its runs had in flight when it froze.
        lost: the runs of ``in_flight`` that the other worker claimed while it was frozen.
    """

    pid: int
    kind: str
    why: str
    runs: list[str]
    since: float
    thaw_at: float
    until_takeover: bool
    in_flight: dict[str, int] = field(default_factory=dict)
    taken_over: bool = False
    held_write_lock: bool = False
    lost: dict[str, int] = field(default_factory=dict)


@dataclass
class Journal:
    """What the observer saw.

    Attributes:
        closed: every step seen closed, as first seen.
        terminal: the first terminal status seen of each run.
        left_terminal: runs seen in another status after a terminal one.
        changed_steps: closed steps seen changed or gone later.
    """

    closed: dict[tuple[str, int], Step] = field(default_factory=dict)
    terminal: dict[str, RunStatus] = field(default_factory=dict)
    left_terminal: list[str] = field(default_factory=list)
    changed_steps: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- observer


class Observer:
    """Samples the journals and records deliveries (thread-safe)."""

    def __init__(self, lab: ChaosLab) -> None:
        self.lab = lab
        self.journal = Journal()
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()

    def delivered(self, kind: str, marker: str, peer: tuple[str, int] | None) -> Delivery:
        """Record a delivery that a sink just received (called from the sink's thread)."""
        pid = pid_of_peer(peer, self.lab.workers.alive())
        owner = self.lab.client.store.get_run(self.lab.markers[marker]).lease_owner
        d = Delivery(kind, marker, pid, owner, peer)
        with self._lock:
            self.deliveries.append(d)
        return d

    def sample(self) -> None:
        """Read every run and journal; note changed or lost steps and terminal statuses left."""
        for run in self.lab.runs():
            first = self.journal.terminal.get(run.id)
            if first is not None and run.status != first:
                self.journal.left_terminal.append(
                    f"run {run.id} was seen {first}, later {run.status} "
                    f"({short(run.status_message)})"
                )
            if run.status.is_terminal:
                self.journal.terminal.setdefault(run.id, run.status)
            self.check_steps(run.id, self.lab.client.steps(run.id))

    def check_steps(self, run_id: str, steps: list[Step]) -> None:
        """Compare ``steps`` with the closed steps seen before; remember new closed ones."""
        by_seq = {s.seq: s for s in steps}
        for (rid, seq), seen in list(self.journal.closed.items()):
            if rid != run_id:
                continue
            now = by_seq.get(seq)
            if now != seen:
                self.journal.changed_steps.append(
                    f"run {run_id}: step {seq} was seen closed and then changed:\n"
                    f"    seen  {_brief(seen)}\n    later {_brief(now)}"
                )
                self.journal.closed[(rid, seq)] = now if now is not None else seen
        for step in steps:
            if step.status != StepStatus.STARTED:
                self.journal.closed.setdefault((run_id, step.seq), step)


def _brief(step: Step | None) -> str:
    if step is None:
        return "(missing)"
    out = step.output
    text = str(out.get("content", out) if isinstance(out, dict) else out)[:90]
    return (
        f"{step.kind} {step.name} {step.status} attempt {step.attempt} "
        f"finished {step.finished_at} output {text!r}"
    )


# --------------------------------------------------------------------------- driver


class Driver:
    """Kills, freezes and thaws workers; restarts killed ones; samples the journals.

    The driver strikes one blow at a time, from an agenda: the two freezes that matter most
    (a worker frozen while connecting to the mail server, before its point of no return;
    one frozen right after its e-mail or POST arrived, before it knows) come first, then
    every kind of strike in a seeded random order, again and again. A blow tied to a point
    of an effect waits for the next effect to get there; the others land at a random moment
    on a worker that holds runs. The next blow waits until nothing is frozen, both workers
    are up, and a worker woken after losing its runs has said what became of its effects.

    Args:
        lab: the lab.
        observer: told of deliveries, asked to sample.
        seed: the seed of every random choice.
    """

    FIRST = ("freeze at connect", "freeze after delivery")
    KINDS = (
        "freeze at connect",
        "freeze after delivery",
        "kill at connect",
        "kill after delivery",
        "kill",
        "brief freeze",
        "freeze",
    )

    def __init__(self, lab: ChaosLab, observer: Observer, seed: int) -> None:
        self.lab = lab
        self.observer = observer
        self.seed = seed
        self.rng = rng_for(seed, "driver")
        self.active = True
        """Whether to strike; cleared for the calm end of the test."""
        self.frozen: dict[int, Freeze] = {}
        self.frozen_before_send: set[tuple[str, int]] = set()
        """Mail connections whose sender was frozen before the server greeted it."""
        self.events: list[str] = []
        self.kills = 0
        self.freezes: list[Freeze] = []
        self._agenda: list[str] = list(self.FIRST)
        self._lock = threading.RLock()
        self._restart_at: dict[int, float] = {}
        self._reports: dict[str, int] = {}
        self._reports_until = 0.0
        self._next_strike = 0.0
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-driver", daemon=True)
        self.error: BaseException | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start both workers and the driver's thread."""
        for slot in range(len(self.lab.workers.procs)):
            self.lab.workers.start(slot)
        self._thread.start()

    def calm(self) -> None:
        """Stop striking and start the missing workers at once.

        A worker frozen until its runs are taken over stays frozen until then (or until
        :data:`TAKEOVER_BOUND_S`): the last blow plays out.
        """
        with self._lock:
            self.active = False
            for slot in self.lab.workers.dead_slots():
                self._restart_at[slot] = 0.0

    @property
    def took_over(self) -> bool:
        """Whether a worker frozen until then has lost its runs to the other."""
        return any(f.taken_over for f in self.freezes)

    @property
    def failed(self) -> bool:
        """Whether the driver stopped on an error (see :meth:`stop`)."""
        return self.error is not None

    def stop(self) -> None:
        """End the driver's thread (its last error, if any, is re-raised)."""
        self._stop.set()
        self._thread.join(timeout=30)
        if self.error is not None:
            raise self.error

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                with self._lock:
                    self.lab.workers.check()
                    self._thaw_due(now)
                    self._restart_due(now)
                    if self._next() in ("kill", "brief freeze", "freeze") and self._ready():
                        self._strike_now()
                self.observer.sample()
                self._stop.wait(0.02)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def note(self, text: str) -> None:
        """Log what the driver did (shown when the test fails)."""
        self.events.append(f"{time.monotonic() - self._t0:6.2f}s {text}")

    # ------------------------------------------------------------------ agenda

    def _next(self) -> str:
        """The next blow on the agenda."""
        if not self._agenda:
            self._agenda = list(self.KINDS)
            self.rng.shuffle(self._agenda)
        return self._agenda[0]

    def _done(self) -> None:
        """The blow on the agenda was struck; the next one comes a little later."""
        self._agenda.pop(0)
        self._next_strike = time.monotonic() + self.rng.uniform(0.2, 0.8)

    def _ready(self) -> bool:
        """Striking, and nothing else going on: a new blow may land."""
        return (
            self.active
            and time.monotonic() >= self._next_strike
            and not self.frozen
            and not self.lab.workers.dead_slots()
            and not self._awaiting()
        )

    def _awaiting(self) -> bool:
        """Whether a woken worker has yet to record what became of its lost effects."""
        if not self._reports:
            return False
        events = audit.events(self.lab.db)
        if events is None or time.monotonic() > self._reports_until:
            self._reports = {}  # no fencing, or never recorded (the verdict says so)
            return False
        seen = {(e.run_id, e.seq) for e in events}
        self._reports = {r: q for r, q in self._reports.items() if (r, q) not in seen}
        return bool(self._reports)

    # ------------------------------------------------------------------ strikes

    def _strike_now(self) -> None:
        holders = {owner_pid(r.lease_owner) for r in self.lab.runs()}
        pids = sorted(p for p in self.lab.workers.alive() if p in holders)
        if not pids:
            return  # nobody works on anything: wait for a better moment
        pid = self.rng.choice(pids)
        kind = self._next()
        if kind == "kill":
            self._kill(pid, "at a random moment")
        elif kind == "brief freeze":
            self._freeze(pid, "briefly, at a random moment", self.rng.uniform(0.05, 0.5))
        else:
            self._freeze(pid, "at a random moment, until its runs are taken over", None)
        self._done()

    def on_smtp_connect(self, peer: tuple[str, int]) -> None:
        """A worker opened a connection to the mail server: its send has begun."""
        with self._lock:
            kind = self._next()
            if not kind.endswith(" at connect") or not self._ready():
                return
            pid = pid_of_peer(peer, self.lab.workers.alive())
            if pid is None:
                return
            if kind == "kill at connect":
                self._kill(pid, "connecting to the mail server")
            else:
                sending = self._sending(pid)
                self._freeze(pid, "connecting to the mail server", None, sending)
                self.frozen_before_send.add(peer)
            self._done()

    def on_delivery(self, kind: str, marker: str, peer: tuple[str, int] | None) -> None:
        """An e-mail or POST reached its sink; the sender waits for the answer."""
        delivery = self.observer.delivered(kind, marker, peer)
        with self._lock:
            if delivery.stale:
                self.note(f"STALE {kind} {marker} from pid {delivery.pid} ({delivery.owner})")
            blow = self._next()
            if not blow.endswith(" after delivery") or not self._ready():
                return
            if delivery.pid is None or delivery.stale:
                return  # strike a worker that holds the run, not one already fenced out
            why = f"right after its {kind} {marker} arrived"
            if blow == "kill after delivery":
                self._kill(delivery.pid, why)
            else:
                self._freeze(delivery.pid, why, None, [self.lab.markers[marker]])
            self._done()

    def _sending(self, pid: int) -> list[str] | None:
        """The runs of worker ``pid`` with an e-mail in flight."""
        runs = [
            r.id
            for r in self.lab.runs()
            if owner_pid(r.lease_owner) == pid and self._effect_in_flight(r, "send_email")
        ]
        return runs or None

    def _effect_in_flight(self, run: Run, *tools: str) -> bool:
        """Whether the run's last step is an e-mail or POST (or one of ``tools``) in flight."""
        if not run.last_seq:
            return False
        last = self.lab.client.steps(run.id, run.last_seq)
        names = tools or ("send_email", "http_post")
        return bool(last) and last[-1].name in names and last[-1].status == StepStatus.STARTED

    def _kill(self, pid: int, why: str) -> None:
        slot = self.lab.workers.slot_of(pid)
        if slot is None or not self.lab.workers.signal(pid, signal.SIGKILL):
            return
        self.kills += 1
        self.note(f"SIGKILL pid {pid} {why}")
        self._restart_at[slot] = time.monotonic() + self.rng.uniform(0.1, 0.8)

    def _freeze(
        self, pid: int, why: str, seconds: float | None, runs: list[str] | None = None
    ) -> None:
        """SIGSTOP ``pid``, to be woken after ``seconds`` or once ``runs`` were taken over.

        ``runs`` default to every run the worker holds. A worker to be frozen until a
        takeover is not left frozen inside a write transaction: another of its threads may
        be committing, which would lock the other worker out of the database. It is let go
        on until the commit is done, and stopped again (the thread the blow is about waits
        for the sink meanwhile).
        """
        if not self.lab.workers.signal(pid, signal.SIGSTOP):
            return
        for _ in range(REFREEZE_TRIES if seconds is None else 0):
            if not self._holds_write_lock(pid):
                break
            self.lab.workers.signal(pid, signal.SIGCONT)
            time.sleep(0.002)  # a moment to finish its commit: part of the freeze, not a wait
            self.lab.workers.signal(pid, signal.SIGSTOP)
        held = [r for r in self.lab.runs() if owner_pid(r.lease_owner) == pid]
        ids = [r.id for r in held]
        runs = [r for r in runs if r in ids] if runs is not None else ids
        now = time.monotonic()
        bound = now + (seconds if seconds is not None else TAKEOVER_BOUND_S)
        freeze = Freeze(pid, self._next(), why, runs, now, bound, seconds is None)
        freeze.in_flight = {r.id: r.last_seq for r in held if self._effect_in_flight(r)}
        self.frozen[pid] = freeze
        self.freezes.append(freeze)
        self.note(f"SIGSTOP pid {pid} {why}; waiting for run(s) {' '.join(runs) or '-'}")

    # ------------------------------------------------------------------ thaw, restart

    def _thaw_due(self, now: float) -> None:
        for pid, f in list(self.frozen.items()):
            if f.until_takeover and f.runs:
                owners = {r.id: r.lease_owner for r in self.lab.runs()}
                if all(owner_pid(owners.get(run)) != pid for run in f.runs):
                    f.taken_over = True
                    f.lost = {
                        r: seq for r, seq in f.in_flight.items() if owner_pid(owners.get(r)) != pid
                    }
                    self._thaw(pid, "its runs were taken over")
                    # Give it the time to say what became of its effects before any strike.
                    self._reports = dict(f.lost)
                    self._reports_until = now + REPORT_BOUND_S
                    continue
                if self._holds_write_lock(pid):
                    f.held_write_lock = True
                    self._thaw(pid, "it holds the database's write lock")
                    if self.active:
                        self._agenda.insert(0, f.kind)  # no takeover possible: again
                    continue
            if now >= f.thaw_at or (f.until_takeover and not f.runs):
                self._thaw(pid, "time is up" if f.runs or not f.until_takeover else "no run")

    def _thaw(self, pid: int, why: str) -> None:
        self.frozen.pop(pid, None)
        if self.lab.workers.signal(pid, signal.SIGCONT):
            self.note(f"SIGCONT pid {pid}: {why}")

    def _holds_write_lock(self, pid: int) -> bool:
        """Whether worker ``pid`` holds the database's write lock (see :func:`holds_write_lock`)."""
        return holds_write_lock(self.lab.db, pid)

    def _restart_due(self, now: float) -> None:
        for slot, when in list(self._restart_at.items()):
            if now >= when:
                del self._restart_at[slot]
                pid = self.lab.workers.start(slot)
                self.note(f"started worker pid {pid} in slot {slot}")


def freeze_outside_writes(workers: Workers, db: Path, pid: int) -> bool:
    """SIGSTOP worker ``pid`` outside a write transaction (``tests.helpers.sqlite_locks``)."""
    return stop_outside_writes(db, pid, workers.signal)
