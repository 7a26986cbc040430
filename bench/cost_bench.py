"""What a run costs streamed and in economy mode, and how much of each prompt the cache holds.

The real engine, a real SQLite journal, the product's Claude adapter and its batch pump
talk to the contract fake in its cache-modelling mode (``tests/helpers/fake_anthropic.py``:
a breakpoint writes an entry for its prefix that lives 5 minutes or an hour, refreshed when
read; a request reads the longest live prefix; requests of a Message Batch go through the
same model when their batch ends). The clock is the fake's and the engine's, moved by hand:
a timer of 20 minutes, or a batch that takes ``--batch-minutes``, costs no real time.

Two workloads, each streamed and in economy mode, in one process:

* **a research run** of ``--steps`` steps (model and tool calls in turn) that sets three
  timers longer than five minutes: the cache-read share over the run and on the first call
  after each wait, prompt tokens, and cost;
* **a folder batch** of ``--items`` items (short runs sharing the system prompt and tools):
  cost per item, economy against streamed.

Design choices that move the figures are shown both ways: the cache's lifetime (the
product writes for an hour when a run can wait, and always in economy mode; the baseline
writes for five minutes).

Targets (issue: half the bill): cache-read share >= 90% over the run and >= 80% on the
first call after each wait; economy cost per batch item <= 0.55x the streamed item.

    .venv/bin/python bench/cost_bench.py [--model claude-sonnet-5-5] [--steps 100]
        [--items 50] [--batch-minutes 20] [--dir bench/out]
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
from desktop_agent.client.schedules import RunOptions, Scheduling  # noqa: E402
from desktop_agent.config import Settings  # noqa: E402
from desktop_agent.domain import RunStatus, StepKind, Usage  # noqa: E402
from desktop_agent.engine import request as engine_request  # noqa: E402
from desktop_agent.engine.loop import EngineConfig  # noqa: E402
from desktop_agent.llm.batches import BatchApi  # noqa: E402
from desktop_agent.llm.claude import ClaudeModel, RetryPolicy  # noqa: E402
from desktop_agent.llm.pacing import RateLimitPacer  # noqa: E402
from desktop_agent.persistence.batches import BatchBook  # noqa: E402
from desktop_agent.worker.batches import BatchPump, PumpConfig  # noqa: E402
from desktop_agent.worker.compose import build_executor  # noqa: E402
from desktop_agent.worker.scheduling import DbSchedulerPort  # noqa: E402
from desktop_agent.worker.worker import Worker, WorkerConfig  # noqa: E402
from tests.helpers.fake_anthropic import (  # noqa: E402
    FakeAnthropic,
    Reply,
    Stream,
    Text,
    ToolUse,
)
from tests.helpers.fakes import FakeClock  # noqa: E402

KEY = "sk-ant-api03-bench-0000000000000000"
NOTE = "Quarterly figures, vendor notes and the analyst's comments on them. " * 12


@dataclass
class Figures:
    """What one variant measured."""

    label: str
    runs: int
    calls: int
    prompt_tokens: int
    share: float
    after_waits: list[float]
    cost_usd: float


class Research:
    """The research run's agent: reads a note per turn, sets timers, then answers."""

    def __init__(self, turns: int, waits: tuple[int, ...], wait_s: float) -> None:
        self.turns, self.waits, self.wait_s = turns, waits, wait_s

    def __call__(self, body: dict[str, Any], _index: int) -> Reply:
        """The reply to a request (the fake calls this)."""
        turn = (len(body["messages"]) + 1) // 2
        if turn > self.turns:
            return Stream([Text("Done: the figures agree across the notes.")])
        if turn in self.waits:
            tool = ToolUse("wait", {"seconds": self.wait_s, "reason": "let the feed update"})
        else:
            tool = ToolUse("read_file", {"path": f"notes/n{turn % 5}.md"})
        return Stream([Text(f"Turn {turn}: reading on."), tool], output_tokens=60)


class Item:
    """A batch item's agent: reads its file, then summarises it."""

    def __call__(self, body: dict[str, Any], _index: int) -> Reply:
        """The reply to a request (the fake calls this)."""
        if len(body["messages"]) == 1:
            return Stream(
                [Text("Reading."), ToolUse("list_files", {"path": "."})], output_tokens=40
            )
        return Stream([Text("Summary: " + "the note's figures, checked. " * 8)], output_tokens=120)


