"""Claude Code sessions on disk, read as runs through the Claude Agent SDK's own functions.

Claude Code keeps every session as a transcript in its configuration folder
(``CLAUDE_CONFIG_DIR``, by default ``~/.claude``): ``projects/<project>/<session>.jsonl``,
and a subagent's beside it in ``<session>/subagents/agent-<id>.jsonl``. The SDK finds them
(``list_sessions``), rebuilds the conversation from a transcript's chain of entries
(``get_session_messages``, which also puts back the calls and results of tools run in
parallel) and reads subagents (``list_subagents``, ``get_subagent_messages``). Nothing here
writes to that folder.

A session becomes a run of kind ``claude-code`` (``AgentSpec.agent``; its
``session_id`` the session's), completed and read-only: no worker ever executes it. Its
steps take the shapes of our own steps, so the timeline, search, usage, export and compare
read them alike:

* each response of the model (the entries sharing one ``message.id``) is a ``model_call``
  step named after its model: its content blocks as the output, its usage as tokens, its
  cost as Claude Code reported it (``costUSD``) or else priced by the caller;
* each ``tool_use`` with its ``tool_result`` is a ``tool_call`` step (open until the result
  is in the transcript);
* each later prompt of the person is a ``steer`` step named ``prompt`` (the first one is
  the run's goal), and a summary left by compaction a ``compaction`` step;
* a subagent's steps carry ``agent`` (its type) and ``agent_id`` in their input.

Steps are keyed by what they came from (the response's ``message.id``, the ``tool_use``
id, the prompt's entry uuid), so importing a session again adds only what is new and
completes what was open (:func:`plan_import`). The SDK's messages carry no time; the time
of each entry (and Claude Code's ``costUSD``, and the compaction mark) are read from the
transcript's lines by their uuid (:func:`_line_facts`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from desktop_agent.domain import (
    JSON,
    AgentSpec,
    EffectClass,
    Run,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.domain.agents import AgentKind
from desktop_agent.domain.errors import InvalidInputError

RUN_PREFIX = "cc-"
"""Runs imported from Claude Code are named ``cc-`` and the session's id (see
:func:`run_ids_of`)."""

INSTALL_HINT = "pip install 'desktop-agent[agents]'"

SYNTHETIC_MODEL = "<synthetic>"
"""The model Claude Code names on responses it made up itself (an error, an interruption)."""

READ_ONLY_TOOLS = frozenset(
    {
        "Read", "Glob", "Grep", "LS", "NotebookRead", "WebFetch", "WebSearch", "TodoWrite",
        "TodoRead", "Task", "Agent", "ExitPlanMode", "AskUserQuestion", "BashOutput",
        "ListMcpResourcesTool", "ReadMcpResourceTool",
    }
)  # fmt: skip
"""Claude Code's tools that change nothing outside the conversation (TodoWrite keeps its
list in the session; Task and Agent start a subagent, whose own calls are asked about)."""

WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
"""Claude Code's tools that write files in the workspace: the same content twice is the
same file (idempotent). Every other tool (Bash, an MCP server's) counts as unsafe."""

Price = Callable[[str, Usage, int, float], float]
"""Dollars of one model response: (model, usage, tokens cached for an hour, its time)."""


def run_ids_of(session_id: str) -> tuple[str, str]:
    """The ids a Claude Code session's run may have: short (as our own runs' ids), and long.

    ``cc-`` and the first seven hex digits of the session's id, as long as our own runs'
    ids; a session whose short id another session took first gets ``cc-<session id>``.
    """
    return f"{RUN_PREFIX}{session_id.replace('-', '')[:7]}", f"{RUN_PREFIX}{session_id}"


def session_run_id(journal: SessionJournal, session_id: str) -> str:
    """The id of the run the session is (or will be) imported as."""
    short, full = run_ids_of(session_id)
    owner = journal.session_of(short)
    if owner == session_id or (owner is None and journal.session_of(full) is None):
        return short
    return full


def effect_of(tool: str) -> EffectClass:
    """How a Claude Code tool's effect may be repeated (as our own tools declare theirs)."""
    if tool in READ_ONLY_TOOLS:
        return EffectClass.READ_ONLY
    if tool in WRITE_TOOLS:
        return EffectClass.IDEMPOTENT
    return EffectClass.UNSAFE


# --------------------------------------------------------------------------- the SDK


def sdk() -> ModuleType:
    """The Claude Agent SDK, imported on first use (it costs about a second).

    Raises:
        InvalidInputError: it is not installed (the message says how to install it).
    """
    try:
        import claude_agent_sdk
    except ImportError:
        raise InvalidInputError(
            "reading Claude Code sessions needs the Claude Agent SDK: " + INSTALL_HINT,
            code="sdk_missing",
        ) from None
    return claude_agent_sdk


def config_folder() -> Path:
    """Claude Code's configuration folder: ``CLAUDE_CONFIG_DIR``, or ``~/.claude``."""
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def projects_folder() -> Path:
    """Where Claude Code keeps its sessions, one folder per project."""
    return config_folder() / "projects"


# --------------------------------------------------------------------------- finding


@dataclass(frozen=True)
class FoundSession:
    """A session on disk, as the SDK's listing describes it.

    Attributes:
        session_id: the session's id (a UUID).
        path: its transcript.
        cwd: the folder Claude Code worked in ("" when the transcript does not say).
        title: the title given to the session ("" when none).
        summary: the SDK's one line for it (title, last prompt, summary or first prompt).
        first_prompt: the person's first prompt.
        created_at: its first entry's time.
        modified_at: when its transcript last changed.
    """

    session_id: str
    path: Path
    cwd: str
    title: str
    summary: str
    first_prompt: str
    created_at: float
    modified_at: float


def find_sessions(project: Path | None = None, since: float | None = None) -> list[FoundSession]:
    """The sessions of one project folder, or of every project; oldest change first.

    Args:
        project: the folder Claude Code worked in (its sessions and its git worktrees');
            None for every project.
        since: only sessions whose transcript changed at or after this time.

    Raises:
        InvalidInputError: the SDK is missing, Claude Code's projects folder does not
            exist, or ``project`` is not a folder.
    """
    folder = projects_folder()
    if not folder.is_dir():
        raise InvalidInputError(
            f"no Claude Code sessions folder at {folder} (Claude Code keeps its sessions "
            "there; set CLAUDE_CONFIG_DIR if it uses another configuration folder)",
            code="no_sessions_folder",
        )
    if project is not None and not project.is_dir():
        raise InvalidInputError(f"{project} is not a folder", code="no_project")
    sdk_ = sdk()
    if project is not None:
        infos = sdk_.list_sessions(directory=str(project))
    else:
        infos = sdk_.list_sessions()
    found = []
    for info in infos:
        path = transcript_path(info.session_id)
        if path is None:
            continue
        item = FoundSession(
            session_id=info.session_id,
            path=path,
            cwd=info.cwd or "",
            title=info.custom_title or "",
            summary=info.summary or "",
            first_prompt=info.first_prompt or "",
            created_at=(info.created_at or info.last_modified) / 1000,
            modified_at=info.last_modified / 1000,
        )
        if since is None or item.modified_at >= since:
            found.append(item)
    return sorted(found, key=lambda s: (s.modified_at, s.session_id))


def find_session(session_id: str) -> FoundSession | None:
    """One session by its id, wherever it is (None: no such transcript)."""
    info = sdk().get_session_info(session_id)
    path = transcript_path(session_id)
    if info is None or path is None:
        return None
    return FoundSession(
        session_id=session_id,
        path=path,
        cwd=info.cwd or "",
        title=info.custom_title or "",
        summary=info.summary or "",
        first_prompt=info.first_prompt or "",
        created_at=(info.created_at or info.last_modified) / 1000,
        modified_at=info.last_modified / 1000,
    )


def changed_sessions(since: float) -> list[FoundSession]:
    """The sessions whose transcript (or a subagent's) changed at or after ``since``.

    Only the files' times are read for the others (a watch looks every half minute at
    folders of thousands of sessions); the SDK reads each changed one.
    """
    folder = projects_folder()
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*/*.jsonl")):
        if _newest_change(path) < since:
            continue
        session = find_session(path.stem)
        if session is not None:
            found.append(session)
    return sorted(found, key=lambda s: (s.modified_at, s.session_id))


def _newest_change(path: Path) -> float:
    """The newest change time of a transcript and its subagents' (0: cannot be read)."""
    files = [path]
    subagents = path.with_suffix("") / "subagents"
    if subagents.is_dir():
        files += list(subagents.rglob("agent-*.jsonl"))
    newest = 0.0
    for f in files:
        try:
            newest = max(newest, f.stat().st_mtime)
        except OSError:
            continue
    return newest


def transcript_path(session_id: str) -> Path | None:
    """The transcript of a session in any project folder (None: not found)."""
    for path in sorted(projects_folder().glob(f"*/{session_id}.jsonl")):
        if path.is_file():
            return path
    return None


def signature(session: FoundSession) -> dict[str, list[int]]:
    """Size and change time of the session's files: equal means nothing new to read."""
    files = {session.path.name: session.path}
    subagents = session.path.with_suffix("") / "subagents"
    if subagents.is_dir():
        for path in sorted(subagents.rglob("agent-*.jsonl")):
            files[str(path.relative_to(session.path.parent))] = path
    out = {}
    for name, path in files.items():
        try:
            st = path.stat()
        except OSError:
            continue
        out[name] = [st.st_size, st.st_mtime_ns]
    return out


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class LineFacts:
    """What a transcript's line says of its entry beyond the SDK's message."""

    at: float
    cost_usd: float | None = None
    compact: bool = False


@dataclass(frozen=True)
class Message:
    """One user or assistant message of a session or subagent, with its time.

    Attributes:
        kind: ``user`` or ``assistant``.
        uuid: its entry's id.
        message: the Messages API message (role, content, and for the model: id, model,
            usage, stop_reason).
        at: its entry's time.
        cost_usd: what Claude Code reported the response cost (None: not recorded).
        compact: the summary left by a compaction.
    """

    kind: str
    uuid: str
    message: dict[str, Any]
    at: float
    cost_usd: float | None = None
    compact: bool = False


@dataclass(frozen=True)
class Subagent:
    """A subagent's transcript: its id, the call that started it, its messages."""

    agent_id: str
    parent_tool_use_id: str
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class SessionRead:
    """A session as read: its messages in conversation order, and its subagents."""

    session: FoundSession
    messages: tuple[Message, ...]
    subagents: tuple[Subagent, ...]
    last_at: float


def read_session(session: FoundSession) -> SessionRead:
    """The session's conversation and its subagents', through the SDK (read only)."""
    sdk_ = sdk()
    sid = session.session_id
    where = session.cwd or None
    raw = sdk_.get_session_messages(sid, directory=where)
    if not raw and where is not None:
        raw = sdk_.get_session_messages(sid)
    facts = _line_facts(session.path)
    messages = _messages(raw, facts, session.created_at)
    subagents = []
    agent_ids = sdk_.list_subagents(sid, directory=where) or sdk_.list_subagents(sid)
    folder = session.path.with_suffix("") / "subagents"
    for agent_id in agent_ids:
        sub_raw = sdk_.get_subagent_messages(sid, agent_id, directory=where)
        if not sub_raw and where is not None:
            sub_raw = sdk_.get_subagent_messages(sid, agent_id)
        sub_facts: dict[str, LineFacts] = {}
        for path in folder.rglob(f"agent-{agent_id}.jsonl"):
            sub_facts.update(_line_facts(path))
        parent = next((m.parent_tool_use_id for m in sub_raw if m.parent_tool_use_id), "")
        subagents.append(
            Subagent(agent_id, parent or "", _messages(sub_raw, sub_facts, session.created_at))
        )
        facts.update(sub_facts)
    last = max((f.at for f in facts.values()), default=session.modified_at)
    return SessionRead(session, messages, tuple(subagents), last)


def _messages(
    raw: Iterable[Any], facts: Mapping[str, LineFacts], default_at: float
) -> tuple[Message, ...]:
    out = []
    at = default_at
    for m in raw:
        if not isinstance(m.message, dict):
            continue
        fact = facts.get(m.uuid)
        at = fact.at if fact is not None else at  # an entry without a time: its predecessor's
        out.append(
            Message(
                kind=str(m.type),
                uuid=str(m.uuid),
                message=m.message,
                at=at,
                cost_usd=fact.cost_usd if fact else None,
                compact=fact.compact if fact else False,
            )
        )
    return tuple(out)


def _line_facts(path: Path) -> dict[str, LineFacts]:
    """Each entry's time, reported cost and compaction mark, by uuid (the file is only read)."""
    out: dict[str, LineFacts] = {}
    try:
        with path.open("rb") as f:
            data = f.read()
    except OSError:
        return out
    for line in data.decode("utf-8", errors="replace").splitlines():
        if '"uuid"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("uuid"), str):
            continue
        at = parse_time(entry.get("timestamp"))
        if at is None:
            continue
        cost = entry.get("costUSD")
        out[entry["uuid"]] = LineFacts(
            at=at,
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            compact=bool(entry.get("isCompactSummary")),
        )
    return out


def parse_time(value: object) -> float | None:
    """An ISO 8601 time of a transcript (``2026-11-27T08:30:00.123Z``) in seconds, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# --------------------------------------------------------------------------- steps


@dataclass
class _Draft:
    """A step before its place in the journal: its key, the step (seq 0), its source order."""

    key: str
    step: Step
    order: int
    entries: int = 1


@dataclass
class _Builder:
    """Turns one conversation (the session's or a subagent's) into drafts, in order."""

    run_id: str
    price: Price
    agent: dict[str, str] = field(default_factory=dict)
    drafts: list[_Draft] = field(default_factory=list)
    tool_steps: dict[str, _Draft] = field(default_factory=dict)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Every tool_use block seen, by id (subagents are named after their Agent call)."""

    def add(self, key: str, step: Step, entries: int = 1) -> _Draft:
        draft = _Draft(key, step, len(self.drafts), entries)
        self.drafts.append(draft)
        return draft

    def conversation(self, messages: Sequence[Message], skip_first_prompt: bool) -> None:
        groups: dict[str, list[Message]] = {}
        for m in messages:
            if m.kind == "assistant":
                groups.setdefault(_response_id(m), []).append(m)
        done: set[str] = set()
        before = messages[0].at if messages else 0.0
        prompted = False
        for index, m in enumerate(messages):
            if m.kind == "assistant":
                rid = _response_id(m)
                if rid not in done:
                    done.add(rid)
                    self.response(groups[rid], before, index)
            else:
                prompted = self.user(m, skip_first_prompt and not prompted) or prompted
            before = m.at

    def user(self, m: Message, is_goal: bool) -> bool:
        """A person's prompt (True), or tool results (False)."""
        content = m.message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        words = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                self.result(block, m.at)
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                words.append(block["text"])
        said = "\n".join(w for w in words if w.strip())
        if not said:
            return False
        if is_goal and not m.compact:  # a compacted session opens with its summary
            return True
        if m.compact:
            output: dict[str, JSON] = {"mode": "client", "summary": said}
            kind, name = StepKind.COMPACTION, "compaction"
            input_: dict[str, JSON] = {"id": m.uuid, **self.agent}
        else:
            output, kind, name = {"delivered": True}, StepKind.STEER, "prompt"
            input_ = {"text": said, "id": m.uuid, **self.agent}
        step = Step(
            self.run_id, 0, kind, name, StepStatus.COMPLETED, input_, output,
            started_at=m.at, finished_at=m.at,
        )  # fmt: skip
        self.add("u:" + m.uuid, step)
        return True

    def response(self, group: list[Message], before: float, index: int) -> None:
        first, last = group[0], group[-1]
        model = str(first.message.get("model") or "")
        content: list[JSON] = []
        for m in group:
            for block in m.message.get("content") or []:
                if isinstance(block, dict):
                    content.append(_plain_block(block))
        spent, one_hour = _usage_of(group)
        reported = [m.cost_usd for m in group if m.cost_usd is not None]
        if model == SYNTHETIC_MODEL:
            cost = 0.0
        elif reported:
            cost = max(reported)
        else:
            cost = self.price(model, spent, one_hour, last.at)
        output: dict[str, JSON] = {
            "content": content,
            "stop_reason": next(
                (
                    m.message.get("stop_reason")
                    for m in reversed(group)
                    if m.message.get("stop_reason")
                ),
                None,
            ),
            "model": model,
        }
        if one_hour or spent.cache_write_tokens:
            output["api"] = {
                "cache_write_1h": one_hour,
                "cache_write_5m": spent.cache_write_tokens - one_hour,
            }
        input_: dict[str, JSON] = {
            "model": model,
            "messages": index,
            "id": _response_id(first),
            "entries": len(group),
            **self.agent,
        }
        step = Step(
            self.run_id, 0, StepKind.MODEL_CALL, model, StepStatus.COMPLETED, input_, output,
            started_at=min(before, first.at), finished_at=last.at, usage=spent, cost_usd=cost,
        )  # fmt: skip
        self.add("m:" + _response_id(first), step, len(group))
        for m in group:
            for block in m.message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.call(block, m.at)

    def call(self, block: dict[str, Any], at: float) -> None:
        use_id = str(block.get("id") or "")
        name = str(block.get("name") or "tool")
        self.calls[use_id] = block
        input_: dict[str, JSON] = {
            "tool_use_id": use_id,
            "arguments": block.get("input"),
            **self.agent,
        }
        step = Step(
            self.run_id, 0, StepKind.TOOL_CALL, name, StepStatus.STARTED, input_, None,
            started_at=at, effect=effect_of(name),
        )  # fmt: skip
        self.tool_steps[use_id] = self.add("t:" + use_id, step)

    def result(self, block: dict[str, Any], at: float) -> None:
        draft = self.tool_steps.get(str(block.get("tool_use_id") or ""))
        if draft is None:
            return
        output = {
            "content": result_text(block.get("content")),
            "is_error": bool(block.get("is_error")),
            "data": None,
        }
        draft.step = dataclasses.replace(
            draft.step, status=StepStatus.COMPLETED, output=output, finished_at=at
        )


def _response_id(m: Message) -> str:
    return str(m.message.get("id") or m.uuid)


def _plain_block(block: dict[str, Any]) -> dict[str, Any]:
    """A content block without what only the API reads back (thinking's signature)."""
    return {k: v for k, v in block.items() if k not in ("signature", "data")}


def _usage_of(group: Sequence[Message]) -> tuple[Usage, int]:
    """A response's usage (each of its entries repeats it; the last counts all the output)."""
    best: dict[str, Any] = {}
    for m in group:
        u = m.message.get("usage")
        if isinstance(u, dict) and int(u.get("output_tokens") or 0) >= int(
            best.get("output_tokens") or 0
        ):
            best = u
    creation = best.get("cache_creation")
    one_hour = (
        int(creation.get("ephemeral_1h_input_tokens") or 0) if isinstance(creation, dict) else 0
    )
    spent = Usage(
        int(best.get("input_tokens") or 0),
        int(best.get("output_tokens") or 0),
        int(best.get("cache_creation_input_tokens") or 0),
        int(best.get("cache_read_input_tokens") or 0),
    )
    return spent, min(one_hour, spent.cache_write_tokens)


def result_text(content: object) -> str:
    """A tool_result's content as text (a string, or blocks of text and images)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content)
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type', 'content')}]")
    return "\n".join(parts)


def _drafts(read: SessionRead, run_id: str, price: Price) -> list[_Draft]:
    """Every step the session and its subagents make, in the order they happened."""
    main = _Builder(run_id, price)
    main.conversation(read.messages, skip_first_prompt=True)
    drafts = list(main.drafts)
    for sub in read.subagents:
        call = main.calls.get(sub.parent_tool_use_id) or {}
        given = call.get("input")
        arguments = given if isinstance(given, dict) else {}
        label = str(arguments.get("subagent_type") or "subagent")
        builder = _Builder(run_id, price, {"agent": label, "agent_id": sub.agent_id})
        builder.conversation(sub.messages, skip_first_prompt=True)
        drafts += builder.drafts
    # Time order (the time axis reads the journal so); a tie keeps the order they were made.
    for n, draft in enumerate(drafts):
        draft.order = n
    return sorted(drafts, key=lambda d: (d.step.started_at, d.order))


def step_key(step: Step) -> str | None:
    """The key an imported step was made under (None: not an imported step)."""
    inp = step.input if isinstance(step.input, dict) else {}
    if step.kind == StepKind.TOOL_CALL and inp.get("tool_use_id"):
        return f"t:{inp['tool_use_id']}"
    if step.kind == StepKind.MODEL_CALL and inp.get("id"):
        return f"m:{inp['id']}"
    if step.kind in (StepKind.STEER, StepKind.COMPACTION) and inp.get("id"):
        return f"u:{inp['id']}"
    return None


# --------------------------------------------------------------------------- importing


@dataclass(frozen=True)
class ImportPlan:
    """What importing a session writes: the run as it now is, new steps, completed ones.

    Attributes:
        run: the run's row (totals are summed from its steps when written).
        new_steps: steps to append, numbered after the run's last step.
        changed_steps: steps already in the journal with their new outcome (a tool's
            result came, a response had more blocks written since).
        cursor: what the next import compares with (the files' sizes and times).
        messages: how many messages the session and its subagents hold now.
    """

    run: Run
    new_steps: tuple[Step, ...]
    changed_steps: tuple[Step, ...]
    cursor: dict[str, JSON]
    messages: int


def plan_import(
    read: SessionRead,
    *,
    run_id: str,
    existing: Run | None,
    steps: Sequence[Step],
    files: Mapping[str, list[int]],
    price: Price,
) -> ImportPlan:
    """The run and the steps that importing ``read`` adds to what the journal holds.

    Args:
        read: the session as read now.
        run_id: its run's id (:func:`session_run_id`).
        existing: its run, if imported before.
        steps: the run's steps (inputs and statuses are enough).
        files: :func:`signature` of the session's files as read.
        price: dollars of a response whose cost Claude Code did not record.
    """
    session = read.session
    drafts = _drafts(read, run_id, price)
    known = {k: s for s in steps if (k := step_key(s)) is not None}
    last_seq = max((s.seq for s in steps), default=0)
    new: list[Step] = []
    changed: list[Step] = []
    for draft in drafts:
        old = known.get(draft.key)
        if old is None:
            last_seq += 1
            new.append(dataclasses.replace(draft.step, seq=last_seq))
            known[draft.key] = new[-1]
        elif _grew(old, draft):
            changed.append(dataclasses.replace(draft.step, seq=old.seq, started_at=old.started_at))
    run = _run_of(read, existing, run_id)
    count = len(read.messages) + sum(len(s.messages) for s in read.subagents)
    cursor: dict[str, JSON] = {
        "agent": str(AgentKind.CLAUDE_CODE),
        "session_id": session.session_id,
        "files": {k: list(v) for k, v in files.items()},
        "messages": count,
    }
    return ImportPlan(run, tuple(new), tuple(changed), cursor, count)


def _grew(old: Step, draft: _Draft) -> bool:
    """Whether an imported step has more to say now (its result, more of its response)."""
    if old.status == StepStatus.STARTED and draft.step.status != StepStatus.STARTED:
        return True
    if old.kind == StepKind.MODEL_CALL:
        entries = (old.input or {}).get("entries", 0) if isinstance(old.input, dict) else 0
        return isinstance(entries, int) and draft.entries > entries
    return False


def _run_of(read: SessionRead, existing: Run | None, run_id: str) -> Run:
    session = read.session
    models = [
        str(m.message.get("model"))
        for m in read.messages
        if m.kind == "assistant" and m.message.get("model") not in (None, "", SYNTHETIC_MODEL)
    ]
    model = models[-1] if models else (existing.spec.model if existing else "unknown")
    goal = session.first_prompt or session.summary or f"Claude Code session {session.session_id}"
    title = session.title or (session.summary if session.summary != goal else "")
    spec = AgentSpec(
        model=model,
        system_prompt="",
        agent=str(AgentKind.CLAUDE_CODE),
        session_id=session.session_id,
    )
    created = existing.created_at if existing else session.created_at
    return Run(
        id=run_id,
        goal=goal,
        status=existing.status if existing else RunStatus.COMPLETED,
        spec=spec,
        workspace=session.cwd or (existing.workspace if existing else ""),
        created_at=created,
        updated_at=created,
        started_at=created,
        finished_at=max(read.last_at, created),
        title=title[:200],
        definition_hash=spec.definition_hash,
    )


@dataclass(frozen=True)
class Imported:
    """What importing one session did.

    Attributes:
        session_id: the session.
        run_id: its run.
        outcome: ``new`` (first import), ``grown`` (something added), ``unchanged``.
        steps_added: steps appended to the journal.
        steps_completed: steps already there that got their outcome.
    """

    session_id: str
    run_id: str
    outcome: str
    steps_added: int = 0
    steps_completed: int = 0


class SessionJournal(Protocol):
    """Where imported sessions are kept (``persistence/imported_sessions.py``)."""

    def known(self, run_id: str) -> tuple[Run | None, list[Step], JSON]:
        """The run (None: never imported), its steps (no outputs) and the last cursor."""
        ...

    def cursor(self, run_id: str) -> JSON:
        """The last import's cursor of the run (None: never imported)."""
        ...

    def session_of(self, run_id: str) -> str | None:
        """The session id the run ``run_id`` holds ("" for a run of ours; None: no run)."""
        ...

    def save(self, plan: ImportPlan, expect_last_seq: int) -> bool:
        """Write the plan in one transaction; False when the journal moved meanwhile."""
        ...


def import_session(
    session: FoundSession, journal: SessionJournal, price: Price, *, attempts: int = 3
) -> Imported:
    """Bring one session into the journal: new, grown or unchanged (then nothing is written).

    Two imports of the same session at once (the app's watch and a terminal) cannot both
    append: the second finds the journal moved, reads it again and adds what is left.
    """
    run_id = session_run_id(journal, session.session_id)
    for _ in range(max(1, attempts)):
        files = signature(session)
        cursor = journal.cursor(run_id)
        if isinstance(cursor, dict) and cursor.get("files") == files:
            return Imported(session.session_id, run_id, "unchanged")
        existing, steps, _cursor = journal.known(run_id)
        plan = plan_import(
            read_session(session),
            run_id=run_id,
            existing=existing,
            steps=steps,
            files=files,
            price=price,
        )
        last_seq = max((s.seq for s in steps), default=0)
        if journal.save(plan, last_seq):
            outcome = "new" if existing is None else "grown"
            return Imported(
                session.session_id, run_id, outcome, len(plan.new_steps), len(plan.changed_steps)
            )
    raise InvalidInputError(
        f"Claude Code session {session.session_id} kept changing while it was imported; "
        "import it again"
    )
