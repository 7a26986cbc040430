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

from desktop_agent.domain import (
    JSON,
    Approval,
    Command,
    Lease,
    Run,
    RunEvent,
    RunEventKind,
    Step,
    StepKind,
    Usage,
)
from desktop_agent.domain.errors import DesktopAgentError
from desktop_agent.domain.units import format_usd
from desktop_agent.engine.ports import JournalStore, RunPatch, Snapshot, StepIntent, StepOutcome
from desktop_agent.engine.run_state import RunState

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
        add_usage: Usage | None = None,
        add_cost_usd: float = 0.0,
    ) -> None:
        """Add an event to the run, and spend to its totals (not fenced: no journal write)."""
        self.inner.record_event(
            run_id,
            kind,
            message,
            seq=seq,
            data=data,
            add_usage=add_usage,
            add_cost_usd=add_cost_usd,
        )

    def run_events(self, run_id: str) -> list[RunEvent]:
        """The run's events, oldest first."""
        return self.inner.run_events(run_id)

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
    rs: RunState,
    kind: RunEventKind,
    seq: int,
    message: str,
    data: dict[str, JSON],
    unsaved: tuple[Usage, float] | None = None,
) -> None:
    """Write the event (and ``unsaved`` spend to the run's totals, in the same commit).

    A storage failure is logged, never raised over the lost lease.
    """
    lease = rs.guard.lease if rs.guard is not None else None
    if lease is not None:
        data = {**data, "worker": lease.owner, "epoch": lease.epoch}
    add_usage, add_cost = unsaved if unsaved is not None else (Usage(), 0.0)
    if unsaved is not None:
        data = {**data, "added_usage": add_usage.to_json(), "added_cost_usd": add_cost}
    log.warning("run %s: %s", rs.run.id, message)
    try:
        rs.store.record_event(
            rs.run.id,
            kind,
            message,
            seq=seq,
            data=data,
            add_usage=add_usage,
            add_cost_usd=add_cost,
        )
    except DesktopAgentError as exc:
        log.error("run %s: could not record that event: %s", rs.run.id, exc)


def _unsaved(rs: RunState, seq: int, usage: Usage, cost_usd: float) -> tuple[Usage, float]:
    """What of a call's spend (``usage``, ``cost_usd``) its last fenced save did not hold.

    What a save held is on the step's row, and the run's totals get it from there when the
    new owner starts the step again (its salvage) or closes it: counting it here as well
    would count it twice. The rest is known to this worker alone.
    """
    saved, saved_usd = rs.saved_spend.get(seq, (Usage(), 0.0))
    rest = Usage(
        max(0, usage.input_tokens - saved.input_tokens),
        max(0, usage.output_tokens - saved.output_tokens),
        max(0, usage.cache_write_tokens - saved.cache_write_tokens),
        max(0, usage.cache_read_tokens - saved.cache_read_tokens),
    )
    return rest, max(0.0, cost_usd - saved_usd)


def _spent(cost_usd: float, what: str) -> str:
    """`` It spent $0.0123 on the call, counted in the run's cost.`` (nothing when free)."""
    if not cost_usd:
        return ""
    return f" It spent {format_usd(cost_usd)} on {what}, counted in the run's cost."


def report_late_outcome(rs: RunState, outcome: StepOutcome, kind: StepKind, name: str) -> None:
    """An effect this worker finished after losing the run: its outcome, as an event.

    A model call's cost beyond its last save goes to the run's totals with the event.
    """
    what = _what(kind, name)
    text = _summary(outcome) if kind == StepKind.TOOL_CALL else ""
    message = (
        f"A worker that lost its lease finished {what} (step {outcome.seq}) after the run "
        f"moved on{': ' + text if text else ''}. Its result is not in the journal."
        + _spent(outcome.cost_usd, "it")
    )
    usage = outcome.usage.to_json() if outcome.usage is not None else None
    unsaved = None
    if outcome.cost_usd or outcome.usage is not None:
        unsaved = _unsaved(rs, outcome.seq, outcome.usage or Usage(), outcome.cost_usd)
    _record(
        rs,
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
        unsaved,
    )


def report_abandoned(rs: RunState, seq: int, name: str) -> None:
    """An effect this worker gave up at its last check, because the run had moved on."""
    message = (
        f"A worker that lost its lease gave up {name} (step {seq}) before doing it, "
        "because the run had moved on."
    )
    _record(rs, RunEventKind.ABANDONED_EFFECT, seq, message, {"name": name})


def report_model_spend(
    rs: RunState, seq: int, kind: StepKind, name: str, usage: Usage, cost_usd: float
) -> None:
    """A model call this worker went on with after losing the run: what it cost.

    ``usage`` and ``cost_usd`` are what the call reported spending so far; its spend
    beyond its last save goes to the run's totals with the event.
    """
    message = (
        f"A worker that lost its lease went on with {_what(kind, name)} (step {seq}) after "
        f"the run moved on; its answer was dropped." + _spent(cost_usd, "the call")
    )
    _record(
        rs,
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
        _unsaved(rs, seq, usage, cost_usd),
    )


def late_spend(rs: RunState) -> tuple[Usage, float]:
    """What workers that lost the run spent on it outside its journal (from its events).

    The run's totals hold it already (see :func:`report_model_spend`); budgets, which
    count from the journal, add it.
    """
    usage, cost = Usage(), 0.0
    if rs.fencing_token == 1:
        # The run's first claim: no worker ever lost it, so none can have spent on it
        # outside the journal. Budgets are checked at every step: no read for that case.
        return usage, cost
    for event in rs.store.run_events(rs.run.id):
        data = event.data if isinstance(event.data, dict) else {}
        added = data.get("added_cost_usd")
        if isinstance(added, int | float) and not isinstance(added, bool):
            cost += float(added)
        usage = usage + Usage.from_json(data.get("added_usage"))
    return usage, cost
