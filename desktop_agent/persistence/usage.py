"""Spend across runs: the usage totals' rows, the month's total and the cap's reservations.

Days are local calendar days (the machine's time zone). A step's spend counts on the day
it finished (or started, while in flight). Runs archived and removed from the database
keep their totals in the search index (``search_runs``: cost, model, schedule, batch, but
no tokens and no steps): they count on the day they were created, the only date kept.

Each spending step also says how it was sent (:data:`ECONOMY_MARK` in its intent: a
request of a Message Batch, else streamed) and, where the API split them, how many of its
cache writes were for an hour (``api.cache_write_1h`` in its output), read in SQL so that
neither the intents' tool lists nor the answers' text leave the database.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from sqlalchemy import JSON, and_, case, cast, delete, func, insert, null, or_, select, true
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from desktop_agent.domain import DEMO_MODEL, RunStatus
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import outside_cap
from desktop_agent.persistence.readmodels import CHUNK, RunKeys
from desktop_agent.persistence.tables import runs, search_runs, spend_reservations, steps

ECONOMY_MARK = '"mode":"economy"'
"""What an economy-mode model step's intent holds (its ``input`` column is compact JSON)."""


class SpendRow(NamedTuple):
    """What one step spent (a model call or a compaction), and when.

    Attributes:
        model: the model the step asked (the step's name; "" when unknown).
        economy: the step was a request of a Message Batch (its cost is the batch price).
        cache_write_1h_tokens: how many of ``cache_write_tokens`` were written for an
            hour, as the API reported them (None: the step does not say).
    """

    run_id: str
    finished_at: float
    cost_usd: float
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    model: str = ""
    economy: bool = False
    cache_write_1h_tokens: int | None = None


class ArchivedSpend(NamedTuple):
    """What an archived run spent in all, and how usage groups it."""

    run_id: str
    created_at: float
    cost_usd: float
    model: str
    schedule_id: str | None
    batch_id: str | None


def spend_since(
    db: Database, since: float
) -> tuple[list[SpendRow], list[RunKeys], list[ArchivedSpend]]:
    """Steps that spent since ``since`` with their runs' keys, and archived runs since then.

    Only steps with a cost or tokens are read (model calls, compactions): tool calls spend
    nothing, so a day of busy runs is a few thousand rows, not the journal. Of each, the
    columns of its spend, its name, whether its intent holds :data:`ECONOMY_MARK`, and
    the one number of its output that says its hour-long cache writes.
    """
    when = func.coalesce(steps.c.finished_at, steps.c.started_at)
    economy = case((steps.c.input.like(f"%{ECONOMY_MARK}%"), 1), else_=0)
    r = search_runs.c
    archived = select(r.run_id, r.created_at, r.cost_usd, r.model, r.schedule_id, r.batch_id).where(
        r.archived == true(), r.created_at >= since, r.cost_usd > 0
    )
    with db.read() as conn:
        spent = (
            select(
                steps.c.run_id,
                when,
                steps.c.cost_usd,
                steps.c.input_tokens,
                steps.c.output_tokens,
                steps.c.cache_write_tokens,
                steps.c.cache_read_tokens,
                steps.c.name,
                economy,
                _one_hour_writes(conn.dialect.name),
            )
            .where(
                when >= since,
                or_(steps.c.cost_usd > 0, steps.c.input_tokens > 0, steps.c.output_tokens > 0),
            )
            .order_by(when)
        )
        rows = [
            SpendRow(
                run_id=str(row[0]),
                finished_at=float(row[1]),
                cost_usd=float(row[2]),
                input_tokens=int(row[3]),
                output_tokens=int(row[4]),
                cache_write_tokens=int(row[5]),
                cache_read_tokens=int(row[6]),
                model=str(row[7] or ""),
                economy=bool(row[8]),
                cache_write_1h_tokens=_count(row[9]),
            )
            for row in conn.execute(spent)
        ]
        ids = sorted({row.run_id for row in rows})
        keys: list[RunKeys] = []
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            stmt = select(runs.c.id, runs.c.spec, runs.c.schedule_id, runs.c.parent_id).where(
                runs.c.id.in_(chunk)
            )
            keys += [RunKeys(*row) for row in conn.execute(stmt)]
        gone = [ArchivedSpend(*row) for row in conn.execute(archived)]
    return rows, keys, gone


ONE_HOUR_KEY = '"cache_write_1h"'
"""The key of the hour-long cache writes in a model step's output (under ``api``)."""


