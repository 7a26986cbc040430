"""Two runs side by side: their steps aligned, what differs, and what each cost.

An analyst compares a run with its re-run, a fork with its parent, or yesterday's run with
today's, to see where they went apart. The comparison is plain data (no Qt): the CLI prints
it, the GUI's compare window shows it, an export could write it.

How steps are aligned. Each step has three keys, from the most to the least specific: the
whole step (kind, arguments, result and outcome: the two steps did exactly the same), its
*intent* (kind, tool and arguments; for a model call, the tools it asked for) and its
*key* (kind, plus the tool's name for tool calls and approvals: a model call matches a
model call whatever the model, so a run re-done on another model still lines up). Steps
are aligned on the most specific key first; identical steps anchor the alignment, and the
steps between two anchors are aligned on the next key, then the next (:func:`align_steps`).
So a step is paired with its identical twin before any merely similar step, and a model
call with one that asked for the same tool before any other model call.

Each level is aligned by :func:`align_keys`: two runs of the same agent usually share a
long beginning and often an ending, so the common prefix and suffix are matched first in
linear time. The middle is aligned by a longest-common-subsequence match
(:class:`difflib.SequenceMatcher` without its "junk" heuristic, which would discard the
frequent keys that make up a run) when it is small enough for that match's quadratic
worst case; a larger middle is aligned greedily: walk both runs, and where keys differ,
skip the fewest steps (within :data:`LOOKAHEAD`) that bring them back in step. The greedy
walk is linear, and on runs of the same agent it finds the same pairs; on unrelated runs it
gives up quickly and lists the steps as only in one run, which is what they are. Two runs
of 10,000 steps compare in about 0.3 s (``bench/compare_bench.py``).

Matched steps are then compared on what they did: their arguments (a tool call's
arguments, other kinds' input, without ids that differ on every run) and their result
(the text a tool returned, what the model said and which tools it asked for). Diffs are
computed per row when asked for (:func:`step_diff`), so aligning 10,000-step runs never
parses every result twice.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from desktop_agent.domain import JSON, Run, StepKind

if TYPE_CHECKING:  # the CLI imports this module at start: it stays light
    from desktop_agent.client.api import Client
    from desktop_agent.client.views import StepEntry

LOOKAHEAD = 64
"""Steps the greedy alignment looks ahead in each run to bring two runs back in step."""

EXACT_LIMIT = 1_000_000
"""The largest product of the two middles' lengths aligned by the exact LCS match."""

DIFF_LINES = 400
"""Lines of a result diff kept; the rest is cut (and the diff says so)."""

VALUE_CHARS = 2_000
"""Characters of one argument's value kept in an argument change."""

_ID_KEYS = frozenset({"tool_use_id", "id"})
"""Keys whose values differ on every run and say nothing about what a step did."""


class RowKind(StrEnum):
    """What a row of a comparison shows."""

    SAME = "same"
    CHANGED = "changed"
    ONLY_A = "only_a"
    ONLY_B = "only_b"


@dataclass(frozen=True, slots=True)
class Facets:
    """What a step is compared on: its key, its arguments and its result, as text.

    Attributes:
        key: kind and, for tool calls and approvals, the tool's name.
        intent: the key and what the step set out to do: a tool call's arguments, the tools
            a model call asked for.
        arguments: canonical JSON of the arguments (ids left out).
        result: the result as text (what a tool returned, what the model said).
        status: the step's status, and its error if it failed.
    """

    key: tuple[str, str]
    intent: tuple[str, str, str]
    arguments: str
    result: str
    status: str