class Lab:
    """One database, a fake API, the engine and (in economy mode) the pump, on one clock."""

    def __init__(self, folder: Path, script: Any, *, economy: bool, batch_s: float) -> None:
        folder.mkdir(parents=True)
        self.db = folder / "desktop-agent.db"
        self.settings = Settings(default_max_cost_usd=None, default_max_steps=None)
        self.settings.save(self.db)
        self.client = Client(self.db, self.settings)
        self.economy = economy
        self.batch_s = batch_s
        self.clock = FakeClock()
        self.fake = FakeAnthropic(script, cache=True, clock=self.clock.now).__enter__()
        claude = ClaudeModel(
            lambda: KEY,
            base_url=self.fake.url,
            policy=RetryPolicy(backoff_s=0.01),
            pacer=RateLimitPacer(),
            clock=self.clock.now,
        )
        self.executor = build_executor(
            self.client.store,
            self.settings,
            clock=self.clock,
            model_for=lambda _name: claude,
            config=EngineConfig(settings=self.settings),
        )
        self.pump = BatchPump(
            BatchBook(self.client.store.db),
            lambda: BatchApi(lambda: KEY, base_url=self.fake.url),
            self.clock.now,
            PumpConfig(window_s=0.0, first_poll_s=1.0, doubt_s=3600.0),
        )

    def close(self) -> None:
        """Stop the fake and close the database."""
        self.fake.__exit__(None, None, None)
        self.client.close()

    def drive(self, run_ids: list[str], wait_s: float) -> list[int]:
        """Run every run to its end; returns the model-call counts right after each timer."""
        woken: list[int] = []
        for _ in range(100_000):
            Worker(
                self.client.store,
                self.executor,
                WorkerConfig(max_runs=64, until_idle=True, poll_s=0.0, backup_every_s=0),
                clock=self.clock,
            ).run()
            runs = [self.client.run(r) for r in run_ids]
            if all(r.status == RunStatus.COMPLETED for r in runs):
                return woken
            stuck = [r for r in runs if r.status not in (RunStatus.WAITING, RunStatus.COMPLETED)]
            if stuck:
                raise SystemExit(
                    f"run {stuck[0].id} is {stuck[0].status}: {stuck[0].status_message}"
                )
            if self.pump.book.active():
                self.pump.run_pass()  # send what was queued
                self.clock.advance(self.batch_s)
                self.pump.run_pass()  # read what ended and wake its runs
                continue
            self.clock.advance(wait_s + 1)  # every run waits on its timer
            woken.append(len(self.fake.requests))
        raise SystemExit("the runs did not end")


