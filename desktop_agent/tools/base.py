"""Tool protocol helpers: typed arguments become a JSON schema and are validated.

A tool subclasses :class:`TypedTool` with a pydantic ``Args`` model; the schema the model
sees is derived from it, and arguments that do not fit, at any depth, become a
``ToolInputError`` naming the path of each bad field (an error result the model reads),
never a crash. Tools without a model of their own (MCP servers' tools) are checked against
their JSON schema instead (:mod:`desktop_agent.engine.schema`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from desktop_agent.domain import JSON, ApprovalPolicy, EffectClass
from desktop_agent.engine.ports import ToolContext, ToolInputError, ToolResult
from desktop_agent.engine.schema import field_path

A = TypeVar("A", bound=BaseModel)


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", str_max_length=2_000_000)


def _describe(exc: ValidationError) -> str:
    """Each problem as ``path: message``, the path as ``filters[2].since`` reads."""
    parts = []
    for err in exc.errors()[:5]:
        where = field_path(err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


class TypedTool(Generic[A]):
    """A tool whose arguments are a pydantic model.

    Subclasses set ``name``, ``description``, ``args_model``, ``effect`` and implement
    :meth:`call`.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    description: ClassVar[str]
    args_model: type[A]
    effect: ClassVar[EffectClass] = EffectClass.READ_ONLY
    approval: ClassVar[ApprovalPolicy] = ApprovalPolicy.ALWAYS

    @functools.cached_property
    def input_schema(self) -> Mapping[str, JSON]:
        """JSON schema of the arguments (built once per tool)."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema

    def parse(self, args: Mapping[str, JSON]) -> A:
        """Validate ``args``; raise :class:`ToolInputError` with a readable message."""
        if not isinstance(args, Mapping):
            raise ToolInputError("expected a JSON object of arguments")
        try:
            return self.args_model.model_validate(dict(args))
        except ValidationError as exc:
            raise ToolInputError(_describe(exc)) from None

    def run(self, args: Mapping[str, JSON], ctx: ToolContext) -> ToolResult:
        """Validate and perform the call."""
        return self.call(self.parse(args), ctx)

    def call(self, args: A, ctx: ToolContext) -> ToolResult:
        """Perform the effect with validated arguments."""
        raise NotImplementedError

    def approval_reason(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """A rule-based reason to ask the analyst, or None."""
        return self.needs_approval(self.parse(args), ctx)

    def needs_approval(self, args: A, ctx: ToolContext) -> str | None:
        """Override to ask the analyst in some cases (e.g. an overwrite)."""
        return None

    def validate(self, args: Mapping[str, JSON], ctx: ToolContext) -> str | None:
        """Re-check right before an approved effect; a string says what changed."""
        return self.check(self.parse(args), ctx)

    def check(self, args: A, ctx: ToolContext) -> str | None:
        """Override to re-check the world before an approved effect."""
        return None

    def probe(self, args: Mapping[str, JSON], ctx: ToolContext) -> bool | None:
        """Ask the target whether the keyed effect already happened (None: unknown)."""
        return None

    def effect_of(self, args: Mapping[str, JSON], ctx: ToolContext) -> EffectClass:
        """The effect class of this particular call (by default the tool's own)."""
        return self.effect

    def timeout_s(self, args: Mapping[str, JSON], ctx: ToolContext) -> float | None:
        """How long the effect may take at most (None: the engine's default).

        The worker makes its lease outlast this (plus a margin) before the effect starts,
        so that no other worker can take the run over while it runs.
        """
        return None


def result(content: str, *, error: bool = False, data: Any = None) -> ToolResult:
    """Shorthand for a :class:`ToolResult`."""
    return ToolResult(content=content, is_error=error, data=data)
