"""One description per step kind: its label, colours, icon, summary lines and inspector sections.

A step kind used to be presented in several places that nothing kept in agreement (the
timeline's summary, the terminal's near copy, the inspector, the theme's colours and
labels, the delegate that paints a row). Each kind now has one :class:`KindDescription`
in :data:`KINDS`; every presenter looks its kind up there. Adding a kind means adding one
entry (and its tests): ``tests/unit/test_stepkinds.py`` fails for a kind without one.

Why here, in ``client``: the GUI, the CLI and a later HTTP export all present steps, and
all of them sit on ``client``. The module imports only ``domain`` and the standard library
(no Qt, no database), so each presenter renders the same plain data its own way: the GUI
turns :class:`Section` values into HTML and colour pairs into ``QColor``, the terminal
prints the summary line, an export can write the sections as JSON or Markdown.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from desktop_agent.client.server_tool_lines import server_tool_lines
from desktop_agent.domain import JSON, Step, StepKind, StepStatus

# --------------------------------------------------------------------------- what is read


@dataclass(frozen=True, slots=True)
class StepFacts:
    """What a description reads of a step, whichever shape the step came in.

    The timeline holds slim entries with unparsed JSON, the CLI and the inspector hold
    domain steps; both become these facts. ``input`` and ``output`` are objects (a step
    whose input or output is not a JSON object reads as an empty one).
    """

    kind: StepKind
    name: str
    status: StepStatus
    input: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    partial_text: str = ""
    salvaged: tuple[str, ...] = ()

    @property
    def is_open(self) -> bool:
        """Intent written, outcome not yet."""
        return self.status == StepStatus.STARTED

    @classmethod
    def make(
        cls,
        kind: StepKind,
        name: str,
        status: StepStatus,
        input_: JSON,
        output: JSON,
        *,
        error: str | None = None,
        partial_text: str = "",
        salvaged: tuple[str, ...] = (),
    ) -> StepFacts:
        """Facts of a step whose input and output are parsed JSON of any shape."""
        return cls(
            kind,
            name,
            status,
            input_ if isinstance(input_, dict) else {},
            output if isinstance(output, dict) else {},
            error,
            partial_text,
            salvaged,
        )


def facts_of(step: Step) -> StepFacts:
    """The facts of a domain step."""
    return StepFacts.make(
        step.kind,
        step.name,
        step.status,
        step.input,
        step.output,
        error=step.error,
        partial_text=step.partial_text,
        salvaged=step.salvaged,
    )


@dataclass(frozen=True)
class Context:
    """What a description needs beyond the step itself.

    Attributes:
        width: characters the timeline's summary line may take.
        model_label: how a model id is named (the terminal marks the demo model).
        thought: for a tool call, what the model call that asked for it said.
    """

    width: int = 160
    model_label: Callable[[str], str] = str
    thought: str = ""


# --------------------------------------------------------------------------- what is shown


class Shape(StrEnum):
    """How a section's content is meant to be shown."""

    TEXT = "text"
    """Plain text, shown as written (line breaks kept)."""
    JSON = "json"
    """Any JSON value, shown pretty-printed."""
    ARGUMENTS = "arguments"
    """Named values (a tool's arguments): short ones side by side, long texts as blocks."""


@dataclass(frozen=True, slots=True)
class Section:
    """One titled part of a step's details, as plain data (no markup).

    Attributes:
        title: the heading, plain text.
        shape: how ``content`` is meant to be shown.
        content: a string for :attr:`Shape.TEXT`, any JSON value otherwise.
    """

    title: str
    shape: Shape
    content: JSON


class ColorPair(NamedTuple):
    """A colour as hex for a light and for a dark palette (the dark one is lighter)."""

    light: str
    dark: str


Summarize = Callable[[StepFacts, Context], str]
Detail = Callable[[StepFacts, Context], list[Section]]


