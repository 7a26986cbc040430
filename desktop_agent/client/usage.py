"""What runs spent, in total: per day, per model, per schedule and per batch.

The totals come from the journal's steps (each model call records its cost and tokens when
it finishes), so they are exact to the step and follow the day a cost was incurred, not the
day its run started. Runs archived and removed from the database are not counted (their
records are in the archive files).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from desktop_agent.client.api import Client
from desktop_agent.persistence import readmodels


@dataclass
class Total:
    """Spend and tokens of one group."""

    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    runs: set[str] = field(default_factory=set)

    def add(self, row: readmodels.SpendRow) -> None:
        """Count one step."""
        self.cost_usd += row.cost_usd
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens
        self.calls += 1
        self.runs.add(row.run_id)

    def to_json(self) -> dict[str, float | int]:
        """Plain data."""
        return {
            "cost_usd": round(self.cost_usd, 6),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
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
    """

    since: float
    total: Total = field(default_factory=Total)
    by_day: dict[str, Total] = field(default_factory=dict)
    by_model: dict[str, Total] = field(default_factory=dict)
    by_schedule: dict[str, Total] = field(default_factory=dict)
    by_batch: dict[str, Total] = field(default_factory=dict)

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
        }


def _model_of(spec: str) -> str:
    try:
        return str(json.loads(spec).get("model", "?"))
    except (ValueError, AttributeError):
        return "?"


def totals(
    rows: Iterable[readmodels.SpendRow], keys: Iterable[readmodels.RunKeys], since: float
) -> Usage:
    """Group ``rows`` (steps that spent) by day, model, schedule and batch."""
    of = {k.run_id: k for k in keys}
    usage = Usage(since)
    for row in rows:
        usage.total.add(row)
        day = time.strftime("%Y-%m-%d", time.localtime(row.finished_at))
        usage.by_day.setdefault(day, Total()).add(row)
        key = of.get(row.run_id)
        if key is None:
            continue
        usage.by_model.setdefault(_model_of(key.spec), Total()).add(row)
        if key.schedule_id:
            usage.by_schedule.setdefault(key.schedule_id, Total()).add(row)
        if key.batch_id:
            usage.by_batch.setdefault(key.batch_id, Total()).add(row)
    return usage


def usage_since(client: Client, since: float) -> Usage:
    """What every run spent since ``since``."""
    rows, keys = readmodels.spend_since(client._db, since)
    return totals(rows, keys, since)
