"""The SQL store: the engine's journal port, plus what the worker and the client need.

The journal's hot path sends prepared driver-level statements over the tables declared in
:mod:`~desktop_agent.persistence.tables`: the ORM costs more per row than an fsync. On SQLite,
:meth:`SqlStore.commit` goes further and runs its statements on the pooled DB-API connection
itself (see :meth:`SqlStore._write_journal`). Every public method owns its transaction; one
call is one commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from desktop_agent.domain import (
    AgentSpec,
    Approval,
    ApprovalState,
    Command,
    CommandKind,
    EffectClass,
    Lease,
    Run,
    RunEvent,
    RunEventKind,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.domain.errors import NotFoundError, StorageError
from desktop_agent.engine.ports import RunPatch, Snapshot, StepIntent, StepOutcome
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import (
    approval_from_row,
    approval_params,
    command_from_row,
    dumps,
    event_from_row,
    loads,
    run_from_row,
    run_params,
    step_from_row,
)
from desktop_agent.persistence.sqlbase import _now, storage_error
from desktop_agent.persistence.workers import FENCE, WorkerQueries, lease_lost

_Exec = Callable[[str, dict[str, Any]], int]
"""Runs one statement (named ``:param`` style) in the current transaction; returns rowcount."""


_INSERT_STEP = """
INSERT INTO steps (run_id, seq, kind, name, status, effect, attempt, input, output, error,
                   partial_text, started_at, finished_at)
VALUES (:run_id, :seq, :kind, :name, :status, :effect, :attempt, :input, :output, NULL,
        '', :now, :finished_at)
"""

_FINISH_STEP = """
UPDATE steps SET status = :status, output = :output, error = :error, finished_at = :now,
       input_tokens = :it, output_tokens = :ot, cache_write_tokens = :cw,
       cache_read_tokens = :cr, cost_usd = :cost
WHERE run_id = :run_id AND seq = :seq
"""

_RUN_PROGRESS = """
UPDATE runs SET last_seq = CASE WHEN last_seq > :seq THEN last_seq ELSE :seq END,
       cost_usd = cost_usd + :cost, input_tokens = input_tokens + :it,
       output_tokens = output_tokens + :ot, cache_write_tokens = cache_write_tokens + :cw,
       cache_read_tokens = cache_read_tokens + :cr, active_seconds = active_seconds + :active
WHERE id = :run_id
"""

_RUN_TOTALS = _RUN_PROGRESS.replace("UPDATE runs SET ", "UPDATE runs SET updated_at = :now, ")

TOUCH_EVERY_S = 1.0
"""While a run only adds steps, its ``updated_at`` moves at most this often (SQLite).