def _one_hour_writes(dialect: str) -> ColumnElement[Any]:
    """The step's ``api.cache_write_1h`` read from its output in SQL (NULL: not there).

    SQLite and PostgreSQL read the JSON themselves; only outputs that name the key are
    parsed (and, on SQLite, only valid JSON: a malformed output reads as NULL). Another
    database reads NULL: the writes count as 5-minute ones.
    """
    output = steps.c.output
    named = output.like(f"%{ONE_HOUR_KEY}%")
    if dialect == "sqlite":
        value = func.json_extract(output, "$.api.cache_write_1h")
        return case((and_(named, func.json_valid(output) == 1), value), else_=null())
    if dialect == "postgresql":
        value = func.json_extract_path_text(cast(output, JSON), "api", "cache_write_1h")
        return case((named, value), else_=null())
    return null()


def _count(value: object) -> int | None:
    """A token count read from JSON (a number, or its text on PostgreSQL), or None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return max(0, int(float(str(value))))
    except ValueError:
        return None


def month_start(now: float) -> float:
    """Midnight (local time) of the first day of the calendar month containing ``now``."""
    t = time.localtime(now)
    return time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))


MANY_RUNS = 50
"""More runs than this to sum again (a worker's first check): one grouped pass instead."""

TOUCH_MARGIN_S = 5.0
"""A run's ``updated_at`` lags its last step by at most a second (``TOUCH_EVERY_S``, SQLite)."""


RESERVATION_TTL_S = 3 * 3600.0
"""A reservation older than this no longer counts: its worker died during the call (no
model call streams for hours) and the run was not taken over since."""

SPEND_LOCK = 0x5D5E_7A11
"""The PostgreSQL advisory lock every reservation takes (SQLite's write lock serves there)."""


class Reservation(NamedTuple):
    """The answer to :meth:`MonthSpend.reserve`.

    Attributes:
        granted: whether the cap leaves room for the amount (held when asked to).
        spent_usd: what runs spent this month.
        held_usd: what other runs' calls in flight hold.
        cap_usd: the cap that was checked (None: none is set).
        token: the reservation's own id when one was made (for :meth:`MonthSpend.release`).
    """

    granted: bool
    spent_usd: float
    held_usd: float
    cap_usd: float | None
    token: str | None


class MonthSpend:
    """The monthly spend cap's port: the cap from the settings, the month's total from here.

    A model call must not scan the journal, so the total is kept per run: one indexed read
    of the runs touched this month (id and running cost), and a sum over one run's steps
    (its primary key) only for a run whose cost moved since the last check, typically the
    run asking. Archived runs created this month count with their whole cost. Runs of the
    offline demo model count nothing (their dollars are simulated), nor do imported Claude
    Code sessions (their dollars were spent elsewhere, before desktop-agent saw them).

    Calls in flight hold their worst case (:meth:`reserve`), so that runs asking at the same
    moment, in one worker or several, cannot each find room for the same last dollars.
    """

    def __init__(self, db: Database, cap: Callable[[], float | None]) -> None:
        self.db = db
        self._cap = cap
        self._lock = threading.Lock()
        self._month = 0.0
        self._runs: dict[str, tuple[float, float]] = {}  # run id -> (run cost, month's part)
        self._demo: dict[str, bool] = {}  # run id -> outside the cap (demo, import; fixed)

    def cap_usd(self) -> float | None:
        """The cap as the settings say now."""
        return self._cap()

    def month_spent_usd(self, now: float) -> float:
        """Dollars spent since the start of ``now``'s month (see the class docstring)."""
        with self._lock, self.db.read() as conn:
            return self._total(conn, month_start(now))

    def reserve(
        self,
        run_id: str,
        amount_usd: float,
        now: float,
        *,
        hold: bool = True,
        force: bool = False,
    ) -> Reservation:
        """Hold ``amount_usd`` for ``run_id``'s next model call if the cap leaves room.

        One transaction reads the other runs' reservations, then the month's spend, and
        adds this run's reservation (replacing one it held): SQLite's write lock, or an
        advisory lock on PostgreSQL, makes the check and the hold one step for every
        worker. Reservations are read first: a call that ends between the two reads has
        its cost in the journal before its reservation goes (:meth:`release` comes after
        the journal's commit), so it is counted at least once, never zero times.
        ``hold=False`` only checks (a run deciding whether its budget wait can end);
        ``force`` holds the amount whatever is left (a call already under way, being
        recovered, must still count for the others).
        """
        cap = self._cap()
        r = spend_reservations.c
        with self._lock, self.db.write() if hold else self.db.read() as conn:
            if hold and conn.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SPEND_LOCK})")
            held = self._held(conn, run_id, now)
            spent = self._total(conn, month_start(now))
            granted = force or cap is None or spent + held + amount_usd <= cap
            token = None
            if granted and hold:
                token = secrets.token_hex(8)
                conn.execute(delete(spend_reservations).where(r.run_id == run_id))
                conn.execute(
                    insert(spend_reservations).values(
                        run_id=run_id, token=token, amount_usd=amount_usd, reserved_at=now
                    )
                )
        return Reservation(granted, spent, held, cap, token)

    def release(self, run_id: str, token: str) -> None:
        """Drop ``run_id``'s reservation ``token``: its call's cost is in the journal.

        A newer reservation, made by a worker that took the run over, stays.
        """
        r = spend_reservations.c
        with self.db.write() as conn:
            conn.execute(delete(spend_reservations).where(r.run_id == run_id, r.token == token))

    @staticmethod
    def _held(conn: Connection, run_id: str, now: float) -> float:
        """What other runs' calls in flight hold (runs still running, reservations not stale)."""
        r = spend_reservations.c
        stmt = (
            select(func.coalesce(func.sum(r.amount_usd), 0.0))
            .select_from(spend_reservations.join(runs, runs.c.id == r.run_id))
            .where(
                r.run_id != run_id,
                r.reserved_at >= now - RESERVATION_TTL_S,
                runs.c.status == str(RunStatus.RUNNING),
            )
        )
        return float(conn.execute(stmt).scalar_one())

    def _total(self, conn: Connection, start: float) -> float:
        """The month's spend from ``start`` (the caller holds ``self._lock``)."""
        r = search_runs.c
        touched = select(runs.c.id, runs.c.cost_usd).where(
            runs.c.updated_at >= start - TOUCH_MARGIN_S, runs.c.cost_usd > 0
        )
        archived = select(func.coalesce(func.sum(r.cost_usd), 0.0)).where(
            r.archived == true(),
            r.created_at >= start,
            or_(r.model.is_(None), r.model != DEMO_MODEL),
        )
        if start != self._month:
            self._month, self._runs, self._demo = start, {}, {}
        total = float(conn.execute(archived).scalar_one())
        moved: dict[str, float] = {}
        rows = [(str(run_id), float(cost)) for run_id, cost in conn.execute(touched)]
        self._learn_demo(conn, [run_id for run_id, _ in rows])
        present = [(run_id, cost) for run_id, cost in rows if not self._demo.get(run_id, False)]
        for run_id, cost in present:
            known = self._runs.get(run_id)
            if known is None or known[0] != cost:
                moved[str(run_id)] = float(cost)
        for run_id, part in self._parts(conn, start, moved).items():
            self._runs[run_id] = (moved[run_id], part)
        total += sum(self._runs[str(r)][1] for r, _cost in present)
        return total

    def _learn_demo(self, conn: Connection, run_ids: list[str]) -> None:
        """Note which of ``run_ids`` (not known yet) stay outside the cap (demo, imports)."""
        unknown = [run_id for run_id in run_ids if run_id not in self._demo]
        for first in range(0, len(unknown), CHUNK):
            chunk = unknown[first : first + CHUNK]
            for run_id, spec in conn.execute(
                select(runs.c.id, runs.c.spec).where(runs.c.id.in_(chunk))
            ):
                self._demo[str(run_id)] = outside_cap(spec)

    @staticmethod
    def _parts(conn: Connection, start: float, moved: dict[str, float]) -> dict[str, float]:
        """This month's spend of each run in ``moved``: by key, or one grouped pass if many."""
        when = func.coalesce(steps.c.finished_at, steps.c.started_at)
        spent = func.coalesce(func.sum(steps.c.cost_usd), 0.0)
        parts = dict.fromkeys(moved, 0.0)
        if len(moved) > MANY_RUNS:
            grouped = select(steps.c.run_id, spent).where(when >= start).group_by(steps.c.run_id)
            for run_id, part in conn.execute(grouped).all():
                if run_id in parts:
                    parts[run_id] = float(part)
            return parts
        for run_id in moved:
            one = select(spent).where(steps.c.run_id == run_id, when >= start)
            parts[run_id] = float(conn.execute(one).scalar_one())
        return parts
