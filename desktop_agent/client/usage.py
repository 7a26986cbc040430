"""What runs spent, in total: per day, model, schedule, batch and mode; what the cache saved.

The totals come from the journal's steps (each model call records its cost and tokens when
it finishes), so they are exact to the step and follow the day a cost was incurred, not the
day its run started. Days are local calendar days (this machine's time zone). Runs archived
and removed from the database count with the totals the search index kept for them (cost,
model, schedule and batch; no tokens), on the day they were created: the only date kept.

**Mode.** A model call sent as a request of a Message Batch (economy mode, billed at half
price; its intent says ``"mode": "economy"``) is ``economy``; every other model call and
compaction is ``streamed``. An archived run kept no steps, so its cost is its own line,
``archived`` (mode unknown), never guessed into either.

**Cache saving** (:func:`cache_saving_usd`): per step, what its cache reads would have cost
as plain input minus what they cost, less what its cache writes cost above plain input, at
the prices of the step's model on the step's day (``llm/pricing.py``). Writes the API
reported as hour-long are priced at the 1-hour rate; every other write at the 5-minute
rate (a step that does not split them is assumed to have written for 5 minutes, which
under-states the premium of an hour-long cache). An economy step's rates are all halved,
and a prompt past the model's long-prompt threshold takes its factor, as its cost did. The
figure is net: negative when writes cost more than reads saved. Archived runs kept no
tokens and add nothing to it.

**The demo model** (:data:`~desktop_agent.domain.DEMO_MODEL`) spends simulated dollars:
they are in :attr:`Usage.simulated` only, never in a total, a group, a mode, a cache
saving or the month.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from desktop_agent.domain import DEMO_MODEL
from desktop_agent.domain.agents import agent_kind
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import format_usd
from desktop_agent.llm import pricing
from desktop_agent.persistence import usage as usage_rows
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import outside_cap, spec_agent, spec_model
from desktop_agent.persistence.readmodels import RunKeys
from desktop_agent.persistence.usage import ArchivedSpend, SpendRow, month_start

GROUPS = ("day", "model", "agent", "schedule", "batch", "mode")
"""How totals can be grouped (``--by``)."""

STREAMED, ECONOMY, ARCHIVED = "streamed", "economy", "archived"
MODES = (STREAMED, ECONOMY, ARCHIVED)
"""The keys of :attr:`Usage.by_mode`, always all present (zero when nothing spent so)."""

MODE_LABELS = {
    STREAMED: "streamed",
    ECONOMY: "economy (batch, half price)",
    ARCHIVED: "archived, mode unknown",
}
"""How the CLI and the app name each mode."""


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
    cache_write_1h_tokens: int = 0
    cache_saving_usd: float = 0.0

    def add(self, row: SpendRow, saving_usd: float = 0.0) -> None:
        """Count one step, whose cache saved ``saving_usd`` (see :func:`cache_saving_usd`)."""
        self.cost_usd += row.cost_usd
        self.input_tokens += row.input_tokens
        self.output_tokens += row.output_tokens
        self.cache_write_tokens += row.cache_write_tokens
        self.cache_read_tokens += row.cache_read_tokens
        self.cache_write_1h_tokens += one_hour_writes(row)
        self.cache_saving_usd += saving_usd
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
            "cache_write_1h_tokens": self.cache_write_1h_tokens,
            "cache_saving_usd": round(self.cache_saving_usd, 6),
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
        by_agent: by the agent that spent (desktop-agent, Claude Code, Claude Agent SDK,
            Managed Agents: :class:`~desktop_agent.domain.agents.AgentKind` labels).
        by_schedule: by schedule id (runs a schedule started).
        by_batch: by batch id (runs of a batch).
        by_mode: by how calls were sent: ``streamed``, ``economy`` (requests of Message
            Batches, at half price) and ``archived`` (archived runs: mode unknown); all
            three keys, always.
        month: spent since the start of this calendar month (local time), as the monthly
            cap counts it: imported Claude Code sessions are in the totals, not here.
        month_start: when this month started (seconds since the epoch).
        cap_usd: the monthly spend cap (None: none set).
        simulated: what runs of the offline demo model "spent" in the period: simulated
            dollars, shown apart and counted in none of the above (its cache saving is
            not computed: zero).

    The cache saving of the period is ``total.cache_saving_usd`` (per group, each
    group's); see the module's docstring.
    """

    since: float
    total: Total = field(default_factory=Total)
    by_day: dict[str, Total] = field(default_factory=dict)
    by_model: dict[str, Total] = field(default_factory=dict)
    by_agent: dict[str, Total] = field(default_factory=dict)
    by_schedule: dict[str, Total] = field(default_factory=dict)
    by_batch: dict[str, Total] = field(default_factory=dict)
    by_mode: dict[str, Total] = field(default_factory=lambda: {m: Total() for m in MODES})
    month: float = 0.0
    month_start: float = 0.0
    cap_usd: float | None = None
    simulated: Total = field(default_factory=Total)

    def group(self, by: str) -> dict[str, Total]:
        """The totals grouped ``by`` one of :data:`GROUPS`."""
        return {
            "day": self.by_day,
            "model": self.by_model,
            "agent": self.by_agent,
            "schedule": self.by_schedule,
            "batch": self.by_batch,
            "mode": self.by_mode,
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
            "by_agent": group(self.by_agent),
            "by_schedule": group(self.by_schedule),
            "by_batch": group(self.by_batch),
            "by_mode": group(self.by_mode),
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


def one_hour_writes(row: SpendRow) -> int:
    """The step's cache writes known to be hour-long (0 when the step does not say)."""
    return min(max(0, row.cache_write_1h_tokens or 0), row.cache_write_tokens)


def cache_saving_usd(row: SpendRow, model: str) -> float:
    """What the prompt cache saved on one step, net, in dollars (see the module's docstring).

    ``cache_read_tokens x (input - cache read) - 5-minute writes x (5-minute write -
    input) - hour-long writes x (1-hour write - input)``, per million tokens, at the
    prices ``model`` had on the step's local day; halved for an economy step, and times
    the long-prompt factor where the step's prompt passed the model's threshold.
    """
    info = pricing.model_info(model, on=_day(row.finished_at))
    hour = one_hour_writes(row)
    minutes = row.cache_write_tokens - hour
    per_million = (
        row.cache_read_tokens * (info.input - info.cache_read)
        - minutes * (info.cache_write - info.input)
        - hour * (info.write_1h - info.input)
    )
    factor = pricing.BATCH_DISCOUNT if row.economy else 1.0
    prompt = row.input_tokens + row.cache_write_tokens + row.cache_read_tokens
    if info.long_prompt_tokens and prompt > info.long_prompt_tokens:
        factor *= info.long_prompt_factor
    return per_million / 1_000_000 * factor


def saving_text(amount_usd: float) -> str:
    """A net cache saving in words: saved, or cost more than it saved."""
    if amount_usd < 0:
        return f"the prompt cache cost {format_usd(-amount_usd)} more than it saved"
    return f"the prompt cache saved {format_usd(amount_usd)}"


def agent_kind_of(spec: str) -> str:
    """The label of the agent a run's stored spec names (our own loop: desktop-agent)."""
    try:
        return agent_kind(spec_agent(spec)).label
    except InvalidInputError:
        return spec_agent(spec)


def _is_demo(row: SpendRow, key: RunKeys | None) -> bool:
    """Whether the step's dollars are simulated (its run's model, or its own, is the demo)."""
    return row.model == DEMO_MODEL or (key is not None and spec_model(key.spec) == DEMO_MODEL)


def totals(
    rows: Iterable[SpendRow],
    keys: Iterable[RunKeys],
    since: float,
    archived: Iterable[ArchivedSpend] = (),
) -> Usage:
    """Group ``rows`` (steps that spent) and ``archived`` runs by day, model, schedule, etc.

    Every group (and mode) carries its cache saving; demo steps go to ``simulated`` only.
    """
    of = {k.run_id: k for k in keys}
    usage = Usage(since)
    for row in rows:
        key = of.get(row.run_id)
        if _is_demo(row, key):
            usage.simulated.add(row)
            continue
        model = spec_model(key.spec) if key is not None else "?"
        saving = cache_saving_usd(row, row.model or model)
        usage.total.add(row, saving)
        usage.by_mode[ECONOMY if row.economy else STREAMED].add(row, saving)
        usage.by_day.setdefault(_day(row.finished_at), Total()).add(row, saving)
        if key is None:
            continue
        usage.by_model.setdefault(model, Total()).add(row, saving)
        agent = agent_kind_of(key.spec)
        usage.by_agent.setdefault(agent, Total()).add(row, saving)
        if key.schedule_id:
            usage.by_schedule.setdefault(key.schedule_id, Total()).add(row, saving)
        if key.batch_id:
            usage.by_batch.setdefault(key.batch_id, Total()).add(row, saving)
    for gone in archived:
        if gone.model == DEMO_MODEL:
            usage.simulated.add_archived(gone)
            continue
        usage.total.add_archived(gone)
        usage.by_mode[ARCHIVED].add_archived(gone)
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
    of = {k.run_id: k for k in keys}
    usage.month = sum(
        r.cost_usd
        for r in rows
        if r.finished_at >= first
        and not _is_demo(r, key := of.get(r.run_id))
        and not (key is not None and outside_cap(key.spec))
    ) + sum(a.cost_usd for a in archived if a.created_at >= first and a.model != DEMO_MODEL)
    usage.cap_usd = cap_usd
    return usage
