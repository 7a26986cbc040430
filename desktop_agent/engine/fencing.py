"""Fencing inside the engine: fenced writes, and events for what a fenced-out worker did.

A worker frozen past its lease (a laptop asleep, a paused VM, SIGSTOP) may wake up in the
middle of a step that another worker has since taken over and finished. Its writes then
fail with :class:`~desktop_agent.domain.errors.LeaseLost` (see :class:`FencedJournal`),
and the activation stops without touching the run. What it had done meanwhile is not
dropped silently: an effect it finished, an effect it gave up at its last check, a model
call it paid for become events on the run (:func:`report_late_outcome`,
:func:`report_abandoned`, :func:`report_model_spend`), which the analyst sees beside the
journal. They never change the run's status or journal: those belong to the new owner.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from desktop_agent.domain import (
    JSON,
    Approval,
    Command,
    Lease,
    Run,
    RunEventKind,
    Step,
    StepKind,
    Usage,
)
from desktop_agent.domain.errors import DesktopAgentError
from desktop_agent.domain.units import format_usd
from desktop_agent.engine.ports import JournalStore, RunPatch, Snapshot, StepIntent, StepOutcome

if TYPE_CHECKING:
    from desktop_agent.engine.compaction import PartialStreamer
    from desktop_agent.engine.loop import Activation

log = logging.getLogger(__name__)

_SUMMARY_CHARS = 300
"""Longest piece of an effect's result quoted in an event's message."""


class FencedJournal:
    """The journal as one activation of a worker sees it: every write carries its lease.

    Reads pass through. :meth:`commit`, :meth:`restart_step` and :meth:`save_partial`
    present the activation's lease (whatever the caller passes), so that no write of
    the activation can land once another worker has claimed the run.

    Args:
        store: the journal.
        lease: the worker's claim of the run.
    """

    def __init__(self, store: JournalStore, lease: Lease) -> None:
        self.inner = store
        self.lease = lease

    def get_run(self, run_id: str) -> Run:
        """The run; raises NotFoundError."""
        return self.inner.get_run(run_id)

    def load_snapshot(self, run_id: str) -> Snapshot | None:
        """The newest snapshot of the run, if any."""
        return self.inner.load_snapshot(run_id)

    def load_steps(self, run_id: str, from_seq: int = 1) -> list[Step]:
        """Steps with ``seq >= from_seq`` in order."""
        return self.inner.load_steps(run_id, from_seq)

    def commit(
        self,
        run_id: str,
        *,
        outcome: StepOutcome | None = None,
        intents: Sequence[StepIntent] = (),
        patch: RunPatch | None = None,
        snapshot: Snapshot | None = None,
        applied_commands: Sequence[tuple[int, str]] = (),
        approvals: Sequence[Approval] = (),
        lease: Lease | None = None,
    ) -> None:
        """Write all of it in one transaction, if the run is still ours."""
        self.inner.commit(
            run_id,
            outcome=outcome,
            intents=intents,
            patch=patch,
            snapshot=snapshot,
            applied_commands=applied_commands,
            approvals=approvals,
            lease=self.lease,
        )

    def restart_step(
        self, run_id: str, seq: int, *, salvaged: str | None, lease: Lease | None = None
    ) -> int:
        """Count another attempt of an in-flight step, if the run is still ours."""
        return self.inner.restart_step(run_id, seq, salvaged=salvaged, lease=self.lease)

    def save_partial(
        self,
        run_id: str,
        seq: int,
        text: str,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
        lease: Lease | None = None,
    ) -> None:
        """Persist what an in-flight model call streamed and spent, if the run is still ours."""
        self.inner.save_partial(run_id, seq, text, usage, cost_usd, lease=self.lease)

    def record_event(
        self,
        run_id: str,
        kind: RunEventKind,
        message: str,
        *,
        seq: int | None = None,
        data: JSON = None,
    ) -> None:
        """Add an event to the run (not fenced: it changes no state)."""
        self.inner.record_event(run_id, kind, message, seq=seq, data=data)

    def pending_commands(self, run_id: str) -> list[Command]:
        """Commands not yet applied, oldest first."""
        return self.inner.pending_commands(run_id)

    def get_approvals(self, run_id: str, seq: int) -> list[Approval]:
        """Approval records created by step ``seq``."""
        return self.inner.get_approvals(run_id, seq)

    def list_run_approvals(self, run_id: str) -> list[Approval]:
        """Every approval record of the run."""
        return self.inner.list_run_approvals(run_id)


# --------------------------------------------------------------------------- events


def _what(kind: StepKind, name: str) -> str:
    if kind == StepKind.MODEL_CALL:
        return f"a model call ({name})"
    if kind == StepKind.COMPACTION:
        return f"a summary of older turns ({name})"
    return name


def _summary(outcome: StepOutcome) -> str:
    """The tool's result text (or error), on one line, cut short."""
    out = outcome.output if isinstance(outcome.output, dict) else {}
    content = out.get("content")
    text = " ".join((content if isinstance(content, str) else outcome.error or "").split())
    if len(text) > _SUMMARY_CHARS:
        text = text[: _SUMMARY_CHARS - 1] + "…"
    return text


