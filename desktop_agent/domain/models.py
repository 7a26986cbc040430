"""Frozen value objects: what every layer above the database sees."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from desktop_agent.domain.enums import (
    ApprovalState,
    CommandKind,
    EffectClass,
    RunEventKind,
    RunStatus,
    StepKind,
    StepStatus,
    WaitReason,
)

JSON = Any
"""A value that ``json.dumps`` accepts."""


DEMO_MODEL = "demo"
"""The offline demo model's id. What it "spends" is simulated: it counts against its run's
own budget (so that budgets can be tried), never in usage totals or the monthly cap."""

ANALYST_WAITS = frozenset(
    {WaitReason.APPROVAL, WaitReason.HUMAN_INPUT, WaitReason.BUDGET, WaitReason.CREDENTIALS}
)
"""Wait reasons that only the analyst can end."""

MONTHLY_CAP_REACHED = "Monthly spend cap reached"
"""How the status message of a run the monthly spend cap holds begins (what lifts it is a
higher cap, not a bigger budget: the app offers *Raise the cap…* on such a run)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one model call or a sum of them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        """Sum two usages field by field."""
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
        )

    @property
    def total(self) -> int:
        """All tokens, cached or not."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_write_tokens
            + self.cache_read_tokens
        )

    def to_json(self) -> dict[str, int]:
        """Plain dict for storage."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_tokens": self.cache_read_tokens,
        }

    @classmethod
    def from_json(cls, data: JSON) -> Usage:
        """Inverse of :meth:`to_json`; tolerates missing keys."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            int(data.get("input_tokens", 0) or 0),
            int(data.get("output_tokens", 0) or 0),
            int(data.get("cache_write_tokens", 0) or 0),
            int(data.get("cache_read_tokens", 0) or 0),
        )


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of a run; ``None`` means unlimited.

    Attributes:
        max_cost_usd: dollars the run may spend on model calls.
        max_steps: journal steps the run may take.
        max_time_s: wall-clock seconds of work.
        max_tokens: model tokens of every kind.
        count_waiting_time: whether time spent waiting on the user counts towards
            ``max_time_s`` (it does not by default).
    """

    max_cost_usd: float | None = None
    max_steps: int | None = None
    max_time_s: float | None = None
    max_tokens: int | None = None
    count_waiting_time: bool = False

    def to_json(self) -> dict[str, JSON]:
        """Plain dict for storage."""
        return {
            "max_cost_usd": self.max_cost_usd,
            "max_steps": self.max_steps,
            "max_time_s": self.max_time_s,
            "max_tokens": self.max_tokens,
            "count_waiting_time": self.count_waiting_time,
        }

    @classmethod
    def from_json(cls, data: JSON) -> Budget:
        """Inverse of :meth:`to_json`."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            max_cost_usd=data.get("max_cost_usd"),
            max_steps=data.get("max_steps"),
            max_time_s=data.get("max_time_s"),
            max_tokens=data.get("max_tokens"),
            count_waiting_time=bool(data.get("count_waiting_time", False)),
        )

    def extended(
        self,
        *,
        cost_usd: float = 0.0,
        steps: int = 0,
        time_s: float = 0.0,
        tokens: int = 0,
    ) -> Budget:
        """Return this budget raised by the given amounts (unlimited stays unlimited)."""

        def add(limit: float | None, extra: float) -> float | None:
            return None if limit is None else limit + extra

        def add_int(limit: int | None, extra: int) -> int | None:
            return None if limit is None else limit + extra

        return replace(
            self,
            max_cost_usd=add(self.max_cost_usd, cost_usd),
            max_steps=add_int(self.max_steps, steps),
            max_time_s=add(self.max_time_s, time_s),
            max_tokens=add_int(self.max_tokens, tokens),
        )


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file the analyst gave a run at its start, copied into its workspace.

    Attributes:
        name: the file's name as given (sanitised; it may differ from ``path``'s last part
            when another file in the workspace already had it).
        path: where the copy is, relative to the workspace, with ``/``
            (``attachments/NAME``).
        size: its length in bytes.
        sha256: the hex SHA-256 of its content when it was copied.
    """

    name: str
    path: str
    size: int
    sha256: str

    def to_json(self) -> dict[str, JSON]:
        """Plain dict for storage."""
        return {"name": self.name, "path": self.path, "size": self.size, "sha256": self.sha256}

    @classmethod
    def from_json(cls, data: JSON) -> Attachment:
        """Inverse of :meth:`to_json`."""
        return cls(
            name=str(data.get("name", "")),
            path=str(data.get("path", "")),
            size=int(data.get("size", 0) or 0),
            sha256=str(data.get("sha256", "")),
        )

    @property
    def size_words(self) -> str:
        """Its size for people: ``812 bytes``, ``12.4 KB``, ``3.1 MB``."""
        return size_words(self.size)


