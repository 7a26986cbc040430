"""What a model call is sent: the run's tool definitions, and the request itself.

The engine's own tools and the provider's server tools are defined in
:mod:`desktop_agent.engine.builtin_tools`; this module builds requests from them for every
helper that sends one (model calls, compaction, the budget's worst case).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass
from desktop_agent.engine.attachments import with_attachments, with_container_uploads
from desktop_agent.engine.builtin_tools import CONTROL_TOOLS, SERVER_TOOLS, SERVER_WEB_FETCH
from desktop_agent.engine.ports import ModelRequest
from desktop_agent.engine.run_state import RunState

WAITING_TOOLS = frozenset({"wait", "ask_user"})
"""Control tools whose use hibernates the run (a timer, a question to the analyst)."""

WEB_FETCH_MAX_CONTENT_TOKENS = 50_000
"""The most tokens of one page Anthropic's web fetch puts in the conversation
(``max_content_tokens``): a fetched page stays in every later request of the run."""

CONTAINER_MARGIN_S = 60.0
"""A container whose ``expires_at`` is this close is not named again: a new one is cheaper
than a request refused halfway through a turn."""

# --------------------------------------------------------------------------- schemas


def _server_tool(rs: RunState, name: str) -> dict[str, JSON] | None:
    """``name``'s definition for this run, or None when the run goes without it.

    The run's own choice (``AgentSpec.web_search``) wins over the setting; its domain
    lists go on the tool (one of them at most: the API refuses both), on web fetch's too,
    which shares the setting's uses per call. Web fetch and code execution are in a run's
    tool names only when it chose them.
    """
    settings = rs.cfg.settings
    spec = rs.run.spec
    if name == "code_execution":
        return dict(SERVER_TOOLS[name])
    wanted = settings.web_search if spec.web_search is None else spec.web_search
    if name == "web_search" and not wanted:
        return None
    definition: dict[str, JSON] = dict(SERVER_TOOLS[name])
    definition["max_uses"] = settings.web_search_max_uses
    if name == SERVER_WEB_FETCH:
        definition["max_content_tokens"] = WEB_FETCH_MAX_CONTENT_TOKENS
    if spec.search_domains:
        definition["allowed_domains"] = list(spec.search_domains)
    elif spec.search_blocked_domains:
        definition["blocked_domains"] = list(spec.search_blocked_domains)
    return definition


def tool_schemas(rs: RunState) -> list[dict[str, JSON]]:
    """Definitions of the run's tools, as sent to the model."""
    out: list[dict[str, JSON]] = []
    for name in rs.run.spec.tool_names:
        if name in SERVER_TOOLS:
            server = _server_tool(rs, name)
            if server is not None:
                out.append(server)
            continue
        if name in CONTROL_TOOLS:
            meta = CONTROL_TOOLS[name]
            out.append(
                {
                    "name": name,
                    "description": meta["description"],
                    "input_schema": meta["input_schema"],
                }
            )
            continue
        tool = rs.tools.get(name)
        if tool is not None:
            out.append(
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": dict(tool.input_schema),
                }
            )
    return out


def run_tools(rs: RunState) -> list[dict[str, JSON]]:
    """The run's tool definitions: those its first model call sent, else today's.

    They are part of every later turn's prefix (a thinking block is bound to them), so once
    sent they never change: not when an MCP server's tool description changes, nor when
    the analyst turns web search on or off in the settings while the run goes on.
    """
    frozen = rs.state.scalars.tools
    return list(frozen) if frozen is not None else tool_schemas(rs)


def build_request(rs: RunState) -> ModelRequest:
    """The model request for the current conversation."""
    spec = rs.run.spec
    tools = run_tools(rs)
    messages = with_goal_files(rs, rs.state.conversation.request_messages(), tools)
    return ModelRequest(
        model=spec.model,
        system=spec.system_prompt,
        messages=messages,
        tools=tools,
        max_tokens=spec.max_tokens,
        thinking_budget=spec.thinking_budget,
        effort=spec.effort,
        cache_ttl=cache_ttl(rs),
        previous_message_id=rs.state.scalars.last_message_id or None,
        task_budget=task_budget(rs),
        workspace=str(rs.run.workspace),
        container=container(rs) if has_code_execution(tools) else None,
    )


