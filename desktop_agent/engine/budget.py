"""Budgets: checked before each model call (worst case) and after it.

A run that reaches a limit does not fail: it opens a ``budget`` step and waits for the
analyst to extend the budget or stop the run.

The global monthly spend cap (``EngineConfig.spend_cap``) is checked the same way before
each model call: what every run spent this calendar month, plus what the other runs' calls
in flight hold, plus the call's worst case must stay within it. The check holds the worst
case at once (:func:`reserve`), atomically across runs and workers, until the call's cost
is in the journal (:func:`release`): ten runs asking at the same moment cannot each find
room for the same last dollar. Reaching the cap opens a ``budget`` step named ``monthly``;
extending the run's own budget does not lift it (the wait is kept): the analyst raises the
cap in Settings and resumes the run, or stops it.

A run's own cost budget needs no reservation: one worker at a time holds the run (its
lease), and the run makes one model call at a time.
"""

from __future__ import annotations

from dataclasses import replace

from desktop_agent.domain import JSON, MONTHLY_CAP_REACHED, RunStatus, Step, StepKind, WaitReason
from desktop_agent.domain.units import format_duration, format_usd
from desktop_agent.engine import fencing
from desktop_agent.engine.commands import boundary
from desktop_agent.engine.ports import MONTHLY_CAP, RunPatch, StepIntent
from desktop_agent.engine.recording import close_wait, commit, open_wait, suspend
from desktop_agent.engine.request import build_request
from desktop_agent.engine.run_state import RunState


def elapsed_s(rs: RunState) -> float:
    """Seconds that count against the time budget."""
    run = rs.run
    now = rs.clock.now()
    if run.budget.count_waiting_time and run.started_at is not None:
        return now - run.started_at
    current = now - rs.mark if run.status == RunStatus.RUNNING else 0.0
    return rs.active_seconds + max(0.0, current)


def spent_steps(rs: RunState) -> int:
    """Model calls and tool calls taken so far."""
    sc = rs.state.scalars
    return sc.model_calls + sc.tool_calls


def spent(rs: RunState) -> tuple[int, float]:
    """Tokens and dollars spent on the run so far.

    The journal's fold, plus what workers that lost the run spent on it beyond their last
    save (recorded with their events, outside the journal; read only when a budget
    counts tokens or dollars).
    """
    sc = rs.state.scalars
    b = rs.run.budget
    if b.max_cost_usd is None and b.max_tokens is None:
        return sc.usage.total, sc.cost_usd
    late, late_usd = fencing.late_spend(rs)
    return sc.usage.total + late.total, sc.cost_usd + late_usd


def exceeded(rs: RunState, worst_case_usd: float = 0.0) -> str | None:
    """Which limit the run has reached (``cost``, ``steps``, ``time``, ``tokens``), if any."""
    b = rs.run.budget
    tokens, cost_usd = spent(rs)
    if b.max_cost_usd is not None and cost_usd + worst_case_usd > b.max_cost_usd:
        return "cost"
    if b.max_steps is not None and spent_steps(rs) >= b.max_steps:
        return "steps"
    if b.max_time_s is not None and elapsed_s(rs) >= b.max_time_s:
        return "time"
    if b.max_tokens is not None and tokens >= b.max_tokens:
        return "tokens"
    return None


def monthly_exceeded(
    rs: RunState, worst_case_usd: float, *, hold: bool = False
) -> tuple[float, float, float] | None:
    """``(spent this month, held by calls in flight, cap)`` if the next call could pass it.

    None when the monthly cap leaves room; with ``hold``, that room is then held for the
    run's call (see :func:`reserve`).
    """
    port = rs.cfg.spend_cap
    if port is None or port.cap_usd() is None:
        return None
    check = port.reserve(rs.run.id, worst_case_usd, rs.clock.now(), hold=hold)
    if check.granted:
        if check.token is not None:
            rs.reservation = check.token
        return None
    return check.spent_usd, check.held_usd, check.cap_usd or 0.0


