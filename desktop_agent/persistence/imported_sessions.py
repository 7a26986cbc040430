"""Runs imported from another agent's sessions (Claude Code), and the approvals they ask.

An imported session is a run like any other (``runs``, ``steps``), written here in one
transaction per import: the run's row, the steps that are new, the steps that got their
outcome since, the run's totals summed again from its steps, and the import's cursor (a
``run_events`` row of kind ``imported``, rewritten in place). A save names the last step
it read; when the journal moved meanwhile (another import, an approval asked) nothing is
written and the caller reads again. A step already indexed for search and changed here
moves the run's search watermark back, so the next catch-up indexes it again.

Claude Code asks for approvals through a hook process (``desktop-agent hook
claude-code``): :meth:`ImportedSessions.open_approval` writes the ``approval`` step and its
approval row as the engine does, and the run waits for approval (no wake time). The
analyst's decision is a command row; whoever reads it first applies it with
:meth:`ImportedSessions.close_approval`, a write made only while the approval is pending:
the waiting hook, or a worker the command woke (its driver of Claude Code runs). No engine
ever runs for such a run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection

from desktop_agent.domain import (
    JSON,
    Approval,
    ApprovalState,
    Command,
    CommandKind,
    Run,
    RunEventKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    WaitReason,
)
from desktop_agent.persistence.mapping import (
    approval_from_row,
    approval_values,
    command_from_row,
    dumps,
    loads,
    run_from_row,
    run_values,
)
from desktop_agent.persistence.sqlbase import SqlBase
from desktop_agent.persistence.tables import (
    approvals,
    commands,
    run_events,
    runs,
    search_runs,
    steps,
)

_DECISIONS = (str(CommandKind.APPROVE), str(CommandKind.REJECT))


class ImportPlan(Protocol):
    """What an import writes (``agents.claude_code.ImportPlan`` has this shape)."""

    @property
    def run(self) -> Run:
        """The run's row as it now is (its totals are summed from its steps)."""
        ...

    @property
    def new_steps(self) -> Sequence[Step]:
        """Steps to append, numbered after the run's last one."""
        ...

    @property
    def changed_steps(self) -> Sequence[Step]:
        """Steps already written, with their new outcome."""
        ...

    @property
    def cursor(self) -> JSON:
        """What the next import compares with."""
        ...

    @property
    def messages(self) -> int:
        """Messages the session holds now."""
        ...


def _step_values(step: Step) -> dict[str, Any]:
    finished = step.status != StepStatus.STARTED
    return {
        "run_id": step.run_id,
        "seq": step.seq,
        "kind": str(step.kind),
        "name": step.name[:200],
        "status": str(step.status),
        "effect": str(step.effect) if step.effect else None,
        "attempt": 1,
        "input": dumps(step.input),
        "output": dumps(step.output) if finished else None,
        "error": step.error,
        "partial_text": "",
        "input_tokens": step.usage.input_tokens,
        "output_tokens": step.usage.output_tokens,
        "cache_write_tokens": step.usage.cache_write_tokens,
        "cache_read_tokens": step.usage.cache_read_tokens,
        "cost_usd": step.cost_usd,
        "started_at": step.started_at,
        "finished_at": step.finished_at if finished else None,
    }


