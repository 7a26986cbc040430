"""Small builders of what the conformance tests write: runs, intents, approvals."""

from __future__ import annotations

from collections.abc import Callable

from desktop_agent.domain import (
    JSON,
    AgentSpec,
    Approval,
    Budget,
    EffectClass,
    Lease,
    Run,
    RunStatus,
    StepKind,
    StepStatus,
)
from desktop_agent.engine.ports import StepIntent
from desktop_agent.persistence.store import SqlStore

T0 = 1_800_000_000.0
"""Where every test's clock starts (the default start of ``FakeClock``)."""

LEASE_S = 30.0

SPEC = AgentSpec(model="demo", system_prompt="Summarise the sources.", tools=(("read_file", "1"),))


def new_run(
    store: SqlStore,
    run_id: str = "run-1",
    *,
    created_at: float = T0,
    status: RunStatus = RunStatus.QUEUED,
    budget: Budget | None = None,
    goal: str = "Summarise the sources",
) -> Run:
    """Create a run and return it as the store reads it back."""
    store.create_run(
        Run(
            id=run_id,
            goal=goal,
            status=status,
            spec=SPEC,
            workspace=f"/srv/agent/{run_id}",
            budget=budget or Budget(),
            created_at=created_at,
            updated_at=created_at,
            definition_hash=SPEC.definition_hash,
        )
    )
    return store.get_run(run_id)


def intent(
    seq: int,
    *,
    kind: StepKind = StepKind.TOOL_CALL,
    name: str = "read_file",
    effect: EffectClass | None = None,
    args: JSON = None,
    status: StepStatus = StepStatus.STARTED,
    output: JSON = None,
) -> StepIntent:
    """The intent of step ``seq`` (a read-only tool call unless told otherwise)."""
    if effect is None and kind == StepKind.TOOL_CALL:
        effect = EffectClass.READ_ONLY
    return StepIntent(
        seq=seq,
        kind=kind,
        name=name,
        input={"arguments": args if args is not None else {"path": f"src-{seq}.md"}},
        effect=effect,
        status=status,
        output=output,
    )


def approval(run_id: str, seq: int, approval_id: str | None = None) -> Approval:
    """A pending approval of an e-mail, asked by step ``seq``."""
    return Approval(
        id=approval_id or f"{run_id}:{seq}:a",
        run_id=run_id,
        seq=seq,
        tool="send_email",
        arguments={"to": "board@example.org", "subject": "Q3"},
        reason="sends an e-mail",
        rule="unsafe",
        created_at=T0,
    )


def claimed(store: SqlStore, run_id: str, owner: str, now: float = T0) -> Lease:
    """Claim the run (it must be free) and return the lease."""
    lease = store.claim_run(run_id, owner, now, LEASE_S)
    assert lease is not None, f"{owner} could not claim {run_id}"
    return lease


def refused(call: Callable[[], object], what: str) -> Exception:
    """Call ``call``, which must fail with an ordinary exception, and return that exception.

    For refusals whose error type the contract does not fix (a driver's integrity error
    today): what the tests check is that nothing was written.
    """
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError(f"the store accepted {what}")
