"""What the GUI and the CLI call: read state and write command rows, never run the engine."""

from __future__ import annotations

import math
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

from desktop_agent import config, procs
from desktop_agent.agents.claude_code_hooks import approval_tool
from desktop_agent.agents.sdk_policy import SdkTool
from desktop_agent.client import attachments as attaching
from desktop_agent.client import mcp as mcp_tools
from desktop_agent.client import sdk_runs
from desktop_agent.client.forecast import record_start_forecast
from desktop_agent.client.models import ModelList, can_batch, check_model, list_models
from desktop_agent.client.usage import Usage, usage_since
from desktop_agent.config import Settings
from desktop_agent.domain import (
    DEMO_MODEL,
    JSON,
    AgentSpec,
    Approval,
    ApprovalPolicy,
    ApprovalState,
    Budget,
    CommandKind,
    Resolution,
    Run,
    RunEvent,
    RunStatus,
    Step,
    StepKind,
    WaitReason,
    WorkerInfo,
)
from desktop_agent.domain.agents import AgentKind
from desktop_agent.domain.catalogue import ModelEntry
from desktop_agent.domain.errors import InvalidInputError, InvalidStateError, NotFoundError
from desktop_agent.domain.placement import ANY, parse_placement
from desktop_agent.domain.tags import normalize_tags
from desktop_agent.domain.text import check_json_text, check_text
from desktop_agent.engine.edits import edit_problem
from desktop_agent.engine.ports import MONTHLY_CAP, CancelToken, SystemClock, ToolContext
from desktop_agent.llm.pricing import MODELS
from desktop_agent.persistence import search as search_index
from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.decisions import Decision, DecisionQueries
from desktop_agent.persistence.identity import vanish_notice
from desktop_agent.persistence.search import SearchFilters, SearchHit, fts_query
from desktop_agent.persistence.store import SqlStore, open_store
from desktop_agent.persistence.tagging import with_tags
from desktop_agent.secrets import KeyStore, database_password
from desktop_agent.tools.mcp import CATALOGUE_FILE as MCP_CATALOGUE
from desktop_agent.tools.mcp import listed_tools
from desktop_agent.tools.registry import ToolRegistry, default_tools

DEFAULT_SYSTEM_PROMPT = (
    "You are a careful research agent working for an analyst. Work in small steps with the "
    "tools you have; keep a plan with update_plan and tick items as you finish them. Cite the "
    "files and pages you used. When the goal is met, answer with a short summary of what you "
    "found and where you wrote it."
)

LOW_DISK_BYTES = 2 * 2**20
"""Free space below which :meth:`Client.storage_warning` warns that the disk is low."""

FULL_DISK_BYTES = 64 * 2**10
"""Free space below which it says the disk is full: less than a few journal commits need
(a commit writes whole 4 KB pages to the write-ahead log, plus its index)."""

WORKER_STALE_S = 45.0
"""A worker whose heartbeat is older than this is shown as offline."""


@dataclass(frozen=True)
class WorkerStatus:
    """Whether a worker is serving the database."""

    alive: bool
    worker: WorkerInfo | None
    age_s: float | None

    def describe(self) -> str:
        """One line for a status bar."""
        if self.alive and self.worker:
            return f"worker online (pid {self.worker.pid})"
        if self.worker is not None and self.age_s is not None:
            return f"worker offline (last heartbeat {self.age_s:.0f}s ago)"
        return "worker offline"


def new_run_id() -> str:
    """A short random run id."""
    return uuid.uuid4().hex[:10]