def _record(
    act: Activation, kind: RunEventKind, seq: int, message: str, data: dict[str, JSON]
) -> None:
    """Write the event; a storage failure is logged, never raised over the lost lease."""
    lease = act.guard.lease if act.guard is not None else None
    if lease is not None:
        data = {**data, "worker": lease.owner, "epoch": lease.epoch}
    log.warning("run %s: %s", act.run.id, message)
    try:
        act.store.record_event(act.run.id, kind, message, seq=seq, data=data)
    except DesktopAgentError as exc:
        log.error("run %s: could not record that event: %s", act.run.id, exc)


def report_late_outcome(act: Activation, outcome: StepOutcome, kind: StepKind, name: str) -> None:
    """An effect this worker finished after losing the run: its outcome, as an event."""
    what = _what(kind, name)
    text = _summary(outcome) if kind == StepKind.TOOL_CALL else ""
    spent = f" It spent {format_usd(outcome.cost_usd)} on it." if outcome.cost_usd else ""
    message = (
        f"A worker that lost its lease finished {what} (step {outcome.seq}) after the run "
        f"moved on{': ' + text if text else ''}. Its result is not in the journal.{spent}"
    )
    usage = outcome.usage.to_json() if outcome.usage is not None else None
    _record(
        act,
        RunEventKind.LATE_EFFECT,
        outcome.seq,
        message,
        {
            "step_kind": str(kind),
            "name": name,
            "status": str(outcome.status),
            "output": outcome.output if kind == StepKind.TOOL_CALL else None,
            "error": outcome.error,
            "cost_usd": outcome.cost_usd,
            "usage": usage,
        },
    )


def report_abandoned(act: Activation, seq: int, name: str) -> None:
    """An effect this worker gave up at its last check, because the run had moved on."""
    message = (
        f"A worker that lost its lease gave up {name} (step {seq}) before doing it, "
        "because the run had moved on."
    )
    _record(act, RunEventKind.ABANDONED_EFFECT, seq, message, {"name": name})


def report_model_spend(
    act: Activation, seq: int, kind: StepKind, name: str, streamer: PartialStreamer
) -> None:
    """A model call this worker went on with after losing the run: what it cost."""
    usage, cost_usd = streamer.usage, streamer.cost_usd
    spent = f" It spent {format_usd(cost_usd)} on the call." if cost_usd else ""
    message = (
        f"A worker that lost its lease went on with {_what(kind, name)} (step {seq}) after "
        f"the run moved on; its answer was dropped.{spent}"
    )
    _record(
        act,
        RunEventKind.LATE_EFFECT,
        seq,
        message,
        {
            "step_kind": str(kind),
            "name": name,
            "status": "dropped",
            "cost_usd": cost_usd,
            "usage": usage.to_json(),
        },
    )
