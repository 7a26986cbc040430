"""What a model call is sent: the run's tool definitions, and the request itself.

The engine's own tools (:data:`CONTROL_TOOLS`, carried out by
:mod:`desktop_agent.engine.control`) and the provider's server tools
(:data:`SERVER_TOOLS`) are defined here, below every helper that builds a request (model
calls, compaction, the budget's worst case).
"""

from __future__ import annotations

from typing import Any

from desktop_agent.domain import JSON
from desktop_agent.engine.ports import ModelRequest
from desktop_agent.engine.run_state import RunState

CONTROL_TOOL_VERSION = "engine-1"

CONTROL_TOOLS: dict[str, dict[str, Any]] = {
    "update_plan": {
        "description": (
            "Write or update your to-do list for this run. Send the whole list each time; "
            "mark finished items done. The analyst sees it."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string"},
                            "done": {"type": "boolean"},
                        },
                        "required": ["text"],
                    },
                }
            },
            "required": ["items"],
        },
    },
    "wait": {
        "description": (
            "Pause this run until a time or for a duration, e.g. to let a page update. "
            "The run hibernates and is woken later."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "seconds": {"type": "number", "description": "how long to wait"},
                "until": {"type": "number", "description": "epoch seconds to wait until"},
                "reason": {"type": "string"},
            },
        },
    },
    "ask_user": {
        "description": "Ask the analyst a question and wait for the answer.",
        "input_schema": {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
    },
}


SERVER_TOOLS: dict[str, dict[str, Any]] = {
    "web_search": {"type": "web_search_20250305", "name": "web_search"},
}
"""Tools the model provider runs itself (Anthropic server tools).

Offered only when the setting of the same name is true (``web_search_max_uses`` caps the
searches per call). The model adapter passes these definitions through unchanged: they
have a ``type`` and no ``input_schema``. Their ``server_tool_use`` and
``*_tool_result`` blocks in an answer are not tool uses the engine must answer.
"""


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