``updated_at`` is indexed (the GUI's change token and incremental reads use it), so moving
it costs one more page in every commit: a quarter of a journal step's pages. The steps
themselves, ``last_seq`` and the totals are written at every commit; the GUI notices new
steps through :meth:`SqlStore.change_token` (the newest step's rowid) and re-reads running
runs whatever their ``updated_at``. A commit that changes anything else about the run (what
:meth:`SqlStore._apply_patch` writes: status, wait, budget, ...; applied commands;
approvals), or adds no step, moves it at once.
"""

_DELETE_SNAPSHOT = "DELETE FROM snapshots WHERE run_id = :id"

_INSERT_SNAPSHOT = (
    "INSERT INTO snapshots (run_id, seq, state, created_at) VALUES (:id, :seq, :state, :now)"
)

_APPLY_COMMAND = "UPDATE commands SET applied_at = :now, result = :r WHERE id = :id"

_RUN_COLUMNS = (
    "id, goal, title, status, wait_reason, wake_at, status_message, attention_seq, spec, "
    "definition_hash, workspace, budget, created_at, updated_at, started_at, finished_at, "
    "last_seq, cost_usd, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, "
    "active_seconds, lease_owner, lease_expires_at, lease_epoch, parent_id, schedule_id"
)


class SqlStore(WorkerQueries):
    """Runs, journals, approvals, commands and workers in one SQL database.

    Args:
        db: an opened, migrated database.
        clock: time source for bookkeeping columns (``updated_at``, ``created_at``).
    """

    def __init__(self, db: Database, clock: Callable[[], float] = _now) -> None:
        super().__init__(db, clock)
        self._touched: dict[str, float] = {}
        """When each run's ``updated_at`` was last moved by :meth:`commit` (SQLite)."""

    # ------------------------------------------------------------------ journal port

    def get_run(self, run_id: str) -> Run:
        """The run; raises NotFoundError."""
        rows = self._read(
            lambda c: self._rows(c, f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = :id", id=run_id)
        )
        if not rows:
            raise NotFoundError(f"no run {run_id!r}")
        return run_from_row(rows[0])

    def load_snapshot(self, run_id: str) -> Snapshot | None:
        """The newest snapshot of the run, if any."""
        rows = self._read(
            lambda c: self._rows(
                c, "SELECT seq, state FROM snapshots WHERE run_id = :id", id=run_id
            )
        )
        if not rows:
            return None
        return Snapshot(seq=rows[0]["seq"], state=loads(rows[0]["state"]))

    def load_steps(self, run_id: str, from_seq: int = 1, limit: int | None = None) -> list[Step]:
        """Steps with ``seq >= from_seq`` in order."""
        sql = "SELECT * FROM steps WHERE run_id = :id AND seq >= :s ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._read(lambda c: self._rows(c, sql, id=run_id, s=from_seq))
        return [step_from_row(r) for r in rows]

    def get_step(self, run_id: str, seq: int) -> Step:
        """One step; raises NotFoundError."""
        steps = self.load_steps(run_id, seq, limit=1)
        if not steps or steps[0].seq != seq:
            raise NotFoundError(f"run {run_id} has no step {seq}")
        return steps[0]

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
        """Write all of it in one transaction (one fsync).

        With ``lease`` (a worker's write), only while the worker still holds the run at
        the lease's epoch, checked first in the same transaction: else nothing is written
        and :class:`~desktop_agent.domain.errors.LeaseLost` is raised. The analyst's side
        writes without a lease.
        """
        now = self.now()
        touch = (
            self._pg
            or not intents
            or bool(applied_commands)
            or bool(approvals)
            or not 0.0 <= now - self._touched.get(run_id, -TOUCH_EVERY_S) < TOUCH_EVERY_S
        )

        def txn(run: _Exec) -> None:
            nonlocal touch
            if lease is not None and run(FENCE, _fence(run_id, lease)) != 1:
                raise lease_lost(run_id, lease)
            # A patch that changes the run's row (status, wait, budget, ...) moves updated_at.
            if patch is not None and self._apply_patch(run, run_id, patch):
                touch = True
            seq = 0
            cost, it, ot, cw, cr = 0.0, 0, 0, 0, 0
            if outcome is not None:
                u = outcome.usage
                cost = outcome.cost_usd
                if u is not None:
                    it, ot = u.input_tokens, u.output_tokens
                    cw, cr = u.cache_write_tokens, u.cache_read_tokens
                run(
                    _FINISH_STEP,
                    {
                        "status": str(outcome.status),
                        "output": dumps(outcome.output),
                        "error": outcome.error,
                        "now": now,
                        "run_id": run_id,
                        "seq": outcome.seq,
                        "cost": cost,
                        "it": it,
                        "ot": ot,
                        "cw": cw,
                        "cr": cr,
                    },
                )
                seq = outcome.seq
            for intent in intents:
                finished = intent.status != StepStatus.STARTED
                run(
                    _INSERT_STEP,
                    {
                        "run_id": run_id,
                        "seq": intent.seq,
                        "kind": str(intent.kind),
                        "name": intent.name,
                        "status": str(intent.status),
                        "effect": str(intent.effect) if intent.effect else None,
                        "attempt": intent.attempt,
                        "input": dumps(intent.input),
                        "output": dumps(intent.output) if finished else None,
                        "now": now,
                        "finished_at": now if finished else None,
                    },
                )
                seq = max(seq, intent.seq)
            run(
                _RUN_TOTALS if touch else _RUN_PROGRESS,
                {
                    "now": now,
                    "seq": seq,
                    "active": patch.add_active_seconds if patch else 0.0,
                    "run_id": run_id,
                    "cost": cost,
                    "it": it,
                    "ot": ot,
                    "cw": cw,
                    "cr": cr,
                },
            )
            if snapshot is not None:
                run(_DELETE_SNAPSHOT, {"id": run_id})
                run(
                    _INSERT_SNAPSHOT,
                    {"id": run_id, "seq": snapshot.seq, "state": dumps(snapshot.state), "now": now},
                )
            for cmd_id, result in applied_commands:
                run(_APPLY_COMMAND, {"now": now, "r": result, "id": cmd_id})
            for a in approvals:
                self._upsert_approval(run, a)

        self._write_journal(txn)
        if (
            patch is not None
            and patch.status is not None
            and (patch.status.is_terminal or patch.status == RunStatus.STOPPED)
        ):
            self._touched.pop(run_id, None)
        elif touch and not self._pg:
            self._touched[run_id] = now
        self._ledger(run_id, intents)

    def _ledger(self, run_id: str, intents: Sequence[StepIntent]) -> None:
        """Append the effects among ``intents`` to the effect ledger (SQLite).

        Called right after the transaction that started them committed (one that failed or
        was refused writes no line) and before returning, so before the engine can start
        them: a restore from an older backup reads the ledger to find them.

        Raises:
            StorageError: the ledger cannot be written (the effect must then not start).
        """
        path = self.db.settings.sqlite_path
        if intents and path is not None:
            from desktop_agent.persistence.ledger import EffectLedger

            EffectLedger.beside(path).record(run_id, intents)

    def _write_journal(self, fn: Callable[[_Exec], None]) -> None:
        """One write transaction of the journal's hot path.

        On SQLite the statements run on the pooled DB-API connection itself, between a
        ``BEGIN IMMEDIATE`` and a ``COMMIT`` of our own, with the same SQL and named
        parameters: SQLAlchemy's per-transaction and per-statement machinery costs more
        than the commit itself at ``synchronous=NORMAL``, and half as much again as the
        fsync at ``FULL``. Errors are mapped as :meth:`_write` maps them. Elsewhere
        (PostgreSQL) this is an ordinary :meth:`_write`.
        """
        if self._pg:
            self._write(lambda conn: fn(lambda sql, params: self._exec(conn, sql, **params)))
            return
        last: tuple[str, dict[str, Any]] = ("BEGIN IMMEDIATE", {})
        raw = self.db.writer.raw_connection()
        try:
            cursor = raw.cursor()

            def run(sql: str, params: dict[str, Any]) -> int:
                nonlocal last
                last = (sql, params)
                cursor.execute(sql, params)
                return int(cursor.rowcount)

            try:
                cursor.execute("BEGIN IMMEDIATE")
                fn(run)
                last = ("COMMIT", {})
                cursor.execute("COMMIT")
            except BaseException:
                raw.rollback()  # a no-op when SQLite already rolled back
                raise
            finally:
                cursor.close()
        except sqlite3.Error as exc:
            wrapped = DBAPIError.instance(last[0], last[1], exc, sqlite3.Error)
            if isinstance(wrapped, OperationalError):
                raise storage_error(wrapped) from exc
            raise wrapped from exc
        finally:
            raw.close()  # back to the pool

    def _apply_patch(self, run: _Exec, run_id: str, p: RunPatch) -> bool:
        """Write the patch's changes to the run's row (its time worked aside); whether any."""
        sets: list[str] = []
        params: dict[str, Any] = {"id": run_id}

        def put(col: str, value: Any) -> None:
            sets.append(f"{col} = :{col}")
            params[col] = value

        if p.status is not None:
            put("status", str(p.status))
            if p.status != RunStatus.WAITING:
                put("wait_reason", None)
                put("wake_at", None)
        if p.clear_wait:
            params.setdefault("wait_reason", None)
            params.setdefault("wake_at", None)
            if "wait_reason = :wait_reason" not in sets:
                sets += ["wait_reason = :wait_reason", "wake_at = :wake_at"]
        if p.wait_reason is not None:
            params["wait_reason"] = str(p.wait_reason)
            params["wake_at"] = p.wake_at
            if "wait_reason = :wait_reason" not in sets:
                sets += ["wait_reason = :wait_reason", "wake_at = :wake_at"]
        if p.status_message is not None:
            put("status_message", p.status_message)
        if p.attention_seq is not None:
            put("attention_seq", p.attention_seq)
        elif p.clear_attention:
            put("attention_seq", None)
        if p.budget is not None:
            put("budget", dumps(p.budget))
        if p.started_at is not None:
            put("started_at", p.started_at)
        if p.finished_at is not None:
            put("finished_at", p.finished_at)
        if p.spec is not None:
            put("spec", dumps(p.spec))
            put("definition_hash", AgentSpec.from_json(p.spec).definition_hash)
        if sets:
            run(f"UPDATE runs SET {', '.join(sets)} WHERE id = :id", params)
        return bool(sets)

    def _upsert_approval(self, run: _Exec, a: Approval) -> None:
        params = approval_params(a)
        n = run(
            "UPDATE approvals SET state = :state, decided_arguments = :decided_arguments, "
            "decision_note = :decision_note, decided_at = :decided_at WHERE id = :id",
            {
                k: params[k]
                for k in ("state", "decided_arguments", "decision_note", "decided_at", "id")
            },
        )
        if n == 0:
            cols = ", ".join(params)
            vals = ", ".join(f":{k}" for k in params)
            run(f"INSERT INTO approvals ({cols}) VALUES ({vals})", params)

    def restart_step(
        self, run_id: str, seq: int, *, salvaged: str | None, lease: Lease | None = None
    ) -> int:
        """Count another attempt of an in-flight step; keep its partial text and cost.

        What the interrupted attempt streamed and spent (saved while it streamed) moves to
        the step's salvage, and its cost is added to the run's totals: it was paid for.
        Fenced by ``lease`` as :meth:`commit` is. An effect started again gets its line in
        the effect ledger, as a new one does in :meth:`commit`: a restore from a backup
        older than this attempt must know it may have happened.
        """

        def txn(conn: Connection) -> tuple[int, StepIntent]:
            self._check_fence(conn, run_id, lease)
            rows = self._rows(
                conn,
                "SELECT kind, name, effect, input, attempt, salvaged, input_tokens, "
                "output_tokens, cache_write_tokens, cache_read_tokens, cost_usd "
                "FROM steps WHERE run_id = :id AND seq = :seq",
                id=run_id,
                seq=seq,
            )
            if not rows:
                raise NotFoundError(f"run {run_id} has no step {seq}")
            r = rows[0]
            attempt = int(r["attempt"]) + 1
            again = StepIntent(
                seq=seq,
                kind=StepKind(r["kind"]),
                name=str(r["name"]),
                input=loads(r["input"]),
                effect=EffectClass(r["effect"]) if r["effect"] else None,
                attempt=attempt,
            )
            kept = list(loads(r["salvaged"]) or [])
            usage = Usage(
                int(r["input_tokens"]),
                int(r["output_tokens"]),
                int(r["cache_write_tokens"]),
                int(r["cache_read_tokens"]),
            )
            cost = float(r["cost_usd"])
            spent = {
                "it": usage.input_tokens,
                "ot": usage.output_tokens,
                "cw": usage.cache_write_tokens,
                "cr": usage.cache_read_tokens,
                "cost": cost,
            }
            if salvaged or cost or usage.total:
                kept.append(
                    {
                        "text": salvaged or "",
                        "attempt": attempt - 1,
                        "cost_usd": cost,
                        "usage": usage.to_json(),
                    }
                )
            self._exec(
                conn,
                "UPDATE steps SET attempt = :a, salvaged = :s, partial_text = '', "
                "input_tokens = 0, output_tokens = 0, cache_write_tokens = 0, "
                "cache_read_tokens = 0, cost_usd = 0 WHERE run_id = :id AND seq = :seq",
                a=attempt,
                s=dumps(kept) if kept else None,
                id=run_id,
                seq=seq,
            )
            self._exec(
                conn,
                "UPDATE runs SET updated_at = :now, cost_usd = cost_usd + :cost, "
                "input_tokens = input_tokens + :it, output_tokens = output_tokens + :ot, "
                "cache_write_tokens = cache_write_tokens + :cw, "
                "cache_read_tokens = cache_read_tokens + :cr WHERE id = :id",
                now=self.now(),
                id=run_id,
                **spent,
            )
            return attempt, again

        attempt, again = self._write(txn)
        self._ledger(run_id, [again])
        return attempt

    def save_partial(
        self,
        run_id: str,
        seq: int,
        text: str,
        usage: Usage | None = None,
        cost_usd: float = 0.0,
        lease: Lease | None = None,
    ) -> None:
        """Persist what an in-flight model call streamed and spent so far.

        Fenced by ``lease`` as :meth:`commit` is: a worker that lost the run learns it here,
        while it streams.
        """

        def txn(conn: Connection) -> None:
            self._check_fence(conn, run_id, lease)
            u = usage or Usage()
            self._exec(
                conn,
                "UPDATE steps SET partial_text = :t, input_tokens = :it, output_tokens = :ot, "
                "cache_write_tokens = :cw, cache_read_tokens = :cr, cost_usd = :cost "
                "WHERE run_id = :id AND seq = :seq AND status = 'started'",
                t=text,
                it=u.input_tokens,
                ot=u.output_tokens,
                cw=u.cache_write_tokens,
                cr=u.cache_read_tokens,
                cost=cost_usd,
                id=run_id,
                seq=seq,
            )
            self._exec(
                conn, "UPDATE runs SET updated_at = :now WHERE id = :id", now=self.now(), id=run_id
            )

        self._write(txn)

    def _check_fence(self, conn: Connection, run_id: str, lease: Lease | None) -> None:
        """Raise LeaseLost (rolling back) unless ``lease`` still holds the run (None: no check)."""
        if lease is not None and self._exec(conn, FENCE, **_fence(run_id, lease)) != 1:
            raise lease_lost(run_id, lease)

    def record_event(
        self,
        run_id: str,
        kind: RunEventKind,
        message: str,
        *,
        seq: int | None = None,
        data: Any = None,
        add_usage: Usage | None = None,
        add_cost_usd: float = 0.0,
    ) -> None:
        """Add an event to the run, for the analyst (never fenced: it changes no journal).

        The run's ``updated_at`` moves so that the views read the run again and show it.
        ``add_usage`` and ``add_cost_usd`` go to the run's totals in the same transaction:
        what a worker that lost the run spent on it after its last fenced save (nothing
        else would count it). The journal, its steps and the run's status are not touched.
        """
        u = add_usage or Usage()

        def txn(conn: Connection) -> None:
            now = self.now()
            self._exec(
                conn,
                "INSERT INTO run_events (run_id, seq, kind, message, data, created_at) "
                "VALUES (:id, :seq, :kind, :m, :data, :now)",
                id=run_id,
                seq=seq,
                kind=str(kind),
                m=message,
                data=dumps(data),
                now=now,
            )
            self._exec(
                conn,
                "UPDATE runs SET updated_at = :now, cost_usd = cost_usd + :cost, "
                "input_tokens = input_tokens + :it, output_tokens = output_tokens + :ot, "
                "cache_write_tokens = cache_write_tokens + :cw, "
                "cache_read_tokens = cache_read_tokens + :cr WHERE id = :id",
                now=now,
                cost=add_cost_usd,
                it=u.input_tokens,
                ot=u.output_tokens,
                cw=u.cache_write_tokens,
                cr=u.cache_read_tokens,
                id=run_id,
            )

        self._write(txn)

    def run_events(self, run_id: str) -> list[RunEvent]:
        """The run's events, oldest first."""
        rows = self._read(
            lambda c: self._rows(
                c, "SELECT * FROM run_events WHERE run_id = :id ORDER BY id", id=run_id
            )
        )
        return [event_from_row(r) for r in rows]

    def pending_commands(self, run_id: str) -> list[Command]:
        """Commands not yet applied, oldest first."""
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT * FROM commands WHERE run_id = :id AND applied_at IS NULL ORDER BY id",
                id=run_id,
            )
        )
        return [command_from_row(r) for r in rows]

    def get_approvals(self, run_id: str, seq: int) -> list[Approval]:
        """Approval records created by step ``seq``."""
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT * FROM approvals WHERE run_id = :id AND seq = :seq ORDER BY id",
                id=run_id,
                seq=seq,
            )
        )
        return [approval_from_row(r) for r in rows]

    def list_run_approvals(self, run_id: str) -> list[Approval]:
        """Every approval record of the run."""
        return self.list_approvals(None, run_id=run_id)

    # ------------------------------------------------------------------ client side

    def create_run(self, run: Run) -> None:
        """Insert a new run (normally ``queued``)."""
        params = run_params(run)
        cols = ", ".join(params)
        vals = ", ".join(f":{k}" for k in params)
        try:
            self._write(
                lambda c: self._exec(c, f"INSERT INTO runs ({cols}) VALUES ({vals})", **params)
            )
        except IntegrityError:
            raise StorageError(f"a run with id {run.id} already exists") from None

    def list_runs(
        self,
        statuses: Iterable[RunStatus] | None = None,
        limit: int = 500,
        search: str | None = None,
    ) -> list[Run]:
        """Runs, newest first."""
        where = []
        params: dict[str, Any] = {}
        if statuses is not None:
            names = [str(s) for s in statuses]
            where.append("status IN (" + ", ".join(f":s{i}" for i in range(len(names))) + ")")
            params.update({f"s{i}": n for i, n in enumerate(names)})
        if search:
            where.append("(lower(goal) LIKE :q OR lower(id) LIKE :q)")
            params["q"] = f"%{search.lower()}%"
        sql = f"SELECT {_RUN_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += f" ORDER BY created_at DESC LIMIT {int(limit)}"
        return [run_from_row(r) for r in self._read(lambda c: self._rows(c, sql, **params))]

    def find_run(self, prefix: str) -> Run:
        """A run by id or unique id prefix; raises NotFoundError."""
        rows = self._read(
            lambda c: self._rows(
                c,
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE id LIKE :p ORDER BY id LIMIT 2",
                p=prefix.replace("%", "").replace("_", r"\_") + "%",
            )
        )
        exact = [r for r in rows if r["id"] == prefix]
        if exact:
            return run_from_row(exact[0])
        if len(rows) == 1:
            return run_from_row(rows[0])
        if not rows:
            raise NotFoundError(f"no run {prefix!r}; `desktop-agent runs` lists them")
        raise NotFoundError(f"{prefix!r} matches several runs; give more of the id")

    def add_command(self, run_id: str, kind: CommandKind, payload: Any = None) -> int:
        """Queue a command for the worker; returns its id."""

        def txn(conn: Connection) -> int:
            now = self.now()
            if not self._rows(conn, "SELECT id FROM runs WHERE id = :id", id=run_id):
                raise NotFoundError(f"no run {run_id!r}")
            self._exec(
                conn,
                "INSERT INTO commands (run_id, kind, payload, created_at, result) "
                "VALUES (:id, :k, :p, :now, '')",
                id=run_id,
                k=str(kind),
                p=dumps(payload),
                now=now,
            )
            self._exec(conn, "UPDATE runs SET updated_at = :now WHERE id = :id", now=now, id=run_id)
            rows = self._rows(
                conn, "SELECT max(id) AS id FROM commands WHERE run_id = :id", id=run_id
            )
            return int(rows[0]["id"])

        return self._write(txn)

    def get_command(self, command_id: int) -> Command:
        """One command row."""
        rows = self._read(
            lambda c: self._rows(c, "SELECT * FROM commands WHERE id = :id", id=command_id)
        )
        if not rows:
            raise NotFoundError(f"no command {command_id}")
        return command_from_row(rows[0])

    def list_approvals(
        self, state: ApprovalState | None = ApprovalState.PENDING, run_id: str | None = None
    ) -> list[Approval]:
        """Approvals, oldest first."""
        where, params = [], {}
        if state is not None:
            where.append("state = :st")
            params["st"] = str(state)
        if run_id is not None:
            where.append("run_id = :rid")
            params["rid"] = run_id
        sql = "SELECT * FROM approvals"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at, id"
        return [approval_from_row(r) for r in self._read(lambda c: self._rows(c, sql, **params))]

    def get_approval(self, approval_id: str) -> Approval:
        """One approval; raises NotFoundError."""
        rows = self._read(
            lambda c: self._rows(c, "SELECT * FROM approvals WHERE id = :id", id=approval_id)
        )
        if not rows:
            raise NotFoundError(
                f"no approval {approval_id!r}; `desktop-agent approvals` lists them"
            )
        return approval_from_row(rows[0])

    def change_token(self) -> tuple[int, float, int, int]:
        """A cheap value that changes whenever anything the GUI shows changes.

        On SQLite the newest step's rowid is part of it: a commit that only adds steps moves
        ``updated_at`` at most once a second (see :data:`TOUCH_EVERY_S`).
        """
        newest_step = "0" if self._pg else "(SELECT max(rowid) FROM steps)"
        rows = self._read(
            lambda c: self._rows(
                c,
                "SELECT (SELECT count(*) FROM runs) AS n, "
                "(SELECT max(updated_at) FROM runs) AS u, "
                "(SELECT max(heartbeat_at) FROM workers) AS h, "
                f"{newest_step} AS s",
            )
        )
        r = rows[0]
        return int(r["n"] or 0), float(r["u"] or 0.0), int(r["h"] or 0), int(r["s"] or 0)

    def resume_waiting_for(self, reason: str) -> int:
        """Queue a resume command for every run waiting for ``reason``; returns how many."""
        runs = [
            r for r in self.list_runs([RunStatus.WAITING], limit=100_000) if r.wait_reason == reason
        ]
        for run in runs:
            self.add_command(run.id, CommandKind.RESUME, {"why": f"{reason} resolved"})
        return len(runs)


def _fence(run_id: str, lease: Lease) -> dict[str, Any]:
    return {"id": run_id, "owner": lease.owner, "epoch": lease.epoch}
