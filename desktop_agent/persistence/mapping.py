"""Row ⇄ domain mapping. Rows are read as SQLAlchemy ``Row`` mappings, never handed out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from desktop_agent.domain import (
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


def run_from_row(r: Mapping[str, Any]) -> Run:
    """Map a ``runs`` row."""
    return Run(
        id=r["id"],
        goal=r["goal"],
        title=r["title"] or "",
        status=RunStatus(r["status"]),
        spec=AgentSpec.from_json(loads(r["spec"])),
        workspace=r["workspace"],
        budget=Budget.from_json(loads(r["budget"])),
        wait_reason=WaitReason(r["wait_reason"]) if r["wait_reason"] else None,
        wake_at=r["wake_at"],
        status_message=r["status_message"] or "",
        attention_seq=r["attention_seq"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        last_seq=r["last_seq"],
        cost_usd=r["cost_usd"],
        usage=Usage(
            r["input_tokens"], r["output_tokens"], r["cache_write_tokens"], r["cache_read_tokens"]
        ),
        active_seconds=r["active_seconds"],
        lease_owner=r["lease_owner"],
        lease_expires_at=r["lease_expires_at"],
        lease_epoch=int(r["lease_epoch"] or 0),
        definition_hash=r["definition_hash"],
        parent_id=r["parent_id"],
        schedule_id=r["schedule_id"],
    )


def step_from_row(r: Mapping[str, Any]) -> Step:
    """Map a ``steps`` row."""
    salvaged = loads(r["salvaged"]) or []
    texts: list[str] = []
    spent = Usage()
    spent_usd = 0.0
    for item in salvaged:
        if isinstance(item, dict):
            if item.get("text"):
                texts.append(str(item["text"]))
            spent = spent + Usage.from_json(item.get("usage"))
            spent_usd += float(item.get("cost_usd", 0.0) or 0.0)
        elif item:
            texts.append(str(item))
    return Step(
        run_id=r["run_id"],
        seq=r["seq"],
        kind=StepKind(r["kind"]),
        name=r["name"],
        status=StepStatus(r["status"]),
        input=loads(r["input"]),
        output=loads(r["output"]),
        error=r["error"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        attempt=r["attempt"],
        partial_text=r["partial_text"] or "",
        salvaged=tuple(texts),
        salvaged_usage=spent,
        salvaged_cost_usd=spent_usd,
        usage=Usage(
            r["input_tokens"], r["output_tokens"], r["cache_write_tokens"], r["cache_read_tokens"]
        ),
        cost_usd=r["cost_usd"],
        effect=EffectClass(r["effect"]) if r["effect"] else None,
    )


def approval_from_row(r: Mapping[str, Any]) -> Approval:
    """Map an ``approvals`` row."""
    return Approval(
        id=r["id"],
        run_id=r["run_id"],
        seq=r["seq"],
        tool=r["tool"],
        arguments=loads(r["arguments"]),
        state=ApprovalState(r["state"]),
        reason=r["reason"] or "",
        rule=r["rule"] or "",
        decided_arguments=loads(r["decided_arguments"]),
        decision_note=r["decision_note"] or "",
        deadline=r["deadline"],
        default_action=r["default_action"],
        created_at=r["created_at"],
        decided_at=r["decided_at"],
    )


def approval_params(a: Approval) -> dict[str, Any]:
    """Column values of an approval."""
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


def command_from_row(r: Mapping[str, Any]) -> Command:
    """Map a ``commands`` row."""
    return Command(
        id=r["id"],
        run_id=r["run_id"],
        kind=CommandKind(r["kind"]),
        payload=loads(r["payload"]),
        created_at=r["created_at"],
        applied_at=r["applied_at"],
        result=r["result"] or "",
    )


def event_from_row(r: Mapping[str, Any]) -> RunEvent:
    """Map a ``run_events`` row."""
    return RunEvent(
        id=r["id"],
        run_id=r["run_id"],
        kind=RunEventKind(r["kind"]),
        message=r["message"] or "",
        created_at=r["created_at"],
        seq=r["seq"],
        data=loads(r["data"]),
    )


def worker_from_row(r: Mapping[str, Any]) -> WorkerInfo:
    """Map a ``workers`` row."""
    return WorkerInfo(
        id=r["id"],
        host=r["host"],
        pid=r["pid"],
        started_at=r["started_at"],
        heartbeat_at=r["heartbeat_at"],
        stopped_at=r["stopped_at"],
    )


def run_params(run: Run) -> dict[str, Any]:
    """Column values of a new run (``SqlStore.create_run`` and scheduled firings)."""
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
    }
