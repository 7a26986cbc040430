"""Per-step cost of the journal against raw sqlite3 commits, at FULL and NORMAL.

Usage::

    .venv/bin/python bench/journal_bench.py [--steps 500,5000] [--payload 200] [--repeat 3]
                                            [--levels FULL,NORMAL] [--dir bench/out]

A *journal step* is what the engine writes per tool step, through the real
:class:`~desktop_agent.persistence.store.SqlStore` API: one ``commit()`` holding the
outcome of step ``n`` (a result of ``--payload`` bytes; every other step a model call with
usage and cost), the intent of step ``n + 1``, the run's patch (active time, cost), and
every 25 steps a small snapshot, exactly as the engine sends them (``engine.recording.commit``).

The *raw* baseline is the plain ``sqlite3`` module on a fresh file in WAL mode at the same
``synchronous`` level, committing one comparable row (same key, kind, name, status, input,
output and timestamps) per ``BEGIN IMMEDIATE``/``COMMIT`` transaction.

Figures: µs per step (wall time of the N steps divided by N; median of ``--repeat``
interleaved runs), the journal/raw ratio, and bytes stored per step (pages in use after
the steps minus before, divided by N). Targets: at FULL a journal step costs at most
1.5x one raw commit, and journal bytes per step do not grow with N. The exit status is
always 0: this is a report, not a test.

Scratch databases go to ``--dir`` (default ``bench/out``, git-ignored), which must be on a
real disk: on tmpfs an fsync costs nothing and the figures mean nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from desktop_agent.domain import (
    AgentSpec,
    Run,
    RunStatus,
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.engine.ports import RunPatch, Snapshot, StepIntent, StepOutcome
from desktop_agent.persistence.db import WAL_AUTOCHECKPOINT_PAGES, Database, DbSettings
from desktop_agent.persistence.store import SqlStore

DEFAULT_DIR = Path(__file__).resolve().parent / "out"
RUN_ID = "bench00001"
SNAPSHOT_EVERY = 25
RATIO_TARGET = 1.5
GROWTH_TOLERANCE = 1.10
"""Bytes per step at the largest N may exceed those at the smallest by page rounding only."""


@dataclass(frozen=True)
class Figure:
    """One measurement: time per step and bytes stored per step."""

    us_per_step: float
    bytes_per_step: float


def payload(n: int, size: int) -> str:
    """A deterministic, incompressible-looking result of ``size`` characters."""
    seed = hashlib.sha256(str(n).encode()).hexdigest()
    text = f"result of step {n}: "
    while len(text) < size:
        text += seed
    return text[:size]


def used_bytes(path: Path) -> int:
    """Bytes of the database's pages in use (WAL content included, free pages excluded)."""
    conn = sqlite3.connect(path)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        conn.close()
    return int((pages - free) * page_size)