@dataclass(frozen=True, slots=True)
class CompareRow:
    """One line of the comparison: a step of A, a step of B, or both.

    Attributes:
        a: the step of run A (None when only run B has this step).
        b: the step of run B (None when only run A has it).
        arguments_differ: both steps exist and their arguments differ.
        result_differs: both steps exist and their results or outcomes differ.
    """

    a: StepEntry | None
    b: StepEntry | None
    arguments_differ: bool = False
    result_differs: bool = False

    @property
    def kind(self) -> RowKind:
        """Same, changed, only in A, or only in B."""
        if self.b is None:
            return RowKind.ONLY_A
        if self.a is None:
            return RowKind.ONLY_B
        if self.arguments_differ or self.result_differs:
            return RowKind.CHANGED
        return RowKind.SAME

    @property
    def delta_cost(self) -> float:
        """B's cost minus A's (a missing step counts as nothing)."""
        return _cost(self.b) - _cost(self.a)

    @property
    def delta_tokens(self) -> int:
        """B's tokens minus A's."""
        return _tokens(self.b) - _tokens(self.a)

    @property
    def delta_seconds(self) -> float:
        """B's duration minus A's (an open step counts as nothing yet)."""
        return _seconds(self.b) - _seconds(self.a)


@dataclass(frozen=True, slots=True)
class RunTotals:
    """What a run cost in all.

    Attributes:
        steps: steps in its journal.
        cost_usd: what it spent (including interrupted attempts it paid for).
        tokens: input plus output tokens (cache reads and writes not counted twice).
        step_seconds: the sum of its steps' durations.
        worked_seconds: the time the run worked (its time budget's measure).
    """

    steps: int
    cost_usd: float
    tokens: int
    step_seconds: float
    worked_seconds: float


@dataclass(frozen=True)
class Comparison:
    """Two runs aligned.

    Attributes:
        run_a: the first run.
        run_b: the second run.
        rows: aligned rows, in the order of both journals.
        totals_a: run A's totals.
        totals_b: run B's totals.
    """

    run_a: Run
    run_b: Run
    rows: tuple[CompareRow, ...]
    totals_a: RunTotals
    totals_b: RunTotals
    shared: RunTotals | None = None
    """When one run is a fork of the other: the steps 1..N they share, and their cost
    (then :attr:`own_a` and :attr:`own_b` are each run's work beyond them)."""
    own_a: RunTotals | None = None
    own_b: RunTotals | None = None

    def count(self, kind: RowKind) -> int:
        """How many rows are of ``kind``."""
        return sum(1 for r in self.rows if r.kind == kind)


@dataclass(frozen=True)
class ArgumentChange:
    """One argument that differs between two matched steps.

    Attributes:
        name: the argument's name (``""`` when the arguments are not an object).
        a: its value in run A as JSON text, or None when A does not pass it.
        b: its value in run B, or None.
    """

    name: str
    a: str | None
    b: str | None
    lines: tuple[str, ...] = ()
    """A unified diff of the two values when both are text of several lines (a file's
    content, a message): easier to read than the two quoted strings."""


@dataclass(frozen=True)
class StepDiff:
    """What differs between two matched steps.

    Attributes:
        arguments: the arguments that differ, by name.
        result_lines: a unified diff of the results (empty when they are equal).
        cut: the result diff was cut after :data:`DIFF_LINES` lines.
        status_a: A's outcome (status, and error if any).
        status_b: B's outcome.
    """

    arguments: tuple[ArgumentChange, ...]
    result_lines: tuple[str, ...]
    cut: bool
    status_a: str
    status_b: str


# --------------------------------------------------------------------------- facets


def _cost(entry: StepEntry | None) -> float:
    return entry.cost_usd if entry is not None else 0.0


def _tokens(entry: StepEntry | None) -> int:
    return entry.tokens[0] + entry.tokens[1] if entry is not None else 0


def _seconds(entry: StepEntry | None) -> float:
    if entry is None:
        return 0.0
    return entry.duration_s or 0.0


def step_key(entry: StepEntry) -> tuple[str, str]:
    """What two steps must share to be aligned: kind, and the tool for calls and approvals."""
    if entry.kind in (StepKind.TOOL_CALL, StepKind.APPROVAL):
        return (entry.kind.value, entry.name)
    return (entry.kind.value, "")


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in _ID_KEYS}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def _canonical(value: JSON) -> str:
    return json.dumps(_without_ids(value), sort_keys=True, ensure_ascii=False)


def _parsed(text: str | None) -> JSON:
    if not text:
        return None
    try:
        value: JSON = json.loads(text)
    except ValueError:
        return text
    return value