def research(folder: Path, model: str, turns: int, wait_s: float, waits: int, *,
             economy: bool, batch_s: float, label: str) -> Figures:  # fmt: skip
    """One research run (see the module docstring)."""
    at = tuple(turns * (i + 1) // (waits + 1) for i in range(waits))
    lab = Lab(folder, Research(turns, at, wait_s), economy=economy, batch_s=batch_s)
    try:
        workspace = folder / "ws"
        (workspace / "notes").mkdir(parents=True, exist_ok=True)
        for i in range(5):
            (workspace / "notes" / f"n{i}.md").write_text(f"Note {i}. " + NOTE)
        run = lab.client.start_run(
            "Read the notes and check the figures",
            model=model,
            workspace=workspace,
            economy=economy,
        )
        woken = lab.drive([run.id], wait_s)
        usages = [s.usage for s in lab.client.steps(run.id) if s.kind == StepKind.MODEL_CALL]
        return Figures(
            label,
            1,
            len(usages),
            sum(_prompt(u) for u in usages),
            _share(sum(usages, Usage())),
            [_share(usages[i]) for i in woken if i < len(usages)],
            lab.client.run(run.id).cost_usd,
        )
    finally:
        lab.close()


def batch(folder: Path, model: str, items: int, *, economy: bool, batch_s: float,
          label: str) -> Figures:  # fmt: skip
    """A folder batch of ``items`` short runs (see the module docstring)."""
    lab = Lab(folder, Item(), economy=economy, batch_s=batch_s)
    try:
        inbox = folder / "inbox"
        inbox.mkdir()
        for i in range(items):
            (inbox / f"note{i:03d}.md").write_text(f"# Note {i}\n" + NOTE)
        sched = Scheduling(lab.client, lab.clock.now)
        made = sched.start_batch(
            "Summarise the note",
            folder=inbox,
            concurrency=items,
            options=RunOptions(model=model, economy=economy),
        )
        DbSchedulerPort(lab.client.store, lab.clock, folder).pump(lab.clock.now())
        run_ids = [i.run_id for i in sched.batch_items(made.id) if i.run_id]
        if len(run_ids) != items:
            raise SystemExit(f"{len(run_ids)} of {items} batch items started")
        lab.drive(run_ids, 0.0)
        usages = [
            s.usage for r in run_ids for s in lab.client.steps(r) if s.kind == StepKind.MODEL_CALL
        ]
        return Figures(
            label,
            items,
            len(usages),
            sum(_prompt(u) for u in usages),
            _share(sum(usages, Usage())),
            [],
            sum(lab.client.run(r).cost_usd for r in run_ids),
        )
    finally:
        lab.close()


@contextmanager
def five_minutes(on: bool) -> Iterator[None]:
    """Every write kept five minutes (the baseline), or the product's choice."""
    if not on:
        yield
        return
    with mock.patch.object(engine_request, "cache_ttl", lambda _rs: "5m"):
        yield


def _prompt(u: Usage) -> int:
    return u.input_tokens + u.cache_write_tokens + u.cache_read_tokens


def _share(u: Usage) -> float:
    return u.cache_read_tokens / _prompt(u) if _prompt(u) else 0.0


def _line(f: Figures) -> str:
    after = ", ".join(f"{s:.0%}" for s in f.after_waits) or "-"
    per = f.cost_usd / f.runs
    return (
        f"  {f.label:34s} {f.calls:4d} calls  prompt {f.prompt_tokens:>10,d} tok  "
        f"cache read {f.share:6.1%}  after waits {after:16s}  ${f.cost_usd:.4f}"
        + (f"  (${per:.5f}/item)" if f.runs > 1 else "")
    )


def main(argv: list[str] | None = None) -> int:
    """Run every variant and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="claude-sonnet-5-5")
    parser.add_argument("--steps", type=int, default=100, help="steps of the research run")
    parser.add_argument("--waits", type=int, default=3)
    parser.add_argument("--wait-minutes", type=float, default=20.0)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--batch-minutes", type=float, default=20.0,
                        help="how long each batch takes to end")  # fmt: skip
    parser.add_argument("--dir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    turns = max(8, args.steps // 2)
    wait_s, batch_s = args.wait_minutes * 60, args.batch_minutes * 60
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        root = Path(scratch)
        runs: list[Figures] = []
        for name, economy, five in (
            ("streamed, product's cache choice", False, False),
            ("streamed, 5-minute writes", False, True),
            ("economy, 1-hour writes (product)", True, False),
            ("economy, 5-minute writes", True, True),
        ):
            with five_minutes(five):
                runs.append(research(root / f"r{len(runs)}", args.model, turns, wait_s,
                                     args.waits, economy=economy, batch_s=batch_s,
                                     label=name))  # fmt: skip
        items: list[Figures] = []
        for name, economy, five in (
            ("streamed items", False, False),
            ("economy items (product)", True, False),
            ("economy items, 5-minute writes", True, True),
        ):
            with five_minutes(five):
                items.append(batch(root / f"b{len(items)}", args.model, args.items,
                                   economy=economy, batch_s=batch_s, label=name))  # fmt: skip
    print(
        f"{args.model}: research run of {turns} model calls (~{2 * turns} steps), "
        f"{args.waits} timers of {args.wait_minutes:g} min; batches end after "
        f"{args.batch_minutes:g} min"
    )
    for f in runs:
        print(_line(f))
    print(f"folder batch of {args.items} items (two model calls each):")
    for f in items:
        print(_line(f))
    product, thrifty = runs[0], runs[2]
    ratio = items[1].cost_usd / items[0].cost_usd if items[0].cost_usd else float("nan")
    print(f"  economy / streamed, per batch item: {ratio:.2f}x (target <= 0.55x)")
    print(f"  economy / streamed, research run:   {thrifty.cost_usd / product.cost_usd:.2f}x")
    for f in (product, thrifty):
        met = f.share >= 0.90 and all(s >= 0.80 for s in f.after_waits)
        print(f"  cache targets ({f.label}): {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
