"""Cache share of a long run that waits: how much of each prompt is read from the cache.

A 100-step research run (model calls and tool calls in turn) on the real engine and a real
SQLite journal, talking through the product's Claude adapter to the contract fake in its
cache-modelling mode (``tests/helpers/fake_anthropic.py``: a breakpoint writes an entry for
its prefix that lives 5 minutes or an hour, refreshed when read; a request reads the longest
live prefix). Three times the agent sets a timer longer than five minutes (``wait``); the
run hibernates, the clock of the engine and of the fake jumps, and the run is woken.

Printed for the product as it is (a run that can wait writes its cache for an hour) and
for the same run with every write kept five minutes (the baseline, in the same process):

* the cache share over the run: cache reads / (input + cache writes + cache reads);
* the share of the first call after each wait;
* what the prompts cost (the run's model's prices, 1-hour writes at 2x input).

Targets: >= 80% right after a wait, >= 90% over the run.

    .venv/bin/python bench/cache_share.py [--model claude-sonnet-5-5] [--steps 100]
                                          [--wait-minutes 20] [--dir bench/out]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from desktop_agent.client.api import Client  # noqa: E402
from desktop_agent.config import Settings  # noqa: E402
from desktop_agent.domain import RunStatus, StepKind, Usage  # noqa: E402
from desktop_agent.engine import request as engine_request  # noqa: E402
from desktop_agent.engine.loop import EngineConfig  # noqa: E402
from desktop_agent.llm.claude import ClaudeModel, RetryPolicy  # noqa: E402
from desktop_agent.llm.pacing import RateLimitPacer  # noqa: E402
from desktop_agent.worker.compose import build_executor  # noqa: E402
from desktop_agent.worker.worker import Worker, WorkerConfig  # noqa: E402
from tests.helpers.fake_anthropic import FakeAnthropic, Reply, Stream, Text, ToolUse  # noqa: E402
from tests.helpers.fakes import FakeClock  # noqa: E402

KEY = "sk-ant-api03-bench-0000000000000000"
NOTE = "Quarterly figures, vendor notes and the analyst's comments on them. " * 12


@dataclass
class Figures:
    """What one run measured."""

    label: str
    calls: int
    share: float
    after_waits: list[float]
    prompt_usd: float
    total_usd: float


class Agent:
    """A scripted agent: reads a note per turn, sets three long timers, then answers.

    Args:
        turns: model calls before the final answer (a 100-step run has about 50).
        waits: the turns at which it sets a timer.
        wait_s: how long each timer is.
    """

    def __init__(self, turns: int, waits: tuple[int, ...], wait_s: float) -> None:
        self.turns = turns
        self.waits = waits
        self.wait_s = wait_s
        self.turn = 0

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        """The reply to the next request (the fake calls this)."""
        self.turn += 1
        if self.turn > self.turns:
            return Stream([Text("Done: the figures agree across the notes.")])
        if self.turn in self.waits:
            tool = ToolUse("wait", {"seconds": self.wait_s, "reason": "let the feed update"})
        else:
            tool = ToolUse("read_file", {"path": f"notes/n{self.turn % 5}.md"})
        return Stream([Text(f"Turn {self.turn}: reading on."), tool], output_tokens=60)


def run_once(
    folder: Path, model: str, turns: int, wait_s: float, *, one_hour: bool, waits: int = 3
) -> Figures:
    """One run with the product's cache TTL (``one_hour``) or every write kept 5 minutes."""
    db = folder / ("hour.db" if one_hour else "five.db")
    settings = Settings(default_max_cost_usd=None, default_max_steps=None)
    settings.save(db)
    client = Client(db, settings)
    workspace = folder / "ws"
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    for i in range(5):
        (workspace / "notes" / f"n{i}.md").write_text(f"Note {i}. " + NOTE)
    clock = FakeClock()
    at = tuple(turns * (i + 1) // (waits + 1) for i in range(waits))
    agent = Agent(turns, at, wait_s)
    with FakeAnthropic(agent, cache=True, clock=clock.now) as fake, _ttl(one_hour):
        claude = ClaudeModel(
            lambda: KEY,
            base_url=fake.url,
            policy=RetryPolicy(backoff_s=0.01),
            pacer=RateLimitPacer(),
            clock=clock.now,
        )
        executor = build_executor(
            client.store,
            settings,
            clock=clock,
            model_for=lambda _name: claude,
            config=EngineConfig(settings=settings),
        )
        run = client.start_run(
            "Read the notes and check the figures", model=model, workspace=workspace
        )
        woken: list[int] = []
        for _ in range(len(at) + 2):
            Worker(
                client.store,
                executor,
                WorkerConfig(max_runs=1, until_idle=True, poll_s=0.01),
                clock=clock,
            ).run()
            state = client.run(run.id)
            if state.status != RunStatus.WAITING:
                break
            clock.advance(wait_s + 1)
            woken.append(len(fake.requests))
        done = client.run(run.id)
        if done.status != RunStatus.COMPLETED:
            raise SystemExit(f"the run ended {done.status}: {done.status_message}")
        calls = [s for s in client.steps(run.id) if s.kind == StepKind.MODEL_CALL]
        usages = [c.usage for c in calls]
        after = [_share(usages[i]) for i in woken if i < len(usages)]
        total = sum(usages, Usage())
        prompt_usd = sum(c.cost_usd for c in calls) - _output_usd(model, total)
        figures = Figures(
            "1-hour writes (the product)" if one_hour else "5-minute writes (baseline)",
            len(calls),
            _share(total),
            after,
            prompt_usd,
            done.cost_usd,
        )
    client.close()
    return figures


@contextmanager
def _ttl(one_hour: bool) -> Iterator[None]:
    """The product's TTL choice, or five minutes for every call (the baseline)."""
    if one_hour:
        yield
        return
    with mock.patch.object(engine_request, "cache_ttl", lambda _rs: "5m"):
        yield


def _share(u: Usage) -> float:
    prompt = u.input_tokens + u.cache_write_tokens + u.cache_read_tokens
    return u.cache_read_tokens / prompt if prompt else 0.0


def _output_usd(model: str, total: Usage) -> float:
    from desktop_agent.llm.pricing import model_info

    return total.output_tokens * model_info(model).output / 1_000_000


def main(argv: list[str] | None = None) -> int:
    """Run both variants and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="claude-sonnet-5-5")
    parser.add_argument(
        "--steps", type=int, default=100, help="steps of the run (about half calls)"
    )
    parser.add_argument("--wait-minutes", type=float, default=20.0)
    parser.add_argument("--waits", type=int, default=3, help="timers the agent sets")
    parser.add_argument("--dir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    turns = max(8, args.steps // 2)
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        results = [
            run_once(
                Path(scratch) / name,
                args.model,
                turns,
                args.wait_minutes * 60,
                one_hour=hour,
                waits=args.waits,
            )
            for name, hour in (("a", True), ("b", False))
        ]
    print(
        f"{args.model}: {turns} model calls (~{2 * turns} steps), {args.waits} timers of "
        f"{args.wait_minutes:g} minutes"
    )
    for f in results:
        after = ", ".join(f"{s:.0%}" for s in f.after_waits)
        print(
            f"  {f.label:30s} cache share {f.share:.1%} over {f.calls} calls; "
            f"right after each wait: {after}; prompt ${f.prompt_usd:.4f}, run ${f.total_usd:.4f}"
        )
    hour, five = results
    ratio = hour.prompt_usd / five.prompt_usd if five.prompt_usd else float("nan")
    print(f"  prompt cost, 1-hour / 5-minute writes: {ratio:.2f}x")
    met = hour.share >= 0.90 and all(s >= 0.80 for s in hour.after_waits)
    if not args.waits:
        print("  (no waits: the hour's writes are the premium a run that never waits would pay)")
    print(f"  targets (>= 90% over the run, >= 80% after each wait): {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