def arguments_of(entry: StepEntry) -> JSON:
    """A step's arguments: a tool call's arguments, another step's input (ids left out)."""
    value = _parsed(entry.input_json)
    if entry.kind == StepKind.TOOL_CALL and isinstance(value, dict) and "arguments" in value:
        value = value["arguments"]
    elif entry.kind == StepKind.MODEL_CALL and isinstance(value, dict):
        # How long the conversation was differs after any inserted step: not a difference
        # of this call (what the model answered is its result).
        value = {k: v for k, v in value.items() if k != "messages"}
    result: JSON = _without_ids(value)
    return result


def result_text(entry: StepEntry) -> str:
    """A step's result as text: a tool's content, the model's words and requested calls."""
    output = _parsed(entry.output_json)
    if entry.kind == StepKind.MODEL_CALL and isinstance(output, dict):
        return _model_result(output)
    if entry.kind == StepKind.TOOL_CALL and isinstance(output, dict) and "content" in output:
        text = _content_text(output["content"])
        return ("error: " + text) if output.get("is_error") else text
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    return json.dumps(_without_ids(output), sort_keys=True, indent=1, ensure_ascii=False)


def _content_text(content: JSON) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(block.get("text", "")) if isinstance(block, dict) else str(block)
            for block in content
        ]
        return "\n".join(parts)
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


def _model_result(output: dict[str, Any]) -> str:
    lines: list[str] = []
    thinking = output.get("thinking")
    if isinstance(thinking, str) and thinking:
        lines.append(f"(thinking) {thinking}")
    for block in output.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            lines.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            args = json.dumps(block.get("input"), sort_keys=True, ensure_ascii=False)
            lines.append(f"→ {block.get('name')}({args})")
    return "\n".join(lines)


def _status_text(entry: StepEntry) -> str:
    status = entry.status.value
    return f"{status}: {entry.error}" if entry.error else status


def facets(entry: StepEntry) -> Facets:
    """What ``entry`` is compared on."""
    key = step_key(entry)
    arguments = _canonical(arguments_of(entry))
    result = result_text(entry)
    if entry.kind == StepKind.MODEL_CALL:
        asked = ",".join(
            line[2:].split("(", 1)[0] for line in result.splitlines() if line[:2] == "→ "
        )
        intent = (*key, asked)
    else:
        intent = (*key, arguments)
    return Facets(key, intent, arguments, result, _status_text(entry))


# --------------------------------------------------------------------------- alignment


Pair = tuple[int | None, int | None]


def align_keys(a: Sequence[Any], b: Sequence[Any]) -> list[Pair]:
    """Pairs of indices of equal keys in order; ``(i, None)`` and ``(None, j)`` for the rest.

    Every index of ``a`` and of ``b`` appears exactly once, in increasing order.
    """
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    pairs: list[Pair] = [(i, i) for i in range(head)]
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if len(mid_a) * len(mid_b) <= EXACT_LIMIT:
        middle = _exact(mid_a, mid_b)
    else:
        middle = _greedy(mid_a, mid_b)
    pairs.extend(
        (None if i is None else i + head, None if j is None else j + head) for i, j in middle
    )
    pairs.extend((len(a) - tail + k, len(b) - tail + k) for k in range(tail))
    return pairs


def _exact(a: Sequence[Any], b: Sequence[Any]) -> list[Pair]:
    pairs: list[Pair] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs.extend(zip(range(i1, i2), range(j1, j2), strict=True))
            continue
        pairs.extend((i, None) for i in range(i1, i2))
        pairs.extend((None, j) for j in range(j1, j2))
    return pairs


def _greedy(a: Sequence[Any], b: Sequence[Any]) -> list[Pair]:
    pairs: list[Pair] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
            continue
        skip = _resync(a, b, i, j)
        if skip is None:  # nothing near matches: one step of each, unmatched
            pairs.extend([(i, None), (None, j)])
            i, j = i + 1, j + 1
            continue
        di, dj = skip
        pairs.extend((k, None) for k in range(i, i + di))
        pairs.extend((None, k) for k in range(j, j + dj))
        i, j = i + di, j + dj
    pairs.extend((k, None) for k in range(i, len(a)))
    pairs.extend((None, k) for k in range(j, len(b)))
    return pairs