@dataclass(frozen=True)
class KindDescription:
    """Everything presenters show of one step kind.

    Attributes:
        kind: the step kind described.
        label: the short label (timeline, inspector heading).
        colors: the kind's colour (the timeline's strip and label, the charts).
        icon: name of an icon under ``resources/icons`` that stands for the kind, or None
            when no icon fits yet (the timeline draws none today).
        waits: an open step of this kind waits (for the analyst or the clock) rather than
            works; the timeline marks it as waiting.
        summary: the timeline's one line (also what an export would list).
        terminal_summary: the terminal's shorter line (``desktop-agent show``/``follow``).
        sections: the inspector's sections for this kind (before the error and salvage
            sections every kind shares, see :func:`sections`).
    """

    kind: StepKind
    label: str
    colors: ColorPair
    icon: str | None
    waits: bool
    summary: Summarize
    terminal_summary: Summarize
    sections: Detail


# --------------------------------------------------------------------------- helpers


def clip(text: str, n: int) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def model_text(output: JSON) -> str:
    """The text blocks of a model call's output."""
    if not isinstance(output, dict):
        return ""
    blocks = output.get("content") or []
    return "\n".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    ).strip()


def tool_uses(output: JSON) -> list[dict[str, Any]]:
    """The tool uses a model call asked for."""
    if not isinstance(output, dict):
        return []
    return [
        b
        for b in output.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]


_KEY_ARGUMENTS = ("path", "url", "query", "to", "file_path", "command", "pattern")
"""Arguments that say what a call is about (the last three: Claude Code's tools')."""


def _key_argument(f: StepFacts) -> str:
    """The argument that says what a tool call is about (a path, a url, a query, a to)."""
    args = f.input.get("arguments")
    if not isinstance(args, dict):
        return ""
    return next((str(v) for k, v in args.items() if k in _KEY_ARGUMENTS), "")


def _whose(f: StepFacts) -> str:
    """``Explore › `` for a step of a subagent (an imported Claude Code session's), else ""."""
    agent = f.input.get("agent")
    return f"{agent} › " if isinstance(agent, str) and agent else ""


def _approval_parts(f: StepFacts) -> tuple[str, str]:
    """The tools an approval step asked about, and the decisions taken (comma-separated)."""
    names = ", ".join(str(r.get("name")) for r in f.input.get("requests", []))
    decisions = ", ".join(str(d.get("state")) for d in f.output.get("decisions", []))
    return names, decisions


def _streaming(f: StepFacts, c: Context) -> str:
    if f.input.get("mode") == "economy":
        return "in a batch (economy mode): the answer comes when its batch ends"
    live = f.partial_text.strip()
    return clip(live, c.width) if live else "waiting for the model…"


# --------------------------------------------------------------------------- summaries


def _model_summary(f: StepFacts, c: Context) -> str:
    if f.is_open:
        return _streaming(f, c)
    text = model_text(f.output) or str(f.output.get("partial", "")) or f.error or ""
    uses = [str(u.get("name", "")) for u in tool_uses(f.output)]
    tail = f"  → {', '.join(uses)}" if uses else ""
    return clip(_whose(f) + text, max(20, c.width - len(tail))) + tail


def _compaction_summary(f: StepFacts, c: Context) -> str:
    if f.is_open:
        return _streaming(f, c)
    return clip(f"summarized {f.input.get('summarized_messages', '?')} messages", c.width)


def _tool_summary(f: StepFacts, c: Context) -> str:
    call = f"{_whose(f)}{f.name} {_key_argument(f)}".strip()
    if f.is_open:
        return clip(f"{call} → running…", c.width)
    res = str(f.output.get("content", f.error or ""))
    mark = "error: " if f.output.get("is_error") else ""
    return clip(f"{call} → {mark}{res}", c.width)


def _approval_summary(f: StepFacts, c: Context) -> str:
    names, decisions = _approval_parts(f)
    if decisions:
        return f"approval for {names}: {decisions}"
    if f.is_open:
        return f"approval for {names}: waiting for you"
    # Closed undecided: the run was cancelled or stopped while it asked.
    return f"approval for {names}: not decided ({f.error or 'the run ended first'})"


def _steer_summary(f: StepFacts, c: Context) -> str:
    said = "prompt" if f.name == "prompt" else "your note"  # a Claude Code session's prompt
    return clip(f"{_whose(f)}{said}: {f.input.get('text', '')}", c.width)


