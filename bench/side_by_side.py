"""Side by side: the same N-step workload through desktop-agent, LangGraph and DBOS.

Usage::

    .venv/bin/python bench/side_by_side.py [--steps 200,800] [--payload 200] [--repeat 3]

The workload is a run whose state (a conversation) grows by one result of ``--payload``
bytes per step, made durable after every step at the same level in every system: SQLite,
WAL, ``synchronous=FULL`` (a step is on disk before the next one starts).

* ``sqlite3 raw commit``: the floor, for reference: one plain INSERT of the result per
  ``BEGIN IMMEDIATE`` ... ``COMMIT`` on the same kind of file (desktop-agent's WAL size).
* ``desktop-agent journal``: the real :class:`~desktop_agent.persistence.store.SqlStore`
  journal API, used as the engine uses it: one commit per step holding the outcome of step
  ``n`` and the intent of step ``n + 1``, a small snapshot every 25 steps.
* ``desktop-agent engine``: the real engine (:class:`~desktop_agent.engine.loop.RunExecutor`)
  with a local stand-in model that calls a tool until N journal steps exist; model calls
  and tool calls alternate, each tool result is ``--payload`` bytes.
* ``LangGraph sqlite sync``: a one-node graph looping N times over a state with a list
  channel (``operator.add``), compiled with ``SqliteSaver`` and invoked with
  ``durability="sync"``.
* ``DBOS sqlite WAL`` / ``DBOS sqlite default``: one ``@DBOS.workflow`` calling an
  ``@DBOS.step`` N times, with a SQLite system database (WAL forced on the file, or DBOS's
  default rollback journal); no Postgres, no network.
* ``LangGraph, our WAL size`` / ``DBOS WAL, our WAL size``: the same two with
  desktop-agent's ``wal_autocheckpoint`` on their connections, to show how much of the
  difference that one setting makes. The target is judged against them as they ship.

LangGraph and DBOS come from the optional ``bench`` extra (``pip install -e .[bench]``);
when they are absent their rows say so. Each (system, N) runs in a fresh child process in
a scratch folder (default under ``bench/out/``) that must be on a real disk, not tmpfs:
fsync is what is measured.

Figures: per-step time (median of ``--repeat`` runs, wall time of the whole run divided
by N), bytes stored per step (pages in use after the run minus before it, divided by N),
and the ratios of every other system to ``desktop-agent journal``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import operator
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

SYSTEMS: dict[str, str] = {
    "raw": "sqlite3 raw commit",
    "journal": "desktop-agent journal",
    "engine": "desktop-agent engine",
    "langgraph": "LangGraph sqlite sync",
    "langgraph-small-wal": "LangGraph, our WAL size",
    "dbos": "DBOS sqlite WAL",
    "dbos-small-wal": "DBOS WAL, our WAL size",
    "dbos-default": "DBOS sqlite default",
}
BASELINE = "journal"
COMPETITORS = ("langgraph", "langgraph-small-wal", "dbos", "dbos-small-wal", "dbos-default")
SNAPSHOT_EVERY = 25


class State(TypedDict):
    """LangGraph state: the results so far, appended to by each step."""

    results: Annotated[list[str], operator.add]


def payload(n: int, size: int) -> str:
    """The ``size``-byte result of step ``n`` (distinct per step, so nothing dedupes)."""
    stem = f"result {n:08d}: "
    return (stem * (size // len(stem) + 1))[:size]


def used_bytes(path: Path) -> int:
    """Bytes of database pages in use (the WAL's newer pages included), via a fresh link."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(path)
    try:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        return (pages - free) * page_size
    finally:
        conn.close()


def pragmas(path: Path) -> str:
    """Journal mode of the file, and the synchronous level a new connection gets."""
    conn = sqlite3.connect(path)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        return str(mode)
    finally:
        conn.close()


def filesystem_of(path: Path) -> str:
    """File system type holding ``path`` (from /proc/mounts), or ``?``."""
    best, fstype = "", "?"
    real = str(path.resolve())
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return fstype
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and real.startswith(parts[1]) and len(parts[1]) > len(best):
            best, fstype = parts[1], parts[2]
    return fstype


# --------------------------------------------------------------------------- workloads


Result = dict[str, Any]


def run_raw(folder: Path, n: int, size: int) -> Result:
    """The floor: one plain ``sqlite3`` INSERT of the result per ``BEGIN IMMEDIATE``/COMMIT."""
    path = folder / "raw.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint={_our_wal_pages()}")  # the same kind of file
    conn.execute(
        "CREATE TABLE steps (run_id TEXT, seq INTEGER, status TEXT, output TEXT, at REAL, "
        "PRIMARY KEY (run_id, seq))"
    )
    before = used_bytes(path)
    started = time.perf_counter()
    for seq in range(1, n + 1):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO steps VALUES ('bench', ?, 'completed', ?, ?)",
            (seq, json.dumps({"content": payload(seq, size)}), time.time()),
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return {"seconds": elapsed, "bytes": used_bytes(path) - before, "sync": "FULL", "steps": n}


