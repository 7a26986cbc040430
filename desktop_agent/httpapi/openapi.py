"""The API's OpenAPI description.

Served at ``/v1/openapi.json`` and checked in as ``docs/openapi.json``: a test keeps the
two, and the routes, in agreement.
"""

from __future__ import annotations

from typing import Any

from desktop_agent.domain.catalogue import EFFORT_LEVELS

_ERROR = {
    "description": "an error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}
_ERRORS = {"400": _ERROR, "401": _ERROR, "403": _ERROR, "404": _ERROR, "409": _ERROR}
_BODY_ERRORS = {"408": _ERROR, "413": _ERROR}
"""A body that is too slow to arrive, or too large (see ``httpapi/inputs.py``)."""

_MAX_INT = 2**53


def _op(summary: str, ok: str = "200", body: dict[str, Any] | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {ok: {"description": "done"}, **_ERRORS}}
    if body is not None:
        op["responses"].update(_BODY_ERRORS)
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


_OBJ = {"type": "object"}
_DOMAINS = {"type": "array", "items": {"type": "string"}}

SERVER_TOOL_FIELDS: dict[str, Any] = {
    "web_search": {
        "type": ["boolean", "null"],
        "description": "offer Anthropic's web search (absent or null: the web_search setting)",
    },
    "search_domains": _DOMAINS
    | {"description": "the only domains web search (and web fetch) may reach, e.g. example.com"},
    "search_blocked_domains": _DOMAINS
    | {"description": "domains web search (and web fetch) never reach; not with search_domains"},
    "server_web_fetch": {
        "type": "boolean",
        "description": "Anthropic's web fetch in the place of web_fetch (URLs already in the "
        "run only); 400 for a model that does not take it",
    },
    "code_execution": {
        "type": "boolean",
        "description": "Anthropic's code execution: the attachments go into its container, the "
        "files it writes into the workspace's outputs/; 400 for a model that does not take it, "
        "or with economy",
    },
}
"""The run options of Anthropic's server tools (``POST /v1/runs`` and its estimate)."""

DESCRIPTION: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "desktop-agent local API",
        "version": "1",
        "description": "On 127.0.0.1 only, with the token of `desktop-agent api-token show`.",
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Error": {
                "type": "object",
                "properties": {"error": {"type": "string"}, "code": {"type": "string"}},
            },
            "NewRun": {
                "type": "object",
                "required": ["goal"],
                "properties": {
                    "goal": {"type": "string"},
                    "model": {"type": "string"},
                    "workspace": {"type": "string"},
                    "tools": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "tool names; mcp:SERVER for every tool an MCP server "
                        "lists (desktop-agent mcp list), mcp:SERVER/TOOL for one of them",
                    },
                    "max_cost_usd": {"type": "number", "minimum": 0, "maximum": _MAX_INT},
                    "max_steps": {"type": "integer", "minimum": 0, "maximum": _MAX_INT},
                    "max_time": {"type": "string", "description": "e.g. 30m, 2h"},
                    "placement": {"type": "string", "description": "any, host:NAME, pool:NAME"},
                    "tags": {
                        "type": "array",
                        "items": {
                            "type": "string",
                            "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,39}$",
                        },
                        "description": "the analyst's tags (case-insensitive, kept lowercase)",
                    },
                    "effort": {
                        "type": ["string", "null"],
                        "enum": [*EFFORT_LEVELS, "", None],
                        "description": "absent, null or empty: the model's default "
                        "(GET /v1/models lists the levels each model takes)",
                    },
                    "thinking": {
                        "type": "boolean",
                        "description": "let the model think before it answers (default false)",
                    },
                    "economy": {
                        "type": "boolean",
                        "description": "economy mode: each model turn waits in a Message Batch "
                        "at half price (default false: streamed)",
                    },
                    **SERVER_TOOL_FIELDS,
                    "attachments": {
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/Attachment"},
                        "description": "files copied into the run's workspace (attachments/NAME, "
                        "a taken name gets -2, -3...) and named to the model in its first turn; "
                        "the body's limit of 1 MiB holds them too (about 750 KB of files; larger "
                        "ones: desktop-agent run --attach); any bad file: 400 or 413, no run",
                    },
                },
            },
            "Attachment": {
                "type": "object",
                "required": ["name", "content_base64"],
                "properties": {
                    "name": {
                        "type": "string",
                        "description": "a file name, no folders (a path or '..' is refused)",
                    },
                    "content_base64": {"type": "string", "contentEncoding": "base64"},
                },
            },
            "Estimate": {
                "type": "object",
                "description": "the fields of NewRun (goal may be left out), and these",
                "properties": {
                    "economy": {
                        "type": "boolean",
                        "description": "the mode asked for: economy (true) or streamed",
                    },
                    "template": {
                        "type": "string",
                        "description": "a schedule, watched folder or batch whose past runs "
                        "to read first",
                    },
                    "items": {"type": "integer", "minimum": 1, "maximum": 100_000},
                    "concurrency": {"type": "integer", "minimum": 1, "maximum": 100_000},
                },
            },
        },
    },
    "security": [{"bearer": []}],
    "paths": {
        "/v1/openapi.json": {"get": _op("this description")},
        "/v1/runs": {
            "get": _op("runs, newest first (status, search, tag: those with every tag, limit)"),
            "post": _op(
                "start a run: 202 with its id and status URL (and a notice when its model "
                "is deprecated)",
                "202",
                {"$ref": "#/components/schemas/NewRun"},
            ),
        },
        "/v1/runs/estimate": {
            "post": _op(
                "the forecast of a run's cost and duration, nothing started: basis, based_on, "
                "cost_usd and duration_s {median, p90} in the mode asked for, modes {streamed, "
                "economy}, explain",
                "200",
                {"$ref": "#/components/schemas/Estimate"},
            )
        },
        "/v1/runs/{run_id}": {
            "get": _op(
                "a run (attachments: name, path, size, sha256), with the forecast made when "
                "it was started and, while it waits in a "
                "Message Batch (economy mode), where its turn is: batch {state, seq, "
                "queued_at, submitted_at, batch_id}"
            )
        },
        "/v1/runs/{run_id}/steps": {"get": _op("a page of its steps (after_seq, limit)")},
        "/v1/runs/{run_id}/report": {
            "get": _op(
                "its final report (the report file it wrote, else its last answer): origin, "
                "path, seq, markdown, annotated (with [n] after cited sentences and [?] after "
                "uncited ones), sentences {text, claim, refs, uncited}, references {number, "
                "path, title, passage, source_seq, cited_seq, pages, chars, blocks}, cited, "
                "uncited; 404 no_report while it has none"
            )
        },
        "/v1/runs/{run_id}/events": {"get": _op("server-sent events: step, status, end")},
        "/v1/runs/{run_id}/{command}": {
            "post": _op(
                "pause, resume, cancel, stop, steer {text}, answer {text}, resolve {action}, "
                "budget {add_cost_usd, add_steps, add_time_s, add_tokens}",
                "202",
                _OBJ,
            )
        },
        "/v1/approvals": {"get": _op("pending approvals, oldest first")},
        "/v1/models": {
            "get": _op(
                "the models runs can use: efforts, thinking, window, status, price (all=true: "
                "retired ones too)"
            )
        },
        "/v1/schedules/{schedule_id}/trigger": {
            "post": _op(
                "a webhook: start a run from the schedule's template now {item?}", "202", _OBJ
            )
        },
        "/v1/approvals/{approval_id}/{decision}": {
            "post": _op("approve {arguments?} or reject {reason}: 202, decided", "202", _OBJ)
        },
    },
}