def limit_reached(rs: RunState, worst_case_usd: float, *, hold: bool = False) -> str | None:
    """The run's own limit reached, else ``monthly`` if the monthly cap is, else None.

    With ``hold``, the call's worst case is held against the monthly cap when it fits.
    """
    limit = exceeded(rs, worst_case_usd)
    if limit is None and monthly_exceeded(rs, worst_case_usd, hold=hold) is not None:
        return MONTHLY_CAP
    return limit


def reserve(rs: RunState, worst_case_usd: float) -> None:
    """Hold ``worst_case_usd`` against the monthly cap for a call about to start.

    Held whatever is left: a call the journal already holds open, or a compaction (not
    checked before: it keeps the run within its context window), still counts for others.
    """
    port = rs.cfg.spend_cap
    if port is None or rs.reservation is not None or port.cap_usd() is None:
        return
    check = port.reserve(rs.run.id, worst_case_usd, rs.clock.now(), force=True)
    rs.reservation = check.token


def release(rs: RunState) -> None:
    """Drop what the monthly cap holds for the run's call (when the activation ends)."""
    for token in (rs.reservation, rs.spent_reservation):
        if token is not None and rs.cfg.spend_cap is not None:
            rs.cfg.spend_cap.release(rs.run.id, token)
    rs.reservation = rs.spent_reservation = None


def release_on_commit(rs: RunState) -> None:
    """Drop what the monthly cap holds for the call just made once its cost is written.

    The call's outcome (its cost) is buffered until the next commit
    (:func:`~desktop_agent.engine.recording.finish_step`); the reservation goes after
    that commit, never before: in between, other runs would find neither the cost nor
    the hold, and room for dollars already spent. Until then both count (at least once,
    never zero times).
    """
    rs.spent_reservation, rs.reservation = rs.reservation, None


def spend_report(rs: RunState, limit: str, worst_case_usd: float) -> dict[str, JSON]:
    """Spend breakdown shown with an extend-budget request."""
    sc = rs.state.scalars
    b = rs.run.budget
    tokens, cost_usd = spent(rs)
    hours = max(elapsed_s(rs), 1.0) / 3600.0
    plan = sc.plan
    done = sum(1 for item in plan if item.get("done"))
    projected = None
    if plan and done:
        projected = cost_usd * len(plan) / done
    monthly: JSON = None
    if limit == MONTHLY_CAP:
        month, held, cap = monthly_exceeded(rs, worst_case_usd) or (0.0, 0.0, 0.0)
        monthly = {"cap_usd": cap, "spent_usd": month, "held_usd": held}
    return {
        "monthly_cap": monthly,
        "limit": limit,
        "budget": b.to_json(),
        "spent": {
            "cost_usd": cost_usd,
            "steps": spent_steps(rs),
            "time_s": elapsed_s(rs),
            "tokens": tokens,
        },
        "next_call_worst_case_usd": worst_case_usd,
        "by_model": dict(sc.cost_by_model),
        "by_step": _costly_steps(rs),
        "burn_rate_usd_per_hour": cost_usd / hours,
        "projected_cost_usd": projected,
    }


def _costly_steps(rs: RunState, limit: int = 10) -> list[dict[str, JSON]]:
    """The costliest recent steps (of the last 200), most expensive first."""
    first = max(1, rs.state.scalars.last_seq - 199)
    steps = [s for s in rs.store.load_steps(rs.run.id, from_seq=first) if s.cost_usd > 0]
    steps.sort(key=lambda s: s.cost_usd, reverse=True)
    return [
        {"seq": s.seq, "kind": str(s.kind), "name": s.name, "cost_usd": s.cost_usd}
        for s in steps[:limit]
    ]