class RunSpecOptions(TypedDict, total=False):
    """Options of a run's definition and budget; every one may be left out.

    Attributes:
        model: model id (default: the settings' default model).
        max_cost_usd: cost budget in dollars.
        max_steps: budget of model and tool calls.
        max_time_s: budget of time worked, in seconds.
        max_tokens_budget: budget of tokens.
        tools: enabled tools (default: the default tool set).
        system_prompt: the agent's instructions (default: the built-in research prompt).
        approval_overrides: per-tool approval policy (``always``, ``ask`` or ``never``).
        max_tokens: most tokens per model answer (default 4096).
        thinking_budget: thinking on (above 0, a budget in tokens on models that take one)
            or off (default 0: off, which on models that always think means the least).
        effort: ``low``, ``medium``, ``high``, ``xhigh`` or ``max`` (default "": the
            model's documented default).
        economy: send each model turn as a request of a Message Batch (half price; the
            run waits for each result, most within an hour). Not for the demo model.
        use_defaults: fill budgets left out from the settings (default True).
        count_waiting_time: time waiting on the analyst counts towards the time budget
            (default False).
        web_search: offer Anthropic's web search to this run (True) or not (False);
            default: the ``web_search`` setting.
        search_domains: the only domains web search may return (no scheme: ``example.com``).
        search_blocked_domains: domains web search never returns; not with
            ``search_domains`` (the API takes one list or the other).
        server_web_fetch: offer Anthropic's web fetch in the place of our own ``web_fetch``
            (limited by the same domain lists); refused for a model that does not take it.
        code_execution: offer Anthropic's code execution (the attachments go into its
            container, the files it writes into the workspace's ``outputs``); refused for
            a model that does not take it, and in economy mode.
        agent: ``agent-sdk`` for a session of the Claude Agent SDK (Claude Code's tools;
            :mod:`desktop_agent.client.sdk_runs`); default "": desktop-agent's own loop.
    """

    model: str | None
    max_cost_usd: float | None
    max_steps: int | None
    max_time_s: float | None
    max_tokens_budget: int | None
    tools: Sequence[str] | None
    system_prompt: str | None
    approval_overrides: dict[str, str] | None
    max_tokens: int
    thinking_budget: int
    effort: str | None
    economy: bool
    use_defaults: bool
    count_waiting_time: bool
    web_search: bool | None
    search_domains: Sequence[str] | None
    search_blocked_domains: Sequence[str] | None
    server_web_fetch: bool
    code_execution: bool
    agent: str | None


