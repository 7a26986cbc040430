"""What runs spent, in total: per day, per model, per schedule and per batch.

The totals come from the journal's steps (each model call records its cost and tokens when
it finishes), so they are exact to the step and follow the day a cost was incurred, not the
day its run started. Days are local calendar days (this machine's time zone). Runs archived
and removed from the database count with the totals the search index kept for them (cost,
model, schedule and batch; no tokens), on the day they were created: the only date kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from desktop_agent.domain import DEMO_MODEL
from desktop_agent.persistence import usage as usage_rows
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import spec_model
from desktop_agent.persistence.readmodels import RunKeys
from desktop_agent.persistence.usage import ArchivedSpend, SpendRow, month_start

GROUPS = ("day", "model", "schedule", "batch")
"""How totals can be grouped (``--by``)."""


@dataclass
class Total:
    """Spend and tokens of one group."""

    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    calls: int = 0
    runs: set[str] = field(default_factory=set)

    def add(self, row: SpendRow) -> None:
        """Count one step."""
        self.cost_usd += row.cost_usd
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens
        self.cache_write_tokens += row.cache_write_tokens
        self.cache_read_tokens += row.cache_read_tokens
        self.calls += 1
        self.runs.add(row.run_id)

    def add_archived(self, row: ArchivedSpend) -> None:
        """Count an archived run's whole cost (its steps are no longer in the database)."""
        self.cost_usd += row.cost_usd
        self.runs.add(row.run_id)

    def to_json(self) -> dict[str, float | int]:
        """Plain data."""
        return {
            "cost_usd": round(self.cost_usd, 6),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "model_calls": self.calls,
            "runs": len(self.runs),
        }


@dataclass
class Usage:
    """Totals since a time, by group.

    Attributes:
        since: the start of the period (seconds since the epoch).
        total: everything.
        by_day: by local calendar day (``YYYY-MM-DD``), oldest first.
        by_model: by model id.
        by_schedule: by schedule id (runs a schedule started).
        by_batch: by batch id (runs of a batch).
        month: spent since the start of this calendar month (local time).
        month_start: when this month started (seconds since the epoch).
        cap_usd: the monthly spend cap (None: none set).
        simulated: what runs of the offline demo model "spent" in the period: simulated
            dollars, shown apart and counted in none of the above.
    """

    since: float
    total: Total = field(default_factory=Total)
    by_day: dict[str, Total] = field(default_factory=dict)
    by_model: dict[str, Total] = field(default_factory=dict)
    by_schedule: dict[str, Total] = field(default_factory=dict)
    by_batch: dict[str, Total] = field(default_factory=dict)
    month: float = 0.0
    month_start: float = 0.0
    cap_usd: float | None = None
    simulated: Total = field(default_factory=Total)

    def group(self, by: str) -> dict[str, Total]:
        """The totals grouped ``by`` one of :data:`GROUPS`."""
        return {
            "day": self.by_day,
            "model": self.by_model,
            "schedule": self.by_schedule,
            "batch": self.by_batch,
        }[by]

    def to_json(self) -> dict[str, object]:
        """Plain data (stable keys)."""

        def group(g: dict[str, Total]) -> dict[str, object]:
            return {k: v.to_json() for k, v in g.items()}

        return {
            "since": self.since,
            "total": self.total.to_json(),
            "by_day": group(self.by_day),
            "by_model": group(self.by_model),
            "by_schedule": group(self.by_schedule),
            "by_batch": group(self.by_batch),
            "timezone": time.strftime("%Z"),
            "month": {
                "since": self.month_start,
                "cost_usd": round(self.month, 6),
                "cap_usd": self.cap_usd,
            },
            "simulated": self.simulated.to_json(),
        }


def _day(at: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(at))


def totals(
    rows: Iterable[SpendRow],
    keys: Iterable[RunKeys],
    since: float,
    archived: Iterable[ArchivedSpend] = (),
) -> Usage:
    """Group ``rows`` (steps that spent) and ``archived`` runs by day, model, schedule, batch."""
    of = {k.run_id: k for k in keys}
    usage = Usage(since)
    for row in rows:
        key = of.get(row.run_id)
        model = spec_model(key.spec) if key is not None else "?"
        if model == DEMO_MODEL:
            usage.simulated.add(row)
            continue
        usage.total.add(row)
        usage.by_day.setdefault(_day(row.finished_at), Total()).add(row)
        if key is None:
            continue
        usage.by_model.setdefault(model, Total()).add(row)
        if key.schedule_id:
            usage.by_schedule.setdefault(key.schedule_id, Total()).add(row)
        if key.batch_id:
            usage.by_batch.setdefault(key.batch_id, Total()).add(row)
    for gone in archived:
        if gone.model == DEMO_MODEL:
            usage.simulated.add_archived(gone)
            continue
        usage.total.add_archived(gone)
        usage.by_day.setdefault(_day(gone.created_at), Total()).add_archived(gone)
        usage.by_model.setdefault(gone.model or "?", Total()).add_archived(gone)
        if gone.schedule_id:
            usage.by_schedule.setdefault(gone.schedule_id, Total()).add_archived(gone)
        if gone.batch_id:
            usage.by_batch.setdefault(gone.batch_id, Total()).add_archived(gone)
    usage.by_day = dict(sorted(usage.by_day.items()))
    return usage


def usage_since(
    db: Database, since: float, cap_usd: float | None, now: float | None = None
) -> Usage:
    """What every run spent since ``since``, and this month so far against ``cap_usd``."""
    now = time.time() if now is None else now
    first = month_start(now)
    rows, keys, archived = usage_rows.spend_since(db, min(since, first))
    usage = totals(
        [r for r in rows if r.finished_at >= since],
        keys,
        since,
        [a for a in archived if a.created_at >= since],
    )
    usage.month_start = first
    demo = {k.run_id for k in keys if spec_model(k.spec) == DEMO_MODEL}
    usage.month = sum(
        r.cost_usd for r in rows if r.finished_at >= first and r.run_id not in demo
    ) + sum(a.cost_usd for a in archived if a.created_at >= first and a.model != DEMO_MODEL)
    usage.cap_usd = cap_usd
    return usage