def describe(report: JSON) -> str:
    """One line for the run's status message."""
    spent = report["spent"]
    b = report["budget"]
    limit = report["limit"]
    if limit == MONTHLY_CAP:
        month = report["monthly_cap"]
        held = month.get("held_usd") or 0.0
        in_flight = f" (and {format_usd(held)} held by calls in flight)" if held else ""
        return (
            f"{MONTHLY_CAP_REACHED}: {format_usd(month['spent_usd'])} of "
            f"{format_usd(month['cap_usd'])} spent this month{in_flight}; raise the cap in "
            "Settings and resume, or stop"
        )
    if limit == "cost":
        return (
            f"Budget reached: spent {format_usd(spent['cost_usd'])} of "
            f"{format_usd(b['max_cost_usd'])}; extend the budget or stop"
        )
    if limit == "steps":
        return f"Budget reached: {spent['steps']} of {b['max_steps']} steps; extend or stop"
    if limit == "time":
        return (
            f"Budget reached: worked {format_duration(spent['time_s'])} of "
            f"{format_duration(b['max_time_s'])}; extend or stop"
        )
    return f"Budget reached: {spent['tokens']} of {b['max_tokens']} tokens; extend or stop"


def open_budget_wait(rs: RunState, limit: str, worst_case_usd: float) -> None:
    """Record a ``budget`` step and hibernate until the analyst decides."""
    seq = rs.next_seq
    report = spend_report(rs, limit, worst_case_usd)
    step = open_wait(
        rs,
        StepIntent(seq=seq, kind=StepKind.BUDGET, name=limit, input=report),
        patch=RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.BUDGET,
            status_message=describe(report),
        ),
    )
    boundary(rs, step)
    resume_budget_wait(rs, step)


NEAR = 0.8
"""A worst case this close to what is left of a limit is recomputed from an exact count."""


def _worst_case(rs: RunState) -> float:
    """The next call's worst-case price, from an exact prompt count when it decides.

    The estimate is generous (three characters a token); when it comes within a fifth
    of what the budget or the monthly cap has left, the prompt is counted exactly
    (``count_tokens``) so that a run is not stopped on an overestimate, nor let through
    on one that was short.
    """
    port = rs.cfg.spend_cap
    cap = port.cap_usd() if port is not None else None
    if rs.run.budget.max_cost_usd is None and cap is None:
        return 0.0
    model = rs.model_for(rs.run.spec.model)
    request = build_request(rs)
    worst = model.worst_case_cost(request)
    left = _left_usd(rs, cap)
    if left is not None and worst >= NEAR * left:
        exact = model.count_tokens(request)
        if exact is not None:
            worst = model.worst_case_cost(replace(request, prompt_tokens=exact))
    return worst


def _left_usd(rs: RunState, cap: float | None) -> float | None:
    """Dollars left before the tighter of the run's cost budget and the monthly cap."""
    lefts: list[float] = []
    if rs.run.budget.max_cost_usd is not None:
        lefts.append(rs.run.budget.max_cost_usd - spent(rs)[1])
    if cap is not None and rs.cfg.spend_cap is not None:
        lefts.append(cap - rs.cfg.spend_cap.month_spent_usd(rs.clock.now()))
    return min(lefts) if lefts else None


def check_before_model_call(rs: RunState) -> None:
    """Open a budget wait if the next call could exceed a limit.

    Else the call's worst case is held against the monthly cap (see the module). The
    last call's cost, if still buffered, is written first: holding the next call's worst
    case replaces the run's hold, and the run's spend must count before it goes.
    """
    if rs.spent_reservation is not None and rs.outcome is not None:
        commit(rs)
    worst = _worst_case(rs)
    limit = limit_reached(rs, worst, hold=True)
    if limit:
        open_budget_wait(rs, limit, worst)


def check_after_model_call(rs: RunState) -> None:
    """Open a budget wait if the call just made went over a limit."""
    limit = exceeded(rs)
    if limit and not rs.state.conversation.finished:
        open_budget_wait(rs, limit, 0.0)


def resume_budget_wait(rs: RunState, step: Step) -> None:
    """Continue once the budget was extended; else keep waiting."""
    worst = _worst_case(rs) if not rs.state.conversation.pending else 0.0
    limit = limit_reached(rs, worst)
    if limit is None:
        close_wait(rs, step, {"action": "extend", "budget": rs.run.budget.to_json()})
        return
    report = spend_report(rs, limit, worst if limit == MONTHLY_CAP else 0.0)
    suspend(
        rs,
        RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.BUDGET,
            status_message=describe(report),
        ),
    )
