"""``desktop-agent compare RUN_A RUN_B``: two runs' steps side by side, and what differs.

One line per aligned row: A's step, B's step, a mark (``~`` changed, ``-`` only in A,
``+`` only in B, blank when the same), what differs (arguments, result) and B's cost, tokens
and time against A's. Rows that are the same in both runs are folded into one line unless
``--all``; a table of totals ends the output. ``--json`` prints every row with the
differences of changed rows.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from desktop_agent.cli.output import EXIT_OK, echo, json_line
from desktop_agent.domain.units import format_duration, format_usd

if TYPE_CHECKING:
    from desktop_agent.cli.output import Out
    from desktop_agent.client.compare import CompareRow, Comparison, RunTotals, StepDiff
    from desktop_agent.client.views import StepEntry

AddParser = Callable[[str, str], argparse.ArgumentParser]

STEP_CHARS = 34
"""Characters of a step's description in each column."""

FOLD_AT = 3
"""Same rows in a row folded into one line (fewer are printed)."""

MARKS = {"same": " ", "changed": "~", "only_a": "-", "only_b": "+"}
"""The mark of each kind of row, by ``RowKind``'s values (a ``StrEnum``: ``RowKind.SAME ==
"same"``), so that building the parser does not import the comparison."""


def add_parsers(add: AddParser) -> None:
    """Add the ``compare`` command to the main parser (``add(name, help)``)."""
    p = add("compare", "two runs' steps side by side: what differs, cost, tokens, time")
    p.add_argument("run_a", metavar="RUN_A", help="run id or unique prefix")
    p.add_argument("run_b", metavar="RUN_B", help="run id or unique prefix")
    p.add_argument("--all", action="store_true", help="print the same rows too")


def _signed_usd(value: float) -> str:
    if abs(value) < 0.00005:
        return ""
    return ("+" if value > 0 else "-") + format_usd(abs(value))


def _signed_int(value: int) -> str:
    return f"{value:+,}" if value else ""


def _signed_seconds(value: float) -> str:
    if abs(value) < 0.5:  # format_duration shows whole seconds
        return ""
    return ("+" if value > 0 else "-") + format_duration(abs(value))


def _step_cell(entry: StepEntry | None) -> str:
    from desktop_agent.client.stepkinds import clip
    from desktop_agent.client.views import step_summary

    if entry is None:
        return f"{'':>5} {'':{STEP_CHARS}}"
    text = clip(step_summary(entry, STEP_CHARS), STEP_CHARS)
    return f"{entry.seq:>5} {text:{STEP_CHARS}}"


def _what_differs(row: CompareRow) -> str:
    parts = [w for w, on in (("args", row.arguments_differ), ("result", row.result_differs)) if on]
    return "+".join(parts)


def row_line(row: CompareRow) -> str:
    """One aligned row as a table line."""
    return (
        f"{_step_cell(row.a)} {MARKS[row.kind]} {_step_cell(row.b)} "
        f"{_what_differs(row):13} {_signed_usd(row.delta_cost):>10} "
        f"{_signed_int(row.delta_tokens):>9} {_signed_seconds(row.delta_seconds):>8}"
    )


def _fold(rows: tuple[CompareRow, ...], show_all: bool) -> Iterator[str]:
    """Table lines, with runs of same rows folded into one line unless ``show_all``."""
    from desktop_agent.client.compare import RowKind

    same: list[CompareRow] = []

    def flush() -> Iterator[str]:
        if len(same) >= FOLD_AT:
            first, last = same[0], same[-1]
            assert first.a and last.a and first.b and last.b
            yield (
                f"{'':>5} … {len(same)} same steps (A #{first.a.seq}–{last.a.seq}, "
                f"B #{first.b.seq}–{last.b.seq})"
            )
        else:
            yield from (row_line(r) for r in same)
        same.clear()

    for row in rows:
        if row.kind == RowKind.SAME and not show_all:
            same.append(row)
            continue
        yield from flush()
        yield row_line(row)
    yield from flush()


def _totals_lines(a: RunTotals, b: RunTotals, shared: RunTotals | None = None) -> list[str]:
    def line(label: str, va: str, vb: str, delta: str) -> str:
        return f"  {label:11} {va:>12} {vb:>12} {delta:>12}"

    head = (
        [line("", "A (own)", "B (own)", "B − A (own)")]
        if shared is not None
        else [line("", "A", "B", "B − A")]
    )
    return [
        *head,
        line("steps", f"{a.steps:,}", f"{b.steps:,}", _signed_int(b.steps - a.steps) or "="),
        line(
            "cost",
            format_usd(a.cost_usd),
            format_usd(b.cost_usd),
            _signed_usd(b.cost_usd - a.cost_usd) or "=",
        ),
        line("tokens", f"{a.tokens:,}", f"{b.tokens:,}", _signed_int(b.tokens - a.tokens) or "="),
        line(
            "step time",
            format_duration(a.step_seconds),
            format_duration(b.step_seconds),
            _signed_seconds(b.step_seconds - a.step_seconds) or "=",
        ),
        line(
            "worked",
            format_duration(a.worked_seconds),
            format_duration(b.worked_seconds),
            _signed_seconds(b.worked_seconds - a.worked_seconds) or "=",
        ),
    ]


