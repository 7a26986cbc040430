"""Economy mode as the analyst sees it: where a run's turn is in the Message Batch queue.

A run in economy mode sends each model turn as a request of a Message Batch and waits
(``WaitReason.BATCH``) until its result is in. :func:`batch_wait` says where its newest
request is, for the run's header ("in a batch, submitted 12 min ago") and ``show``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from desktop_agent.persistence.batches import SqlBatchQueue

if TYPE_CHECKING:
    from desktop_agent.client.api import Client


@dataclass(frozen=True)
class BatchWait:
    """A run's newest batch request.

    Attributes:
        state: ``queued`` (waiting for the next batch), ``submitting``, ``submitted``,
            then the result's type (``succeeded``, ``errored``, ``expired``,
            ``canceled``) or ``withdrawn``.
        queued_at: when the run queued it (epoch seconds).
        submitted_at: when a worker sent it (None: not yet).
        batch_id: the batch that carries it, once known.
        seq: the model step it answers.
    """

    state: str
    queued_at: float
    submitted_at: float | None
    batch_id: str | None
    seq: int


def batch_wait(client: Client, run_id: str) -> BatchWait | None:
    """Where the run's newest batch request is (None: the run never queued one)."""
    entry = SqlBatchQueue(client.store.db).latest(run_id)
    if entry is None:
        return None
    return BatchWait(entry.state, entry.queued_at, entry.submitted_at, entry.batch_id, entry.seq)


def batch_wait_words(wait: BatchWait, now: float) -> str:
    """Where the run's turn is, for its header and ``show``: "in a batch, submitted 12 min ago"."""
    if wait.state == "queued":
        return f"queued for the next batch ({_ago(now - wait.queued_at)})"
    if wait.state == "submitting":
        return "being sent in a batch"
    if wait.state == "submitted":
        since = wait.submitted_at if wait.submitted_at is not None else wait.queued_at
        return f"in a batch, submitted {_ago(now - since)}"
    if wait.state == "withdrawn":
        return "its batch request was withdrawn"
    return f"its batch's result is in ({wait.state}); the run goes on shortly"


def _ago(seconds: float) -> str:
    """``just now``, ``12 min ago``, ``3 h 5 min ago``, ``2 d ago``."""
    s = max(0.0, seconds)
    if s < 60:
        return "just now"
    minutes = int(s // 60)
    if minutes < 60:
        return f"{minutes} min ago"
    hours, rest = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {rest} min ago" if rest else f"{hours} h ago"
    return f"{hours // 24} d ago"