def run_journal(folder: Path, n: int, size: int) -> Result:
    """N steps through the real SqlStore journal API, as the engine commits them."""
    from desktop_agent.domain import StepKind, StepStatus
    from desktop_agent.engine.ports import RunPatch, Snapshot, StepIntent, StepOutcome
    from desktop_agent.engine.state import Scalars
    from desktop_agent.persistence.db import Database, DbSettings
    from desktop_agent.persistence.store import SqlStore

    path = folder / "desktop-agent.db"
    db = Database(DbSettings.for_path(path, "FULL"))
    store = SqlStore(db)
    run_id = _create_run(store, folder, tools=(("produce", "1"),))
    before = used_bytes(path)
    sync = _sync_level(db)

    def intent(seq: int) -> StepIntent:
        return StepIntent(seq=seq, kind=StepKind.TOOL_CALL, name="produce", input={"n": seq})

    started = time.perf_counter()
    store.commit(run_id, intents=[intent(1)], patch=RunPatch(add_active_seconds=0.0))
    mark = time.perf_counter()
    for seq in range(1, n + 1):
        out = StepOutcome(seq, StepStatus.COMPLETED, {"content": payload(seq, size)})
        snap = None
        if seq % SNAPSHOT_EVERY == 0:
            scalars = Scalars(last_seq=seq, tool_calls=seq).to_json()
            snap = Snapshot(seq=seq, state=scalars)
        now = time.perf_counter()
        store.commit(
            run_id,
            outcome=out,
            intents=[intent(seq + 1)] if seq < n else [],
            patch=RunPatch(add_active_seconds=now - mark),
            snapshot=snap,
        )
        mark = now
    elapsed = time.perf_counter() - started
    steps = store.load_steps(run_id)
    assert len(steps) == n and all(s.status == StepStatus.COMPLETED for s in steps)
    db.dispose()
    return {"seconds": elapsed, "bytes": used_bytes(path) - before, "sync": sync, "steps": n}


def _our_wal_pages() -> int:
    from desktop_agent.persistence.db import WAL_AUTOCHECKPOINT_PAGES

    return WAL_AUTOCHECKPOINT_PAGES


def _sync_level(db: Any) -> str:
    with db.write() as conn:
        level = int(conn.exec_driver_sql("PRAGMA synchronous").scalar())
    return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(level, str(level))


def _create_run(store: Any, folder: Path, tools: tuple[tuple[str, str], ...]) -> str:
    from desktop_agent.domain import AgentSpec, Budget, Run, RunStatus

    workspace = folder / "workspace"
    workspace.mkdir(exist_ok=True)
    spec = AgentSpec(model="claude-haiku-4-5", system_prompt="bench", tools=tools)
    now = time.time()
    run = Run(
        id="bench",
        goal="side-by-side benchmark",
        status=RunStatus.QUEUED,
        spec=spec,
        workspace=str(workspace),
        budget=Budget(),
        created_at=now,
        updated_at=now,
        definition_hash=spec.definition_hash,
    )
    store.create_run(run)
    return run.id