def has_code_execution(tools: Sequence[Mapping[str, JSON]]) -> bool:
    """Whether a request's tools hold Anthropic's code execution."""
    return any(t.get("name") == "code_execution" and "type" in t for t in tools)


def with_goal_files(
    rs: RunState, messages: list[dict[str, Any]], tools: Sequence[Mapping[str, JSON]]
) -> list[dict[str, Any]]:
    """``messages`` whose goal message names the run's attachments.

    With code execution it also puts them in the container; the same way for every call
    of the run, compactions included.
    """
    spec = rs.run.spec
    first_is_goal = rs.state.conversation.message_seqs[:1] == [0]
    out = with_attachments(messages, spec.attachments, first_is_goal=first_is_goal)
    if has_code_execution(tools):
        out = with_container_uploads(
            out, spec.attachments, rs.state.scalars.uploads, first_is_goal=first_is_goal
        )
    return out


def container(rs: RunState) -> str | None:
    """The code execution container the run's next call names: its last one, unless expired.

    The container's id and expiry come from the run's model steps (the API's answer, kept
    in the journal), so a run resumed after a crash or a wait names the same container
    while it lives. An expired one is not named: the API starts a new one, and the step
    that gets it says so (``container.replaces``). Nor is the container of a fork's parent
    (from the steps the fork shares): a fork must not change its parent's files.
    """
    kept = rs.state.scalars.container
    if not kept.get("id"):
        return None
    if kept.get("run_id") not in (None, rs.run.id):
        return None  # a fork's parent's container: the fork gets one of its own
    expires = kept.get("expires_at")
    if isinstance(expires, int | float) and expires - CONTAINER_MARGIN_S <= rs.clock.now():
        return None
    return str(kept["id"])


def container_intent(rs: RunState, request: ModelRequest) -> JSON:
    """What a model step's intent says of its container (None without code execution).

    ``{"id": ...}`` when the call names the run's container, ``{"new": true}`` when the
    API is to start one, with ``expired``: the run's last container, which had expired
    (a fork's first call starts its own: its parent's is never named nor noted).
    """
    if not has_code_execution(request.tools):
        return None
    if request.container:
        return {"id": request.container}
    kept = rs.state.scalars.container
    old = kept.get("id")
    if not old or kept.get("run_id") not in (None, rs.run.id):
        return {"new": True}
    return {"new": True, "expired": str(old)}


def cache_ttl(rs: RunState) -> str:
    """``1h`` when the run can hibernate between two calls, else ``5m``.

    An economy-mode run waits in a Message Batch at every turn: always the hour (the
    batch-processing page advises it too).

    A run hibernates when its model asks for a timer or a question, or for a call the
    analyst must approve; the wait is usually longer than five minutes, and a prefix
    written for an hour is read at a tenth of the price when the run wakes instead of
    being written again. An hour's write costs 2x input instead of 1.25x, so runs that
    cannot wait keep the five minutes (figures: bench/README.md, cache share). The
    ``prompt_cache_ttl`` setting overrides the choice (``5m`` or ``1h``).
    """
    chosen = rs.cfg.settings.prompt_cache_ttl
    if chosen != "auto":
        return chosen
    spec = rs.run.spec
    if spec.economy:
        return "1h"  # each turn waits in a batch, often longer than five minutes
    overrides = dict(spec.approval_overrides)
    for name in spec.tool_names:
        if name in WAITING_TOOLS:
            return "1h"
        tool = rs.tools.get(name)
        if tool is None:
            continue
        policy = ApprovalPolicy(overrides[name]) if name in overrides else tool.approval
        if policy == ApprovalPolicy.ASK or (
            policy != ApprovalPolicy.NEVER and tool.effect == EffectClass.UNSAFE
        ):
            return "1h"
    return "5m"


def task_budget(rs: RunState) -> tuple[int, int] | None:
    """(total, remaining) tokens of the run's token budget, told to the model; None if none."""
    limit = rs.run.budget.max_tokens
    if limit is None:
        return None
    return limit, max(0, limit - rs.state.scalars.usage.total)