def size_words(size: int) -> str:
    """A size in bytes for people: ``812 bytes``, ``12.4 KB``, ``3.1 MB``, ``1.2 GB``."""
    if size < 1024:
        return f"{size} byte" + ("" if size == 1 else "s")
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """Everything that defines how a run behaves; its hash pins the run.

    Attributes:
        model: model id, e.g. ``claude-sonnet-4-5`` or ``demo``.
        system_prompt: the system prompt.
        tools: names of the enabled tools, with their versions.
        max_tokens: output tokens per model call.
        thinking_budget: thinking on (above 0) or off (0). On models that take a budget
            (``thinking: enabled``) it is the budget in tokens; on the 2026 models, which
            choose their depth themselves, only on/off counts (see ``llm/claude.py``).
        approval_overrides: per-tool approval policy chosen for this run.
        effort: ``output_config.effort`` (``low`` … ``max``), or "" for the model's
            documented default (nothing sent).
        economy: each model turn goes to a Message Batch (half price; the run hibernates
            until the result is in) instead of a streamed call.
        web_search: offer Anthropic's web search to this run (True), withhold it (False),
            or follow the ``web_search`` setting (None).
        search_domains: the only domains web search may return (``allowed_domains``).
        search_blocked_domains: domains web search never returns (``blocked_domains``);
            the API takes one of the two lists, never both.
        attachments: the files the analyst gave the run at its start, copied into its
            workspace (the first user message names them).
        agent: the agent that drives the run (:class:`~desktop_agent.domain.agents.AgentKind`
            values): "" for desktop-agent's own loop, else another Claude agent it
            supervises (``claude-code``, ``agent-sdk``, ``managed-agents``).
        session_id: that other agent's own id of the session ("" for our own runs).
        server_web_fetch: offer Anthropic's web fetch (a server tool) to this run, in the
            place of our own ``web_fetch`` (the API takes one tool per name); the run's
            domain lists limit it as they limit web search.
        code_execution: offer Anthropic's code execution (a server tool running in a
            container the run keeps from call to call); the run's attachments are put in
            the container and the files it writes are copied into the workspace.
    """

    model: str
    system_prompt: str
    tools: tuple[tuple[str, str], ...] = ()
    max_tokens: int = 4096
    thinking_budget: int = 0
    approval_overrides: tuple[tuple[str, str], ...] = ()
    effort: str = ""
    economy: bool = False
    attachments: tuple[Attachment, ...] = ()
    web_search: bool | None = None
    search_domains: tuple[str, ...] = ()
    search_blocked_domains: tuple[str, ...] = ()
    agent: str = ""
    session_id: str = ""
    server_web_fetch: bool = False
    code_execution: bool = False

    def to_json(self) -> dict[str, JSON]:
        """Plain dict for storage.

        ``effort``, ``economy`` and ``attachments`` are written only when set, so the
        definition hash of every run made before they existed (and of every run left at the
        defaults) stays the same.
        """
        out: dict[str, JSON] = {
            "model": self.model,
            "system_prompt": self.system_prompt,
            "tools": [list(t) for t in self.tools],
            "max_tokens": self.max_tokens,
            "thinking_budget": self.thinking_budget,
            "approval_overrides": [list(t) for t in self.approval_overrides],
        }
        if self.effort:
            out["effort"] = self.effort
        if self.economy:
            out["economy"] = True
        if self.attachments:
            out["attachments"] = [a.to_json() for a in self.attachments]
        if self.web_search is not None:
            out["web_search"] = self.web_search
        if self.search_domains:
            out["search_domains"] = list(self.search_domains)
        if self.search_blocked_domains:
            out["search_blocked_domains"] = list(self.search_blocked_domains)
        if self.agent:
            out["agent"] = self.agent
        if self.session_id:
            out["session_id"] = self.session_id
        if self.server_web_fetch:
            out["server_web_fetch"] = True
        if self.code_execution:
            out["code_execution"] = True
        return out

    @classmethod
    def from_json(cls, data: JSON) -> AgentSpec:
        """Inverse of :meth:`to_json`."""
        return cls(
            model=str(data["model"]),
            system_prompt=str(data.get("system_prompt", "")),
            tools=tuple((str(n), str(v)) for n, v in data.get("tools", [])),
            max_tokens=int(data.get("max_tokens", 4096)),
            thinking_budget=int(data.get("thinking_budget", 0)),
            approval_overrides=tuple(
                (str(n), str(p)) for n, p in data.get("approval_overrides", [])
            ),
            effort=str(data.get("effort", "") or ""),
            economy=bool(data.get("economy", False)),
            attachments=tuple(Attachment.from_json(a) for a in data.get("attachments") or ()),
            web_search=None if data.get("web_search") is None else bool(data["web_search"]),
            search_domains=tuple(str(d) for d in data.get("search_domains") or ()),
            search_blocked_domains=tuple(str(d) for d in data.get("search_blocked_domains") or ()),
            agent=str(data.get("agent", "") or ""),
            session_id=str(data.get("session_id", "") or ""),
            server_web_fetch=bool(data.get("server_web_fetch", False)),
            code_execution=bool(data.get("code_execution", False)),
        )

    @property
    def definition_hash(self) -> str:
        """Stable hash of the definition; a resume under another hash is flagged."""
        blob = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the enabled tools."""
        return tuple(name for name, _ in self.tools)


@dataclass(frozen=True, slots=True)
class Run:
    """One agent run: its definition, status and running totals."""

    id: str
    goal: str
    status: RunStatus
    spec: AgentSpec
    workspace: str
    budget: Budget = field(default_factory=Budget)
    wait_reason: WaitReason | None = None
    wake_at: float | None = None
    status_message: str = ""
    attention_seq: int | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    last_seq: int = 0
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)
    active_seconds: float = 0.0
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    title: str = ""
    definition_hash: str = ""
    parent_id: str | None = None
    schedule_id: str | None = None
    lease_epoch: int = 0
    """The fencing token of the newest claim (0: never claimed)."""
    placement: str = "any"
    """Which workers may claim it: ``any``, ``host:NAME`` or ``pool:NAME`` (see
    :mod:`desktop_agent.domain.placement`)."""
    forked_from: str | None = None
    """The run this one was forked from or is a "run again" of (None: neither)."""
    forked_at_seq: int | None = None
    """The fork shares the parent's steps 1..this (0: a "run again", sharing none)."""
    tags: tuple[str, ...] = ()
    """The analyst's tags, lowercase and sorted (table ``run_tags``). Filled by the
    client's reads (``Client.run``, ``Client.runs``, the run list); the engine's reads of
    the run leave it empty: tags are not part of the journal."""

    @property
    def model(self) -> str:
        """The model the run uses."""
        return self.spec.model

    @property
    def needs_analyst(self) -> bool:
        """Whether only the analyst can move the run on: a decision, answer, budget, key."""
        return self.status == RunStatus.NEEDS_ATTENTION or (
            self.status == RunStatus.WAITING and self.wait_reason in ANALYST_WAITS
        )

    @property
    def is_demo(self) -> bool:
        """Whether the run is driven by the offline demo model."""
        return self.spec.model == DEMO_MODEL


