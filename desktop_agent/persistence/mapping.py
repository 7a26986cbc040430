"""Row ⇄ domain mapping. Rows are read as SQLAlchemy ``Row`` mappings, never handed out.

Columns are read by the names the declaration of :mod:`desktop_agent.persistence.tables`
gives them (``r[_RUNS.goal]``, a name taken from ``runs.c``), so rows must come from
single-table statements that select those columns (``select(runs)``). Values are written
by column name:
SQLAlchemy's ``values()`` and the journal's own rendering
(:func:`~desktop_agent.persistence.compiled.render`) refuse a name the table does not have.
Either way a column renamed in the declaration breaks these functions in the tests, never
in silence.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from sqlalchemy import RowMapping, Table

from desktop_agent.domain import (
    DEMO_MODEL,
    JSON,
    AgentSpec,
    Approval,
    ApprovalState,
    Budget,
    Command,
    CommandKind,
    EffectClass,
    Run,
    RunEvent,
    RunEventKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Usage,
    WaitReason,
    WorkerInfo,
)
from desktop_agent.domain.placement import ANY
from desktop_agent.persistence.tables import approvals, commands, run_events, runs, steps, workers


def _names(table: Table) -> SimpleNamespace:
    """A table's column names as attributes (``_names(runs).goal == "goal"``).

    Rows are read by name, a plain lookup in the row's key map: the run list maps hundreds
    of rows per poll, and a lookup by ``Column`` object costs several times as much. The
    names come from the declaration, so one the table lacks fails as an AttributeError
    wherever it is read, never as a silent None. Only for single-table selects, where no
    name is ambiguous.
    """
    return SimpleNamespace(**{column.key: column.key for column in table.c})


_RUNS = _names(runs)
_STEPS = _names(steps)
_APPROVALS = _names(approvals)
_COMMANDS = _names(commands)
_EVENTS = _names(run_events)
_WORKERS = _names(workers)


def dumps(value: JSON) -> str | None:
    """JSON text for a column (None stays NULL)."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def loads(text: str | None) -> JSON:
    """Inverse of :func:`dumps`."""
    if text is None or text == "":
        return None
    return json.loads(text)


def run_from_row(r: RowMapping) -> Run:
    """Map a ``runs`` row."""
    c = _RUNS
    return Run(
        id=r[c.id],
        goal=r[c.goal],
        title=r[c.title] or "",
        status=RunStatus(r[c.status]),
        spec=AgentSpec.from_json(loads(r[c.spec])),
        workspace=r[c.workspace],
        budget=Budget.from_json(loads(r[c.budget])),
        wait_reason=WaitReason(r[c.wait_reason]) if r[c.wait_reason] else None,
        wake_at=r[c.wake_at],
        status_message=r[c.status_message] or "",
        attention_seq=r[c.attention_seq],
        created_at=r[c.created_at],
        updated_at=r[c.updated_at],
        started_at=r[c.started_at],
        finished_at=r[c.finished_at],
        last_seq=r[c.last_seq],
        cost_usd=r[c.cost_usd],
        usage=Usage(
            r[c.input_tokens], r[c.output_tokens], r[c.cache_write_tokens], r[c.cache_read_tokens]
        ),
        active_seconds=r[c.active_seconds],
        lease_owner=r[c.lease_owner],
        lease_expires_at=r[c.lease_expires_at],
        lease_epoch=int(r[c.lease_epoch] or 0),
        definition_hash=r[c.definition_hash],
        parent_id=r[c.parent_id],
        schedule_id=r[c.schedule_id],
        placement=r[c.placement] or ANY,
        forked_from=r[c.forked_from],
        forked_at_seq=r[c.forked_at_seq],
    )


def salvage_of(salvaged: str | None) -> tuple[tuple[str, ...], Usage, float]:
    """The texts, usage and cost of a step's earlier attempts (its ``salvaged`` column)."""
    texts: list[str] = []
    spent = Usage()
    spent_usd = 0.0
    for item in loads(salvaged) or []:
        if isinstance(item, dict):
            if item.get("text"):
                texts.append(str(item["text"]))
            spent = spent + Usage.from_json(item.get("usage"))
            spent_usd += float(item.get("cost_usd", 0.0) or 0.0)
        elif item:
            texts.append(str(item))
    return tuple(texts), spent, spent_usd


