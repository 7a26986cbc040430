"""Run again, and fork from a step: new runs made from an existing one.

A fork shares the parent's first N steps by reference (the store reads the parent's rows;
see :mod:`desktop_agent.persistence.forks`) and continues from there, as a new queued run
with the parent's definition, workspace and placement. Nothing of the prefix is executed
again: its steps are finished, so the worker replays their recorded outputs, exactly as for
a resumed run. What continues may start with one step of the analyst's, recorded when the
fork is made (in the same transaction as the run):

- a note (a ``steer`` step at N+1, as a steer command records it), sent with the next
  model call;
- edited arguments for the parent's tool call at N+1: recorded as an analyst's *edited*
  decision on that tool use (an ``approval`` step at N+1 and its approval record, as an
  edit in the approval dialog records it), checked by the same check approvals use
  (:func:`~desktop_agent.engine.edits.edit_problem`). The worker then runs the edited call
  (only it) at N+2, under the fork's own idempotency key.

Budgets count the fork's own work: the limits are the parent's, moved up by what the
prefix spent (dollars, tokens, steps), since the engine folds the prefix's spend into the
run's totals; the prefix's cost is shown as inherited (:func:`inherited_cost`) and the
fork's own ``cost_usd`` starts at zero.

"Run again" is a fresh run with the same definition (or edited options), recorded with
``forked_from`` = the original and ``forked_at_seq`` = 0 so that the original lists it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from desktop_agent.client.api import Client, new_run_id
from desktop_agent.domain import (
    JSON,
    Approval,
    ApprovalState,
    Budget,
    Run,
    RunStatus,
    StepKind,
    StepStatus,
)
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.text import check_json_text, check_text
from desktop_agent.engine.edits import edit_problem
from desktop_agent.engine.ports import StepIntent
from desktop_agent.persistence.forks import fork_point_problem, inherited


def run_again(client: Client, run_id: str, **overrides: Any) -> Run:
    """Queue a fresh run started as ``run_id`` was (:meth:`Client.run_again`).

    ``overrides``: ``goal``, ``model``, ``max_cost_usd`` (None: keep the original's).

    Raises:
        NotFoundError: no such run.
        InvalidInputError: an override is not valid (nothing is created).
    """
    return client.run_again(
        run_id,
        goal=overrides.get("goal"),
        model=overrides.get("model"),
        max_cost_usd=overrides.get("max_cost_usd"),
    )


def fork(
    client: Client,
    run_id: str,
    at_seq: int,
    note: str | None = None,
    edited_arguments: JSON = None,
) -> Run:
    """Queue a fork of ``run_id`` that shares its steps 1..``at_seq``.

    Raises:
        NotFoundError: no such run.
        InvalidInputError: the fork point or the edit is not valid (the message says why
            and where a fork can be made); nothing is created.
    """
    if note is not None and edited_arguments is not None:
        raise InvalidInputError("give a note or edited arguments, not both")
    if note is not None and not check_text(note, "the note").strip():
        raise InvalidInputError("the note is empty: write what the fork should do differently")
    check_json_text(edited_arguments, "the edited arguments")
    parent = client.run(run_id)
    editing = edited_arguments is not None
    journal = client._store.load_steps(parent.id, 1, max(at_seq, 0) + 1)
    problem = fork_point_problem(parent, journal, at_seq, editing=editing)
    if problem:
        raise InvalidInputError(f"cannot fork run {parent.id}: {problem}")
    cost, tokens = inherited(journal, at_seq)
    b = parent.budget
    budget = dataclasses.replace(
        b,
        max_cost_usd=b.max_cost_usd + cost if b.max_cost_usd is not None else None,
        max_tokens=b.max_tokens + tokens if b.max_tokens is not None else None,
        max_steps=b.max_steps + at_seq if b.max_steps is not None else None,
    )
    run = _new_run(parent, goal=parent.goal, spec=parent.spec, budget=budget, at_seq=at_seq)
    seq = at_seq + 1
    if editing:
        call = next(s for s in journal if s.seq == seq)
        first, approval = _edited_call(client, run, call.name, call.input, edited_arguments, seq)
        client._store.create_fork(run, first, approval)
    elif note is not None:
        text = note.strip()
        step = StepIntent(
            seq=seq,
            kind=StepKind.STEER,
            name="note",
            input={"text": text, "fork": True},
            status=StepStatus.COMPLETED,
            output={"delivered": True},
        )
        client._store.create_fork(run, step)
    else:
        client._store.create_fork(run)
    return client._store.get_run(run.id)


@dataclasses.dataclass(frozen=True)
class ForkOptions:
    """Where a fork asked for at a step can be made, and how (see :func:`fork_options`).

    Attributes:
        run_id: the run to fork.
        asked: the step the analyst chose.
        at_seq: the step the fork shares up to (``asked``, or the nearest that works).
        moved: why ``at_seq`` is not ``asked`` ("" when it is).
        note_problem: why a note cannot follow ``at_seq`` ("" when it can).
        next_call: the tool call at ``at_seq`` + 1 whose arguments may be edited (its name
            and arguments), None when editing is not possible there.
        problem: why no fork can be made near ``asked`` at all ("" when one can).
    """

    run_id: str
    asked: int
    at_seq: int
    moved: str = ""
    note_problem: str = ""
    next_call: tuple[str, JSON] | None = None
    problem: str = ""


def fork_options(client: Client, run_id: str, seq: int) -> ForkOptions:
    """How the run can be forked from step ``seq``: there, or from the nearest step that can.

    A note can follow a step only where no tool use of the model is left unanswered; the
    arguments of the next step can be edited only where it is a tool call. When neither
    works at ``seq`` (a step inside a model turn), the nearest step before it that takes a
    note is offered ("Fork from step 17, before this model turn"), else the nearest after.
    """
    parent = client.run(run_id)
    journal = client._store.load_steps(parent.id, 1, max(parent.last_seq, seq) + 1)
    note = fork_point_problem(parent, journal, seq, editing=False)
    edit = fork_point_problem(parent, journal, seq, editing=True)
    call = _next_call(journal, seq) if edit is None else None
    if note is None or edit is None:
        return ForkOptions(run_id, seq, seq, note_problem=note or "", next_call=call)
    for candidate, where in (
        *((s, "before") for s in range(seq - 1, 0, -1)),
        *((s, "after") for s in range(seq + 1, parent.last_seq + 1)),
    ):
        if fork_point_problem(parent, journal, candidate, editing=False) is None:
            moved = f"Fork from step {candidate}, {where} this model turn: {note}."
            editable = fork_point_problem(parent, journal, candidate, editing=True) is None
            return ForkOptions(
                run_id,
                seq,
                candidate,
                moved=moved,
                next_call=_next_call(journal, candidate) if editable else None,
            )
    return ForkOptions(run_id, seq, seq, problem=f"cannot fork run {parent.id}: {note}")


def _next_call(journal: list[Any], at_seq: int) -> tuple[str, JSON] | None:
    """The tool call recorded at ``at_seq`` + 1 (its name and arguments), if it is one."""
    step = next((s for s in journal if s.seq == at_seq + 1), None)
    if step is None or step.kind != StepKind.TOOL_CALL or not isinstance(step.input, dict):
        return None
    arguments: JSON = step.input.get("arguments")
    return step.name, arguments


def forks_of(client: Client, run_id: str) -> list[Run]:
    """The runs made from ``run_id`` (forks, and "run again"s: ``forked_at_seq`` 0)."""
    return client._store.forks_of(client.run(run_id).id)


def inherited_cost(client: Client, run: Run) -> float:
    """What a fork's shared prefix cost (paid by the parent; 0 for other runs)."""
    if not run.forked_from or not run.forked_at_seq:
        return 0.0
    return inherited(client._store.load_steps(run.id, 1, run.forked_at_seq), run.forked_at_seq)[0]


def _new_run(original: Run, *, goal: str, spec: Any, budget: Budget, at_seq: int) -> Run:
    now = time.time()
    return Run(
        id=new_run_id(),
        goal=goal,
        status=RunStatus.QUEUED,
        spec=spec,
        workspace=original.workspace,
        budget=budget,
        created_at=now,
        updated_at=now,
        title=goal.splitlines()[0][:120],
        definition_hash=spec.definition_hash,
        placement=original.placement,
        forked_from=original.id,
        forked_at_seq=at_seq,
    )


def _edited_call(
    client: Client, run: Run, tool: str, call_input: JSON, args: JSON, seq: int
) -> tuple[StepIntent, Approval]:
    """The edited decision on the parent's tool call at ``seq``, checked as approvals are."""
    data = call_input if isinstance(call_input, dict) else {}
    tool_use_id = str(data.get("tool_use_id"))
    approval = Approval(
        id=f"{run.id}.{seq}.1",
        run_id=run.id,
        seq=seq,
        tool=tool,
        arguments=data.get("arguments"),
        state=ApprovalState.EDITED,
        reason=f"edited when forking from run {run.forked_from} at step {run.forked_at_seq}",
        rule="fork",
        decided_arguments=args,
        decision_note="edited in the fork",
        created_at=run.created_at,
        decided_at=run.created_at,
    )
    problem = edit_problem(client._tools.get(tool), args, client.tool_context(approval))
    if problem:
        raise InvalidInputError(f"edit of {tool} refused, no fork was made: {problem}")
    request = {
        "tool_use_id": tool_use_id,
        "name": tool,
        "arguments": data.get("arguments"),
        "approval_id": approval.id,
        "rule": "fork",
    }
    decision = {
        "tool_use_id": tool_use_id,
        "approval_id": approval.id,
        "state": str(ApprovalState.EDITED),
        "arguments": args,
        "note": "edited in the fork",
    }
    step = StepIntent(
        seq=seq,
        kind=StepKind.APPROVAL,
        name="approval",
        input={"requests": [request]},
        status=StepStatus.COMPLETED,
        output={"decisions": [decision]},
    )
    return step, approval
