"""Edited arguments of an approved call: one check, shared by the client and the engine.

An analyst may approve a tool call with edited arguments. The client asks, before it records
the decision, whether the edit can run at all, and refuses it with one line saying why; the
engine asks the same question when it applies the decision, so that an edit it accepts is the
one that runs and a refused one never turns into running the original call. Both use
:func:`edit_problem`, so they cannot disagree.

Three layers, cheapest first:

* **shape**: a JSON object (not ``null``, not a list), nested at most
  :data:`~desktop_agent.engine.sanitize.MAX_ARG_DEPTH` levels, with valid Unicode (no lone
  surrogates, which can be neither stored nor sent) and finite numbers;
* **schema**: the fields the tool's JSON schema requires, no unknown fields where it allows
  none, and the declared JSON type of each field;
* **pre-run check**: the tool's own ``validate`` (its argument model and the checks it runs
  right before an approved effect), when a context to run it in is given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from desktop_agent.domain import JSON
from desktop_agent.domain.errors import ControlFlowInterrupt
from desktop_agent.engine.ports import Tool, ToolContext, ToolInputError
from desktop_agent.engine.sanitize import MAX_ARG_DEPTH, too_deep

_SURROGATE = re.compile("[\ud800-\udfff]")

_JSON_TYPES: dict[str, str] = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def edit_problem(tool: Tool | None, args: object, ctx: ToolContext | None = None) -> str | None:
    """Why ``args`` cannot run as an edit of a call to ``tool``, in one line; None if they can.

    Args:
        tool: the tool the approval is for (None: it is not installed here).
        args: the edited arguments, as decoded from JSON.
        ctx: where the tool's pre-run check runs; None leaves that check out (the engine
            runs it again right before the call).
    """
    problem = shape_problem(args)
    if problem is not None:
        return problem
    assert isinstance(args, dict)
    if tool is None:
        return "the tool is not installed here, so its arguments cannot be checked"
    problem = schema_problem(tool.input_schema, args)
    if problem is not None or ctx is None:
        return problem
    try:
        problem = tool.validate(args, ctx)
    except ToolInputError as exc:
        return one_line(f"invalid arguments: {exc}")
    except ControlFlowInterrupt:
        raise
    except Exception as exc:  # a tool's bug is a refusal to check, not a crash
        return one_line(f"the tool's check could not run ({exc or 'no reason given'})")
    return one_line(problem) if problem else None


def shape_problem(args: object) -> str | None:
    """Why ``args`` is not a JSON object of arguments that can be stored and sent, or None."""
    if args is None:
        return (
            "the edited arguments are null: give a JSON object of arguments, "
            "or approve without editing"
        )
    if not isinstance(args, dict):
        return f"the edited arguments must be a JSON object, not {_kind(args)}"
    if too_deep(args):
        return f"the edited arguments are nested deeper than {MAX_ARG_DEPTH} levels"
    for leaf in _leaves(args):
        if isinstance(leaf, str) and _SURROGATE.search(leaf):
            return (
                "the edited arguments hold invalid Unicode (a lone surrogate such as \\ud800), "
                "which can be neither stored nor sent"
            )
        if isinstance(leaf, float) and not math.isfinite(leaf):
            return "the edited arguments hold a number that is not finite (NaN or Infinity)"
    return None


def schema_problem(schema: Mapping[str, Any], args: Mapping[str, JSON]) -> str | None:
    """Why ``args`` does not fit the top level of the object ``schema``, or None.

    Only what a JSON schema says plainly is checked here (required fields, unknown fields,
    each field's ``type``); the tool's own validation checks the rest.
    """
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    missing = [r for r in required if r not in args] if isinstance(required, list) else []
    if missing:
        return f"missing required field(s): {', '.join(map(str, missing))}"
    if schema.get("additionalProperties") is False:
        unknown = [k for k in args if k not in props]
        if unknown:
            known = ", ".join(map(str, props)) or "none"
            return f"unknown field(s): {', '.join(unknown)} (the tool takes: {known})"
    for name, value in args.items():
        field = props.get(name)
        wanted = _types(field) if isinstance(field, Mapping) else None
        if wanted and not any(_fits(value, t) for t in wanted):
            expected = " or ".join(_JSON_TYPES.get(t, t) for t in wanted)
            return f"field {name!r} must be {expected}, not {_kind(value)}"
    return None


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of spaces folded into single spaces."""
    return " ".join(str(text).split())


def _types(field: Mapping[str, Any]) -> list[str] | None:
    """The JSON types a field's schema allows, or None when it does not say plainly."""
    kind = field.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return list(kind)
    options = field.get("anyOf") or field.get("oneOf")
    if isinstance(options, list):
        out: list[str] = []
        for option in options:
            sub = _types(option) if isinstance(option, Mapping) else None
            if sub is None:
                return None  # a $ref or a schema without a type: the tool's check decides
            out.extend(sub)
        return out or None
    return None


def _fits(value: object, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "null":
        return value is None
    return True  # a type this check does not know: the tool's check decides


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _leaves(value: object) -> Iterator[object]:
    """Every key and scalar in ``value`` (bounded: callers check the depth first)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        else:
            yield v