def _resync(a: Sequence[Any], b: Sequence[Any], i: int, j: int) -> tuple[int, int] | None:
    """The fewest steps ``(di, dj)`` to skip so that ``a[i+di] == b[j+dj]``, if near."""
    first: dict[Any, int] = {}
    for dj, key in enumerate(b[j : j + LOOKAHEAD + 1]):
        first.setdefault(key, dj)
    best: tuple[int, int] | None = None
    for di, key in enumerate(a[i : i + LOOKAHEAD + 1]):
        if best is not None and di >= best[0] + best[1]:
            break
        found = first.get(key)
        if found is not None and (best is None or di + found < best[0] + best[1]):
            best = (di, found)
    return best


def align_steps(levels_a: Sequence[Sequence[Any]], levels_b: Sequence[Sequence[Any]]) -> list[Pair]:
    """Align on the most specific keys first, then pair what lies between by coarser keys.

    ``levels_a[0]`` are the most specific keys of run A's steps (two steps did exactly the
    same), the last level the coarsest (same kind of step). Steps matched at one level
    anchor the alignment; the unmatched steps between two anchors are aligned at the
    next level, and so on. A step whose identical twin is found is never paired with a
    merely similar one, and a model call that asked for another tool is paired with
    one that asked for the same tool before any other model call.
    """
    if not levels_a:
        return []
    out: list[Pair] = []
    gap_a: list[int] = []
    gap_b: list[int] = []

    def close_gap() -> None:
        if gap_a and gap_b and len(levels_a) > 1:
            inner = align_steps(
                [[level[k] for k in gap_a] for level in levels_a[1:]],
                [[level[k] for k in gap_b] for level in levels_b[1:]],
            )
            out.extend(
                (None if i is None else gap_a[i], None if j is None else gap_b[j]) for i, j in inner
            )
        else:
            out.extend((i, None) for i in gap_a)
            out.extend((None, j) for j in gap_b)
        gap_a.clear()
        gap_b.clear()

    for i, j in align_keys(levels_a[0], levels_b[0]):
        if i is not None and j is not None:
            close_gap()
            out.append((i, j))
        elif i is not None:
            gap_a.append(i)
        elif j is not None:
            gap_b.append(j)
    close_gap()
    return out


# --------------------------------------------------------------------------- comparison


def totals(run: Run, steps: Sequence[StepEntry]) -> RunTotals:
    """What ``run`` cost in all, from the run's counters and its steps."""
    return RunTotals(
        steps=len(steps),
        cost_usd=run.cost_usd,
        tokens=run.usage.input_tokens + run.usage.output_tokens,
        step_seconds=sum(_seconds(s) for s in steps),
        worked_seconds=run.active_seconds,
    )


def compare(
    run_a: Run, steps_a: Sequence[StepEntry], run_b: Run, steps_b: Sequence[StepEntry]
) -> Comparison:
    """Align two runs' steps and mark what differs between matched steps."""
    facets_a = [facets(s) for s in steps_a]
    facets_b = [facets(s) for s in steps_b]
    rows: list[CompareRow] = []
    pairs = align_steps(
        [[hash(f) for f in facets_a], [f.intent for f in facets_a], [f.key for f in facets_a]],
        [[hash(f) for f in facets_b], [f.intent for f in facets_b], [f.key for f in facets_b]],
    )
    for i, j in pairs:
        if i is None:
            rows.append(CompareRow(None, steps_b[j] if j is not None else None))
        elif j is None:
            rows.append(CompareRow(steps_a[i], None))
        else:
            fa, fb = facets_a[i], facets_b[j]
            rows.append(
                CompareRow(
                    steps_a[i],
                    steps_b[j],
                    arguments_differ=fa.arguments != fb.arguments,
                    result_differs=fa.result != fb.result or fa.status != fb.status,
                )
            )
    total_a, total_b = totals(run_a, steps_a), totals(run_b, steps_b)
    shared = _shared(run_a, steps_a, run_b) or _shared(run_b, steps_b, run_a)
    if shared is None:
        return Comparison(run_a, run_b, tuple(rows), total_a, total_b)
    own_a = _own(total_a, shared, run_a, run_b)
    own_b = _own(total_b, shared, run_b, run_a)
    return Comparison(run_a, run_b, tuple(rows), total_a, total_b, shared, own_a, own_b)