def run_engine(folder: Path, n: int, size: int) -> Result:
    """N journal steps through the real engine (model and tool calls alternate)."""
    from pydantic import Field

    from desktop_agent.domain import RunStatus, Usage
    from desktop_agent.engine.loop import EngineConfig, RunExecutor
    from desktop_agent.engine.ports import (
        CancelToken,
        ModelRequest,
        ModelResponse,
        SystemClock,
        ToolContext,
        ToolResult,
    )
    from desktop_agent.persistence.db import Database, DbSettings
    from desktop_agent.persistence.store import SqlStore
    from desktop_agent.tools.base import ToolArgs, TypedTool
    from desktop_agent.tools.registry import ToolRegistry

    class ProduceArgs(ToolArgs):
        n: int = Field(default=0)

    class Produce(TypedTool[ProduceArgs]):
        name = "produce"
        description = "Return the result of a unit of work."
        args_model = ProduceArgs

        def call(self, args: ProduceArgs, ctx: ToolContext) -> ToolResult:
            return ToolResult(payload(ctx.seq, size))

    turns = n // 2

    class LoopModel:
        """Calls ``produce`` until ``turns`` results exist, then answers."""

        def context_window(self, model: str) -> int:
            return 10_000_000

        def compacts_on_server(self, model: str) -> bool:
            return False

        def count_tokens(self, request: ModelRequest) -> int | None:
            return None

        def worst_case_cost(self, request: ModelRequest) -> float:
            return 0.0

        def complete(
            self,
            request: ModelRequest,
            *,
            idempotency_key: str,
            on_text: Callable[[str], None],
            cancel: CancelToken,
            on_usage: Callable[[Usage, float], None] | None = None,
        ) -> ModelResponse:
            done = (len(request.messages) - 1) // 2
            seq = idempotency_key.rsplit(":", 1)[-1]
            if done >= turns:
                content: list[dict[str, Any]] = [{"type": "text", "text": "done"}]
                stop = "end_turn"
            else:
                use = {"type": "tool_use", "id": f"t{seq}", "name": "produce", "input": {}}
                content, stop = [use], "tool_use"
            return ModelResponse(content, stop, Usage(10, 10), 0.0, request.model)

    path = folder / "desktop-agent.db"
    db = Database(DbSettings.for_path(path, "FULL"))
    store = SqlStore(db)
    run_id = _create_run(store, folder, tools=(("produce", "1"),))
    model = LoopModel()
    executor = RunExecutor(
        store,
        lambda _name: model,
        ToolRegistry([Produce()], plugins=False),
        SystemClock(),
        EngineConfig(snapshot_every=SNAPSHOT_EVERY),
    )
    before = used_bytes(path)
    sync = _sync_level(db)
    started = time.perf_counter()
    # As the worker runs it: commands are read when the worker hints that some wait.
    status = executor.execute(run_id, CancelToken(hinted=True))
    elapsed = time.perf_counter() - started
    assert status == RunStatus.COMPLETED, store.get_run(run_id).status_message
    steps = len(store.load_steps(run_id))
    db.dispose()
    return {"seconds": elapsed, "bytes": used_bytes(path) - before, "sync": sync, "steps": steps}


def run_langgraph(folder: Path, n: int, size: int, *, small_wal: bool = False) -> Result:
    """N super-steps of a one-node LangGraph loop, SqliteSaver, ``durability="sync"``.

    ``small_wal`` gives its connection desktop-agent's WAL size, to show how much of the
    difference that setting alone makes.
    """
    graph_mod: Any = importlib.import_module("langgraph.graph")
    saver_mod: Any = importlib.import_module("langgraph.checkpoint.sqlite")

    def step(state: State) -> dict[str, list[str]]:
        return {"results": [payload(len(state["results"]) + 1, size)]}

    def route(state: State) -> str:
        return "step" if len(state["results"]) < n else str(graph_mod.END)

    graph = graph_mod.StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(graph_mod.START, "step")
    graph.add_conditional_edges("step", route)
    path = folder / "langgraph.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = saver_mod.SqliteSaver(conn)
    saver.setup()  # turns WAL on
    conn.execute("PRAGMA synchronous=FULL")
    if small_wal:
        conn.execute(f"PRAGMA wal_autocheckpoint={_our_wal_pages()}")
    sync = {2: "FULL"}.get(conn.execute("PRAGMA synchronous").fetchone()[0], "?")
    app = graph.compile(checkpointer=saver)
    before = used_bytes(path)
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": n + 10}
    started = time.perf_counter()
    out = app.invoke({"results": []}, config, durability="sync")
    elapsed = time.perf_counter() - started
    assert len(out["results"]) == n
    conn.close()
    return {"seconds": elapsed, "bytes": used_bytes(path) - before, "sync": sync, "steps": n}