def prepare_workspace(workspace: str | Path) -> Path:
    """The absolute folder of a run's workspace, created if missing.

    Raises:
        InvalidInputError: the path is a file, or the folder cannot be created.
    """
    path = Path(workspace).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise InvalidInputError(f"workspace {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInputError(f"cannot create workspace {path}: {exc.strerror}") from None
    return path


class Client:
    """Client API over one database.

    Args:
        db_path: the SQLite file (created and migrated if needed).
        settings: user settings; read from beside the database when omitted.
    """

    def __init__(self, db_path: Path, settings: Settings | None = None) -> None:
        self.db_path = db_path
        self.settings = settings or Settings.load(db_path)
        # The client's own: views of this package read them, nothing outside does (the
        # GUI and the CLI call the methods below; tests and benchmarks use ``store``).
        self._db = Database(
            DbSettings.for_path(db_path, self.settings.durability, database_password)
        )
        self._store = open_store(self._db)
        self._decisions = DecisionQueries(self._db)
        self._tools = ToolRegistry()
        self._mcp_names: set[str] = set()
        self.last_model_notice = ""
        """What the last run prepared was told of its model ("" when nothing: see models)."""
        self.reload_mcp_tools()

    @property
    def store(self) -> SqlStore:
        """The journal this client reads and writes: the seam for tests and benchmarks.

        An engine run in the same process (a test's worker, a benchmark's driver) works on
        it; the GUI, the CLI and the HTTP API never do: they call the methods of the client
        (import-linter's contracts in ``pyproject.toml`` keep them from importing the
        store, and ``tests/unit/test_import_contracts.py`` from reading this property).
        """
        return self._store

    def reload_mcp_tools(self) -> None:
        """Offer new runs the MCP tools as a worker last listed them (workers call them)."""
        for name in self._mcp_names:
            self._tools.remove(name)
        listed = listed_tools(self.db_path.parent / MCP_CATALOGUE)
        for tool in listed:
            self._tools.add(tool)
        self._mcp_names = {t.name for t in listed}

    def close(self) -> None:
        """Release database connections."""
        self._db.dispose()

    def run_again(
        self,
        run_id: str,
        *,
        goal: str | None = None,
        model: str | None = None,
        max_cost_usd: float | None = None,
        max_tokens_budget: int | None = None,
        effort: str | None = None,
        thinking_budget: int | None = None,
        economy: bool | None = None,
        tags: Sequence[str] | None = None,
    ) -> Run:
        """A new run started as ``run_id`` was, some of its options changed.

        ``goal``, ``model``, ``max_cost_usd``, ``max_tokens_budget`` (the token budget),
        ``effort``, ``thinking_budget``, ``economy``, ``tags``: None keeps the original's. The same
        tools, approval overrides, budgets, workspace and placement; the new run records
        the original (``forked_from``, at step 0), which lists it among its forks. Its
        attachments are the original's, recorded where they are in the workspace.
        """
        old = self.run(run_id)
        b = old.budget
        return self.start_run(
            goal if goal is not None else old.goal,
            forked_from=old.id,
            workspace=old.workspace,
            placement=old.placement,
            model=model or old.model,
            tools=[name for name, _version in old.spec.tools],
            approval_overrides=dict(old.spec.approval_overrides),
            system_prompt=old.spec.system_prompt,
            max_tokens=old.spec.max_tokens,
            thinking_budget=(
                thinking_budget if thinking_budget is not None else old.spec.thinking_budget
            ),
            effort=effort if effort is not None else old.spec.effort,
            economy=economy if economy is not None else old.spec.economy,
            max_cost_usd=max_cost_usd if max_cost_usd is not None else b.max_cost_usd,
            max_steps=b.max_steps,
            max_time_s=b.max_time_s,
            max_tokens_budget=(
                max_tokens_budget if max_tokens_budget is not None else b.max_tokens
            ),
            count_waiting_time=b.count_waiting_time,
            use_defaults=False,
            tags=old.tags if tags is None else tags,
            attachments=[Path(old.workspace) / a.path for a in old.spec.attachments],
        )

    def models(self, *, refresh: bool = False, include_retired: bool = False) -> ModelList:
        """The models runs can use, current ones first (see :mod:`desktop_agent.client.models`).

        Args:
            refresh: read the catalogue from the API with the analyst's key first (and
                store it for the app and the workers).
            include_retired: list retired models too.

        Raises:
            InvalidInputError: a refresh could not be made (no key, refused, offline).
        """
        key = None
        if refresh:
            key = KeyStore().get() or ""
        return list_models(self._db, refresh_key=key, include_retired=include_retired)

    def can_batch(self, model: str) -> bool:
        """Whether ``model`` can run in economy mode (see :func:`client.models.can_batch`)."""
        return can_batch(self._db, model)

    def forks_of(self, run_id: str) -> list[Run]:
        """The runs made from ``run_id``: forks, and runs again (``forked_at_seq`` 0)."""
        return self._store.forks_of(run_id)

    def default_placement(self, workspace: Path) -> str:
        """Where a run in ``workspace`` may execute unless the analyst says otherwise.

        One database file means one machine: ``any``. On a shared PostgreSQL database, a
        workspace is a folder of this machine, so only its workers may run it
        (``host:THIS``), unless it lies under one of the ``shared_paths`` the analyst
        declared (a folder every worker mounts): then ``any``.
        """
        if config.database_url(self.db_path) is None:
            return ANY
        resolved = workspace.expanduser().absolute()
        for shared in self.settings.shared_paths:
            if resolved.is_relative_to(Path(shared).expanduser().absolute()):
                return ANY
        return f"host:{this_host()}"

    # ------------------------------------------------------------------ runs

    def start_run(
        self,
        goal: str,
        *,
        workspace: str | Path | None = None,
        placement: str | None = None,
        forked_from: str | None = None,
        tags: Sequence[str] = (),
        attachments: Sequence[attaching.AttachmentInput] = (),
        **options: Unpack[RunSpecOptions],
    ) -> Run:
        """Queue a new run in ``workspace`` (None: a fresh folder); a worker picks it up.

        ``options`` are :meth:`prepare_run`'s (see :class:`RunSpecOptions`); ``placement``
        says which workers may run it (see :meth:`default_placement` when None);
        ``forked_from``: the run this one runs again (it shares none of its steps);
        ``tags``: the analyst's tags (see :mod:`desktop_agent.domain.tags`);
        ``attachments``: files copied into the workspace's ``attachments/`` and recorded
        with the run (:mod:`desktop_agent.client.attachments`; on any error, none is).
        """
        goal = check_text(goal, "the goal").strip()
        if not goal:
            raise InvalidInputError("the goal is empty: say what the agent should do")
        checked_tags = normalize_tags(tags)
        where = parse_placement(placement) if placement is not None else None
        spec, budget = self.prepare_run(**options)
        files = attaching.check_sources(attachments)
        run_id = new_run_id()
        ws = self._workspace(workspace, run_id)
        where = where or self.default_placement(ws)
        placed = attaching.place(ws, files, fresh_workspace=workspace is None)
        spec = replace(spec, attachments=placed.records)
        now = time.time()
        run = Run(
            id=run_id,
            goal=goal,
            status=RunStatus.QUEUED,
            spec=spec,
            workspace=str(ws),
            budget=budget,
            created_at=now,
            updated_at=now,
            title=goal.splitlines()[0][:120],
            definition_hash=spec.definition_hash,
            placement=where,
            forked_from=forked_from,
            forked_at_seq=0 if forked_from else None,
            tags=checked_tags,
        )
        try:
            self._store.create_run(run)
        except BaseException:
            placed.undo()
            raise
        record_start_forecast(self, run)  # kept with the run; a failure is only logged
        return replace(self._store.get_run(run_id), tags=checked_tags)

    def prepare_run(self, **options: Unpack[RunSpecOptions]) -> tuple[AgentSpec, Budget]:
        """Validate run options into a definition and a budget (for a run or a template)."""
        unexpected = options.keys() - RunSpecOptions.__optional_keys__
        if unexpected:  # untyped callers: as a misspelt keyword argument would
            raise TypeError(f"unexpected run option(s): {', '.join(sorted(unexpected))}")
        model = (options.get("model") or self.settings.default_model).strip()
        economy = bool(options.get("economy", False))
        agent = sdk_runs.checked_agent(options.get("agent"), model, economy=economy)
        tools = [] if agent else options.get("tools")  # an Agent SDK run has Claude Code's
        approval_overrides = options.get("approval_overrides")
        max_cost_usd = options.get("max_cost_usd")
        max_steps = options.get("max_steps")
        max_time_s = options.get("max_time_s")
        use_defaults = options.get("use_defaults", True)
        validate_model(model)
        effort = (options.get("effort") or "").strip().lower()
        self.last_model_notice = check_model(
            self._db, model, effort, economy=bool(options.get("economy", False))
        )
        names = (
            list(tools)
            if tools is not None
            else list(default_tools(web_search=self.settings.web_search))
        )
        from desktop_agent.client.models import stored_catalogue
        from desktop_agent.domain.server_tools import web_search_choice

        web_search = options.get("web_search")
        entry = stored_catalogue(self._db).entry(model)
        names, allowed, blocked, notice = web_search_choice(
            names,
            web_search,
            options.get("search_domains"),
            options.get("search_blocked_domains"),
            model_takes_it=entry is None or entry.has("web_search"),
            refuse=InvalidInputError,
        )
        names, added = self._server_tools(names, model, entry, options)
        self.last_model_notice = " ".join(filter(None, (self.last_model_notice, notice, added)))
        if any(n.startswith(mcp_tools.PREFIX) for n in names):
            # ``mcp:SERVER`` stands for the server's tools as the catalogue lists them now.
            self.reload_mcp_tools()
            names = mcp_tools.expand_tools(names, mcp_tools.catalogue(self.db_path))
        available = self._tools.names()
        unknown = [n for n in names if n not in available]
        if unknown:
            raise InvalidInputError(
                f"unknown tool(s): {', '.join(unknown)}; available: {', '.join(available)}"
            )
        for name, policy in (approval_overrides or {}).items():
            if policy not in {p.value for p in ApprovalPolicy}:
                raise InvalidInputError(f"approval policy for {name} must be always, ask or never")
        s = self.settings
        budget = Budget(
            max_cost_usd=max_cost_usd
            if max_cost_usd is not None
            else (s.default_max_cost_usd if use_defaults else None),
            max_steps=max_steps
            if max_steps is not None
            else (s.default_max_steps if use_defaults else None),
            max_time_s=max_time_s
            if max_time_s is not None
            else (s.default_max_time_s if use_defaults else None),
            max_tokens=options.get("max_tokens_budget"),
            count_waiting_time=options.get("count_waiting_time", False),
        )
        for label, value in (
            ("cost", budget.max_cost_usd),
            ("steps", budget.max_steps),
            ("time", budget.max_time_s),
            ("tokens", budget.max_tokens),
        ):
            # NaN compares false with everything, and an infinite budget is no budget.
            if value is not None and not (math.isfinite(value) and value > 0):
                raise InvalidInputError(f"the {label} budget must be a finite number above zero")
        spec = AgentSpec(
            model=model,
            system_prompt=check_text(
                options.get("system_prompt") or DEFAULT_SYSTEM_PROMPT, "the system prompt"
            ),
            tools=tuple((n, self._tools.version_of(n)) for n in names),
            max_tokens=options.get("max_tokens", 4096),
            thinking_budget=options.get("thinking_budget", 0),
            approval_overrides=tuple(sorted((approval_overrides or {}).items())),
            effort=effort,
            economy=bool(options.get("economy", False)),
            web_search=web_search,
            search_domains=allowed,
            search_blocked_domains=blocked,
            server_web_fetch="server_web_fetch" in names,
            code_execution="code_execution" in names,
        )
        if spec.economy and model == DEMO_MODEL:
            raise InvalidInputError(
                "the demo model runs on this machine and cannot be sent in a Message Batch: "
                "choose a Claude model for economy mode, or run the demo without it"
            )
        if agent:
            spec = sdk_runs.sdk_spec(spec, agent, options.get("system_prompt"))
        return spec, budget

    @staticmethod
    def _server_tools(
        names: list[str], model: str, entry: ModelEntry | None, options: RunSpecOptions
    ) -> tuple[list[str], str]:
        """``names`` with the web fetch and code execution the run chose, and a notice."""
        from desktop_agent.domain.server_tools import added_server_tools

        web_fetch = bool(options.get("server_web_fetch", False))
        code = bool(options.get("code_execution", False))
        if model == DEMO_MODEL and (web_fetch or code):
            raise InvalidInputError(
                "the demo model runs on this machine and has no Anthropic server tools: "
                "choose a Claude model for web fetch or code execution"
            )
        return added_server_tools(
            names,
            web_fetch=web_fetch,
            code_execution=code,
            economy=bool(options.get("economy", False)),
            entry=entry,
            model=model,
            refuse=InvalidInputError,
        )

    def _workspace(self, workspace: str | Path | None, run_id: str) -> Path:
        if workspace is None:
            return prepare_workspace(self.db_path.parent / "workspaces" / run_id)
        return prepare_workspace(workspace)

    def runs(
        self,
        statuses: Iterable[RunStatus] | None = None,
        search: str | None = None,
        limit: int = 500,
        tags: Sequence[str] = (),
    ) -> list[Run]:
        """Runs, newest first, with their tags; ``tags``: only runs carrying all of them."""
        wanted = normalize_tags(tags)
        found = self._store.list_runs(statuses, limit=limit, search=search, tags=wanted)
        return with_tags(self._db, found)

    def run(self, run_id: str) -> Run:
        """A run by id or unique prefix; an archived or imported run is refused as read-only."""
        try:
            return with_tags(self._db, [self._store.find_run(run_id)])[0]
        except NotFoundError:
            from desktop_agent.persistence.imports import archived_id

            found = archived_id(self._db, self.db_path.parent / "archives", run_id)
            if found is None:
                raise
            raise NotFoundError(
                f"run {found} is archived here, read-only: it cannot be resumed, changed or "
                f"cancelled (`desktop-agent show {found}` reads it)"
            ) from None

    def steps(self, run_id: str, from_seq: int = 1, limit: int | None = None) -> list[Step]:
        """The run's journal."""
        return self._store.load_steps(run_id, from_seq, limit)

    def step(self, run_id: str, seq: int) -> Step:
        """One step of the run's journal; raises NotFoundError."""
        return self._store.get_step(run_id, seq)

    def events(self, run_id: str) -> list[RunEvent]:
        """What happened to the run outside its journal (e.g. a late worker's effects)."""
        return self._store.run_events(run_id)

    # ------------------------------------------------------------------ commands

    def _command(self, run_id: str, kind: CommandKind, payload: JSON = None) -> int:
        run = self.run(run_id)
        return self._store.add_command(run.id, kind, payload)

    def has_pending_commands(self, run_id: str) -> bool:
        """Whether commands to the run wait for a worker to apply them."""
        return bool(self._store.pending_commands(run_id))

    def resume_runs_waiting_for_key(self) -> int:
        """Resume every run that waits for an API key (one was just stored); how many."""
        return self._store.resume_waiting_for(str(WaitReason.CREDENTIALS))

    def pause(self, run_id: str) -> Run:
        """Pause at the next step boundary."""
        run = self.run(run_id)
        if run.status.is_terminal or run.status in (RunStatus.PAUSED, RunStatus.STOPPED):
            raise InvalidStateError(f"run {run.id} is {run.status}: nothing to pause")
        self._store.add_command(run.id, CommandKind.PAUSE)
        return run

    def resume(self, run_id: str) -> Run:
        """Resume a paused or stopped run, retry a failed one, or wake a rate-limited one now.

        A stopped run continues from its journal where it stopped, and the model is told
        it was resumed.
        """
        run = self.run(run_id)
        ok = (
            run.status.is_resumable
            or (
                run.status == RunStatus.WAITING
                and run.wait_reason
                in (WaitReason.RATE_LIMIT, WaitReason.CREDENTIALS, WaitReason.TIMER)
            )
            # Parked with no step in doubt (a model call that kept failing, an error):
            # resuming tries again; a step in doubt is decided with resolve instead.
            or (run.status == RunStatus.NEEDS_ATTENTION and run.attention_seq is None)
            # Held by the monthly cap: goes on if it was raised, else waits again.
            or self.waits_for_monthly_cap(run)
        )
        if not ok:
            raise InvalidStateError(_resume_hint(run))
        self._store.add_command(run.id, CommandKind.RESUME)
        return run

    def cancel(self, run_id: str) -> Run:
        """Cancel (interrupting a model call in flight); a partial report is written."""
        run = self.run(run_id)
        if run.status.is_terminal:
            raise InvalidStateError(f"run {run.id} already {run.status}")
        self._store.add_command(run.id, CommandKind.CANCEL)
        return run

    def stop(self, run_id: str) -> Run:
        """Stop gracefully with a partial report (e.g. instead of extending a budget).

        The run is stopped, not done: :meth:`resume` continues it, :meth:`cancel` ends it.
        """
        run = self.run(run_id)
        if run.status.is_terminal or run.status == RunStatus.STOPPED:
            raise InvalidStateError(f"run {run.id} already {run.status}")
        self._store.add_command(run.id, CommandKind.STOP)
        return run

    def steer(self, run_id: str, text: str) -> Run:
        """Add a note from the analyst to the conversation at the next boundary.

        A note to a waiting, paused or stopped run is delivered when it goes on.
        """
        if not check_text(text, "the note").strip():
            raise InvalidInputError("the note is empty")
        run = self.run(run_id)
        if run.status in (RunStatus.CANCELLED,):
            raise InvalidStateError(f"run {run.id} is cancelled")
        self._store.add_command(run.id, CommandKind.STEER, {"text": text.strip()})
        return run

    def answer(self, run_id: str, text: str) -> Run:
        """Answer the agent's question."""
        check_text(text, "the answer")
        run = self.run(run_id)
        if run.wait_reason != WaitReason.HUMAN_INPUT:
            raise InvalidStateError(f"run {run.id} is not waiting for an answer")
        self._store.add_command(run.id, CommandKind.ANSWER, {"text": text})
        return run

    def extend_budget(
        self,
        run_id: str,
        *,
        cost_usd: float = 0.0,
        steps: int = 0,
        time_s: float = 0.0,
        tokens: int = 0,
    ) -> Run:
        """Raise the run's limits."""
        if not all(math.isfinite(v) for v in (cost_usd, time_s)):
            raise InvalidInputError("amounts to add must be finite numbers")
        if min(cost_usd, steps, time_s, tokens) < 0 or not any((cost_usd, steps, time_s, tokens)):
            raise InvalidInputError("give a positive amount to add (cost, steps, time or tokens)")
        run = self.run(run_id)
        if run.status.is_terminal:
            raise InvalidStateError(f"run {run.id} already {run.status}")
        if self.waits_for_monthly_cap(run):
            raise InvalidStateError(
                f"run {run.id} waits for the monthly spend cap, not its own budget: "
                "raise the cap in Settings, then resume the run"
            )
        self._store.add_command(
            run.id,
            CommandKind.EXTEND_BUDGET,
            {"cost_usd": cost_usd, "steps": steps, "time_s": time_s, "tokens": tokens},
        )
        return run

    def waits_for_monthly_cap(self, run: Run) -> bool:
        """Whether ``run`` waits because the monthly spend cap was reached."""
        if run.status != RunStatus.WAITING or run.wait_reason != WaitReason.BUDGET:
            return False
        last = self._store.load_steps(run.id, from_seq=run.last_seq)
        return bool(last) and last[-1].kind == StepKind.BUDGET and last[-1].name == MONTHLY_CAP

    def resolve(self, run_id: str, action: str) -> Run:
        """Decide about an effect left in doubt (probe, mark_done, retry, skip) or accept."""
        run = self.run(run_id)
        valid = {r.value for r in Resolution} | {"accept"}
        if action not in valid:
            raise InvalidInputError(f"action must be one of {', '.join(sorted(valid))}")
        if run.status != RunStatus.NEEDS_ATTENTION:
            raise InvalidStateError(f"run {run.id} does not need attention (it is {run.status})")
        self._store.add_command(run.id, CommandKind.RESOLVE, {"action": action})
        return run

    def usage(self, since: float) -> Usage:
        """Spend and tokens of all runs since ``since``, grouped (see ``client/usage.py``)."""
        return usage_since(self._db, since, self.settings.monthly_spend_cap_usd)

    # ------------------------------------------------------------------ search

    def search(
        self, query: str, filters: SearchFilters | None = None, limit: int = 50
    ) -> list[SearchHit]:
        """Steps, goals and approvals matching ``query`` (archived runs too).

        Best first among the newest matches that pass the filters (the newest 1,000 at
        most; a date window reaches older ones): see :func:`search_index.search` for
        exactly what the order means. What was recorded since the last search is indexed
        first (a few thousand steps a second, in short transactions). See
        :mod:`desktop_agent.persistence.search` for the query syntax.

        Raises:
            InvalidInputError: the query cannot be read (a NUL, a lone surrogate or a
                control character in it is said so), or the database cannot search.
        """
        fts_query(query)  # a bad query is refused before any indexing
        search_index.catch_up(self._db)
        return search_index.search(self._db, query, filters or SearchFilters(), limit)

    # ------------------------------------------------------------------ approvals

    def approvals(self, state: ApprovalState | None = ApprovalState.PENDING) -> list[Approval]:
        """Approvals across runs, oldest first."""
        return self._store.list_approvals(state)

    def step_approvals(self, run_id: str, seq: int) -> list[Approval]:
        """The approvals asked for by step ``seq`` of the run (pending or decided)."""
        return self._store.get_approvals(run_id, seq)

    def approve(
        self,
        approval_id: str,
        arguments: JSON = None,
        note: str = "",
        *,
        edit: bool | None = None,
    ) -> Approval:
        """Approve, or approve with edited arguments (only the edited call runs).

        ``edit`` says whether ``arguments`` are an edit (default: when they are not None);
        an edit of ``null`` is refused rather than read as a plain approval. An edit is
        checked as the worker will check it (:func:`~desktop_agent.engine.edits.edit_problem`:
        the tool's schema and its pre-run check) and refused when it would not run. The
        decision is recorded only while the approval is still pending and undecided.

        Raises:
            InvalidInputError: the edit would not run (the message says why).
            InvalidStateError: the approval is decided, or a decision for it is queued.
        """
        check_text(note, "the note")
        check_json_text(arguments, "the edited arguments")
        approval = self._pending_approval(approval_id)
        editing = arguments is not None if edit is None else edit
        payload: dict[str, Any] = {"reason": note}
        if editing:
            tool = approval_tool(approval.run_id, approval.tool) or self._tools.get(approval.tool)
            if tool is None and self.run(approval.run_id).spec.agent == AgentKind.AGENT_SDK:
                tool = SdkTool(approval.tool)  # Claude Code checks its own arguments
            problem = edit_problem(tool, arguments, self.tool_context(approval))
            if problem:
                raise InvalidInputError(
                    f"edit of {approval.id} ({approval.tool}) refused, nothing was approved: "
                    f"{problem}",
                    code="edit_refused",
                )
            payload["arguments"] = arguments
        self._decisions.record([Decision(approval.id, CommandKind.APPROVE, payload)])
        return approval

    def approve_all(self, approval_ids: Sequence[str], note: str = "") -> list[Approval]:
        """Approve several as proposed: all of them, or none when one cannot be."""
        check_text(note, "the note")
        approvals = [self._pending_approval(i) for i in dict.fromkeys(approval_ids)]
        self._decisions.record(
            [Decision(a.id, CommandKind.APPROVE, {"reason": note}) for a in approvals]
        )
        return approvals

    def reject(self, approval_id: str, reason: str) -> Approval:
        """Reject; the reason goes back to the model."""
        return self.reject_all([approval_id], reason)[0]

    def reject_all(self, approval_ids: Sequence[str], reason: str) -> list[Approval]:
        """Reject several with one reason: all of them, or none when one cannot be."""
        if not check_text(reason, "the reason").strip():
            raise InvalidInputError("give a reason: the agent reads it")
        approvals = [self._pending_approval(i) for i in dict.fromkeys(approval_ids)]
        self._decisions.record(
            [Decision(a.id, CommandKind.REJECT, {"reason": reason}) for a in approvals]
        )
        return approvals

    def _pending_approval(self, approval_id: str) -> Approval:
        """The approval, if nothing decided it yet (queued decisions count)."""
        approval = self._store.get_approval(approval_id)
        if approval.state != ApprovalState.PENDING:
            raise InvalidStateError(f"approval {approval_id} was already {approval.state}")
        queued = self._decisions.queued_decision(approval.id, approval.run_id)
        if queued is not None:
            raise InvalidStateError(
                f"approval {approval_id} was already {queued}: that decision is waiting for "
                "the worker to apply it"
            )
        return approval

    def tool_context(self, approval: Approval) -> ToolContext | None:
        """Where a tool checks arguments of ``approval`` from here (None: run not found)."""
        try:
            run = self.run(approval.run_id)
        except NotFoundError:
            return None
        return ToolContext(
            run_id=run.id,
            seq=approval.seq,
            idempotency_key=f"{run.id}:{approval.seq}",
            workspace=Path(run.workspace),
            clock=SystemClock(),
            cancel=CancelToken(),
            settings=self.settings,
        )

    # ------------------------------------------------------------------ worker

    def storage_warning(self) -> str | None:
        """A warning about the database's storage, else None.

        The note a worker left when the database file was deleted or replaced under it
        (see ``worker/vanish.py``: the database cannot hold that message), else a warning
        when the disk holding the database is (nearly) full. Read-only on purpose: when the
        disk is full the worker cannot even record why its runs stopped, but this check
        still works.
        """
        vanished = vanish_notice(self.db_path.parent)
        if vanished is not None:
            return vanished
        try:
            free = shutil.disk_usage(self.db_path.parent).free
        except OSError:
            return None
        if free >= LOW_DISK_BYTES:
            return None
        if free >= FULL_DISK_BYTES:
            return (
                f"the disk holding the database is low on space ({free // 1024} KB free): "
                "free some space; runs pause when it is full and go on once space is freed"
            )
        return (
            f"the disk holding the database is full ({free // 1024} KB free): runs cannot "
            "save their steps and wait; they go on by themselves once space is freed"
        )

    def worker_status(self) -> WorkerStatus:
        """Whether a live worker serves this database."""
        now = time.time()
        workers = self._store.list_workers()
        for info, proc_started in workers:
            age = now - info.heartbeat_at
            local_dead = info.host == _hostname() and not procs.process_alive(
                info.pid, proc_started
            )
            if age <= WORKER_STALE_S and not local_dead:
                return WorkerStatus(True, info, age)
        if workers:
            info = workers[0][0]
            return WorkerStatus(False, info, now - info.heartbeat_at)
        return WorkerStatus(False, None, None)

    def spawn_worker(
        self, *, until_idle: bool = False, nice: int = 0, idle_exit_s: float | None = None
    ) -> int:
        """Start a detached worker process for this database; returns its pid.

        See :func:`desktop_agent.procs.spawn_worker`, the one place workers are started.

        Args:
            until_idle: the worker exits when no run has work left.
            nice: how much lower than ours the worker's CPU priority is (0-19).
            idle_exit_s: the worker exits after this long with nothing to do (None: never).
        """
        return procs.spawn_worker(
            self.db_path, until_idle=until_idle, nice=nice, idle_exit_s=idle_exit_s
        )

    def ensure_worker(self, *, until_idle: bool = False) -> int | None:
        """Start a worker when none is alive; returns the new pid, or None."""
        if self.worker_status().alive:
            return None
        return self.spawn_worker(until_idle=until_idle)

    def needs_worker(self, run_ids: Iterable[str]) -> bool:
        """Whether a worker must be started for these runs.

        True when one of them has work for a worker (e.g. a decision just queued) and no
        live worker serves the database to do it.
        """
        wanted = any(self._store.wants_worker(self.run(r).id) for r in run_ids)
        return wanted and not self.worker_status().alive


def _hostname() -> str:
    import socket

    return socket.gethostname()


def this_host() -> str:
    """This machine's name as workers register it (``DESKTOP_AGENT_HOST`` overrides it)."""
    return os.environ.get("DESKTOP_AGENT_HOST") or _hostname()


def _resume_hint(run: Run) -> str:
    if run.status == RunStatus.WAITING and run.wait_reason == WaitReason.APPROVAL:
        return f"run {run.id} waits for an approval: approve or reject it"
    if run.status == RunStatus.WAITING and run.wait_reason == WaitReason.BUDGET:
        return (
            f"run {run.id} reached its budget: `desktop-agent budget {run.id}` shows what it "
            "spent and the command that extends the limit it reached"
        )
    if run.status == RunStatus.WAITING and run.wait_reason == WaitReason.HUMAN_INPUT:
        return f"run {run.id} asked a question: `desktop-agent answer {run.id} TEXT`"
    if run.status == RunStatus.NEEDS_ATTENTION:
        return f"run {run.id} needs attention: `desktop-agent resolve {run.id} ACTION`"
    return f"run {run.id} is {run.status}: nothing to resume"


def validate_model(model: str) -> None:
    """Refuse model names that cannot be right."""
    if model == "demo" or model in MODELS or model.startswith("claude-"):
        return
    raise InvalidInputError(
        f"unknown model {model!r}; use demo or a Claude model "
        f"({', '.join(m for m in MODELS if m != 'demo')})"
    )


__all__ = ["Client", "NotFoundError", "WorkerStatus"]