def _fresh(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


# --------------------------------------------------------------------------- raw sqlite3


RAW_SCHEMA = """
CREATE TABLE steps (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    status TEXT NOT NULL, input TEXT, output TEXT, started_at REAL NOT NULL,
    finished_at REAL, PRIMARY KEY (run_id, seq)
)
"""

RAW_INSERT = (
    "INSERT INTO steps (run_id, seq, kind, name, status, input, output, started_at, "
    "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class RawWriter:
    """One comparable row per transaction through the plain sqlite3 module."""

    def __init__(self, path: Path, n_steps: int, size: int, level: str) -> None:
        _fresh(path)
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={level}")
        # The same WAL size as the journal's database: the floor is a commit on the same
        # kind of file, not one that pays for a growing WAL for longer.
        self.conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        self.conn.execute(RAW_SCHEMA)
        self.before = used_bytes(path)
        self.rows = [_raw_row(n, size) for n in range(1, n_steps + 1)]

    def step(self, i: int) -> None:
        """Commit row ``i`` in its own transaction."""
        execute = self.conn.execute
        execute("BEGIN IMMEDIATE")
        execute(RAW_INSERT, self.rows[i])
        execute("COMMIT")

    def close(self) -> float:
        """Close; returns the bytes stored by the steps."""
        self.conn.close()
        return used_bytes(self.path) - self.before


def _raw_row(n: int, size: int) -> tuple[object, ...]:
    kind, name, input_json = _step_shape(n)
    output_json = '{"content":"' + payload(n, size) + '","is_error":false,"data":null}'
    now = time.time()
    return (RUN_ID, n, kind, name, "completed", input_json, output_json, now, now)


def _step_shape(n: int) -> tuple[str, str, str]:
    """Kind, name and input JSON of step ``n``: model calls and tool calls alternate."""
    if n % 2:
        return "model_call", "claude-sonnet-4-5", f'{{"model":"claude-sonnet-4-5","messages":{n}}}'
    return (
        "tool_call",
        "read_file",
        f'{{"tool_use_id":"toolu_{n:08d}","arguments":{{"path":"a.md"}}}}',
    )


# --------------------------------------------------------------------------- journal


def _new_run(store: SqlStore) -> None:
    now = time.time()
    spec = AgentSpec(model="claude-sonnet-4-5", system_prompt="You are a benchmark.")
    store.create_run(
        Run(
            id=RUN_ID,
            goal="benchmark the journal",
            status=RunStatus.QUEUED,
            spec=spec,
            workspace=".",
            created_at=now,
            updated_at=now,
            definition_hash=spec.definition_hash,
        )
    )


def _intent(n: int) -> StepIntent:
    kind, name, _ = _step_shape(n)
    if kind == "model_call":
        return StepIntent(
            seq=n,
            kind=StepKind.MODEL_CALL,
            name=name,
            input={"model": name, "messages": n},
        )
    return StepIntent(
        seq=n,
        kind=StepKind.TOOL_CALL,
        name=name,
        input={"tool_use_id": f"toolu_{n:08d}", "arguments": {"path": "a.md"}},
    )


def _outcome(n: int, size: int) -> StepOutcome:
    output = {"content": payload(n, size), "is_error": False, "data": None}
    if n % 2:  # a model call: usage and cost
        usage = Usage(input_tokens=1000 + n, output_tokens=50)
        return StepOutcome(n, StepStatus.COMPLETED, output, usage=usage, cost_usd=0.0012)
    return StepOutcome(n, StepStatus.COMPLETED, output)


_Work = tuple[StepOutcome, list[StepIntent], RunPatch, Snapshot | None]


class JournalWriter:
    """Engine-shaped steps through the real ``SqlStore.commit``, one commit per step."""

    def __init__(self, path: Path, n_steps: int, size: int, level: str) -> None:
        _fresh(path)
        self.path = path
        self.db = Database(DbSettings.for_path(path, level))
        self.store = SqlStore(self.db)
        _new_run(self.store)
        self.store.commit(
            RUN_ID,
            intents=[_intent(1)],
            patch=RunPatch(status=RunStatus.RUNNING, started_at=time.time(), clear_wait=True),
        )
        self.before = used_bytes(path)
        self.work: list[_Work] = []
        for n in range(1, n_steps + 1):
            outcome = _outcome(n, size)
            # What engine.recording.commit sends with an outcome: the active time.
            patch = RunPatch(add_active_seconds=0.001)
            snapshot = None
            if n % SNAPSHOT_EVERY == 0:
                snapshot = Snapshot(seq=n, state={"last_seq": n, "model_calls": n // 2})
            self.work.append((outcome, [_intent(n + 1)], patch, snapshot))

    def step(self, i: int) -> None:
        """Outcome of step ``i + 1`` and intent of step ``i + 2`` in one commit."""
        outcome, intents, patch, snapshot = self.work[i]
        self.store.commit(RUN_ID, outcome=outcome, intents=intents, patch=patch, snapshot=snapshot)

    def close(self) -> float:
        """Close; returns the bytes stored by the steps."""
        self.db.dispose()
        return used_bytes(self.path) - self.before


@dataclass(frozen=True)
class Pair:
    """Raw and journal figures measured in lockstep."""

    raw: Figure
    journal: Figure
    median_ratio: float


def lockstep(folder: Path, n_steps: int, size: int, level: str) -> Pair:
    """Raw commit and journal step alternately (order swapped each step), each timed.

    Running both in lockstep exposes them to the same disk and machine conditions, so
    that background I/O moves both figures together rather than skewing the ratio.
    """
    raw = RawWriter(folder / "raw.db", n_steps, size, level)
    journal = JournalWriter(folder / "journal.db", n_steps, size, level)
    raw_t: list[float] = []
    jour_t: list[float] = []
    clock = time.perf_counter
    try:
        for i in range(n_steps):
            if i % 2:
                t0 = clock()
                raw.step(i)
                t1 = clock()
                journal.step(i)
                t2 = clock()
                raw_t.append(t1 - t0)
                jour_t.append(t2 - t1)
            else:
                t0 = clock()
                journal.step(i)
                t1 = clock()
                raw.step(i)
                t2 = clock()
                jour_t.append(t1 - t0)
                raw_t.append(t2 - t1)
    finally:
        raw_bytes = raw.close()
        jour_bytes = journal.close()
    return Pair(
        Figure(sum(raw_t) / n_steps * 1e6, raw_bytes / n_steps),
        Figure(sum(jour_t) / n_steps * 1e6, jour_bytes / n_steps),
        statistics.median(jour_t) / statistics.median(raw_t),
    )


# --------------------------------------------------------------------------- report


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding ``path`` (Linux; "unknown" elsewhere)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    best, fstype = "", "unknown"
    target = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, parts[2]
    return fstype


def measure(
    folder: Path, levels: Sequence[str], steps: Sequence[int], size: int, repeat: int
) -> dict[tuple[str, int], Pair]:
    """Lockstep runs; the median of ``repeat`` per figure, keyed by (level, N)."""
    results: dict[tuple[str, int], Pair] = {}
    for level in levels:
        for n in steps:
            pairs = [lockstep(folder, n, size, level) for _ in range(repeat)]
            results[(level, n)] = Pair(
                _mid([p.raw for p in pairs]),
                _mid([p.journal for p in pairs]),
                statistics.median(p.median_ratio for p in pairs),
            )
    return results


def _mid(figures: list[Figure]) -> Figure:
    return Figure(
        statistics.median(f.us_per_step for f in figures),
        statistics.median(f.bytes_per_step for f in figures),
    )


def report(results: dict[tuple[str, int], Pair], steps: Sequence[int], size: int) -> str:
    """The table and the verdicts."""
    lines = [
        f"{'sync':<7}{'N':>6}  {'raw µs/step':>12}  {'journal µs/step':>16}  {'ratio':>6}  "
        f"{'median ratio':>12}  {'raw B/step':>11}  {'journal B/step':>15}",
    ]
    for (level, n), pair in results.items():
        raw, journal = pair.raw, pair.journal
        ratio = journal.us_per_step / raw.us_per_step
        lines.append(
            f"{level:<7}{n:>6}  {raw.us_per_step:>12.1f}  {journal.us_per_step:>16.1f}  "
            f"{ratio:>5.2f}x  {pair.median_ratio:>11.2f}x  {raw.bytes_per_step:>11.0f}  "
            f"{journal.bytes_per_step:>15.0f}"
        )
    lines.append("")
    full = [pair for (level, _), pair in results.items() if level == "FULL"]
    if full:
        # Background I/O inflates both means alike, pulling their ratio toward 1; the
        # per-step medians resist it but miss the amortized checkpoints: judge by the worse.
        worst = max(max(p.journal.us_per_step / p.raw.us_per_step, p.median_ratio) for p in full)
        verdict = "met" if worst <= RATIO_TARGET else "NOT met"
        lines.append(
            f"target: a journal step at FULL costs <= {RATIO_TARGET}x one raw commit: "
            f"{verdict} (worst ratio {worst:.2f}x, of means or of medians)"
        )
    levels = list(dict.fromkeys(level for level, _ in results))
    if len(set(steps)) >= 2:
        small, large = min(steps), max(steps)
        for level in levels:
            a = results[(level, small)].journal.bytes_per_step
            b = results[(level, large)].journal.bytes_per_step
            verdict = "met" if b <= a * GROWTH_TOLERANCE else "NOT met"
            lines.append(
                f"target: journal bytes per step do not grow with N ({level}): {verdict} "
                f"({a:.0f} B at N={small}, {b:.0f} B at N={large})"
            )
    else:
        lines.append("target: bytes per step vs N: give two values of --steps to check it")
    lines.append(
        f"(results of {size} bytes; µs/step = mean over the N steps, median of the repeats; "
        "ratio = journal/raw of those means; median ratio = of per-step medians)"
    )
    return "\n".join(lines)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--steps", default="500,5000", help="comma-separated step counts")
    p.add_argument("--payload", type=int, default=200, help="bytes per step result")
    p.add_argument("--repeat", type=int, default=3, help="interleaved runs per figure")
    p.add_argument("--levels", default="FULL,NORMAL", help="synchronous levels")
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="scratch folder (real disk)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the report; always returns 0."""
    args = _parse(argv)
    steps = [int(s) for s in args.steps.split(",") if s.strip()]
    levels = [s.strip().upper() for s in args.levels.split(",") if s.strip()]
    folder: Path = args.dir / f"journal-bench-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    fstype = filesystem_type(folder)
    print(
        f"scratch folder on {fstype}; python {sys.version.split()[0]}, "
        f"sqlite {sqlite3.sqlite_version}"
    )
    if fstype in ("tmpfs", "ramfs"):
        print("WARNING: tmpfs/ramfs: fsync is free here, the figures are meaningless")
    try:
        results = measure(folder, levels, steps, args.payload, max(1, args.repeat))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(report(results, steps, args.payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