def _sleep_summary(f: StepFacts, c: Context) -> str:
    until = f.input.get("until")
    when = time.strftime("%H:%M:%S", time.localtime(float(until))) if until else "?"
    return f"sleeping until {when}" if f.is_open else f"slept until {when}"


def _question_summary(f: StepFacts, c: Context) -> str:
    q = clip(str(f.input.get("question", "")), c.width - 20)
    return f"asked: {q}" + ("" if f.is_open else f" — answer: {f.output.get('content', '')}")


def _budget_summary(f: StepFacts, c: Context) -> str:
    return f"budget reached ({f.name})" + (f": {f.output.get('action')}" if f.output else "")


def _report_summary(f: StepFacts, c: Context) -> str:
    return clip(f"partial report written to {f.output.get('path', '?')}", c.width)


def _error_summary(f: StepFacts, c: Context) -> str:
    detail = f.error or (json.dumps(f.output) if f.output else "")
    return clip(f"{f.name}: {detail}" if detail else f.name, c.width)


# --------------------------------------------------------------------------- terminal lines


def _model_line(f: StepFacts, c: Context) -> str:
    text = model_text(f.output) or f.partial_text or f.error or ""
    uses = [str(u.get("name", "")) for u in tool_uses(f.output)]
    tail = f" → {', '.join(uses)}" if uses else ""
    return f"{c.model_label(f.name)}: {clip(text, 70)}{tail}"


def _tool_line(f: StepFacts, c: Context) -> str:
    res = str(f.output.get("content", f.error or ""))
    err = " ERROR" if f.output.get("is_error") else ""
    return f"{f.name} {_key_argument(f)}{err}: {clip(res, 60)}"


def _approval_line(f: StepFacts, c: Context) -> str:
    names, decisions = _approval_parts(f)
    return f"approval for {names}" + (f": {decisions}" if decisions else ": pending")


def _steer_line(f: StepFacts, c: Context) -> str:
    return f"note: {clip(str(f.input.get('text', '')), 70)}"


def _plain_line(f: StepFacts, c: Context) -> str:
    return f"{f.name} {clip(json.dumps(f.output) if f.output else '', 60)}"


# --------------------------------------------------------------------------- sections


_MISSED = {
    "messages_changed": "the messages changed before the newest turn",
    "model_changed": "the model (or its speed) differs from the previous call's",
    "system_changed": "the system prompt differs from the previous call's",
    "tools_changed": "the tools differ from the previous call's (added, removed or reordered)",
    "previous_message_not_found": (
        "the API kept no record of the previous call to compare with "
        "(this call itself did not change)"
    ),
    "unavailable": (
        "the API could not say why (a setting such as thinking or tool choice may differ "
        "from the previous call's)"
    ),
}
"""Why the prompt cache was missed, in plain words, by the API's ``cache_miss_reason.type``."""


def cache_miss_words(miss: JSON) -> str:
    """One plain sentence for a model call's ``cache_miss`` ("" when there is none)."""
    if not isinstance(miss, dict) or not miss.get("type"):
        return ""
    kind = str(miss["type"])
    why = _MISSED.get(kind, kind.replace("_", " "))
    tokens = miss.get("cache_missed_input_tokens")
    lost = (
        f" (~{tokens:,} tokens not read from the cache)"
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0
        else ""
    )
    return f"cache missed: {why}{lost}"


def _count(value: JSON) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _transformation_words(items: JSON) -> list[str]:
    """What the API changed in the prompt before the model read it, one line per kind."""
    if not isinstance(items, list):
        return []
    kinds: dict[str, int] = {}
    for item in items:
        if isinstance(item, dict):
            kind = str(item.get("type") or "change")
            kinds[kind] = kinds.get(kind, 0) + 1
    words = {
        "thinking_dropped": "thinking block(s) of earlier turns dropped by the API "
        "(they failed its check)",
        "thinking_mismatch_allowed": "thinking block(s) of earlier turns shown to the model "
        "although they failed the API's check",
    }
    return [f"{n} {words.get(kind, kind.replace('_', ' '))}" for kind, n in kinds.items()]