def _active_seconds(spans: Sequence[tuple[float, float]]) -> float:
    """Seconds covered by at least one step (steps of parallel tools and subagents overlap)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


class ImportedSessions(SqlBase):
    """The journal of imported sessions (``agents.claude_code.SessionJournal``)."""

    # ------------------------------------------------------------------ importing

    def known(self, run_id: str) -> tuple[Run | None, list[Step], JSON]:
        """The run (None: never imported), its steps without outputs, and its last cursor."""
        s = steps.c
        read_steps = (
            select(s.run_id, s.seq, s.kind, s.name, s.status, s.input, s.started_at)
            .where(s.run_id == run_id)
            .order_by(s.seq)
        )

        def txn(conn: Connection) -> tuple[Run | None, list[Step], JSON]:
            row = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().first()
            if row is None:
                return None, [], None
            found = [
                Step(
                    run_id=r.run_id,
                    seq=int(r.seq),
                    kind=StepKind(r.kind),
                    name=r.name,
                    status=StepStatus(r.status),
                    input=loads(r.input),
                    started_at=float(r.started_at),
                )
                for r in conn.execute(read_steps)
            ]
            return run_from_row(row), found, self._cursor(conn, run_id)

        return self._read(txn)

    def cursor(self, run_id: str) -> JSON:
        """The last import's cursor of the run (None: never imported)."""
        return self._read(lambda c: self._cursor(c, run_id))

    def session_of(self, run_id: str) -> str | None:
        """The session id the run ``run_id`` holds ("" for a run of ours; None: no run)."""
        stmt = select(runs.c.spec).where(runs.c.id == run_id)
        spec = self._read(lambda c: c.execute(stmt).scalar())
        if spec is None:
            return None
        data = loads(spec)
        return str(data.get("session_id") or "") if isinstance(data, dict) else ""

    @staticmethod
    def _cursor(conn: Connection, run_id: str) -> JSON:
        stmt = select(run_events.c.data).where(
            run_events.c.run_id == run_id, run_events.c.kind == str(RunEventKind.IMPORTED)
        )
        text = conn.execute(stmt.order_by(run_events.c.id.desc()).limit(1)).scalar()
        return loads(text) if text else None

    def save(self, plan: ImportPlan, expect_last_seq: int) -> bool:
        """Write the plan in one transaction; False when the journal moved meanwhile.

        ``expect_last_seq`` is the last step the plan was made from (0: a new run).
        """
        run = plan.run

        def txn(conn: Connection) -> bool:
            now = self.now()
            row = conn.execute(
                select(runs.c.last_seq, runs.c.status).where(runs.c.id == run.id).with_for_update()
            ).first()
            if row is None:
                if expect_last_seq:
                    return False
                conn.execute(insert(runs).values({**run_values(run), "updated_at": now}))
            elif int(row.last_seq) != expect_last_seq:
                return False
            if plan.new_steps:
                conn.execute(insert(steps), [_step_values(s) for s in plan.new_steps])
            for step in plan.changed_steps:
                values = _step_values(step)
                del values["run_id"], values["seq"]
                conn.execute(
                    update(steps)
                    .where(steps.c.run_id == run.id, steps.c.seq == step.seq)
                    .values(values)
                )
            if plan.changed_steps:
                first = min(s.seq for s in plan.changed_steps) - 1
                conn.execute(
                    update(search_runs)
                    .where(search_runs.c.run_id == run.id, search_runs.c.indexed_seq > first)
                    .values(indexed_seq=first)
                )
            self._update_run(conn, run, now)
            message = f"imported from Claude Code: {plan.messages} messages read"
            self._write_cursor(conn, run.id, plan.cursor, message, now)
            return True

        return self._write(txn)

    @staticmethod
    def _update_run(conn: Connection, run: Run, now: float) -> None:
        """The run's row from the plan, its totals summed from its steps."""
        s = steps.c
        totals = conn.execute(
            select(
                func.coalesce(func.max(s.seq), 0),
                func.coalesce(func.sum(s.cost_usd), 0.0),
                func.coalesce(func.sum(s.input_tokens), 0),
                func.coalesce(func.sum(s.output_tokens), 0),
                func.coalesce(func.sum(s.cache_write_tokens), 0),
                func.coalesce(func.sum(s.cache_read_tokens), 0),
            ).where(s.run_id == run.id)
        ).one()
        spans = [
            (float(a), float(b))
            for a, b in conn.execute(
                select(s.started_at, s.finished_at).where(
                    s.run_id == run.id, s.finished_at.is_not(None)
                )
            )
        ]
        conn.execute(
            update(runs)
            .where(runs.c.id == run.id)
            .values(
                goal=run.goal,
                title=run.title,
                spec=dumps(run.spec.to_json()),
                definition_hash=run.spec.definition_hash,
                workspace=run.workspace,
                started_at=run.started_at,
                finished_at=run.finished_at,
                last_seq=int(totals[0]),
                cost_usd=float(totals[1]),
                input_tokens=int(totals[2]),
                output_tokens=int(totals[3]),
                cache_write_tokens=int(totals[4]),
                cache_read_tokens=int(totals[5]),
                active_seconds=_active_seconds(spans),
                # When desktop-agent last changed the row (the app's run list reads what
                # moved since its last look); the session's own times are started/finished.
                updated_at=now,
            )
        )

    @staticmethod
    def _write_cursor(
        conn: Connection, run_id: str, cursor: JSON, message: str, now: float
    ) -> None:
        e = run_events.c
        mine = (e.run_id == run_id) & (e.kind == str(RunEventKind.IMPORTED))
        found = conn.execute(select(e.id).where(mine).limit(1)).scalar()
        values = {"data": dumps(cursor), "message": message, "created_at": now}
        if found is None:
            conn.execute(
                insert(run_events).values(run_id=run_id, kind=str(RunEventKind.IMPORTED), **values)
            )
        else:
            conn.execute(update(run_events).where(e.id == found).values(values))

    # ------------------------------------------------------------------ approvals

    def open_approval(
        self, approval: Approval, request: dict[str, JSON], hook: dict[str, JSON], message: str
    ) -> Approval:
        """Ask the analyst: an open ``approval`` step, its approval row, the run waiting on it.

        The step goes after the run's last one; ``approval``'s id and seq are set here
        (``RUN.SEQ.1``, as the engine names them). Returns the approval as written.
        """

        def txn(conn: Connection) -> Approval:
            now = self.now()
            row = conn.execute(
                select(runs.c.last_seq).where(runs.c.id == approval.run_id).with_for_update()
            ).first()
            if row is None:
                raise ValueError(f"no run {approval.run_id}")
            seq = int(row.last_seq) + 1
            written = Approval(
                **{**approval_values_of(approval), "id": f"{approval.run_id}.{seq}.1", "seq": seq}
            )
            item = {**request, "approval_id": written.id}
            step = Step(
                run_id=approval.run_id,
                seq=seq,
                kind=StepKind.APPROVAL,
                name="approval",
                status=StepStatus.STARTED,
                input={"requests": [item], "hook": hook},
                started_at=now,
            )
            conn.execute(insert(steps).values(_step_values(step)))
            conn.execute(insert(approvals).values(approval_values(written)))
            conn.execute(
                update(runs)
                .where(runs.c.id == approval.run_id)
                .values(
                    last_seq=seq,
                    status=str(RunStatus.WAITING),
                    wait_reason=str(WaitReason.APPROVAL),
                    wake_at=None,
                    status_message=message,
                    updated_at=now,
                )
            )
            return written

        return self._write(txn)

    def decision(self, approval: Approval) -> tuple[ApprovalState, Command | None]:
        """The approval's state, and the analyst's decision waiting to be applied (if any)."""
        c = commands.c
        queued = (
            select(commands)
            .where(c.run_id == approval.run_id, c.applied_at.is_(None), c.kind.in_(_DECISIONS))
            .order_by(c.id)
        )
        state = select(approvals.c.state).where(approvals.c.id == approval.id)

        def txn(conn: Connection) -> tuple[ApprovalState, Command | None]:
            now_state = ApprovalState(conn.execute(state).scalar_one())
            for row in conn.execute(queued).mappings():
                command = command_from_row(row)
                payload = command.payload if isinstance(command.payload, dict) else {}
                if payload.get("approval_id") == approval.id:
                    return now_state, command
            return now_state, None

        return self._read(txn)

    def close_approval(
        self,
        approval: Approval,
        state: ApprovalState,
        *,
        arguments: JSON,
        note: str,
        label: str,
        command: Command | None = None,
        applied: str = "",
    ) -> bool:
        """Record the decision: approval row, command applied, step closed, run released.

        Only while the approval is still pending (False: something else decided it). The
        run is ``completed`` again unless another of its approvals still waits.
        """

        def txn(conn: Connection) -> bool:
            now = self.now()
            a = approvals.c
            done = conn.execute(
                update(approvals)
                .where(a.id == approval.id, a.state == str(ApprovalState.PENDING))
                .values(
                    state=str(state),
                    decided_arguments=dumps(arguments),
                    decision_note=note,
                    decided_at=now,
                )
            )
            if done.rowcount != 1:
                return False
            if command is not None:
                conn.execute(
                    update(commands)
                    .where(commands.c.id == command.id)
                    .values(applied_at=now, result=applied or str(state))
                )
            self._close_step(conn, approval, label, arguments, note, now)
            still = conn.execute(
                select(func.count())
                .select_from(approvals)
                .where(a.run_id == approval.run_id, a.state == str(ApprovalState.PENDING))
            ).scalar_one()
            values: dict[str, Any] = {"updated_at": now}
            if not still:
                values.update(status=str(RunStatus.COMPLETED), status_message="", wait_reason=None)
            conn.execute(update(runs).where(runs.c.id == approval.run_id).values(values))
            return True

        return self._write(txn)

    @staticmethod
    def _close_step(
        conn: Connection, approval: Approval, label: str, arguments: JSON, note: str, now: float
    ) -> None:
        s = steps.c
        where = (s.run_id == approval.run_id) & (s.seq == approval.seq)
        text = conn.execute(select(s.input).where(where)).scalar()
        requests = (loads(text) or {}).get("requests", []) if text else []
        use_id = next(
            (r.get("tool_use_id") for r in requests if r.get("approval_id") == approval.id), None
        )
        decision = {
            "tool_use_id": use_id,
            "approval_id": approval.id,
            "state": label,
            "arguments": arguments,
            "note": note,
        }
        conn.execute(
            update(steps)
            .where(where)
            .values(
                status=str(StepStatus.COMPLETED),
                output=dumps({"decisions": [decision]}),
                finished_at=now,
            )
        )

    def decide(
        self, approval: Approval, state: ApprovalState, arguments: JSON, note: str, command: Command
    ) -> bool:
        """Apply the analyst's ``command`` to ``approval`` (False: it was no longer pending)."""
        return self.close_approval(
            approval, state, arguments=arguments, note=note, label=str(state), command=command
        )

    def refuse_command(self, command_id: int, result: str) -> None:
        """Mark a decision applied as refused (its approval stays pending)."""
        stmt = update(commands).where(commands.c.id == command_id)
        self._write(lambda c: c.execute(stmt.values(applied_at=self.now(), result=result)))

    def waiting_approvals(self, run_prefix: str) -> list[tuple[Approval, JSON]]:
        """Pending approvals of runs whose id starts with ``run_prefix``, with their hook."""
        a, s = approvals.c, steps.c
        stmt = (
            select(approvals, s.input.label("step_input"))
            .join(steps, (s.run_id == a.run_id) & (s.seq == a.seq))
            .where(a.state == str(ApprovalState.PENDING), a.run_id.like(run_prefix + "%"))
            .order_by(a.created_at)
        )

        def txn(conn: Connection) -> list[tuple[Approval, JSON]]:
            out = []
            for row in conn.execute(stmt).mappings():
                step_input = loads(row["step_input"]) or {}
                out.append((approval_from_row(row), step_input.get("hook")))
            return out

        return self._read(txn)


def approval_values_of(a: Approval) -> dict[str, Any]:
    """The fields of an approval, by name (to make a changed copy)."""
    return {f: getattr(a, f) for f in Approval.__dataclass_fields__}


def decision_payload(command: Command) -> dict[str, Any]:
    """A decision command's payload as a dict (an unreadable one is empty)."""
    payload = command.payload
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except ValueError:
            return {}
    return payload if isinstance(payload, dict) else {}
