"""The tools the engine carries out itself, and those the model provider runs.

Plain data, importing nothing of ours: the engine builds requests from it, the tool
registry lists these names beside the built-in tools, and the client shows their
descriptions. :mod:`desktop_agent.engine.control` carries out the control tools.
"""

from __future__ import annotations

from typing import Any

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


WEB_SEARCH_VERSION = "web_search_20260318"
"""The web search tool's version we send.

Anthropic's "Web search tool" page (platform.claude.com, Messages API > Tools) lists three
versions: ``web_search_20250305`` (basic), ``web_search_20260209`` (adds dynamic filtering)
and ``web_search_20260318`` (adds response inclusion control for agentic workflows). Its
settings go on the tool: ``max_uses``, ``allowed_domains`` *or* ``blocked_domains`` (not
both in one request: domains without a scheme, subdomains included) and ``user_location``.
Whether a model takes it is the catalogue's ``capabilities.server_tools.web_search``.
"""

WEB_FETCH_VERSION = "web_fetch_20260318"
"""The server web fetch tool's version we send.

Anthropic's "Web fetch tool" page lists ``web_fetch_20250910`` (basic),
``web_fetch_20260209`` (dynamic filtering), ``web_fetch_20260309`` (and cache bypass) and
``web_fetch_20260318`` (and response inclusion control); the SDK's ``WebFetchTool20260318Param``
names its fields (``allowed_domains`` or ``blocked_domains``, ``max_uses``,
``max_content_tokens``, ``citations``, ``use_cache``, ``url_sources``,
``response_inclusion``). Claude fetches only URLs already in the conversation (given by the
analyst or found by an earlier search or fetch), never URLs it makes up.
"""

CODE_EXECUTION_VERSION = "code_execution_20260521"
"""The code execution tool's version we send (``CodeExecutionTool20260521Param``: Bash and
file editing in a container, REPL state kept; the container is named by the request's
``container`` and answered in the response's ``container: {id, expires_at}``)."""

SERVER_WEB_FETCH = "server_web_fetch"
"""The run's tool name for Anthropic's web fetch (the API's name for it is ``web_fetch``,
which our own fetching tool has: a run offers one of the two)."""

SERVER_TOOLS: dict[str, dict[str, Any]] = {
    "web_search": {"type": WEB_SEARCH_VERSION, "name": "web_search"},
    SERVER_WEB_FETCH: {"type": WEB_FETCH_VERSION, "name": "web_fetch"},
    "code_execution": {"type": CODE_EXECUTION_VERSION, "name": "code_execution"},
}
"""Tools the model provider runs itself (Anthropic server tools), by the run's tool name.

Web search is offered when the run's ``AgentSpec.web_search`` says so, or, left unset,
when the setting of the same name is true (``web_search_max_uses`` caps the searches per
call); the run's ``search_domains`` / ``search_blocked_domains`` become the tool's
``allowed_domains`` / ``blocked_domains``, for web fetch too. Web fetch and code execution
are offered only to runs that chose them (``AgentSpec.server_web_fetch``,
``AgentSpec.code_execution``). The model adapter passes these definitions through unless
the model's catalogue entry does not list the tool: they have a ``type`` and no
``input_schema``. Their ``server_tool_use`` and ``*_tool_result`` blocks in an answer are
not tool uses the engine must answer.
"""

SERVER_TOOL_FEATURES: dict[str, str] = {
    "web_search": "web_search",
    SERVER_WEB_FETCH: "code_execution",
    "code_execution": "code_execution",
}
"""The catalogue capability (``capabilities.server_tools.<name>``) each server tool needs.

The Models API reports no ``web_fetch`` capability; the web fetch page lists the same
models as the code execution page (read 2026-11-27), so web fetch goes where the catalogue
lists code execution (or ``web_fetch``, should the catalogue ever list it).
"""
