"""Tool arguments against the tool's JSON schema, at every depth.

One check for every place arguments are judged by a schema alone: an analyst's edit of a
pending call (:mod:`desktop_agent.engine.edits`, in the client before anything is recorded
and in the engine when the decision is applied) and a call to a tool that owns no argument
model (an MCP server's tool, :class:`desktop_agent.tools.mcp.McpTool`, before anything is
sent to the server). Tools with a pydantic model validate with it instead
(:class:`desktop_agent.tools.base.TypedTool`), at every depth too.

The validator is the ``jsonschema`` library's, for the dialect the schema names in
``$schema`` (2020-12 when it names none, as MCP says). References resolve inside the schema
only: nothing is fetched (the library would otherwise fetch an ``http://`` or ``file://``
``$ref`` with ``urllib``, from the worker, past every check the tools make), so a schema
that refers elsewhere, or is not a valid schema at all, refuses every call with a message
saying so. ``format`` is not checked (it is an annotation unless a schema opts in).

A refusal is one line naming the path of each bad field, the most relevant first, as in
``filters[2].since: 'soon' is not of type 'number'`` (at most :data:`MAX_PROBLEMS`).
``jsonschema`` is imported on the first check.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from desktop_agent.domain import JSON

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

MAX_PROBLEMS = 3
"""Problems named in one refusal; more are counted."""

MAX_PROBLEM_CHARS = 300
"""Longest text of one problem (a message quotes the bad value, which may be long)."""


class UnusableSchemaError(Exception):
    """The tool's schema cannot check arguments; the message says why, for the analyst."""


def field_path(path: Iterable[str | int]) -> str:
    """A field's path as it reads in a message: ``filters[2].since`` ("" for the whole)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def schema_problem(schema: Mapping[str, Any], args: Mapping[str, JSON]) -> str | None:
    """Why ``args`` does not fit ``schema``, at any depth, in one line; None if it fits.

    Args:
        schema: the tool's input schema (a JSON object schema).
        args: the arguments, as decoded from JSON (their depth checked by the caller).
    """
    from referencing.exceptions import Unresolvable

    try:
        validator = _validator(_key(schema))
        errors = list(validator.iter_errors(dict(args)))
    except UnusableSchemaError as exc:
        return str(exc)
    except Unresolvable as exc:
        ref = getattr(exc, "ref", None) or str(exc)
        return (
            f"the tool's input schema refers to {_short(str(ref))!r}, outside itself "
            "(nothing is fetched); its arguments cannot be checked, so the call is refused"
        )
    if not errors:
        return None
    return _describe(errors)


def _describe(errors: list[ValidationError]) -> str:
    """The problems, most relevant first, each as ``path: message``."""
    from jsonschema.exceptions import best_match, relevance

    parts: list[str] = []
    for error in sorted(errors, key=relevance, reverse=True):
        deepest = best_match([error]) or error  # inside anyOf/oneOf: the likeliest branch
        where = field_path(deepest.absolute_path)
        text = _short(deepest.message)
        line = f"{where}: {text}" if where else text
        if line not in parts:
            parts.append(line)
    shown = "; ".join(parts[:MAX_PROBLEMS])
    more = len(parts) - MAX_PROBLEMS
    return shown + (f"; and {more} more problem{'s' * (more > 1)}" if more > 0 else "")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_PROBLEM_CHARS else text[: MAX_PROBLEM_CHARS - 1] + "…"


def _key(schema: Mapping[str, Any]) -> str:
    """The schema as canonical JSON text: what the compiled validators are cached by."""
    try:
        return json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UnusableSchemaError(
            f"the tool's input schema is not JSON ({exc}); its arguments cannot be checked, "
            "so the call is refused"
        ) from None


@functools.lru_cache(maxsize=256)
def _validator(key: str) -> Validator:
    """A compiled validator for the schema ``key`` holds.

    Compiling costs far more than validating, and a tool's schema is checked for every
    call and every edit: validators are kept.

    Raises:
        UnusableSchemaError: the schema is not a valid JSON Schema (not cached: raised again).
    """
    from jsonschema import Draft202012Validator, SchemaError
    from jsonschema.validators import validator_for
    from referencing import Registry

    schema = json.loads(key)
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = field_path(exc.absolute_path)
        raise UnusableSchemaError(
            "the tool's input schema is not a valid JSON Schema "
            f"({where + ': ' if where else ''}{_short(exc.message)}); "
            "its arguments cannot be checked, so the call is refused"
        ) from None
    return cls(schema, registry=Registry())
