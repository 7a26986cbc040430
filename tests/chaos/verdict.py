"""What must hold after the chaos, each check returning the violations it found.

Every check reads the final state (sinks, journals, workspaces, the audit of writes) and
what the observer, the driver and the analyst recorded on the way; none asserts by itself,
so that one failing test reports every broken property at once, with the seed.
"""

from __future__ import annotations

from collections import defaultdict

from desktop_agent.domain import RunStatus, StepStatus
from tests.chaos import audit
from tests.chaos.analyst import Analyst
from tests.chaos.chaos import Driver, Observer, short
from tests.chaos.harness import ChaosLab, owner_pid

_TERMINAL = {str(s) for s in RunStatus if s.is_terminal}


def deliveries(lab: ChaosLab, analyst: Analyst) -> list[str]:
    """Each e-mail and POST arrived at most once, or once more per retry chosen.

    A call the analyst rejected must not have arrived at all.
    """
    out = []
    for run_id in lab.keys:
        for action in lab.plan_of(run_id):
            if action.kind == "write":
                continue
            got = lab.deliveries(action.marker)
            allowed = 0 if analyst.rejected(action.marker) else 1 + analyst.retries(action.marker)
            if got > allowed:
                out.append(
                    f"{action.kind} {action.marker} (run {run_id}) arrived {got} times; "
                    f"allowed {allowed} (retries chosen: {analyst.retries(action.marker)})"
                )
    return out


def stale_sends(lab: ChaosLab, observer: Observer, driver: Driver) -> list[str]:
    """No worker that had lost its run sent anything it could still have held back.

    A send frozen before its point of no return (the mail server had not even greeted
    it) must not happen once the run is lost. One frozen after it cannot be called back:
    it must then be on the run as a late effect, for the analyst to see. Without the
    events table (no fencing), any send by a worker that lost its run counts.
    """
    events = audit.events(lab.db)
    out = []
    for d in observer.deliveries:
        if not d.stale:
            continue
        what = f"{d.kind} {d.marker} was sent by pid {d.pid} while the run was held by {d.owner}"
        if d.peer is not None and d.peer in driver.frozen_before_send:
            out.append(f"{what}, although it was frozen before its point of no return")
            continue
        run_id = lab.markers[d.marker]
        seq = step_of(lab, d.marker)
        late = [
            e
            for e in events or []
            if e.run_id == run_id and e.seq == seq and e.kind == "late_effect"
            if owner_pid(e.worker) in (None, d.pid)
        ]
        if not late:
            out.append(f"{what}, and no event on the run says so")
    return out


def unreported(lab: ChaosLab, driver: Driver) -> list[str]:
    """What a frozen worker had in flight when its run was taken over is on the run.

    Each e-mail or POST it had started must show as an event: done late, or given up.
    """
    events = audit.events(lab.db)
    if events is None:
        return []  # no fencing: nothing records it (the other checks fail already)
    out = []
    for f in driver.freezes:
        for run_id, seq in f.lost.items():
            if not any(e.run_id == run_id and e.seq == seq for e in events):
                out.append(
                    f"run {run_id} step {seq} was in flight in pid {f.pid} (frozen {f.why}) "
                    "when another worker took the run over; no event says what became of it"
                )
    return out


def step_of(lab: ChaosLab, marker: str) -> int | None:
    """The step of the run that carries out the action named ``marker``."""
    for step in lab.client.steps(lab.markers[marker]):
        if isinstance(step.input, dict) and step.input.get("tool_use_id") == f"toolu_{marker}":
            return step.seq
    return None


def writes_by_non_holders(lab: ChaosLab) -> tuple[list[str], list[str]]:
    """Status writes, then other journal writes, made by a worker that did not hold the run."""
    status: list[str] = []
    journal: list[str] = []
    for w in audit.writes(lab.db):
        if w.by_non_holder:
            (status if w.what == "status" else journal).append(w.describe())
    return status, journal


def terminal_changed(lab: ChaosLab, observer: Observer) -> list[str]:
    """No run left a terminal status once it reached one (audit and samples)."""
    out = list(dict.fromkeys(observer.journal.left_terminal))
    ended: dict[str, audit.Write] = {}
    for w in audit.writes(lab.db):
        if w.what != "status":
            continue
        first = ended.get(w.run_id)
        if first is not None:
            out.append(
                f"run {w.run_id} ended {first.new_status} (by {first.writer}), then its "
                f"status was written again: #{w.id} {w.old_status} -> {w.new_status} by {w.writer}"
            )
        elif w.new_status in _TERMINAL:
            ended[w.run_id] = w
    return out


