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
* **schema**: the tool's JSON schema, at every depth (:mod:`desktop_agent.engine.schema`,
  the ``jsonschema`` library): a bad field anywhere is named by its path, as in
  ``filters[2].since: 'soon' is not of type 'number'``;
* **pre-run check**: the tool's own ``validate`` (its argument model and the checks it runs
  right before an approved effect), when a context to run it in is given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from desktop_agent.domain.errors import ControlFlowInterrupt
from desktop_agent.engine.ports import Tool, ToolContext, ToolInputError
from desktop_agent.engine.sanitize import MAX_ARG_DEPTH, too_deep
from desktop_agent.engine.schema import schema_problem

_SURROGATE = re.compile("[\ud800-\udfff]")


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


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of spaces folded into single spaces."""
    return " ".join(str(text).split())


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