def run_dbos(folder: Path, n: int, size: int, *, wal: bool, small_wal: bool = False) -> Result:
    """One DBOS workflow of N steps on a SQLite system database."""
    sa: Any = importlib.import_module("sqlalchemy")
    dbos_mod: Any = importlib.import_module("dbos")
    dbos = dbos_mod.DBOS
    path = folder / "dbos.sqlite"
    if wal:
        # journal_mode=WAL is stored in the file: every DBOS connection then uses it.
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.close()

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA synchronous=FULL")
        if small_wal:
            dbapi_conn.execute(f"PRAGMA wal_autocheckpoint={_our_wal_pages()}")

    sa.event.listen(sa.pool.Pool, "connect", on_connect)

    def work(i: int) -> str:
        return payload(i + 1, size)

    step = dbos.step()(work)

    def workflow(count: int) -> int:
        results = [step(i) for i in range(count)]
        return len(results)

    flow = dbos.workflow()(workflow)
    dbos(
        config={
            "name": "bench",
            "system_database_url": f"sqlite:///{path}",
            "log_level": "WARNING",
        }
    )
    dbos.launch()
    before = used_bytes(path)
    started = time.perf_counter()
    done = flow(n)
    elapsed = time.perf_counter() - started
    assert done == n
    dbos.destroy()
    mode = pragmas(path)
    return {"seconds": elapsed, "bytes": used_bytes(path) - before, "sync": "FULL", "mode": mode}


RUNNERS: dict[str, Callable[[Path, int, int], Result]] = {
    "raw": run_raw,
    "journal": run_journal,
    "engine": run_engine,
    "langgraph": run_langgraph,
    "langgraph-small-wal": lambda f, n, s: run_langgraph(f, n, s, small_wal=True),
    "dbos": lambda f, n, s: run_dbos(f, n, s, wal=True),
    "dbos-small-wal": lambda f, n, s: run_dbos(f, n, s, wal=True, small_wal=True),
    "dbos-default": lambda f, n, s: run_dbos(f, n, s, wal=False),
}
OPTIONAL = {
    "langgraph": "langgraph.checkpoint.sqlite",
    "langgraph-small-wal": "langgraph.checkpoint.sqlite",
    "dbos": "dbos",
    "dbos-small-wal": "dbos",
    "dbos-default": "dbos",
}


# --------------------------------------------------------------------------- driver


def child(system: str, folder: Path, n: int, size: int) -> Result:
    """Run one (system, N) measurement in this process."""
    module = OPTIONAL.get(system)
    if module is not None:
        try:
            importlib.import_module(module)
        except ImportError:
            return {"skipped": f"not installed ({module}); pip install -e .[bench]"}
    folder.mkdir(parents=True, exist_ok=True)
    result = RUNNERS[system](folder, n, size)
    result.setdefault("steps", n)
    return result


