"""Recording an analyst's decisions on approvals, only while they can still take effect.

A decision is a command row that the worker applies at the run's next boundary. Checking
that an approval is pending and then inserting the row in two transactions leaves a window:
someone else (another terminal, the app, the worker applying an earlier decision or a
deadline) may decide it in between, and the worker then ignores the second decision while
its sender was told it was recorded. Here the check and the insert are one write
transaction, so a decision is either recorded while nothing else decides the approval, or
refused with the reason.

An approval counts as decided as soon as a decision for it is queued, not only once the
worker applied it: a second decision queued behind the first would only ever be ignored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from desktop_agent.domain import ApprovalState, CommandKind
from desktop_agent.domain.errors import InvalidStateError, NotFoundError
from desktop_agent.persistence.sqlbase import SqlBase, queue_command
from desktop_agent.persistence.tables import approvals, commands

_DECISIONS = (CommandKind.APPROVE, CommandKind.REJECT)


@dataclass(frozen=True)
class Decision:
    """One decision to record.

    Attributes:
        approval_id: the approval decided.
        kind: approve or reject.
        payload: the command's payload (it must name ``approval_id``).
    """

    approval_id: str
    kind: CommandKind
    payload: dict[str, Any]


class DecisionQueries(SqlBase):
    """Conditional writes of decision commands (see the module docstring)."""

    def record(self, decisions: Sequence[Decision]) -> list[int]:
        """Queue every decision, or none of them; returns the command ids.

        Raises:
            NotFoundError: an approval does not exist.
            InvalidStateError: an approval is no longer pending, or a decision for it is
                already waiting for the worker.
        """
        if any(d.kind not in _DECISIONS for d in decisions):
            raise ValueError("only approve and reject are decisions")

        def txn(conn: Connection) -> list[int]:
            return [self._record_one(conn, d) for d in decisions]

        return self._write(txn)

    def queued_decision(self, approval_id: str, run_id: str) -> str | None:
        """The kind of decision waiting for the worker for this approval, or None."""
        return self._read(lambda c: self._queued(c, approval_id, run_id))

    def _record_one(self, conn: Connection, d: Decision) -> int:
        # FOR UPDATE on PostgreSQL; SQLite's writer already holds the database lock.
        stmt = (
            select(approvals.c.run_id, approvals.c.state)
            .where(approvals.c.id == d.approval_id)
            .with_for_update()
        )
        row = conn.execute(stmt).first()
        if row is None:
            raise NotFoundError(
                f"no approval {d.approval_id!r}; `desktop-agent approvals` lists them"
            )
        run_id, state = str(row.run_id), str(row.state)
        if state != ApprovalState.PENDING:
            raise InvalidStateError(f"approval {d.approval_id} was already {state}")
        queued = self._queued(conn, d.approval_id, run_id)
        if queued is not None:
            raise InvalidStateError(
                f"approval {d.approval_id} was already {queued}: that decision is waiting "
                "for the worker to apply it, so this one would be ignored"
            )
        payload = {**d.payload, "approval_id": d.approval_id}
        return queue_command(conn, run_id, d.kind, payload, self.now())

    @staticmethod
    def _queued(conn: Connection, approval_id: str, run_id: str) -> str | None:
        c = commands.c
        stmt = (
            select(c.kind, c.payload)
            .where(
                c.run_id == run_id,
                c.applied_at.is_(None),
                c.kind.in_([str(k) for k in _DECISIONS]),
            )
            .order_by(c.id)
        )
        for kind, text in conn.execute(stmt).all():
            try:
                payload = json.loads(text or "null")
            except ValueError:
                continue
            if isinstance(payload, dict) and payload.get("approval_id") == approval_id:
                if kind == CommandKind.REJECT:
                    return "rejected"
                return "edited and approved" if "arguments" in payload else "approved"
        return None