def step_from_row(r: RowMapping) -> Step:
    """Map a ``steps`` row."""
    c = _STEPS
    texts, spent, spent_usd = salvage_of(r[c.salvaged])
    return Step(
        run_id=r[c.run_id],
        seq=r[c.seq],
        kind=StepKind(r[c.kind]),
        name=r[c.name],
        status=StepStatus(r[c.status]),
        input=loads(r[c.input]),
        output=loads(r[c.output]),
        error=r[c.error],
        started_at=r[c.started_at],
        finished_at=r[c.finished_at],
        attempt=r[c.attempt],
        partial_text=r[c.partial_text] or "",
        salvaged=texts,
        salvaged_usage=spent,
        salvaged_cost_usd=spent_usd,
        usage=Usage(
            r[c.input_tokens], r[c.output_tokens], r[c.cache_write_tokens], r[c.cache_read_tokens]
        ),
        cost_usd=r[c.cost_usd],
        effect=EffectClass(r[c.effect]) if r[c.effect] else None,
    )


def approval_from_row(r: RowMapping) -> Approval:
    """Map an ``approvals`` row."""
    c = _APPROVALS
    return Approval(
        id=r[c.id],
        run_id=r[c.run_id],
        seq=r[c.seq],
        tool=r[c.tool],
        arguments=loads(r[c.arguments]),
        state=ApprovalState(r[c.state]),
        reason=r[c.reason] or "",
        rule=r[c.rule] or "",
        decided_arguments=loads(r[c.decided_arguments]),
        decision_note=r[c.decision_note] or "",
        deadline=r[c.deadline],
        default_action=r[c.default_action],
        created_at=r[c.created_at],
        decided_at=r[c.decided_at],
    )


def approval_values(a: Approval) -> dict[str, Any]:
    """Column values of an approval, by column name."""
    return {
        "id": a.id,
        "run_id": a.run_id,
        "seq": a.seq,
        "tool": a.tool,
        "arguments": dumps(a.arguments),
        "state": str(a.state),
        "reason": a.reason,
        "rule": a.rule,
        "decided_arguments": dumps(a.decided_arguments),
        "decision_note": a.decision_note,
        "deadline": a.deadline,
        "default_action": a.default_action,
        "created_at": a.created_at,
        "decided_at": a.decided_at,
    }


def command_from_row(r: RowMapping) -> Command:
    """Map a ``commands`` row."""
    c = _COMMANDS
    return Command(
        id=r[c.id],
        run_id=r[c.run_id],
        kind=CommandKind(r[c.kind]),
        payload=loads(r[c.payload]),
        created_at=r[c.created_at],
        applied_at=r[c.applied_at],
        result=r[c.result] or "",
    )


def event_from_row(r: RowMapping) -> RunEvent:
    """Map a ``run_events`` row."""
    c = _EVENTS
    return RunEvent(
        id=r[c.id],
        run_id=r[c.run_id],
        kind=RunEventKind(r[c.kind]),
        message=r[c.message] or "",
        created_at=r[c.created_at],
        seq=r[c.seq],
        data=loads(r[c.data]),
    )


def worker_from_row(r: RowMapping) -> WorkerInfo:
    """Map a ``workers`` row."""
    c = _WORKERS
    return WorkerInfo(
        id=r[c.id],
        host=r[c.host],
        pid=r[c.pid],
        started_at=r[c.started_at],
        heartbeat_at=r[c.heartbeat_at],
        stopped_at=r[c.stopped_at],
    )


def run_values(run: Run) -> dict[str, Any]:
    """Column values of a new run, by column name (``SqlStore.create_run``, firings)."""
    return {
        "id": run.id,
        "goal": run.goal,
        "title": run.title,
        "status": str(run.status),
        "spec": dumps(run.spec.to_json()),
        "definition_hash": run.spec.definition_hash,
        "workspace": run.workspace,
        "budget": dumps(run.budget.to_json()),
        "created_at": run.created_at,
        "updated_at": run.created_at,
        "parent_id": run.parent_id,
        "schedule_id": run.schedule_id,
        "placement": run.placement,
        "forked_from": run.forked_from,
        "forked_at_seq": run.forked_at_seq,
    }


def spec_agent(spec: str) -> str:
    """The agent a run's stored spec names ("" for our own loop, or when unreadable)."""
    try:
        value = json.loads(spec)
    except ValueError:
        return ""
    return str(value.get("agent", "") or "") if isinstance(value, dict) else ""


IMPORTED_AGENTS = frozenset({"claude-code"})
"""Agents whose runs are imported records of spend made elsewhere (Claude Code sessions):
shown in usage, never counted against the monthly cap, which limits what desktop-agent's
own runs may spend."""


def outside_cap(spec: str) -> bool:
    """Whether a run's spend stays out of the monthly cap: the demo model's, an import's."""
    return spec_model(spec) == DEMO_MODEL or spec_agent(spec) in IMPORTED_AGENTS


def spec_model(spec: str, unknown: str = "?") -> str:
    """The model a run's stored spec names (``unknown`` when it cannot be read)."""
    try:
        value = json.loads(spec)
    except ValueError:
        return unknown
    return str(value.get("model", unknown)) if isinstance(value, dict) else unknown