def closed_steps(lab: ChaosLab, observer: Observer) -> list[str]:
    """Every step seen closed at any sample is still there, unchanged, at the end."""
    for run_id in lab.keys:
        observer.check_steps(run_id, lab.client.steps(run_id))
    return list(dict.fromkeys(observer.journal.changed_steps))


def completion(lab: ChaosLab) -> list[str]:
    """Every run completed, every step of it closed."""
    out = []
    for run in lab.runs():
        if run.status != RunStatus.COMPLETED:
            out.append(f"run {run.id} ended {run.status}: {short(run.status_message)}")
        open_steps = [s.seq for s in lab.client.steps(run.id) if s.status == StepStatus.STARTED]
        if open_steps:
            out.append(f"run {run.id} has steps still open: {open_steps}")
    return out


def error_parks(analyst: Analyst) -> list[str]:
    """No run was parked by an error (the scenario has none but the chaos)."""
    return [
        f"run {d.run_id} needed attention without a step in doubt: {d.action}"
        for d in analyst.decisions
        if d.kind == "resume"
    ]


def files(lab: ChaosLab) -> list[str]:
    """Each file the runs wrote holds exactly its content: whole, once."""
    out = []
    for run_id, key in lab.keys.items():
        for action in lab.plan_of(run_id):
            if action.kind != "write":
                continue
            path = lab.root / "ws" / key / str(action.args["path"])
            got = path.read_text(encoding="utf-8") if path.exists() else None
            if got != action.args["content"]:
                size = "missing" if got is None else f"{len(got)} characters"
                out.append(f"{path.name} of run {run_id} is wrong ({size})")
    return out


def coverage(driver: Driver) -> list[str]:
    """The schedule did what the test is about: a worker frozen past its lease lost a run."""
    if driver.took_over:
        return []
    return ["no worker was frozen long enough for the other to take its runs over"]


def check_all(
    lab: ChaosLab, observer: Observer, driver: Driver, analyst: Analyst, unfinished: list[str]
) -> dict[str, list[str]]:
    """Every check, by the property it guards (``unfinished``: why the runs did not end)."""
    status_writes, journal_writes = writes_by_non_holders(lab)
    return {
        "e-mails and POSTs delivered more often than allowed": deliveries(lab, analyst),
        "e-mails and POSTs sent by a worker that had lost the run": stale_sends(
            lab, observer, driver
        ),
        "effects of a frozen worker that no event reports": unreported(lab, driver),
        "run statuses written by a worker that had lost the run": status_writes,
        "journal writes by a worker that had lost the run": journal_writes,
        "terminal statuses changed afterwards": terminal_changed(lab, observer),
        "closed steps changed or lost": closed_steps(lab, observer),
        "runs not completed": unfinished + completion(lab),
        "runs parked by an error": error_parks(analyst),
        "files not whole": files(lab),
        "chaos that did not happen": coverage(driver),
    }


def summary(lab: ChaosLab, driver: Driver, analyst: Analyst, observer: Observer) -> str:
    """What happened, for a failure message."""
    decisions = defaultdict(list)
    for d in analyst.decisions:
        what = "resume" if d.kind == "resume" else d.action
        decisions[d.run_id].append(f"{what}@{d.seq}/{d.via}{' (refused)' if d.refused else ''}")
    lines = ["runs:", lab.describe_runs(), "driver:"]
    lines += [f"  {e}" for e in driver.events]
    lines.append("analyst:")
    lines += [f"  {lab.keys[r]} {r}: {' '.join(ds)}" for r, ds in decisions.items()]
    lines += [f"  error: {e}" for e in analyst.errors]
    events = audit.events(lab.db)
    if events:
        lines.append("events:")
        lines += [f"  {e.run_id} step {e.seq} {e.kind}: {e.message[:140]}" for e in events]
    lines.append(
        f"deliveries: {len(observer.deliveries)}, "
        f"stale: {sum(1 for d in observer.deliveries if d.stale)}"
    )
    return "\n".join(lines)