def _shared(parent: Run, steps: Sequence[StepEntry], fork: Run) -> RunTotals | None:
    """What ``fork`` shares of ``parent`` (its steps 1..N), if it is a fork of it."""
    n = fork.forked_at_seq or 0
    if fork.forked_from != parent.id or n <= 0:
        return None
    prefix = [s for s in steps if s.seq <= n]
    return RunTotals(
        steps=len(prefix),
        cost_usd=sum(_cost(s) for s in prefix),
        tokens=sum(_tokens(s) for s in prefix),
        step_seconds=sum(_seconds(s) for s in prefix),
        worked_seconds=0.0,
    )


def _own(total: RunTotals, shared: RunTotals, run: Run, other: Run) -> RunTotals:
    """A run's work beyond the steps it shares with ``other``.

    A fork's own counters never held the shared steps' cost and tokens (they are the
    parent's); its journal lists the shared steps, so their count and time come off.
    """
    fork = run.forked_from == other.id and bool(run.forked_at_seq)
    return RunTotals(
        steps=total.steps - shared.steps,
        cost_usd=total.cost_usd if fork else max(0.0, total.cost_usd - shared.cost_usd),
        tokens=total.tokens if fork else max(0, total.tokens - shared.tokens),
        step_seconds=max(0.0, total.step_seconds - shared.step_seconds),
        worked_seconds=total.worked_seconds,
    )


def _value_text(value: JSON) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"


def argument_changes(a: JSON, b: JSON) -> tuple[ArgumentChange, ...]:
    """The arguments that differ, by name (one change named ``""`` for non-objects)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        if _canonical(a) == _canonical(b):
            return ()
        return (ArgumentChange("", _value_text(a), _value_text(b)),)
    changes = []
    for name in sorted(set(a) | set(b)):
        va, vb = a.get(name), b.get(name)
        if name in a and name in b and _canonical(va) == _canonical(vb):
            continue
        changes.append(
            ArgumentChange(
                name,
                _value_text(va) if name in a else None,
                _value_text(vb) if name in b else None,
                _text_lines(va, vb),
            )
        )
    return tuple(changes)


def _text_lines(a: JSON, b: JSON, limit: int = DIFF_LINES) -> tuple[str, ...]:
    """A unified diff of two strings when either has several lines (else nothing)."""
    if not isinstance(a, str) or not isinstance(b, str) or ("\n" not in a and "\n" not in b):
        return ()
    diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "A", "B", lineterm="", n=2)
    return tuple(line for _, line in zip(range(limit), diff, strict=False))


def step_diff(row: CompareRow, limit: int = DIFF_LINES) -> StepDiff:
    """What differs between the two steps of ``row`` (a one-sided row differs in all)."""
    a, b = row.a, row.b
    args_a = arguments_of(a) if a is not None else None
    args_b = arguments_of(b) if b is not None else None
    text_a = result_text(a).splitlines() if a is not None else []
    text_b = result_text(b).splitlines() if b is not None else []
    name_a = f"A #{a.seq}" if a is not None else "A (no such step)"
    name_b = f"B #{b.seq}" if b is not None else "B (no such step)"
    lines: list[str] = []
    cut = False
    for line in difflib.unified_diff(text_a, text_b, name_a, name_b, lineterm=""):
        if len(lines) == limit:
            cut = True
            break
        lines.append(line)
    return StepDiff(
        argument_changes(args_a, args_b),
        tuple(lines),
        cut,
        _status_text(a) if a is not None else "",
        _status_text(b) if b is not None else "",
    )


def compare_runs(client: Client, run_a: str, run_b: str) -> Comparison:
    """Read two runs (ids or unique prefixes) and compare them.

    Raises:
        NotFoundError: a run does not exist (or a prefix is not unique).
    """
    from desktop_agent.client.views import timeline_entries

    a, b = client.run(run_a), client.run(run_b)
    return compare(a, timeline_entries(client, a.id), b, timeline_entries(client, b.id))
