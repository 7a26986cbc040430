"""Anthropic's hosted Managed Agents: sessions and their events, in the domain's terms.

Three parts:

* :class:`ManagedAgents`, a small client over the SDK's ``client.beta.sessions`` (the
  ``managed-agents-2026-04-01`` beta, which the SDK sends itself): the organization's
  sessions, one session, its events after a point (``GET /v1/sessions/{id}/events``,
  paginated, oldest first), and the events desktop-agent sends (``user.tool_confirmation``,
  ``user.interrupt``, ``user.message``). Its HTTP client comes from
  :mod:`desktop_agent.http_client`; the address is the SDK's, or ``ANTHROPIC_BASE_URL``.
  Sending is never retried by the SDK: a retry after a lost answer could send twice (the
  driver looks for what it sent in the session's events instead).
* A session as a run (:func:`session_run`): ``AgentSpec.agent`` is ``managed-agents``,
  ``session_id`` the session's id, the model the session's agent's. A session is followed
  by at most one run of a database: its run id is derived from the session id
  (:func:`run_id_for`).
* A session's events as journal steps (:func:`import_events`), read against
  :class:`Follow`, what the journal already holds of the session (the driver keeps it in
  the run's snapshot, written in the same transaction as the steps). A model request
  (``span.model_request_start`` to ``span.model_request_end``) is a ``model_call`` step
  named after the session's model, holding the agent's messages and the tool uses it asked
  for, with the request's ``model_usage`` and its price; each ``agent.tool_use``,
  ``agent.mcp_tool_use`` and ``agent.custom_tool_use`` is a ``tool_call`` step closed by
  its result (``agent.tool_result``, ``agent.mcp_tool_result``, ``user.custom_tool_result``);
  a ``user.message`` someone else sent is a note (``steer``), a ``session.error`` an
  ``error`` step. Status events, ``session.usage`` and the echoes of what desktop-agent
  sent change :class:`Follow` only. Every event is read once: an event id is its key, and
  what the journal holds is never taken again, however often an activation is replayed.

Names and shapes are the SDK's (``anthropic`` 2.14, ``types/beta/sessions``) and the
Managed Agents pages (events and streaming, permission policies, session budgets).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from desktop_agent.domain import (
    JSON,
    AgentSpec,
    Budget,
    Run,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.domain.agents import AgentKind
from desktop_agent.domain.errors import (
    ApiConnectionError,
    AuthenticationError,
    BadRequestError,
    DesktopAgentError,
    NotFoundError,
    RateLimitedError,
)
from desktop_agent.engine.ports import StepIntent, StepOutcome

if TYPE_CHECKING:
    import anthropic
    import httpx2

AGENT = AgentKind.MANAGED.value
"""``AgentSpec.agent`` of a followed session."""

BETA = "managed-agents-2026-04-01"
"""The beta every Managed Agents endpoint needs (the SDK sends it by itself)."""

NO_KEY = "no API key is set: Managed Agents sessions are read with the analyst's key"

TOOL_USES = {
    "agent.tool_use": "tool",
    "agent.mcp_tool_use": "mcp",
    "agent.custom_tool_use": "custom",
}
"""The events by which the agent calls a tool, and the kind of tool."""

TOOL_RESULTS = {
    "agent.tool_result": "tool_use_id",
    "agent.mcp_tool_result": "mcp_tool_use_id",
    "user.custom_tool_result": "custom_tool_use_id",
}
"""The events that end a tool use, and the field naming the use they end."""

ACTIVE = frozenset({"running", "rescheduling"})
"""Session statuses in which the agent works on its own."""


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class SessionInfo:
    """One session as listed (``GET /v1/sessions``, ``GET /v1/sessions/{id}``).

    Attributes:
        id: the session's id.
        title: its title ("" when it has none).
        status: ``rescheduling``, ``running``, ``idle`` or ``terminated``.
        agent: the agent's name.
        model: the agent's model id.
        created_at: epoch seconds.
        usage: the session's cumulative tokens.
        cost_usd: its cumulative list cost in dollars (None until the API tracks it).
        budget_usd: its own spend ceiling in dollars (None: none).
        active_s: seconds it ran (None: not reported).
        archived: whether it is archived.
    """

    id: str
    title: str
    status: str
    agent: str
    model: str
    created_at: float
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    budget_usd: float | None = None
    active_s: float | None = None
    archived: bool = False

    @property
    def name(self) -> str:
        """What an analyst reads: the title, else the agent's name, else the id."""
        return self.title or self.agent or self.id