def print_comparison(result: Comparison, show_all: bool, out: Out) -> None:
    """The table, the totals and the count of rows of each kind."""
    from desktop_agent.client.compare import RowKind
    from desktop_agent.client.stepkinds import clip

    for label, run in (("A", result.run_a), ("B", result.run_b)):
        echo(f"{label}: run {run.id}  {run.status.value}  {clip(run.goal, 90)}", file=out.stream)
    echo(file=out.stream)
    head = f"{'A #':>5} {'step':{STEP_CHARS}}   {'B #':>5} {'step':{STEP_CHARS}} "
    head += f"{'differs':13} {'Δcost':>10} {'Δtokens':>9} {'Δtime':>8}"
    echo(head, file=out.stream)
    for line in _fold(result.rows, show_all):
        echo(line, file=out.stream)
    echo(file=out.stream)
    if result.shared is not None and result.own_a is not None and result.own_b is not None:
        shared = result.shared
        echo(
            f"  shared: steps 1–{shared.steps} of the parent, {format_usd(shared.cost_usd)}, "
            f"{shared.tokens:,} tokens (counted once, in neither run's own work)",
            file=out.stream,
        )
        lines = _totals_lines(result.own_a, result.own_b, shared)
    else:
        lines = _totals_lines(result.totals_a, result.totals_b)
    for line in lines:
        echo(line, file=out.stream)
    echo(file=out.stream)
    echo(
        f"{result.count(RowKind.SAME)} same, {result.count(RowKind.CHANGED)} changed, "
        f"{result.count(RowKind.ONLY_A)} only in A, {result.count(RowKind.ONLY_B)} only in B"
        + ("" if show_all else "; --all prints the same steps, --json the differences"),
        file=out.stream,
    )


def _entry_json(entry: StepEntry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {
        "seq": entry.seq,
        "kind": entry.kind.value,
        "name": entry.name,
        "status": entry.status.value,
        "cost_usd": entry.cost_usd,
        "tokens": entry.tokens[0] + entry.tokens[1],
        "duration_s": entry.duration_s,
    }


def _diff_json(diff: StepDiff) -> dict[str, Any]:
    return {
        "arguments": [
            {"name": c.name, "a": c.a, "b": c.b, "lines": list(c.lines)} for c in diff.arguments
        ],
        "result": list(diff.result_lines),
        "result_cut": diff.cut,
        "status_a": diff.status_a,
        "status_b": diff.status_b,
    }


def _totals_json(t: RunTotals) -> dict[str, Any]:
    return {
        "steps": t.steps,
        "cost_usd": t.cost_usd,
        "tokens": t.tokens,
        "step_seconds": t.step_seconds,
        "worked_seconds": t.worked_seconds,
    }


def comparison_json(result: Comparison) -> dict[str, Any]:
    """The whole comparison as plain data (stable keys); changed rows carry their diff."""
    from desktop_agent.client.compare import RowKind, step_diff

    rows = []
    for row in result.rows:
        item: dict[str, Any] = {
            "kind": row.kind.value,
            "a": _entry_json(row.a),
            "b": _entry_json(row.b),
            "arguments_differ": row.arguments_differ,
            "result_differs": row.result_differs,
            "delta_cost_usd": row.delta_cost,
            "delta_tokens": row.delta_tokens,
            "delta_seconds": row.delta_seconds,
        }
        if row.kind == RowKind.CHANGED:
            item["diff"] = _diff_json(step_diff(row))
        rows.append(item)
    return {
        "run_a": result.run_a.id,
        "run_b": result.run_b.id,
        "totals_a": _totals_json(result.totals_a),
        "totals_b": _totals_json(result.totals_b),
        "counts": {k.value: result.count(k) for k in RowKind},
        "rows": rows,
    }


def cmd_compare(args: argparse.Namespace, out: Out) -> int:
    """Compare two runs and print the table (or the JSON)."""
    from desktop_agent import config
    from desktop_agent.client.api import Client
    from desktop_agent.client.compare import compare_runs

    client = Client(config.resolve_db_path(getattr(args, "db", None)))
    try:
        result = compare_runs(client, args.run_a, args.run_b)
    finally:
        client.close()
    if out.as_json:
        print(json_line(comparison_json(result)), file=out.stream)
    else:
        print_comparison(result, args.all, out)
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Out], int]] = {"compare": cmd_compare}
