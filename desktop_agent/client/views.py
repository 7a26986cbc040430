"""Read helpers shaped for the desktop app: cheap deltas, slim timeline rows, catalogs.

Everything here is plain Python (no Qt) and may be slow on a busy disk: the GUI calls it
from a worker thread, never from the GUI thread. Objects handed out are frozen dataclasses.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from desktop_agent.client import stepkinds
from desktop_agent.client.api import Client
from desktop_agent.client.models import DEMO, ModelList, ModelRow, row_of, snapshot_models
from desktop_agent.domain import (
    JSON,
    Approval,
    ApprovalPolicy,
    ApprovalState,
    EffectClass,
    Run,
    Step,
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.domain.catalogue import BETWEEN_TOOLS_EFFORTS, EFFORT_LEVELS, ModelEntry
from desktop_agent.engine.builtin_tools import CONTROL_TOOLS
from desktop_agent.llm.pricing import MODELS, model_info
from desktop_agent.persistence import readmodels, tagging
from desktop_agent.tools.registry import default_tools

_KINDS = {k.value: k for k in StepKind}
_STATUSES = {s.value: s for s in StepStatus}
_EFFECTS = {e.value: e for e in EffectClass}

# --------------------------------------------------------------------------- catalogs


DEMO_NO_ECONOMY = "The demo model runs on this machine: it has no batches to wait in."
"""Why runs of the demo model have no economy mode."""


@dataclass(frozen=True)
class ModelChoice:
    """A model the analyst can pick.

    Attributes:
        id: model id as stored in the run.
        label: name shown to the user.
        is_demo: the offline demo model (never Claude; always labelled as a demo).
        efforts: the effort levels it takes, lowest first (empty: no effort setting).
        default_effort: the effort it runs at when a run sets none ("" if unknown).
        thinking: the thinking types it takes (``adaptive``, ``disabled`` …).
        notice: what the analyst is told when picking it ("" for an active model).
        price: "$I / $O per million tokens", "price unknown", or "" (the demo).
        lifecycle: ``active``, ``deprecated`` or ``retired``.
        batches: its catalogue entry lists Message Batches (economy mode is offered).
    """

    id: str
    label: str
    is_demo: bool
    efforts: tuple[str, ...] = ()
    default_effort: str = ""
    thinking: tuple[str, ...] = ()
    notice: str = ""
    price: str = ""
    lifecycle: str = "active"
    batches: bool = True

    def economy_refusal(self) -> str:
        """Why economy mode is not offered with this model ("" when it is)."""
        if self.is_demo:
            return DEMO_NO_ECONOMY
        if not self.batches:
            return (
                f"{self.label} does not take Message Batches (its catalogue entry does not "
                "list them): runs of it are streamed."
            )
        return ""

    def thinking_off_words(self, effort: str) -> str:
        """What Thinking off does on this model at ``effort`` ("" when it simply is off).

        As the adapter asks for it: ``between_tools`` where the model takes it (up to high
        effort), else ``disabled`` where it takes that (likewise), else the model thinks all
        the same (it is never sent a setting it refuses).
        """
        if self.is_demo:
            return ""
        low_enough = not effort or effort in BETWEEN_TOOLS_EFFORTS
        if "between_tools" in self.thinking and low_enough:
            return "With Thinking off it still thinks briefly between tool calls."
        if "adaptive" not in self.thinking or ("disabled" in self.thinking and low_enough):
            return ""
        at = f" at effort {effort}" if effort else ""
        return f"This model always thinks{at}: Thinking off changes nothing."


@functools.cache
def snapshot_model_list() -> ModelList:
    """The catalogue shipped with the program, read without the database (current first).

    Read once per process (the file does not change); callers do not change the list.
    """
    rows = []
    for raw in snapshot_models():
        try:
            entry = ModelEntry.from_api(raw)
        except (ValueError, TypeError, AttributeError):
            continue
        rows.append(row_of(entry))
    order = {"active": 0, "deprecated": 1, "retired": 2}
    rows.sort(key=lambda r: order.get(r.lifecycle, 3))
    return ModelList(rows, "snapshot", 0.0)


def choice_of(row: ModelRow) -> ModelChoice:
    """The picker's entry for one row of the catalogue."""
    return ModelChoice(
        row.id,
        row.name,
        False,
        efforts=row.efforts,
        default_effort=row.default_effort,
        thinking=row.thinking,
        notice=row.notice,
        price=row.price,
        lifecycle=row.lifecycle,
        batches="batch" in row.features,
    )


