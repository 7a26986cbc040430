"""Runs, steps and events as plain JSON data: what ``--json`` prints and the HTTP API serves.

One shape for both (the API's OpenAPI description and the CLI's tests hold it); the app's
Raw JSON tab shows a step the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from desktop_agent.client.attachments import attachment_json
from desktop_agent.client.views import cache_share, default_effort
from desktop_agent.domain import Run, RunEvent, Step

if TYPE_CHECKING:
    from desktop_agent.client.economy import BatchWait


def run_json(run: Run) -> dict[str, Any]:
    """A run as plain data.

    ``effort`` is what the run asked for (None: the model's default, which
    ``model_default_effort`` names when known); ``thinking`` is on (True) or off;
    ``cache_share`` is the share of its prompt tokens read from the prompt cache (None
    before any prompt); ``attachments`` the files given at its start (name, path in the
    workspace, size, sha256).
    """
    share = cache_share(run.usage)
    return {
        "id": run.id,
        "goal": run.goal,
        "status": str(run.status),
        "wait_reason": str(run.wait_reason) if run.wait_reason else None,
        "wake_at": run.wake_at,
        "message": run.status_message,
        "model": run.model,
        "effort": run.spec.effort or None,
        "model_default_effort": default_effort(run.model) or None,
        "thinking": run.spec.thinking_budget > 0,
        "thinking_budget": run.spec.thinking_budget,
        "economy": run.spec.economy,
        "demo": run.is_demo,
        "workspace": run.workspace,
        "cost_usd": round(run.cost_usd, 6),
        "usage": run.usage.to_json(),
        "cache_share": None if share is None else round(share, 4),
        "steps": run.last_seq,
        "budget": run.budget.to_json(),
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "attention_seq": run.attention_seq,
        "definition_hash": run.definition_hash,
        "placement": run.placement,
        "forked_from": run.forked_from,
        "forked_at_seq": run.forked_at_seq,
        "tags": list(run.tags),
        "attachments": [attachment_json(a) for a in run.spec.attachments],
    }


def step_json(step: Step) -> dict[str, Any]:
    """A step as plain data."""
    return {
        "seq": step.seq,
        "kind": str(step.kind),
        "name": step.name,
        "status": str(step.status),
        "attempt": step.attempt,
        "effect": str(step.effect) if step.effect else None,
        "idempotency_key": step.idempotency_key,
        "input": step.input,
        "output": step.output,
        "error": step.error,
        "partial_text": step.partial_text,
        "salvaged": list(step.salvaged),
        "usage": step.usage.to_json(),
        "cost_usd": step.cost_usd,
        "started_at": step.started_at,
        "finished_at": step.finished_at,
    }


def batch_wait_json(wait: BatchWait | None) -> dict[str, Any] | None:
    """Where an economy-mode run's newest turn is in the Message Batch queue, or None.

    ``state`` is ``queued`` (for the next batch), ``submitting``, ``submitted`` or the
    result's type; the times are epoch seconds (``submitted_at`` None until it is sent).
    """
    if wait is None:
        return None
    return {
        "state": wait.state,
        "seq": wait.seq,
        "queued_at": wait.queued_at,
        "submitted_at": wait.submitted_at,
        "batch_id": wait.batch_id,
    }


def event_json(event: RunEvent) -> dict[str, Any]:
    """A run event as plain data."""
    return {
        "id": event.id,
        "kind": str(event.kind),
        "seq": event.seq,
        "message": event.message,
        "created_at": event.created_at,
        "data": event.data,
    }