def cache_lines(output: JSON) -> list[str]:
    """What a model call's output says of the prompt cache, as plain lines (may be empty).

    Cache writes by lifetime (5 minutes, 1 hour), the reason the cache was missed, and what
    the API changed in the prompt, from the ``api`` details the adapter records.
    """
    api = output.get("api") if isinstance(output, dict) else None
    if not isinstance(api, dict):
        return []
    lines = []
    w5, w1 = _count(api.get("cache_write_5m")), _count(api.get("cache_write_1h"))
    if w5 or w1:
        parts = [f"{w5:,} tokens for 5 minutes"] if w5 else []
        parts += [f"{w1:,} tokens for 1 hour"] if w1 else []
        lines.append("written to the cache: " + ", ".join(parts))
    missed = cache_miss_words(api.get("cache_miss"))
    if missed:
        lines.append(missed)
    lines.extend(_transformation_words(api.get("input_transformations")))
    return [line[:1].upper() + line[1:] for line in lines]


def _thinking(out: dict[str, Any]) -> str:
    """The thinking (and, on the 2026 models, the words between tool calls) of a call."""
    text = str(out.get("thinking") or "").strip()
    if text:
        return text
    blocks = out.get("content") or []
    return "\n\n".join(
        str(b.get("thinking", "")).strip()
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "thinking" and b.get("thinking")
    ).strip()


def _model_sections(f: StepFacts, c: Context) -> list[Section]:
    out = f.output
    found = []
    thinking = _thinking(out)
    if thinking:
        found.append(Section("Thinking and progress notes", Shape.TEXT, thinking))
    text = model_text(out) or str(out.get("summary") or "")
    if f.partial_text and not text:
        found.append(Section("Output so far (streaming)", Shape.TEXT, f.partial_text))
    elif text:
        found.append(Section("Thought", Shape.TEXT, text))
    for use in tool_uses(out):
        found.append(Section(f"Asks to call {use.get('name')}", Shape.ARGUMENTS, use.get("input")))
    if out.get("partial"):
        found.append(Section("Partial output before the failure", Shape.TEXT, str(out["partial"])))
    cache = cache_lines(out)
    if cache:
        found.append(Section("Prompt cache", Shape.TEXT, "\n".join(cache)))
    if server := server_tool_lines(f.input, out):
        found.append(Section("Anthropic's tools", Shape.TEXT, "\n".join(server)))
    return found


_SUMMARY_TITLES = {
    "server": "Summary (written by the API; it replaces the older turns)",
    "client": "Summary (written by the model; it replaces the older turns)",
}


def _compaction_sections(f: StepFacts, c: Context) -> list[Section]:
    out = f.output
    mode = str(out.get("mode") or "")
    if f.is_open or mode not in ("server", "client", "none"):
        return _model_sections(f, c)  # streaming, or recorded before compaction had modes
    found = []
    thinking = _thinking(out)
    if thinking:
        found.append(Section("Thinking and progress notes", Shape.TEXT, thinking))
    summary = str(out.get("summary") or "").strip()
    if mode == "none" or not summary:
        found.append(
            Section(
                "No summary",
                Shape.TEXT,
                "The API wrote no summary: the conversation was left as it was.",
            )
        )
    else:
        found.append(Section(_SUMMARY_TITLES[mode], Shape.TEXT, summary))
    cache = cache_lines(out)
    if cache:
        found.append(Section("Prompt cache", Shape.TEXT, "\n".join(cache)))
    return found


def _tool_sections(f: StepFacts, c: Context) -> list[Section]:
    found = []
    if c.thought:
        found.append(Section("Thought (from the model call that asked)", Shape.TEXT, c.thought))
    found.append(Section(f"Tool {f.name}: arguments", Shape.ARGUMENTS, f.input.get("arguments")))
    out = f.output
    if out:
        title = "Result (error)" if out.get("is_error") else "Result"
        found.append(Section(title, Shape.TEXT, str(out.get("content", ""))))
        if out.get("data") is not None:
            found.append(Section("Data", Shape.JSON, out["data"]))
    return found


def _approval_sections(f: StepFacts, c: Context) -> list[Section]:
    found = [
        Section(
            f"Asked to approve {req.get('name')} ({req.get('rule', '')})",
            Shape.ARGUMENTS,
            req.get("arguments"),
        )
        for req in f.input.get("requests", [])
    ]
    for dec in f.output.get("decisions", []):
        note = f" — {dec.get('note')}" if dec.get("note") else ""
        found.append(
            Section(f"Decision: {dec.get('state')}{note}", Shape.ARGUMENTS, dec.get("arguments"))
        )
    return found