def model_choices(models: ModelList | None = None) -> list[ModelChoice]:
    """Models for a picker: current Claude models first, deprecated next, the demo last.

    Retired models are never offered (a run naming one is refused). ``models`` is the
    catalogue as read (:meth:`Client.models`, off the GUI thread); None: the shipped one.
    """
    listed = models if models is not None else snapshot_model_list()
    claude = [choice_of(r) for r in listed.rows if r.lifecycle != "retired" and r.id != DEMO]
    demo = ModelChoice(
        DEMO, demo_label(), True, efforts=EFFORT_LEVELS, thinking=("disabled",), batches=False
    )
    return [*claude, demo]


def demo_label() -> str:
    """How the demo model is named everywhere in the app."""
    return "Demo model (offline, simulated cost)"


def model_label(model: str) -> str:
    """The display name of a model id; the demo is always marked as such."""
    if model == "demo":
        return demo_label()
    info = MODELS.get(model)
    return info.label if info else model


# --------------------------------------------------------------------------- run options

THINKING_ON_BUDGET = 16_000
"""``thinking_budget`` of a run with thinking on (the New run dialog, ``--thinking on``).

On models that take a budget it is the budget in tokens; on the 2026 models, which choose
their depth themselves, only on or off counts.
"""


def thinking_budget_for(on: bool) -> int:
    """The ``thinking_budget`` a run with thinking ``on`` or off is started with."""
    return THINKING_ON_BUDGET if on else 0


def default_effort(model: str) -> str:
    """The effort ``model`` runs at when a run sets none ("" when unknown, or the demo)."""
    return "" if model == DEMO else model_info(model).default_effort


def effort_words(model: str, effort: str) -> str:
    """``effort high``, ``effort high (model default)``, or "" when nothing is known."""
    if effort:
        return f"effort {effort}"
    default = default_effort(model)
    return f"effort {default} (model default)" if default else ""


def thinking_words(thinking_budget: int) -> str:
    """``thinking on`` or ``thinking off``."""
    return "thinking on" if thinking_budget > 0 else "thinking off"


def run_settings_words(run: Run) -> str:
    """How the run's model was asked to work: ``effort high (model default) · thinking on``.

    An economy-mode run adds ``economy (batches, half price)``.
    """
    spec = run.spec
    parts = [effort_words(spec.model, spec.effort), thinking_words(spec.thinking_budget)]
    if spec.economy:
        parts.append("economy (batches, half price)")
    return " · ".join(p for p in parts if p)


def model_notice(client: Client) -> str:
    """What the client said of the model of the run (or template) it prepared last.

    A deprecated model's notice (``… is deprecated, retires …; use … instead``), or "".
    The GUI and the CLI read it here rather than from the client's state.
    """
    return client.last_model_notice


def cache_share(usage: Usage) -> float | None:
    """The share of prompt tokens read from the prompt cache (None: no prompt tokens yet).

    Cache reads ÷ (uncached input + cache writes + cache reads).
    """
    prompt = usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens
    return usage.cache_read_tokens / prompt if prompt > 0 else None


def cache_words(usage: Usage) -> str:
    """``cache 87%`` (the share of prompt tokens read from the cache), or "" with no prompt."""
    share = cache_share(usage)
    return "" if share is None else f"cache {share:.0%}"


@dataclass(frozen=True)
class ToolInfo:
    """A tool as the new-run dialog and the approval form need it.

    Attributes:
        name: the tool's name.
        description: what the model reads about it.
        input_schema: JSON schema of its arguments.
        effect: how its effect may be repeated (None for the engine's control tools).
        default_policy: its approval policy when the run does not override it.
        origin: ``tool`` (a tool of this app or a plugin), ``engine`` (plan, wait,
            question) or ``provider`` (run by the model provider, e.g. web search).
    """

    name: str
    description: str
    input_schema: Mapping[str, JSON]
    effect: EffectClass | None
    default_policy: ApprovalPolicy
    origin: str = "tool"

    @property
    def is_control(self) -> bool:
        """Not a tool with its own effect: the engine or the provider handles it."""
        return self.origin != "tool"


def tool_catalog(client: Client) -> list[ToolInfo]:
    """Every tool available to new runs, sorted by name."""
    out = []
    for name in client._tools.names():
        tool = client._tools.get(name)
        if tool is not None:
            out.append(
                ToolInfo(
                    name,
                    tool.description,
                    dict(tool.input_schema),
                    tool.effect,
                    tool.approval,
                )
            )
            continue
        meta = CONTROL_TOOLS.get(name)
        if meta is not None:
            description = str(meta.get("description", ""))
            schema = meta.get("input_schema") or {}
            origin = "engine"
        else:  # a tool the model provider runs itself (e.g. web search)
            description, schema = "Run by the model provider (Anthropic's servers).", {}
            origin = "provider"
        out.append(ToolInfo(name, description, schema, None, ApprovalPolicy.ALWAYS, origin))
    return out


