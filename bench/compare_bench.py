"""How long comparing two long runs takes (``desktop-agent compare`` and the GUI's window).

Builds two synthetic 10,000-step journals (a model call, then two tool calls, repeated;
realistic argument and result text) and times :func:`desktop_agent.client.compare.compare`
on three pairs: a run against itself, a run against a copy with a step removed every 97
steps and an argument changed every 50, and two unrelated runs. The baseline is reading
the facets (parsing every step's JSON once), which any comparison must do; the ratio says
what the alignment adds. Prints one line per pair.

    .venv/bin/python bench/compare_bench.py [--steps N] [--repeat R]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import time
from collections.abc import Callable

from desktop_agent.client.compare import RowKind, compare, facets
from desktop_agent.client.views import StepEntry
from desktop_agent.domain import AgentSpec, Run, RunStatus, StepKind, StepStatus

TOOLS = ("read_file", "web_fetch", "write_file", "list_files", "update_plan")
WORDS = ("cobalt", "supplier", "note", "shipment", "price", "contract", "risk", "report")


def journal(n: int, seed: int, run_id: str) -> list[StepEntry]:
    """``n`` steps: a model call, then two tool calls, repeated."""
    rng = random.Random(seed)
    steps = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
        if i % 3 == 0:
            kind, name = StepKind.MODEL_CALL, "demo"
            inp = {"model": "demo", "messages": i + 1}
            out: dict[str, object] = {"content": [{"type": "text", "text": text}]}
            cost, tokens = 0.002, (1200 + i, 40, 0, 0)
        else:
            kind, name = StepKind.TOOL_CALL, rng.choice(TOOLS)
            inp = {"tool_use_id": f"t{i}", "arguments": {"path": f"src/{rng.randint(0, 400)}.md"}}
            out, cost, tokens = {"content": text, "is_error": False}, 0.0, (0, 0, 0, 0)
        steps.append(
            StepEntry(
                run_id, i + 1, kind, name, StepStatus.COMPLETED, 1, None, float(i),
                i + 0.5, cost, tokens, None, "", json.dumps(inp), json.dumps(out), None,
            )
        )  # fmt: skip
    return steps


def edited(steps: list[StepEntry], run_id: str) -> list[StepEntry]:
    """A copy with every 97th step removed and every 50th tool call's argument changed."""
    out: list[StepEntry] = []
    for k, s in enumerate(steps):
        if k % 97 == 96:
            continue
        inp = s.input_json
        if s.kind == StepKind.TOOL_CALL and k % 50 == 1:
            inp = json.dumps({"tool_use_id": "x", "arguments": {"path": "changed.md"}})
        out.append(dataclasses.replace(s, run_id=run_id, seq=len(out) + 1, input_json=inp))
    return out


def run(run_id: str, steps: list[StepEntry]) -> Run:
    """A finished run holding ``steps``."""
    return Run(
        run_id, "goal", RunStatus.COMPLETED, AgentSpec("demo", ""), "ws", last_seq=len(steps)
    )


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, float]:
    """Median and best seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    a = journal(args.steps, 1, "a")
    pairs = {
        "identical": a,
        "edited copy": edited(a, "b"),
        "unrelated": journal(args.steps, 2, "b"),
    }
    print(f"compare: two runs of {args.steps:,} steps, median of {args.repeat}")
    for label, b in pairs.items():
        ra, rb = run("a", a), run("b", b)

        def read(b: list[StepEntry] = b) -> object:
            return [facets(s) for s in a], [facets(s) for s in b]

        def aligned(b: list[StepEntry] = b, ra: Run = ra, rb: Run = rb) -> object:
            return compare(ra, a, rb, b)

        base, _ = best_of(args.repeat, read)
        med, best = best_of(args.repeat, aligned)
        result = compare(ra, a, rb, b)
        counts = ", ".join(f"{k.value} {result.count(k)}" for k in RowKind)
        print(
            f"  {label:12} {med * 1000:7.1f} ms (best {best * 1000:.1f}); "
            f"reading facets {base * 1000:.1f} ms, ratio {med / base:.2f}; rows: {counts}"
        )


if __name__ == "__main__":
    main()
