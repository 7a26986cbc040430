"""Budgets: checked before each model call (worst case) and after it.

A run that reaches a limit does not fail: it opens a ``budget`` step and waits for the
analyst to extend the budget or stop the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop_agent.domain import JSON, Budget, RunStatus, Step, StepKind, WaitReason
from desktop_agent.domain.units import format_duration, format_usd
from desktop_agent.engine import fencing
from desktop_agent.engine.ports import RunPatch, StepIntent

if TYPE_CHECKING:
    from desktop_agent.engine.loop import Activation


def extend(budget: Budget, payload: JSON) -> Budget:
    """Apply an ``extend_budget`` command's payload to ``budget``."""
    data = payload if isinstance(payload, dict) else {}
    out = budget.extended(
        cost_usd=float(data.get("cost_usd", 0) or 0),
        steps=int(data.get("steps", 0) or 0),
        time_s=float(data.get("time_s", 0) or 0),
        tokens=int(data.get("tokens", 0) or 0),
    )
    return out


def elapsed_s(act: Activation) -> float:
    """Seconds that count against the time budget."""
    run = act.run
    now = act.clock.now()
    if run.budget.count_waiting_time and run.started_at is not None:
        return now - run.started_at
    current = now - act._mark if run.status == RunStatus.RUNNING else 0.0
    return act.active_seconds + max(0.0, current)


def spent_steps(act: Activation) -> int:
    """Model calls and tool calls taken so far."""
    sc = act.state.scalars
    return sc.model_calls + sc.tool_calls


def spent(act: Activation) -> tuple[int, float]:
    """Tokens and dollars spent on the run so far.

    The journal's fold, plus what workers that lost the run spent on it beyond their last
    save (recorded with their events, outside the journal; read only when a budget
    counts tokens or dollars).
    """
    sc = act.state.scalars
    b = act.run.budget
    if b.max_cost_usd is None and b.max_tokens is None:
        return sc.usage.total, sc.cost_usd
    late, late_usd = fencing.late_spend(act)
    return sc.usage.total + late.total, sc.cost_usd + late_usd


def exceeded(act: Activation, worst_case_usd: float = 0.0) -> str | None:
    """Which limit the run has reached (``cost``, ``steps``, ``time``, ``tokens``), if any."""
    b = act.run.budget
    tokens, cost_usd = spent(act)
    if b.max_cost_usd is not None and cost_usd + worst_case_usd > b.max_cost_usd:
        return "cost"
    if b.max_steps is not None and spent_steps(act) >= b.max_steps:
        return "steps"
    if b.max_time_s is not None and elapsed_s(act) >= b.max_time_s:
        return "time"
    if b.max_tokens is not None and tokens >= b.max_tokens:
        return "tokens"
    return None


def spend_report(act: Activation, limit: str, worst_case_usd: float) -> dict[str, JSON]:
    """Spend breakdown shown with an extend-budget request."""
    sc = act.state.scalars
    b = act.run.budget
    tokens, cost_usd = spent(act)
    hours = max(elapsed_s(act), 1.0) / 3600.0
    plan = sc.plan
    done = sum(1 for item in plan if item.get("done"))
    projected = None
    if plan and done:
        projected = cost_usd * len(plan) / done
    return {
        "limit": limit,
        "budget": b.to_json(),
        "spent": {
            "cost_usd": cost_usd,
            "steps": spent_steps(act),
            "time_s": elapsed_s(act),
            "tokens": tokens,
        },
        "next_call_worst_case_usd": worst_case_usd,
        "by_model": dict(sc.cost_by_model),
        "by_step": _costly_steps(act),
        "burn_rate_usd_per_hour": cost_usd / hours,
        "projected_cost_usd": projected,
    }


def _costly_steps(act: Activation, limit: int = 10) -> list[dict[str, JSON]]:
    """The costliest recent steps (of the last 200), most expensive first."""
    first = max(1, act.state.scalars.last_seq - 199)
    steps = [s for s in act.store.load_steps(act.run.id, from_seq=first) if s.cost_usd > 0]
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


def open_budget_wait(act: Activation, limit: str, worst_case_usd: float) -> None:
    """Record a ``budget`` step and hibernate until the analyst decides."""
    seq = act.next_seq
    report = spend_report(act, limit, worst_case_usd)
    step = act.open_wait(
        StepIntent(seq=seq, kind=StepKind.BUDGET, name=limit, input=report),
        patch=RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.BUDGET,
            status_message=describe(report),
        ),
    )
    act.boundary(step)
    resume_budget_wait(act, step)


def _worst_case(act: Activation) -> float:
    if act.run.budget.max_cost_usd is None:
        return 0.0
    model = act.x.model_for(act.run.spec.model)
    return model.worst_case_cost(act.build_request())


def check_before_model_call(act: Activation) -> None:
    """Open a budget wait if the next call could exceed a limit."""
    worst = _worst_case(act)
    limit = exceeded(act, worst)
    if limit:
        open_budget_wait(act, limit, worst)


def check_after_model_call(act: Activation) -> None:
    """Open a budget wait if the call just made went over a limit."""
    limit = exceeded(act)
    if limit and not act.state.conversation.finished:
        open_budget_wait(act, limit, 0.0)


def resume_budget_wait(act: Activation, step: Step) -> None:
    """Continue once the budget was extended; else keep waiting."""
    from desktop_agent.engine.waits import close_wait

    limit = exceeded(act, _worst_case(act) if not act.state.conversation.pending else 0.0)
    if limit is None:
        close_wait(act, step, {"action": "extend", "budget": act.run.budget.to_json()})
        return
    report = spend_report(act, limit, 0.0)
    act.suspend(
        RunPatch(
            status=RunStatus.WAITING,
            wait_reason=WaitReason.BUDGET,
            status_message=describe(report),
        )
    )