def _plain_sections(f: StepFacts, c: Context) -> list[Section]:
    found = []
    if f.input:
        found.append(Section("Input", Shape.JSON, f.input))
    if f.output:
        found.append(Section("Output", Shape.JSON, f.output))
    return found


def _outcome_sections(f: StepFacts) -> list[Section]:
    """What every kind shows last: its error, and what interrupted attempts left."""
    found = [Section("Error", Shape.TEXT, f.error)] if f.error else []
    for i, text in enumerate(f.salvaged, start=1):
        found.append(Section(f"Salvaged output of interrupted attempt {i}", Shape.TEXT, text))
    return found


# --------------------------------------------------------------------------- the registry


def _describe(
    kind: StepKind,
    label: str,
    colors: tuple[str, str],
    icon: str | None,
    summary: Summarize,
    *,
    waits: bool = False,
    terminal: Summarize = _plain_line,
    details: Detail = _plain_sections,
) -> KindDescription:
    return KindDescription(kind, label, ColorPair(*colors), icon, waits, summary, terminal, details)


_ALL = (
    _describe(
        StepKind.MODEL_CALL,
        "model",
        ("#1e78d2", "#5aa2ef"),
        None,
        _model_summary,
        terminal=_model_line,
        details=_model_sections,
    ),
    _describe(
        StepKind.TOOL_CALL,
        "tool",
        ("#138a72", "#3cc9a8"),
        "resolve",
        _tool_summary,
        terminal=_tool_line,
        details=_tool_sections,
    ),
    _describe(
        StepKind.APPROVAL,
        "approval",
        ("#7e57c2", "#b39ddb"),
        "inbox",
        _approval_summary,
        waits=True,
        terminal=_approval_line,
        details=_approval_sections,
    ),
    _describe(
        StepKind.SLEEP, "wait", ("#78808a", "#a9b1bb"), "schedule", _sleep_summary, waits=True
    ),
    _describe(
        StepKind.STEER,
        "note",
        ("#c2185b", "#f06292"),
        "steer",
        _steer_summary,
        terminal=_steer_line,
    ),
    _describe(
        StepKind.COMPACTION,
        "compact",
        ("#3949ab", "#8c9eff"),
        None,
        _compaction_summary,
        details=_compaction_sections,
    ),
    _describe(
        StepKind.BUDGET,
        "budget",
        ("#b7791f", "#f0b94b"),
        "budget",
        _budget_summary,
        waits=True,
        terminal=_budget_summary,
    ),
    _describe(StepKind.ERROR, "error", ("#c62828", "#ff7b72"), "status-failed", _error_summary),
    _describe(
        StepKind.QUESTION,
        "question",
        ("#8e24aa", "#ce93d8"),
        "answer",
        _question_summary,
        waits=True,
    ),
    _describe(StepKind.REPORT, "report", ("#6d4c41", "#c8a18f"), "edit", _report_summary),
)

KINDS: Mapping[StepKind, KindDescription] = MappingProxyType({d.kind: d for d in _ALL})
"""The description of every step kind."""


def describe(kind: StepKind) -> KindDescription:
    """The description of ``kind``."""
    return KINDS[kind]


def summary(facts: StepFacts, width: int = 160) -> str:
    """The timeline's one line for a step, at most about ``width`` characters."""
    return KINDS[facts.kind].summary(facts, Context(width=width))


def terminal_summary(facts: StepFacts, model_label: Callable[[str], str] = str) -> str:
    """The terminal's line for a step (``model_label`` names a model call's model)."""
    return KINDS[facts.kind].terminal_summary(facts, Context(model_label=model_label))


def sections(facts: StepFacts, thought: str = "") -> list[Section]:
    """The inspector's sections for a step, the error and salvaged output last.

    Args:
        facts: the step.
        thought: for a tool call, what the model call that asked for it said.
    """
    return KINDS[facts.kind].sections(facts, Context(thought=thought)) + _outcome_sections(facts)