@dataclass(frozen=True, slots=True)
class Step:
    """One journal record, keyed ``(run_id, seq)``."""

    run_id: str
    seq: int
    kind: StepKind
    name: str
    status: StepStatus
    input: JSON = None
    output: JSON = None
    error: str | None = None
    started_at: float = 0.0
    finished_at: float | None = None
    attempt: int = 1
    partial_text: str = ""
    salvaged: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    effect: EffectClass | None = None
    salvaged_usage: Usage = field(default_factory=Usage)
    salvaged_cost_usd: float = 0.0
    """What earlier, interrupted attempts of this step spent (already paid for)."""

    @property
    def idempotency_key(self) -> str:
        """Key passed to the outside world; stable across retries of this step."""
        return idempotency_key(self.run_id, self.seq)

    @property
    def duration_s(self) -> float | None:
        """Seconds between intent and outcome, if the step finished."""
        if self.finished_at is None:
            return None
        return max(0.0, self.finished_at - self.started_at)


def idempotency_key(run_id: str, seq: int) -> str:
    """The idempotency key of step ``seq`` of run ``run_id``."""
    return f"{run_id}:{seq}"


@dataclass(frozen=True, slots=True)
class Approval:
    """A tool call waiting for (or decided by) the analyst."""

    id: str
    run_id: str
    seq: int
    tool: str
    arguments: JSON
    state: ApprovalState = ApprovalState.PENDING
    reason: str = ""
    rule: str = ""
    decided_arguments: JSON = None
    decision_note: str = ""
    deadline: float | None = None
    default_action: str = "reject"
    created_at: float = 0.0
    decided_at: float | None = None


@dataclass(frozen=True, slots=True)
class Command:
    """A request from the GUI or CLI, applied by the worker at a step boundary."""

    id: int
    run_id: str
    kind: CommandKind
    payload: JSON = None
    created_at: float = 0.0
    applied_at: float | None = None
    result: str = ""


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's claim of a run, with its fencing token.

    Attributes:
        owner: the worker's id.
        epoch: the fencing token: the run's lease epoch, which grows by one with every
            claim, so that a later claim (by anyone) always carries a larger one.
    """

    owner: str
    epoch: int


@dataclass(frozen=True, slots=True)
class RunEvent:
    """Something that happened to a run outside its journal, shown to the analyst.

    For now: what a worker that lost its lease did after the run moved on (an effect it
    finished anyway, one it abandoned, a model call it paid for).

    Attributes:
        id: increasing number.
        run_id: the run.
        kind: what happened.
        message: one line for the analyst.
        created_at: when it was recorded.
        seq: the step it concerns, if any.
        data: details (tool, outcome, cost, worker, epoch).
    """

    id: int
    run_id: str
    kind: RunEventKind
    message: str
    created_at: float
    seq: int | None = None
    data: JSON = None


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker process as recorded in the database."""

    id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    stopped_at: float | None = None