def default_tool_names(client: Client) -> tuple[str, ...]:
    """The tools a new run gets unless the analyst chooses otherwise."""
    return default_tools(web_search=bool(getattr(client.settings, "web_search", False)))


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class PlanItem:
    """One line of the agent's to-do list."""

    text: str
    done: bool


def plan_from_output(output: JSON) -> tuple[PlanItem, ...] | None:
    """The plan saved by an ``update_plan`` step's output, or None if it holds none."""
    if not isinstance(output, dict):
        return None
    data = output.get("data")
    plan = data.get("plan") if isinstance(data, dict) else None
    if not isinstance(plan, list):
        return None
    return tuple(
        PlanItem(str(i.get("text", "")), bool(i.get("done"))) for i in plan if isinstance(i, dict)
    )


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunRow:
    """A run with what the run list shows beside it.

    Attributes:
        run: the run.
        plan: the agent's newest plan (empty when it has none).
        pending_approvals: approvals of this run waiting for the analyst.
    """

    run: Run
    plan: tuple[PlanItem, ...] = ()
    pending_approvals: int = 0

    @property
    def plan_done(self) -> int:
        """Plan items marked done."""
        return sum(1 for i in self.plan if i.done)


@dataclass(frozen=True)
class RunsDelta:
    """What changed since the previous poll.

    Attributes:
        token: the store's change token at the time of reading.
        rows: runs that changed (all runs when ``full``).
        full: ``rows`` replaces everything known (first poll, or runs were removed).
        approvals: every pending approval, oldest first.
    """

    token: tuple[int, float, int, int]
    rows: tuple[RunRow, ...]
    full: bool
    approvals: tuple[Approval, ...]


class RunsTracker:
    """Reads what changed in the run list since the last call, cheaply.

    The change token says whether anything changed at all; then only runs updated since
    the last poll are read, and plans are looked up only in the steps added since.
    Meant to be polled from one worker thread at a time (calls are serialized by a lock).

    Args:
        client: the client whose database is read.
        limit: most runs kept in the list (newest first).
    """

    OVERLAP_S = 2.0
    """Re-read runs updated this long before the newest seen, in case clocks disagree."""

    def __init__(self, client: Client, limit: int = 500) -> None:
        self.client = client
        self.limit = limit
        self._lock = threading.Lock()
        self._token: tuple[int, float, int, int] | None = None
        self._since = 0.0
        self._count = 0
        self._plans: dict[str, tuple[int, tuple[PlanItem, ...]]] = {}

    def reset(self) -> None:
        """Forget everything: the next poll reads all runs."""
        with self._lock:
            self._token = None
            self._since = 0.0

    def poll(self, *, force: bool = False) -> RunsDelta | None:
        """The runs that changed, or None when the change token did not move."""
        with self._lock:
            store = self.client._store
            token = store.change_token()
            if token == self._token and not force:
                return None
            full = self._token is None or token[0] < self._count
            since = 0.0 if full else self._since - self.OVERLAP_S
            runs = self._runs_since(since)
            approvals = tuple(store.list_approvals(ApprovalState.PENDING))
            pending: dict[str, int] = {}
            for a in approvals:
                pending[a.run_id] = pending.get(a.run_id, 0) + 1
            runs = runs[: self.limit]
            if full:  # forget the plans of runs gone from the list (archived, deleted)
                listed = {r.id for r in runs}
                self._plans = {k: v for k, v in self._plans.items() if k in listed}
            plans = self._plans_of(runs)
            rows = tuple(RunRow(r, plans[r.id], pending.get(r.id, 0)) for r in runs)
            if runs:
                self._since = max(self._since, max(r.updated_at for r in runs))
            self._token = token
            self._count = token[0]
            return RunsDelta(token, rows, full, approvals)

    def _runs_since(self, since: float) -> list[Run]:
        db = self.client._store.db
        return tagging.with_tags(db, readmodels.runs_since(db, since, self.limit))

    def _plans_of(self, runs: Sequence[Run]) -> dict[str, tuple[PlanItem, ...]]:
        """The newest plan of each run, reading only steps added since the last look."""
        out: dict[str, tuple[PlanItem, ...]] = {}
        stale: list[tuple[Run, int]] = []
        for run in runs:
            scanned, plan = self._plans.get(run.id, (0, ()))
            out[run.id] = plan
            if run.last_seq > scanned:
                stale.append((run, scanned))
        if not stale:
            return out
        newest = readmodels.newest_plans(
            self.client._store.db, [(run.id, scanned) for run, scanned in stale]
        )
        for run, _scanned in stale:
            if run.id in newest:
                parsed = plan_from_output(json.loads(newest[run.id]))
                if parsed is not None:
                    out[run.id] = parsed
            self._plans[run.id] = (run.last_seq, out[run.id])
        return out