def measure(system: str, base: Path, n: int, size: int, repeat: int) -> Result:
    """Median of ``repeat`` child runs; bytes from the first (they do not vary)."""
    runs: list[Result] = []
    for i in range(repeat):
        folder = base / f"{system}-{n}-{i}"
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                system,
                "--steps",
                str(n),
                "--payload",
                str(size),
                "--dir",
                str(folder),
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=False,
        )
        shutil.rmtree(folder, ignore_errors=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": tail}
        result: Result = json.loads(lines[-1])
        if "skipped" in result:
            return result
        runs.append(result)
    first = dict(runs[0])
    first["seconds"] = statistics.median(r["seconds"] for r in runs)
    return first


def report(results: Mapping[tuple[str, int], Result], steps: Sequence[int], size: int) -> str:
    """The table of figures and ratios."""
    lines = [
        f"{'system':<24} {'N':>6} {'steps':>6} {'ms/step':>9} {'bytes/step':>11} "
        f"{'MB total':>9}  sync",
    ]
    for n in steps:
        for key, label in SYSTEMS.items():
            r = results.get((key, n))
            if r is None:
                continue
            if "skipped" in r or "error" in r:
                lines.append(f"{label:<24} {n:>6}  {r.get('skipped') or 'error: ' + r['error']}")
                continue
            count = int(r.get("steps", n))
            ms = r["seconds"] * 1000 / count
            per = r["bytes"] / count
            mb = r["bytes"] / 1e6
            mode = f" ({r['mode']})" if "mode" in r else ""
            lines.append(
                f"{label:<24} {n:>6} {count:>6} {ms:>9.3f} {per:>11.0f} {mb:>9.2f}  "
                f"{r['sync']}{mode}"
            )
    for baseline, others in (
        (BASELINE, [k for k in SYSTEMS if k != BASELINE]),
        ("engine", [k for k in SYSTEMS if k in COMPETITORS]),
    ):
        lines.append("")
        lines.append(f"Ratios to {SYSTEMS[baseline]} (other ÷ ours; above 1 means ours is better):")
        for n in steps:
            base = results.get((baseline, n))
            if not base or "seconds" not in base:
                continue
            base_ms = base["seconds"] / base["steps"]
            base_b = base["bytes"] / base["steps"]
            for key in others:
                r = results.get((key, n))
                if not r or "seconds" not in r:
                    continue
                count = int(r.get("steps", n))
                t = (r["seconds"] / count) / base_ms
                b = (r["bytes"] / count) / base_b if base_b else float("nan")
                lines.append(f"  N={n:<6} {SYSTEMS[key]:<24} time ×{t:6.2f}   bytes ×{b:7.2f}")
    if len(steps) > 1:
        lines.append("")
        lines.append(
            f"Storage growth: bytes/step at N={steps[-1]} ÷ bytes/step at N={steps[0]} "
            "(1.0 = linear in N)"
        )
        for key, label in SYSTEMS.items():
            lo, hi = results.get((key, steps[0])), results.get((key, steps[-1]))
            if not lo or not hi or "bytes" not in lo or "bytes" not in hi:
                continue
            if lo["bytes"] <= 0:
                lines.append(f"  {label:<24}  n/a: N={steps[0]} did not fill a page")
                continue
            g = (hi["bytes"] / hi.get("steps", steps[-1])) / (lo["bytes"] / lo.get("steps", 1))
            verdict = "linear" if g < 1.3 else "grows faster than N"
            lines.append(f"  {label:<24} ×{g:5.2f}  {verdict}")
    lines.append(f"(payload {size} bytes per step; SQLite WAL except where noted)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="200,800", help="comma-separated N values")
    parser.add_argument("--payload", type=int, default=200, help="bytes of result per step")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="which systems")
    parser.add_argument("--dir", help="scratch folder on a real disk (default: bench/out/)")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    steps = sorted({int(s) for s in args.steps.split(",") if s.strip()})
    if args.child:
        print(json.dumps(child(args.child, Path(args.dir), steps[0], args.payload)))
        return 0
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {unknown}; choose from {list(SYSTEMS)}")
    if args.dir:
        base = Path(args.dir)
    else:
        (REPO / "bench" / "out").mkdir(parents=True, exist_ok=True)
        base = Path(tempfile.mkdtemp(prefix="side-by-side-", dir=REPO / "bench" / "out"))
    base.mkdir(parents=True, exist_ok=True)
    fstype = filesystem_of(base)
    print(
        f"scratch folder on {fstype}; python {sys.version.split()[0]}, "
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs",
        file=sys.stderr,
    )
    if fstype in ("tmpfs", "ramfs"):
        print(
            "warning: tmpfs makes fsync free: these figures are not durable ones", file=sys.stderr
        )
    results: dict[tuple[str, int], Result] = {}
    try:
        for n in steps:
            for system in systems:
                results[(system, n)] = measure(system, base, n, args.payload, args.repeat)
                print(f"  measured {system} N={n}", file=sys.stderr)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps({f"{k[0]}:{k[1]}": v for k, v in results.items()}, indent=2))
    print(report(results, steps, args.payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
