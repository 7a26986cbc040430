"""What a model call is sent: the run's tool definitions, and the request itself.

The engine's own tools and the provider's server tools are defined in
:mod:`desktop_agent.engine.builtin_tools`; this module builds requests from them for every
helper that sends one (model calls, compaction, the budget's worst case).
"""

from __future__ import annotations

from desktop_agent.domain import JSON
from desktop_agent.engine.builtin_tools import CONTROL_TOOLS, SERVER_TOOLS
from desktop_agent.engine.ports import ModelRequest
from desktop_agent.engine.run_state import RunState

# --------------------------------------------------------------------------- schemas


def _server_tool(rs: RunState, name: str) -> dict[str, JSON] | None:
    settings = rs.cfg.settings
    if settings.get(name) is not True:
        return None
    definition: dict[str, JSON] = dict(SERVER_TOOLS[name])
    max_uses = settings.get(f"{name}_max_uses")
    if isinstance(max_uses, int) and not isinstance(max_uses, bool) and max_uses > 0:
        definition["max_uses"] = max_uses
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


def build_request(rs: RunState) -> ModelRequest:
    """The model request for the current conversation."""
    spec = rs.run.spec
    return ModelRequest(
        model=spec.model,
        system=spec.system_prompt,
        messages=rs.state.conversation.request_messages(),
        tools=tool_schemas(rs),
        max_tokens=spec.max_tokens,
        thinking_budget=spec.thinking_budget,
    )