@dataclass(frozen=True)
class Event:
    """One event of a session, as the API sent it.

    Attributes:
        id: the event's id ("" for an event the API left without one).
        type: its ``type`` (``agent.message``...).
        at: its ``processed_at`` (RFC 3339, as sent; "" when not yet processed).
        data: the whole event as JSON.
    """

    id: str
    type: str
    at: str
    data: dict[str, Any]

    @property
    def key(self) -> str:
        """What identifies the event in the journal: its id (else its type and time)."""
        return self.id or f"{self.type}@{self.at}"


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _dollars(amount: Any) -> float | None:
    """A ``BetaMonetaryAmount`` (minor units as a decimal string) in dollars."""
    if not isinstance(amount, dict):
        return None
    try:
        return int(str(amount.get("amount", ""))) / 100.0
    except ValueError:
        return None


def _epoch(text: Any) -> float:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return 0.0


def session_info(data: dict[str, Any]) -> SessionInfo:
    """A session object (JSON) as :class:`SessionInfo`."""
    agent, usage = _obj(data.get("agent")), _obj(data.get("usage"))
    stats, budget = _obj(data.get("stats")), _obj(data.get("budget"))
    model = _obj(agent.get("model"))
    active = usage.get("active_seconds", stats.get("active_seconds"))
    return SessionInfo(
        id=str(data.get("id", "")),
        title=str(data.get("title") or ""),
        status=str(data.get("status", "")),
        agent=str(agent.get("name") or ""),
        model=str(model.get("id") or agent.get("model") or ""),
        created_at=_epoch(data.get("created_at")),
        usage=usage_of(usage),
        cost_usd=_dollars(usage.get("list_cost")),
        budget_usd=_dollars(budget.get("max_list_cost")),
        active_s=float(active) if isinstance(active, int | float) else None,
        archived=bool(data.get("archived_at")),
    )


def usage_of(data: Any) -> Usage:
    """Tokens of a ``model_usage`` or a session's ``usage`` (the API's field names)."""
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        int(data.get("input_tokens") or 0),
        int(data.get("output_tokens") or 0),
        int(data.get("cache_creation_input_tokens") or 0),
        int(data.get("cache_read_input_tokens") or 0),
    )


def run_id_for(session_id: str) -> str:
    """The id of the run that follows ``session_id`` (ten hex digits, as every run id).

    Derived from the session id, so that a session is followed once per database: a
    second run for it would have the same id and is refused when it is inserted.
    """
    return hashlib.sha256(f"{AGENT}:{session_id}".encode()).hexdigest()[:10]


def session_run(info: SessionInfo, *, goal: str, workspace: str, budget: Budget, now: float) -> Run:
    """The queued run that follows the session ``info`` (a worker then drives it)."""
    spec = AgentSpec(
        model=info.model or "unknown",
        system_prompt="",
        agent=AGENT,
        session_id=info.id,
    )
    return Run(
        id=run_id_for(info.id),
        goal=goal,
        status=RunStatus.QUEUED,
        spec=spec,
        workspace=workspace,
        budget=budget,
        created_at=now,
        updated_at=now,
        title=f"{info.name} (Managed Agents)"[:120],
        definition_hash=spec.definition_hash,
    )


# --------------------------------------------------------------------------- the API