# --------------------------------------------------------------------------- timeline


@dataclass(frozen=True, slots=True)
class StepEntry:
    """A journal step as the timeline holds it: columns, with JSON left unparsed.

    Parsing every step's input and output costs more than reading them; the timeline parses
    only what it shows (see :func:`step_summary`) and :meth:`to_step` builds the full step
    for the inspector.
    """

    run_id: str
    seq: int
    kind: StepKind
    name: str
    status: StepStatus
    attempt: int
    effect: EffectClass | None
    started_at: float
    finished_at: float | None
    cost_usd: float
    tokens: tuple[int, int, int, int]
    """Input, output, cache-write and cache-read tokens (a tuple: cheap for the GC)."""
    error: str | None
    partial_text: str
    input_json: str | None
    output_json: str | None
    salvaged_json: str | None

    @property
    def duration_s(self) -> float | None:
        """Seconds between intent and outcome, if the step finished."""
        if self.finished_at is None:
            return None
        return max(0.0, self.finished_at - self.started_at)

    @property
    def usage(self) -> Usage:
        """Token counts."""
        return Usage(*self.tokens)

    @property
    def idempotency_key(self) -> str:
        """The key the step passes to the outside world."""
        return f"{self.run_id}:{self.seq}"

    @property
    def is_open(self) -> bool:
        """Intent written, outcome not yet."""
        return self.status == StepStatus.STARTED

    def input(self) -> JSON:
        """The parsed input."""
        return json.loads(self.input_json) if self.input_json else None

    def output(self) -> JSON:
        """The parsed output."""
        return json.loads(self.output_json) if self.output_json else None

    def to_step(self) -> Step:
        """The full domain step."""
        salvaged = json.loads(self.salvaged_json) if self.salvaged_json else []
        return Step(
            run_id=self.run_id,
            seq=self.seq,
            kind=self.kind,
            name=self.name,
            status=self.status,
            input=self.input(),
            output=self.output(),
            error=self.error,
            started_at=self.started_at,
            finished_at=self.finished_at,
            attempt=self.attempt,
            partial_text=self.partial_text,
            salvaged=tuple(str(s) for s in salvaged),
            usage=self.usage,
            cost_usd=self.cost_usd,
            effect=self.effect,
        )


def timeline_entries(client: Client, run_id: str, from_seq: int = 1) -> list[StepEntry]:
    """Steps ``from_seq`` onwards, in order, as slim timeline entries."""
    rows = readmodels.timeline_rows(client._store.db, run_id, from_seq)
    kinds, statuses, effects = _KINDS, _STATUSES, _EFFECTS
    return [
        StepEntry(
            r.run_id,
            r.seq,
            kinds[r.kind],
            r.name,
            statuses[r.status],
            r.attempt,
            effects[r.effect] if r.effect else None,
            r.started_at,
            r.finished_at,
            r.cost_usd,
            (r.input_tokens, r.output_tokens, r.cache_write_tokens, r.cache_read_tokens),
            r.error,
            r.partial_text or "",
            r.input,
            r.output,
            r.salvaged,
        )
        for r in rows
    ]


def step_summary(entry: StepEntry, width: int = 160) -> str:
    """One line saying what a step did, for the timeline (its kind's description says how)."""
    try:
        inp = entry.input()
        out = entry.output()
    except ValueError:
        return entry.name
    facts = stepkinds.StepFacts.make(
        entry.kind,
        entry.name,
        entry.status,
        inp,
        out,
        error=entry.error,
        partial_text=entry.partial_text,
    )
    return stepkinds.summary(facts, width)


def runs_by_id(rows: Iterable[RunRow]) -> dict[str, RunRow]:
    """Index rows by run id."""
    return {r.run.id: r for r in rows}


def pending_for(approvals: Sequence[Approval], run_id: str) -> list[Approval]:
    """The pending approvals of one run, oldest first."""
    return [a for a in approvals if a.run_id == run_id and a.state == ApprovalState.PENDING]