def _redact(text: str, key: str) -> str:
    return text.replace(key, "[key]") if key else text


def _failure(what: str, exc: Exception, key: str) -> DesktopAgentError:
    """The domain's error for an SDK or transport failure (the key never in its text)."""
    import anthropic

    text = " ".join(_redact(str(exc), key).split())
    if isinstance(exc, anthropic.AuthenticationError | anthropic.PermissionDeniedError):
        return AuthenticationError(f"{what}: the API key was refused ({text})")
    if isinstance(exc, anthropic.NotFoundError):
        return NotFoundError(f"{what}: not found ({text})")
    if isinstance(exc, anthropic.RateLimitError):
        return RateLimitedError(f"{what}: rate limited ({text})")
    if isinstance(exc, anthropic.APIStatusError) and exc.status_code < 500:
        return BadRequestError(f"{what}: refused ({text})")
    return ApiConnectionError(f"{what} failed: {text}")


def event_of(data: dict[str, Any]) -> Event:
    """An event object (JSON) as :class:`Event`."""
    return Event(
        str(data.get("id") or ""),
        str(data.get("type", "")),
        str(data.get("processed_at") or ""),
        data,
    )


def _event(item: Any) -> Event:
    return event_of(item.model_dump(mode="json"))


class ManagedAgents:
    """The organization's Managed Agents sessions, with the analyst's key.

    Args:
        key_source: the API key now (None or "": no key; every call raises).
        base_url: the API's address (None: the SDK's, or ``ANTHROPIC_BASE_URL``).
        timeout: seconds an answer may take.
    """

    def __init__(
        self,
        key_source: Callable[[], str | None],
        *,
        base_url: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.key_source = key_source
        self.base_url = base_url
        self.timeout = timeout
        self._lock = threading.Lock()
        self._sdk: anthropic.Anthropic | None = None
        self._http: httpx2.Client | None = None
        self._key = ""

    def has_key(self) -> bool:
        """Whether a key is set (nothing is sent without one)."""
        return bool(self._current_key())

    def close(self) -> None:
        """Close the HTTP connections (a later call opens new ones)."""
        with self._lock:
            if self._http is not None:
                self._http.close()
            self._http, self._sdk, self._key = None, None, ""

    def sessions(self, *, limit: int = 100) -> list[SessionInfo]:
        """The organization's sessions, newest first (at most ``limit``)."""
        sdk, key = self._client()
        out: list[SessionInfo] = []
        try:
            for item in sdk.beta.sessions.list(limit=min(limit, 100), order="desc"):
                out.append(session_info(item.model_dump(mode="json")))
                if len(out) >= limit:
                    break
        except Exception as exc:
            raise self._wrap("listing the Managed Agents sessions", exc, key) from None
        return out

    def session(self, session_id: str) -> SessionInfo:
        """One session (``NotFoundError`` when the API does not know it)."""
        sdk, key = self._client()
        try:
            item = sdk.beta.sessions.retrieve(session_id)
        except Exception as exc:
            raise self._wrap(f"reading session {session_id}", exc, key) from None
        return session_info(item.model_dump(mode="json"))

    def events(
        self,
        session_id: str,
        *,
        since: str = "",
        types: Sequence[str] = (),
        limit: int = 1000,
    ) -> list[Event]:
        """The session's events, oldest first: those processed at or after ``since``.

        At most ``limit`` (the pages are read in turn); ``types`` keeps those types only.
        """
        sdk, key = self._client()
        options: dict[str, Any] = {"order": "asc", "limit": min(limit, 1000)}
        if since:
            options["created_at_gte"] = since
        if types:
            options["types"] = list(types)
        out: list[Event] = []
        try:
            for item in sdk.beta.sessions.events.list(session_id, **options):
                out.append(_event(item))
                if len(out) >= limit:
                    break
        except Exception as exc:
            raise self._wrap(f"reading the events of session {session_id}", exc, key) from None
        return out

    def send(self, session_id: str, event: dict[str, JSON]) -> list[Event]:
        """Send one event (``user.tool_confirmation``, ``user.interrupt``, ``user.message``).

        Never retried: a lost answer leaves it in doubt, and the caller looks for it in the
        session's events before sending it again. Returns the events the API took.
        """
        sdk, key = self._client()
        try:
            sent = sdk.with_options(max_retries=0).beta.sessions.events.send(
                session_id,
                events=[event],  # type: ignore[list-item]
            )
        except Exception as exc:
            raise self._wrap(
                f"sending {event.get('type')} to session {session_id}", exc, key
            ) from None
        return [_event(item) for item in sent.data or []]

    def _wrap(self, what: str, exc: Exception, key: str) -> DesktopAgentError:
        if isinstance(exc, DesktopAgentError):
            return exc
        return _failure(what, exc, key)

    def _current_key(self) -> str:
        try:
            return (self.key_source() or "").strip()
        except Exception:  # a keyring that cannot be read means no key
            return ""

    def _client(self) -> tuple[anthropic.Anthropic, str]:
        key = self._current_key()
        if not key:
            raise AuthenticationError(NO_KEY)
        import anthropic

        from desktop_agent.http_client import sdk_client

        with self._lock:
            if self._sdk is None or key != self._key:
                if self._http is None:
                    self._http = sdk_client(self.timeout)
                self._sdk = anthropic.Anthropic(
                    api_key=key,
                    base_url=self.base_url,
                    max_retries=2,
                    timeout=self._http.timeout,
                    http_client=self._http,
                )
                self._key = key
            return self._sdk, key


# --------------------------------------------------------------------------- events to steps


@dataclass
class Follow:
    """What the journal holds of a followed session: the fold the driver keeps.

    Every event up to ``cursor`` (its key; ``cursor_at`` its ``processed_at``) is in the
    journal, and so are those in ``ahead`` after it; nothing else is. The rest is what the
    driver did about the session: the approval and budget steps it has open, the events
    it is sending (``sends``, open ``tool_call`` steps by seq) and has sent (``sent``).

    Attributes:
        cursor: the key of the last event read with every event before it.
        cursor_at: its ``processed_at`` (the next reading starts there).
        ahead: keys of events read after the cursor (an open model request's come later).
        model_seq: the open model request's step (0: none).
        model_start: its ``span.model_request_start`` id.
        tools: the tool uses without a result yet, by id: ``seq``, ``name``, ``kind``.
        asked: tool use id → approval id, for the confirmations the analyst was asked for.
        confirmed: tool use id → ``allow`` or ``deny``: confirmations the session has
            (from desktop-agent or any other client), until the tool's result.
        sent: keys of events desktop-agent sent (the newest 200).
        status: the session's status as its events last said.
        stop: the ``stop_reason`` of its last ``session.status_idle``.
        error: the message of its last ``session.error``.
        usage: its last ``session.usage`` snapshot.
        last_text: the agent's last message, its first line.
        approval_seq: the open approval step (0: none).
        budget_seq: the open budget step (0: none).
        interrupted: the run interrupted the session at its budget (a message asks it to
            go on once the budget is extended).
        sends: open ``tool_call`` steps of events being sent, by seq: ``event``, ``kind``.
    """

    cursor: str = ""
    cursor_at: str = ""
    ahead: list[str] = field(default_factory=list)
    model_seq: int = 0
    model_start: str = ""
    tools: dict[str, dict[str, JSON]] = field(default_factory=dict)
    asked: dict[str, str] = field(default_factory=dict)
    confirmed: dict[str, str] = field(default_factory=dict)
    sent: list[str] = field(default_factory=list)
    status: str = ""
    stop: dict[str, JSON] = field(default_factory=dict)
    error: str = ""
    usage: dict[str, JSON] = field(default_factory=dict)
    last_text: str = ""
    approval_seq: int = 0
    budget_seq: int = 0
    interrupted: bool = False
    sends: dict[str, dict[str, JSON]] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        """Plain data, for the run's snapshot."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: JSON) -> Follow:
        """Inverse of :meth:`to_json` (unknown keys ignored; a missing state is empty)."""
        if not isinstance(data, dict):
            return cls()
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def copy(self) -> Follow:
        """A deep copy."""
        return Follow.from_json(self.to_json())

    def remember_sent(self, key: str) -> None:
        """Record an event desktop-agent sent (its echo then adds nothing to the journal)."""
        if key and key not in self.sent:
            self.sent = [*self.sent, key][-200:]


@dataclass(frozen=True)
class Unit:
    """One commit's worth of journal: at most one outcome, new steps, the fold after them."""

    outcome: StepOutcome | None
    intents: tuple[StepIntent, ...]
    follow: Follow


Price = Callable[[str, Usage], float]
"""Dollars of a model request's tokens on a model (the caller's price table)."""


def fresh_events(events: Sequence[Event], follow: Follow) -> list[Event]:
    """The events of a reading (from ``follow.cursor_at`` on) that come after the cursor."""
    if not follow.cursor:
        return list(events)
    keys = [e.key for e in events]
    if follow.cursor in keys:
        return list(events[keys.index(follow.cursor) + 1 :])
    # The cursor's event is not in the reading (it was deleted): what was processed after
    # its time is new.
    start = _epoch(follow.cursor_at)
    return [e for e in events if _epoch(e.at) > start]


def text_of(content: Any) -> str:
    """The text of content blocks; other blocks named in brackets."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(f"[{block.get('type', 'block')}]")
    return "\n".join(p for p in parts if p)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class _Importer:
    """Turns events after the cursor into :class:`Unit` records (see :func:`import_events`)."""

    def __init__(
        self, events: Sequence[Event], follow: Follow, next_seq: int, model: str, price: Price
    ) -> None:
        self.f = follow.copy()
        self.fresh = fresh_events(events, self.f)
        read = {e.key for e in self.fresh}
        # Events taken after the cursor that this reading did not reach (it stops at its
        # limit): still taken, after the ones read.
        self.beyond = [k for k in self.f.ahead if k not in read]
        self.done: set[str] = set(self.f.ahead)
        self.held: list[Event] = []
        self.seq = next_seq
        self.model = model
        self.price = price
        self.units: list[Unit] = []

    # ------------------------------------------------------------------ bookkeeping

    def take(self, *events: Event) -> None:
        self.done.update(e.key for e in events)

    def advance(self) -> None:
        """Move the cursor over the events read, up to the first one not in the journal."""
        order = self.fresh
        i = 0
        while i < len(order) and order[i].key in self.done:
            i += 1
        if i:
            self.f.cursor, self.f.cursor_at = order[i - 1].key, order[i - 1].at
        self.f.ahead = [e.key for e in order[i:] if e.key in self.done] + self.beyond

    def emit(self, outcome: StepOutcome | None, intents: Iterable[StepIntent]) -> None:
        self.advance()
        self.units.append(Unit(outcome, tuple(intents), self.f.copy()))

    def next_seq(self) -> int:
        seq, self.seq = self.seq, self.seq + 1
        return seq

    # ------------------------------------------------------------------ steps

    def tool_intent(self, ev: Event) -> StepIntent:
        data = ev.data
        seq = self.next_seq()
        kind = TOOL_USES[ev.type]
        name = str(data.get("name") or ev.type)
        permission = data.get("evaluated_permission")
        policy = _obj(data.get("evaluation")).get("type")
        self.f.tools[ev.id] = {"seq": seq, "name": name, "kind": kind, "permission": permission}
        step_input: dict[str, JSON] = {
            "tool_use_id": ev.id,
            "arguments": data.get("input"),
            "kind": kind,
            "permission": permission,
            "policy": policy,
            "at": ev.at,
        }
        if data.get("mcp_server_name"):
            step_input["mcp_server"] = data["mcp_server_name"]
        if data.get("session_thread_id"):
            step_input["session_thread_id"] = data["session_thread_id"]
        return StepIntent(seq=seq, kind=StepKind.TOOL_CALL, name=name, input=step_input)

    def model_output(self, held: Sequence[Event]) -> dict[str, JSON]:
        content: list[JSON] = []
        thinking = 0
        for ev in held:
            if ev.type == "agent.message":
                text = text_of(ev.data.get("content"))
                if text:
                    content.append({"type": "text", "text": text})
                    self.f.last_text = _first_line(text)[:200]
            elif ev.type == "agent.thinking":
                thinking += 1
            elif ev.type in TOOL_USES:
                use = {"type": "tool_use", "id": ev.id, "name": ev.data.get("name")}
                content.append({**use, "input": ev.data.get("input")})
        out: dict[str, JSON] = {"content": content, "events": [e.key for e in held]}
        if thinking:
            out["thinking_events"] = thinking
        return out

    def open_model(self, start: str, step_input: dict[str, JSON]) -> None:
        """Record a model request as started (its step open until its end is read)."""
        seq = self.next_seq()
        self.f.model_seq, self.f.model_start = seq, start
        intent = StepIntent(seq=seq, kind=StepKind.MODEL_CALL, name=self.model, input=step_input)
        self.emit(None, [intent])

    def close_model(self, end: Event | None) -> None:
        """End the open model request with what it held (and its usage, from ``end``)."""
        held, self.held = self.held, []
        output = self.model_output(held)
        usage = usage_of(end.data.get("model_usage")) if end is not None else Usage()
        failed = end is not None and bool(end.data.get("is_error"))
        if end is None:
            output["note"] = "the session reported no end of this model request"
        outcome = StepOutcome(
            seq=self.f.model_seq,
            status=StepStatus.FAILED if failed else StepStatus.COMPLETED,
            output=output,
            error="the model request failed" if failed else None,
            usage=usage,
            cost_usd=self.price(self.model, usage) if end is not None else 0.0,
        )
        self.f.model_seq, self.f.model_start = 0, ""
        intents = [self.tool_intent(e) for e in held if e.type in TOOL_USES]
        self.take(*held)
        if end is not None:
            self.take(end)
        self.emit(outcome, intents)

    def completed(self, kind: StepKind, name: str, step_input: JSON, output: JSON) -> StepIntent:
        return StepIntent(
            seq=self.next_seq(),
            kind=kind,
            name=name,
            input=step_input,
            status=StepStatus.COMPLETED,
            output=output,
        )

    # ------------------------------------------------------------------ events

    def run(self) -> tuple[list[Unit], Follow]:
        for ev in self.fresh:
            if ev.key not in self.done:
                self.one(ev)
        self.advance()
        return self.units, self.f

    def one(self, ev: Event) -> None:
        handler = _HANDLERS.get(ev.type)
        if handler is not None:
            handler(self, ev)
        elif ev.type.startswith("session.status_"):
            self.status(ev)
        else:
            self.take(ev)

    def request_start(self, ev: Event) -> None:
        if self.f.model_seq:
            self.close_model(None)
        self.take(ev)
        self.open_model(ev.id, {"model_request": ev.id, "at": ev.at, "agent": AGENT})

    def request_end(self, ev: Event) -> None:
        if not self.f.model_seq:
            # Its start was not read (it came before the session was followed): the
            # request is recorded from its end.
            start = str(ev.data.get("model_request_start_id") or "")
            self.open_model(start, {"model_request": start, "agent": AGENT})
        self.close_model(ev)

    def agent_output(self, ev: Event) -> None:
        if self.f.model_seq:
            self.held.append(ev)  # taken with the request, at its end
            return
        self.take(ev)
        if ev.type in TOOL_USES:
            self.emit(None, [self.tool_intent(ev)])
            return
        step_input = {"at": ev.at, "agent": AGENT}
        output = self.model_output([ev])
        self.emit(None, [self.completed(StepKind.MODEL_CALL, self.model, step_input, output)])

    def confirmation(self, ev: Event) -> None:
        use = str(ev.data.get("tool_use_id", ""))
        self.f.confirmed[use] = str(ev.data.get("result", ""))
        self.take(ev)

    def user_message(self, ev: Event) -> None:
        self.take(ev)
        if ev.key in self.f.sent:
            return  # desktop-agent's own: its step is the one that sent it
        step_input = {"text": text_of(ev.data.get("content")), "from": "session", "at": ev.at}
        output = {"delivered": True}
        self.emit(None, [self.completed(StepKind.STEER, "message", step_input, output)])

    def status(self, ev: Event) -> None:
        if self.f.model_seq and ev.type in ("session.status_idle", "session.status_terminated"):
            self.close_model(None)
        status = ev.type.removeprefix("session.status_")
        self.f.status = "rescheduling" if status == "rescheduled" else status
        stop = _obj(ev.data.get("stop_reason"))
        self.f.stop = stop if ev.type == "session.status_idle" else {}
        self.take(ev)

    def error(self, ev: Event) -> None:
        error = _obj(ev.data.get("error"))
        message = str(error.get("message") or error.get("type") or "error")
        self.f.error = message
        self.take(ev)
        name = str(error.get("type") or "session.error")
        step_input = {"error": error, "at": ev.at}
        self.emit(None, [self.completed(StepKind.ERROR, name, step_input, {"message": message})])

    def usage(self, ev: Event) -> None:
        self.f.usage = _obj(ev.data.get("usage"))
        self.take(ev)

    def tool_result(self, ev: Event) -> None:
        use = str(ev.data.get(TOOL_RESULTS[ev.type], ""))
        output: dict[str, JSON] = {
            "content": text_of(ev.data.get("content")),
            "is_error": bool(ev.data.get("is_error")),
            "event": ev.key,
        }
        self.take(ev)
        self.f.confirmed.pop(use, None)
        self.f.asked.pop(use, None)
        known = self.f.tools.pop(use, None)
        if known is None:
            step = self.completed(
                StepKind.TOOL_CALL, "tool_result", {"tool_use_id": use, "at": ev.at}, output
            )
            self.emit(None, [step])
            return
        self.emit(
            StepOutcome(seq=int(str(known["seq"])), status=StepStatus.COMPLETED, output=output), []
        )


_HANDLERS: dict[str, Callable[[_Importer, Event], None]] = {
    "span.model_request_start": _Importer.request_start,
    "span.model_request_end": _Importer.request_end,
    "agent.message": _Importer.agent_output,
    "agent.thinking": _Importer.agent_output,
    **dict.fromkeys(TOOL_USES, _Importer.agent_output),
    **dict.fromkeys(TOOL_RESULTS, _Importer.tool_result),
    "user.tool_confirmation": _Importer.confirmation,
    "user.message": _Importer.user_message,
    "session.error": _Importer.error,
    "session.usage": _Importer.usage,
}
"""How each type of event is read (a status event by :meth:`_Importer.status`; any other
type adds nothing to the journal)."""


def import_events(
    events: Sequence[Event], follow: Follow, *, next_seq: int, model: str, price: Price
) -> tuple[list[Unit], Follow]:
    """The journal records of the events after ``follow``'s cursor, and the fold after all.

    ``events`` is a reading from ``follow.cursor_at`` on (oldest first); ``next_seq`` the
    run's next step. Each :class:`Unit` is one commit, in order; the fold returned also
    holds the events read that made no step (statuses, usage, echoes), to commit last.
    The messages and tool uses of a model request that has not ended are not taken: the
    cursor stays before them and they are read again next time.
    """
    return _Importer(events, follow, next_seq, model, price).run()
