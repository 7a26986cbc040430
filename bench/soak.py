"""Soak: the real app watches 20 live demo runs for half an hour; does anything drift?

    python bench/soak.py [--minutes 30] [--runs 20] [--hibernated 0] [--delay 0.5]
                         [--warmup-minutes M] [--retain-minutes 3] [--headless]
                         [--sample-seconds 10] [--xvfb]
                         [--report-only] [--json FILE] [--trace-stalls --keep]

The desktop app (``gui.app.main``, the same entry point as ``desktop-agent``) runs in a child
process, offscreen (or on the display in ``DISPLAY`` with ``--xvfb``, e.g. under
``xvfb-run``), and starts its own worker as it does for a user, with the demo model at
``--delay`` seconds per call. This script keeps ``--runs`` runs live (a new one starts as
one ends; each workspace holds a report the demo asks to overwrite, so every run waits for
an approval) and archives runs finished more than ``--retain-minutes`` ago, as the
retention setting does (the run list then stays the size a user with retention sees, and
what grows is what leaks). Inside the app a simulated analyst selects runs, scrolls timelines,
switches tabs and inspector pages, opens and closes the new-run dialog, and approves what
waits, one action per event, spread over each 1.5 s tick as a person's clicks are. A 5 ms
precise timer measures how late the event loop serves it (stalls).

The app process reports every ``--sample-seconds``: RSS, threads, open descriptors,
``None``'s reference count (Python 3.11, where it can drain), the longest stall since the
previous sample. Printed at the end: whether the app aborted, RSS after warm-up and its
growth per hour (least-squares slope over the samples after warm-up), threads and
descriptors after warm-up and at the end, the longest stall after warm-up, and what the
analyst did. Exit code 1 when a target is missed (not with ``--report-only``).

``--headless`` runs a worker process alone (``desktop-agent worker``), no app; this script
then approves what waits, twice a second, and only the worker is judged.
``--hibernated N`` leaves N more runs hibernated at their approvals throughout (the analyst
never decides them): the worker's load of waiting runs. The worker the app started is
sampled too: RSS, threads, descriptors and its connections to the database.

Targets, for the app and its worker: no abort; RSS growth under 2 MB per hour after
warm-up; threads, descriptors (and the worker's database connections) flat (at most 2
above their warm-up value); for the app, the 99.9th percentile of the event loop's
lateness at most 50 ms after warm-up (the longest stall is reported beside it).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RSS_TARGET_MB_PER_H = 2.0
STALL_TARGET_MS = 50.0
FLAT_SLACK = 2
HIBERNATED_PREFIX = "hib"
"""Ids of the runs left hibernated at their approvals (``--hibernated``): the analyst
leaves them waiting. No run id the engine makes starts so (they are hexadecimal)."""
SOURCES = {
    "alpha.md": "# Alpha\nAlpha says the market grew 4% in 2025. More follows.\n",
    "beta.txt": "Beta reports churn fell. More detail follows.\n",
    "gamma.md": "Gamma: three vendors lead. Others trail far behind.\n",
    "report.md": "An older draft that the demo asks before overwriting.\n",
}


# --------------------------------------------------------------------------- the app side


class StallTracer:
    """Where the GUI thread is when the event loop stalls: its stack, sampled from a thread.

    A watcher thread samples the GUI thread's Python stack every 2 ms; the 5 ms meter's
    ticks cut the samples into gaps, and the samples of gaps over 50 ms are counted, with
    how much of each gap the GUI thread spent on a CPU. A diagnostic (``--trace-stalls``);
    the sampling itself costs the GUI thread some time.
    """

    def __init__(self) -> None:
        import threading
        from collections import Counter

        self.last = time.monotonic()
        self.stacks: Counter[str] = Counter()
        self._main = threading.get_ident()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self.gc_pauses: list[tuple[int, float, int]] = []
        self.long_gaps: list[tuple[float, float]] = []
        self._seen: list[str] = []
        self._cpu = time.thread_time()
        self._gc_started = 0.0

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        took = (time.perf_counter() - self._gc_started) * 1000
        if took > 10:
            self.gc_pauses.append((info["generation"], took, info["collected"]))

    def tick(self) -> None:
        """The event loop served a tick."""
        now, cpu = time.monotonic(), time.thread_time()
        gap = now - self.last
        seen, self._seen = self._seen, []
        if gap > 0.05:  # was the GUI thread working (CPU) or waiting (off CPU), and where?
            self.long_gaps.append((gap * 1000, (cpu - self._cpu) * 1000))
            for where in seen:
                self.stacks[where] += 1
        self.last, self._cpu = now, cpu

    def start(self) -> None:
        """Start watching."""
        import gc

        gc.callbacks.append(self._on_gc)
        self._thread.start()

    def _watch(self) -> None:
        import traceback

        while not self._stop.wait(0.002):  # sample the GUI thread's stack all the time
            frame = sys._current_frames().get(self._main)
            if frame is not None:
                lines = traceback.format_stack(frame)[-6:]
                self._seen.append("".join(ln for ln in lines if "soak.py" not in ln))

    def report(self, path: Path) -> None:
        """Write the stacks seen, most frequent first."""
        self._stop.set()
        with path.open("w", encoding="utf-8") as f:
            for gap, cpu in self.long_gaps:
                f.write(f"stall {gap:.0f} ms, GUI thread on CPU {cpu:.0f} ms of it\n")
            for gen, took, collected in self.gc_pauses:
                f.write(f"gc gen {gen}: {took:.0f} ms ({collected} collected)\n")
            for stack, n in self.stacks.most_common(40):
                f.write(f"==== {n} samples (2 ms apart) inside stalls\n{stack}\n")


def _time_handlers(timings: dict[str, list[float]]) -> None:
    """Wrap the GUI thread's busiest handlers so that each call's duration is recorded."""
    from desktop_agent.gui import mainwindow, poller
    from desktop_agent.gui.desk import approvals, controls, detail
    from desktop_agent.gui.desk import runs as runs_room
    from desktop_agent.gui.models import runs, steps
    from desktop_agent.gui.widgets import run_detail

    targets = [
        (mainwindow.MainWindow, "_on_poller_runs_changed"),
        (mainwindow.MainWindow, "_on_poller_steps_loaded"),
        (mainwindow.MainWindow, "select_run"),
        (mainwindow.MainWindow, "_on_clock_timeout"),
        (mainwindow.MainWindow, "_show_approvals"),
        (mainwindow.MainWindow, "_update_controls"),
        (mainwindow.MainWindow, "open_new_run"),
        (runs_room.RunsRoom, "show_selected"),
        (approvals.ApprovalsRoom, "show_pending"),
        (controls.ControlsRoom, "update"),
        (detail.DetailRoom, "steps_loaded"),
        (poller.LivePoller, "_on_job_done"),
        (runs.RunListModel, "apply"),
        (runs.RunListModel, "refresh_times"),
        (steps.StepTimelineModel, "apply"),
        (run_detail.RunDetailPane, "show_run"),
        (run_detail.RunDetailPane, "update_row"),
        (run_detail.RunDetailPane, "tick"),
    ]
    for cls, name in targets:
        original = getattr(cls, name, None)
        if original is None:
            continue

        def timed(
            *a: Any, _f: Any = original, _n: str = f"{cls.__name__}.{name}", **kw: Any
        ) -> Any:
            t = time.perf_counter()
            try:
                return _f(*a, **kw)
            finally:
                timings.setdefault(_n, []).append((time.perf_counter() - t) * 1000)

        setattr(cls, name, timed)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _heap() -> dict[str, int]:
    """The C heap: bytes in use (incl. mmapped blocks) and bytes free in it (glibc only).

    RSS that grows while ``heap_used`` stays flat is fragmentation or freed memory not
    returned; ``heap_used`` that grows is memory somebody holds.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return {}
    fn.restype = _MallInfo2
    info = fn()
    return {"heap_used": info.uordblks + info.hblkhd, "heap_free": info.fordblks}


def _sqlite_memory() -> dict[str, int]:
    """Bytes SQLite's allocator holds in this process (page caches, statements), if known.

    The ``sqlite3`` module links the system's ``libsqlite3``; loading it again by name
    gives the same library, so its counter covers every connection of the process.
    """
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
        fn = lib.sqlite3_memory_used
    except (OSError, AttributeError):
        return {}
    fn.restype = ctypes.c_int64
    return {"sqlite_mem": int(fn())}


LATENESS_EDGES_MS = (1, 2, 3, 5, 7, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 500, 1000)
"""Upper edges of the stall histogram's buckets (a last bucket holds the rest)."""


def _lateness_histogram(gaps: list[float], interval: float) -> list[int]:
    """How many ticks came how late (beyond the period), by :data:`LATENESS_EDGES_MS`."""
    import bisect

    counts = [0] * (len(LATENESS_EDGES_MS) + 1)
    for gap in gaps:
        counts[bisect.bisect_left(LATENESS_EDGES_MS, max(0.0, gap - interval))] += 1
    return counts


def lateness_percentile(counts: list[int], p: float) -> float:
    """The ``p``-th percentile of lateness, as the upper edge of its bucket (inf: beyond)."""
    total = sum(counts)
    if not total:
        return 0.0
    seen = 0
    for i, n in enumerate(counts):
        seen += n
        if seen >= total * p / 100:
            return float(LATENESS_EDGES_MS[i]) if i < len(LATENESS_EDGES_MS) else math.inf
    return math.inf


def _containers(w: Any) -> dict[str, int]:
    """Sizes of the window's long-lived collections: one that keeps growing is a leak."""
    from PySide6.QtCore import QObject

    if w is None:
        return {}
    tracker = w.poller.tracker
    return {
        "n_plans": len(tracker._plans),
        "n_rendered": len(w.runs_model._rendered),
        "n_states": len(w.notices.states or {}),
        "n_decided": len(w.commands.decided),
        "n_pending_tasks": w.tasks.pending,
        "n_children": len(w.findChildren(QObject)),
    }


def _describe(obj: Any) -> str:
    """Where a container lives: the attribute or key that holds it, and of what."""
    import gc

    for holder in gc.get_referrers(obj):
        if isinstance(holder, dict):
            names = [k for k, v in holder.items() if v is obj]
            owners = [
                type(o).__qualname__
                for o in gc.get_referrers(holder)
                if getattr(o, "__dict__", None) is holder
            ]
            if names:
                return f"{owners[0] if owners else 'dict'}.{names[0]}"
    return "?"


def _write_grown_containers(f: Any, containers: list[tuple[Any, int]]) -> None:
    """The containers that were big at the first census and grew most since."""
    grown = sorted(((len(c) - n, n, c) for c, n in containers), key=lambda g: -g[0])[:12]
    f.write("\n== big containers that grew since the first census\n")
    for more, was, container in grown:
        if more > 0:
            kind = type(container).__qualname__
            f.write(f"  {kind} {was} -> {was + more} at {_describe(container)}\n")


def _write_kept_allocations(f: Any) -> None:
    """Memory allocated since the first census and still held, by where it was allocated."""
    if not tracemalloc.is_tracing():
        return
    here = tracemalloc.Filter(False, __file__)
    snap = tracemalloc.take_snapshot().filter_traces([here, tracemalloc.Filter(False, "<*")])
    f.write("\n== allocated since the first census and still held\n")
    for stat in snap.statistics("traceback")[:15]:
        f.write(f"  {stat.size / 1024:8.1f} KiB in {stat.count} blocks\n")
        for line in stat.traceback.format()[-12:]:
            f.write(f"      {line}\n")


def _write_holders(f: Any, names: list[str]) -> None:
    """For each grown type, what holds its newest objects (two levels of referrers)."""
    import gc

    objects = gc.get_objects()
    for name in names:
        mine = [o for o in objects if type(o).__qualname__ == name][-3:]
        f.write(f"\n== who holds {name}\n")
        for obj in mine:
            for holder in gc.get_referrers(obj):
                if holder is objects or holder is mine:
                    continue
                outer = [type(h).__qualname__ for h in gc.get_referrers(holder)][:6]
                what = type(holder).__qualname__
                if isinstance(holder, dict):
                    what += str([k for k in holder if isinstance(k, str)][:6])
                elif isinstance(holder, (list, tuple)):
                    what += f"(len {len(holder)})"
                f.write(f"  {what} <- {outer}\n")


def app_main(db: Path, stats: Path, seconds: float, sample_s: float, seed: int, trace: bool) -> int:
    """Run the real app with an analyst and a stall meter inside; write samples to ``stats``."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import gc
    from collections import Counter

    import psutil
    from gui_bench import StallMeter
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from desktop_agent.gui.app import create_app, main
    from desktop_agent.gui.mainwindow import MainWindow

    timings: dict[str, list[float]] = {}
    if trace:  # time the GUI thread's handlers: which of them stalls the loop?
        _time_handlers(timings)
    app = create_app()
    me = psutil.Process()
    rng = random.Random(seed)
    meter = StallMeter()
    tracer = StallTracer() if trace else None
    if tracer is not None:
        meter._timer.timeout.connect(tracer.tick)
    counts = {"selections": 0, "tabs": 0, "pages": 0, "scrolls": 0, "approved": 0, "dialogs": 0}
    out = stats.open("a", encoding="utf-8")
    started = time.monotonic()
    ticks = {"n": 0}

    def window() -> MainWindow | None:
        found = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]
        return found[0] if found else None

    def select(w: MainWindow) -> None:
        rows = w.runs_model.rows()
        if rows:
            live = [r for r in rows if r.run.status.is_active] or list(rows)
            w.select_run(rng.choice(live[:40]).run.id)
            counts["selections"] += 1

    def switch_tab(w: MainWindow) -> None:
        w.side.setCurrentIndex(rng.randrange(w.side.count()))
        counts["tabs"] += 1

    def switch_page(w: MainWindow) -> None:
        pages = w.detail.inspector
        pages.setCurrentIndex(rng.randrange(pages.count()))
        counts["pages"] += 1

    def scroll(w: MainWindow) -> None:
        if w.steps_model.rowCount():
            timeline = w.detail.timeline
            timeline.setCurrentIndex(w.steps_model.index(rng.randrange(w.steps_model.rowCount())))
            timeline.scrollTo(timeline.currentIndex())
            counts["scrolls"] += 1

    # Timers made once: each QTimer.singleShot with a delay keeps three references to None
    # (PySide6 6.11), which the figures would charge to the app.
    closer = QTimer()
    closer.setSingleShot(True)
    closer.setInterval(800)

    def close_dialog() -> None:
        w = window()
        if w is not None and w.new_run_dialog is not None:
            w.new_run_dialog.reject()

    closer.timeout.connect(close_dialog)
    clicks: collections.deque[Callable[[], None]] = collections.deque()
    clicker = QTimer()

    def click() -> None:
        if clicks:
            clicks.popleft()()
        if not clicks:
            clicker.stop()

    clicker.timeout.connect(click)

    def new_run_dialog(w: MainWindow) -> None:
        w.open_new_run()
        closer.start()
        counts["dialogs"] += 1

    def approve_one(w: MainWindow) -> None:
        for approval in list(w.approvals):
            if approval.id not in w.commands.decided and not approval.run_id.startswith(
                HIBERNATED_PREFIX
            ):
                w.commands.approve(approval)
                counts["approved"] += 1
                return

    def act(action: Callable[[MainWindow], None]) -> Callable[[], None]:
        def run() -> None:
            w = window()
            if w is not None:
                action(w)

        return run

    def analyst() -> None:  # what someone watching the runs does, about every 1.5 s
        # Each action is its own event, spread over the tick, as a person's clicks are:
        # one handler doing a selection, two switches, a scroll and five approvals at once
        # is something no person can do, and the stall meter charged their sum to the app.
        w = window()
        if w is None:
            return
        ticks["n"] += 1
        plan: list[Callable[[MainWindow], None]] = [select]
        if ticks["n"] % 4 == 0:
            plan.append(switch_tab)
        if ticks["n"] % 3 == 0:
            plan.append(switch_page)
        if ticks["n"] % 2 == 0:
            plan.append(scroll)
        if ticks["n"] % 40 == 0:
            plan.append(new_run_dialog)
        waiting = sum(1 for a in w.approvals if a.id not in w.commands.decided)
        plan += [approve_one] * waiting
        clicks.clear()  # one action per event, ``gap`` apart, the first at once
        clicks.extend(act(action) for action in plan)
        clicker.start(1400 // max(len(plan), 1))
        QTimer.singleShot(0, click)  # a zero delay keeps no reference to None

    census: list[Counter[str]] = []

    containers: list[tuple[Any, int]] = []

    def take_census() -> None:  # live objects by type (``--trace-stalls``): what grows?
        gc.collect()
        objects = gc.get_objects()
        census.append(Counter(type(o).__qualname__ for o in objects))
        if not tracemalloc.is_tracing():  # from here on: which lines allocate what stays?
            tracemalloc.start(6)
        if not containers:  # and the big containers, to see later which of them grew
            kinds = (dict, list, set, collections.deque)
            containers.extend((o, len(o)) for o in objects if isinstance(o, kinds) and len(o) > 30)

    def sample() -> None:
        w = window()
        record = {
            "t": time.monotonic() - started,
            "rss": me.memory_info().rss,
            "threads": me.num_threads(),
            "fds": me.num_fds(),
            "none_refs": sys.getrefcount(None),
            "py_blocks": sys.getallocatedblocks(),
            **_heap(),
            **_sqlite_memory(),
            **_containers(w),
            "stall_ms": meter.stall_ms(),
            "lateness": _lateness_histogram(meter.gaps, meter.interval),
            "ticks": len(meter.gaps),
            "runs_shown": w.runs_model.rowCount() if w else 0,
            "steps_shown": w.steps_model.rowCount() if w else 0,
            **counts,
        }
        out.write(json.dumps(record) + "\n")
        out.flush()
        meter.gaps.clear()  # each sample reports the stalls since the previous one

    def finish() -> None:
        if tracer is not None:
            take_census()
            grown = census[-1] - census[0]
            with stats.with_name("growth.txt").open("w", encoding="utf-8") as f:
                for name, n in grown.most_common(40):
                    f.write(f"{n:8d} {name}\n")
                _write_holders(f, [name for name, _ in grown.most_common(8)])
                _write_grown_containers(f, containers)
                _write_kept_allocations(f)
        sample()
        w = window()
        if w is not None:
            w.quit_everything()  # the worker it started stops too
        else:
            QApplication.quit()

    user = QTimer()
    user.setInterval(1500)
    user.timeout.connect(analyst)
    sampler = QTimer()
    sampler.setInterval(int(sample_s * 1000))
    sampler.timeout.connect(sample)

    def begin() -> None:
        if tracer is not None:
            tracer.start()
        meter.start()
        user.start()
        sampler.start()
        QTimer.singleShot(int(seconds * 1000), finish)
        if tracer is not None:
            QTimer.singleShot(int(seconds * 200), take_census)  # after a fifth: warmed up

    QTimer.singleShot(0, begin)
    try:
        return main(db, spawn_workers=True)
    finally:
        out.close()
        if tracer is not None:
            tracer.report(stats.with_name("stalls.txt"))
            with stats.with_name("handlers.txt").open("w", encoding="utf-8") as f:
                for name, took in sorted(timings.items(), key=lambda kv: -max(kv[1])):
                    slow = sum(1 for t in took if t > 20)
                    f.write(
                        f"{name:60s} n={len(took):6d} max={max(took):6.1f} ms "
                        f"mean={sum(took) / len(took):5.2f} ms over-20ms={slow}\n"
                    )
        del app


# --------------------------------------------------------------------------- the driver


@dataclass
class Figures:
    """What the samples say."""

    samples: list[dict[str, Any]]
    warmup_s: float
    after: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.after = [s for s in self.samples if s["t"] >= self.warmup_s] or self.samples[-1:]

    def rss_slope_mb_per_h(self) -> float:
        """Least-squares slope of RSS over the samples after warm-up."""
        return self.slope_per_h("rss", 2**20)

    def slope_per_h(self, key: str, unit: float = 1.0) -> float:
        """Least-squares slope of ``key`` (in ``unit``) per hour after warm-up."""
        if any(key not in s for s in self.after):
            return math.nan
        pts = [(s["t"], s[key] / unit) for s in self.after]
        if len(pts) < 2:
            return 0.0
        mx = sum(t for t, _ in pts) / len(pts)
        my = sum(r for _, r in pts) / len(pts)
        var = sum((t - mx) ** 2 for t, _ in pts)
        cov = sum((t - mx) * (r - my) for t, r in pts)
        return cov / var * 3600 if var else 0.0

    def rise(self, key: str) -> int:
        """How far ``key`` rose above its value at the end of warm-up."""
        return int(max(s[key] for s in self.after) - self.after[0][key])


def keep_runs_live(client: Any, root: Path, want: int, started: list[str]) -> None:
    """Start runs until ``want`` are active (the analyst's "run again")."""
    from desktop_agent.domain import RunStatus

    active = client.runs([s for s in RunStatus if s.is_active], limit=1_000_000)
    live = [r for r in active if not r.id.startswith(HIBERNATED_PREFIX)]
    for _ in range(want - len(live)):
        ws = root / "ws" / f"run-{len(started):05d}"
        ws.mkdir(parents=True)
        for name, text in SOURCES.items():
            (ws / name).write_text(text)
        run = client.start_run(
            f"Soak run {len(started)}: summarise the sources", model="demo", workspace=ws
        )
        started.append(run.id)


def worker_sample(client: Any, db: Path, t: float) -> dict[str, Any] | None:
    """The worker serving the database, if one is alive here: what it holds.

    Its RSS, threads, open descriptors and database connections (descriptors open on the
    database file).
    """
    import psutil

    status = client.worker_status()
    if not status.alive or status.worker is None:
        return None
    try:
        proc = psutil.Process(status.worker.pid)
        with proc.oneshot():
            files = [f.path for f in proc.open_files()]
            return {
                "t": t,
                "pid": proc.pid,
                "rss": proc.memory_info().rss,
                "threads": proc.num_threads(),
                "fds": proc.num_fds(),
                "db_conns": sum(1 for f in files if f == str(db)),
            }
    except psutil.Error:
        return None


def hibernate_runs(db: Path, settings: Any, n: int) -> None:
    """Leave ``n`` runs hibernated at their approvals, as a worker leaves them.

    No thread, no lease: one demo run driven to its approval by a real worker, copied
    ``n`` times (``bench/idle_worker.py``), its original decided by the analyst like any
    other.
    """
    import sqlite3

    sys.path.insert(0, str(REPO / "bench"))
    from idle_worker import COPIED, copy_run, template_run

    template = template_run(db, settings)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        cols = {
            t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in ("runs", *COPIED)
        }
        conn.execute("BEGIN IMMEDIATE")
        for i in range(n):
            copy_run(conn, template, f"{HIBERNATED_PREFIX}{i:05d}", cols)
        conn.execute("COMMIT")
    finally:
        conn.close()


def stop_leftover_workers(client: Any) -> None:
    """Stop the worker the app started if it outlived the app (an abort leaves it running)."""
    import psutil

    from desktop_agent.procs import process_alive

    for info, proc_started in client.store.list_workers():
        if not process_alive(info.pid, proc_started):
            continue
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(info.pid)
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except psutil.TimeoutExpired:
                proc.kill()


def scratch_database(args: argparse.Namespace, prefix: str) -> tuple[Path, Path]:
    """A scratch folder under ``--dir`` and its new database: their paths.

    The database has no default budgets and holds the ``--hibernated`` runs waiting.
    """
    from desktop_agent.config import Settings

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=out))
    db = root / "data" / "desktop-agent.db"
    settings = Settings(default_max_cost_usd=None, default_max_steps=None)
    settings.save(db)
    if args.hibernated:
        hibernate_runs(db, settings, args.hibernated)
    return root, db


def drive(args: argparse.Namespace) -> int:
    """Start the app child, keep runs live, then judge the samples."""
    from desktop_agent.client.api import Client
    from desktop_agent.client.schedules import Scheduling

    root, db = scratch_database(args, "soak-")
    client = Client(db)
    stats = root / "samples.jsonl"
    seconds = args.minutes * 60
    warmup = args.warmup_minutes * 60 if args.warmup_minutes is not None else min(300, seconds / 5)
    env = {**os.environ, "DESKTOP_AGENT_DEMO_DELAY": str(args.delay)}
    if not args.xvfb:
        env["QT_QPA_PLATFORM"] = "offscreen"
    command = [sys.executable, __file__, "--app", str(db), "--stats", str(stats)]
    command += ["--seconds", str(seconds), "--sample-seconds", str(args.sample_seconds)]
    if args.trace_stalls:
        command.append("--trace-stalls")
    started: list[str] = []
    keep_runs_live(client, root, args.runs, started)
    print(
        f"soak: {args.minutes:g} min, {args.runs} live demo runs at {args.delay}s per model "
        f"call, warm-up {warmup / 60:.1f} min, {'Xvfb' if args.xvfb else 'offscreen'}",
        flush=True,
    )
    t0 = time.monotonic()
    child = subprocess.Popen(
        command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    worker: list[dict[str, Any]] = []
    last_worker_sample = 0.0
    sched = Scheduling(client, time.time)
    archived = 0
    try:
        last_report = last_archive = t0
        while child.poll() is None:
            with contextlib.suppress(Exception):  # a busy database only delays a top-up
                keep_runs_live(client, root, args.runs, started)
                now = time.monotonic()
                ws = None
                if now - last_worker_sample >= args.sample_seconds:
                    ws = worker_sample(client, db, now - t0)
                if ws is not None:
                    worker.append(ws)
                    last_worker_sample = now
                if time.monotonic() - last_archive >= 30:
                    last_archive = time.monotonic()
                    archived += len(sched.archive(args.retain_minutes * 60).run_ids)
            if time.monotonic() - last_report >= 60:
                last_report = time.monotonic()
                print(
                    f"  {last_report - t0:6.0f} s: {len(started)} runs started, "
                    f"{archived} archived",
                    flush=True,
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=2)
        stderr = child.stderr.read() if child.stderr else ""
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=30)
    took = time.monotonic() - t0
    samples = [json.loads(line) for line in stats.read_text().splitlines() if line.strip()]
    aborted = child.returncode != 0 or "Fatal Python error" in stderr
    from desktop_agent.domain import RunStatus

    done = client.runs([RunStatus.COMPLETED], limit=1_000_000)
    stop_leftover_workers(client)
    client.close()
    result = judge(args, samples, warmup, aborted, child.returncode, took)
    result["runs_started"] = len(started)
    result["runs_completed"] = len(done) + archived
    result["runs_archived"] = archived
    result["runs_hibernated"] = args.hibernated
    print(
        f"runs started {len(started)}, completed {len(done) + archived}, "
        f"{args.hibernated} hibernated at their approvals throughout"
    )
    result["worker"] = judge_worker(worker, warmup)
    result["targets_met"] = result["targets_met"] and result["worker"]["targets_met"]
    if aborted and stderr:
        print("app stderr (tail):\n" + stderr[-3000:])
    (root / "app-stderr.txt").write_text(stderr)  # kept with --keep
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"kept {root}")
    return 0 if args.report_only or result["targets_met"] else 1


def drive_headless(args: argparse.Namespace) -> int:
    """``--headless``: a worker process alone (no app); this script approves what waits."""
    from desktop_agent.client.api import Client
    from desktop_agent.client.schedules import Scheduling
    from desktop_agent.domain import RunStatus

    root, db = scratch_database(args, "soak-worker-")
    client = Client(db)
    seconds = args.minutes * 60
    warmup = args.warmup_minutes * 60 if args.warmup_minutes is not None else min(300, seconds / 5)
    env = {**os.environ, "DESKTOP_AGENT_DEMO_DELAY": str(args.delay)}
    env["DESKTOP_AGENT_AUTOSTART_WORKER"] = "0"
    started: list[str] = []
    keep_runs_live(client, root, args.runs, started)
    print(
        f"soak (worker alone): {args.minutes:g} min, {args.runs} live demo runs at "
        f"{args.delay}s per model call, {args.hibernated} hibernated, warm-up "
        f"{warmup / 60:.1f} min",
        flush=True,
    )
    log = (root / "worker.log").open("wb")
    t0 = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), "worker"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    worker: list[dict[str, Any]] = []
    sched = Scheduling(client, time.time)
    approved = archived = 0
    last_sample = last_archive = last_report = t0 - args.sample_seconds
    try:
        while child.poll() is None and time.monotonic() - t0 < seconds:
            with contextlib.suppress(Exception):  # a busy database only delays a round
                keep_runs_live(client, root, args.runs, started)
                for approval in client.approvals():
                    if not approval.run_id.startswith(HIBERNATED_PREFIX):
                        client.approve(approval.id)
                        approved += 1
                now = time.monotonic()
                if now - last_sample >= args.sample_seconds:
                    if (ws := worker_sample(client, db, now - t0)) is not None:
                        worker.append(ws)
                    last_sample = now
                if now - last_archive >= 30:
                    last_archive = now
                    archived += len(sched.archive(args.retain_minutes * 60).run_ids)
            if time.monotonic() - last_report >= 60:
                last_report = time.monotonic()
                print(
                    f"  {last_report - t0:6.0f} s: {len(started)} runs started, {approved} "
                    f"approvals, {archived} archived",
                    flush=True,
                )
            time.sleep(0.5)  # the analyst's pace: a round of approvals twice a second
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=60)
        log.close()
    done = client.runs([RunStatus.COMPLETED], limit=1_000_000)
    client.close()
    print(
        f"ran {(time.monotonic() - t0) / 60:.1f} min; runs started {len(started)}, completed "
        f"{len(done) + archived}, {approved} approvals, {args.hibernated} hibernated at their "
        "approvals throughout"
    )
    judged = judge_worker(worker, warmup)
    result: dict[str, Any] = {"worker": judged, "runs_started": len(started)}
    result["targets_met"] = judged["targets_met"]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"kept {root}")
    return 0 if args.report_only or result["targets_met"] else 1


def judge_worker(samples: list[dict[str, Any]], warmup: float) -> dict[str, Any]:
    """Print the worker's figures (RSS, threads, descriptors, database connections)."""
    if not samples:
        print("worker: no samples (no worker was alive)")
        return {"targets_met": False, "samples": 0}
    pids = sorted({s["pid"] for s in samples})
    f = Figures(samples, warmup)
    first, last = f.after[0], samples[-1]
    slope = f.rss_slope_mb_per_h()
    mb = 2**20
    print(
        f"worker: RSS {samples[0]['rss'] / mb:.0f} MB at first sample, {first['rss'] / mb:.0f} "
        f"MB after warm-up, {last['rss'] / mb:.0f} MB at the end; growth after warm-up "
        f"{slope:+.1f} MB/h (least squares over {len(f.after)} samples)"
    )
    print(
        "  "
        + "; ".join(
            f"{name}: {first[key]} after warm-up, {last[key]} at the end, max "
            f"{max(s[key] for s in f.after)}"
            for name, key in (
                ("threads", "threads"),
                ("descriptors", "fds"),
                ("database connections", "db_conns"),
            )
        )
        + f"; {len(pids)} worker process(es)"
    )
    checks = {
        "one worker throughout": len(pids) == 1,
        f"RSS growth < {RSS_TARGET_MB_PER_H:.0f} MB/h": slope < RSS_TARGET_MB_PER_H,
        "threads flat": f.rise("threads") <= FLAT_SLACK,
        "descriptors flat": f.rise("fds") <= FLAT_SLACK,
        "connections flat": f.rise("db_conns") <= FLAT_SLACK,
    }
    print(
        "worker targets: "
        + "; ".join(f"{k}: {'met' if ok else 'MISSED'}" for k, ok in checks.items())
    )
    return {
        "samples": len(samples),
        "rss_mb": [samples[0]["rss"] / mb, first["rss"] / mb, last["rss"] / mb],
        "rss_growth_mb_per_h": slope,
        **{
            key: [first[key], last[key], max(s[key] for s in f.after)]
            for key in ("threads", "fds", "db_conns")
        },
        "checks": checks,
        "targets_met": all(checks.values()),
    }


def judge(
    args: argparse.Namespace,
    samples: list[dict[str, Any]],
    warmup: float,
    aborted: bool,
    returncode: int | None,
    took: float,
) -> dict[str, Any]:
    """Print the figures and whether each target is met."""
    if not samples:
        print(f"the app wrote no samples (exit code {returncode}): ABORTED")
        return {"aborted": True, "targets_met": False, "samples": 0}
    f = Figures(samples, warmup)
    first, last = f.after[0], samples[-1]
    slope = f.rss_slope_mb_per_h()
    stall_after = max(s["stall_ms"] for s in f.after)
    stall_all = max(s["stall_ms"] for s in samples)
    late = sum(1 for s in f.after if s["stall_ms"] > STALL_TARGET_MS)
    mb = 2**20
    print(f"ran {took / 60:.1f} min; {len(samples)} samples; app exit code {returncode}")
    print(f"abort: {'YES' if aborted else 'no'}")
    print(
        f"RSS: {samples[0]['rss'] / mb:.0f} MB at first sample, {first['rss'] / mb:.0f} MB "
        f"after warm-up, {last['rss'] / mb:.0f} MB at the end; growth after warm-up "
        f"{slope:+.1f} MB/h (least squares over {len(f.after)} samples)"
    )
    print(
        f"  of which C heap in use {f.slope_per_h('heap_used', mb):+.1f} MB/h, free in the "
        f"heap {f.slope_per_h('heap_free', mb):+.1f} MB/h; Python objects "
        f"{f.slope_per_h('py_blocks'):+.0f} blocks/h"
    )
    print(
        f"threads: {first['threads']} after warm-up, {last['threads']} at the end, "
        f"max {max(s['threads'] for s in f.after)}; descriptors: {first['fds']} after "
        f"warm-up, {last['fds']} at the end, max {max(s['fds'] for s in f.after)}"
    )
    print(
        f"  SQLite's memory {f.slope_per_h('sqlite_mem', mb):+.1f} MB/h "
        f"({last.get('sqlite_mem', 0) / mb:.1f} MB at the end)"
    )
    none_slope = f.slope_per_h("none_refs")
    print(
        f"None refcount: {samples[0]['none_refs']} at first sample, {last['none_refs']} "
        f"at the end (min {min(s['none_refs'] for s in samples)}); {none_slope:+.0f}/h "
        "after warm-up"
    )
    sizes = sorted(k for k in last if k.startswith("n_"))
    if sizes:
        print(
            "collections after warm-up → end: "
            + ", ".join(f"{k[2:]} {first.get(k, 0)}→{last[k]}" for k in sizes)
        )
    rows = [s["lateness"] for s in f.after if "lateness" in s]
    hist = [sum(col) for col in zip(*rows, strict=True)]
    spread = {p: lateness_percentile(hist, p) for p in (50, 99, 99.9)}
    print(
        f"event loop: longest stall {stall_after:.1f} ms after warm-up ({late} of "
        f"{len(f.after)} sample periods over {STALL_TARGET_MS:.0f} ms), {stall_all:.1f} ms "
        f"including start-up; {sum(s['ticks'] for s in samples)} ticks of 5 ms"
    )
    print(
        "  lateness of a tick after warm-up (bucket upper edge): "
        + ", ".join(f"p{p:g} ≤ {v:g} ms" for p, v in spread.items())
        + f", max {stall_after:.1f} ms"
    )
    print(
        f"analyst: {last['selections']} selections, {last['tabs']} tab switches, "
        f"{last['pages']} inspector pages, {last['scrolls']} timeline jumps, "
        f"{last['dialogs']} new-run dialogs, {last['approved']} approvals; run list "
        f"{last['runs_shown']} rows"
    )
    checks = {
        "no abort": not aborted,
        f"RSS growth < {RSS_TARGET_MB_PER_H:.0f} MB/h": slope < RSS_TARGET_MB_PER_H,
        "threads flat": f.rise("threads") <= FLAT_SLACK,
        "descriptors flat": f.rise("fds") <= FLAT_SLACK,
        f"p99.9 stall ≤ {STALL_TARGET_MS:.0f} ms": spread[99.9] <= STALL_TARGET_MS,
    }
    print("targets: " + "; ".join(f"{k}: {'met' if ok else 'MISSED'}" for k, ok in checks.items()))
    return {
        "aborted": aborted,
        "minutes": took / 60,
        "samples": len(samples),
        "rss_mb_after_warmup": first["rss"] / mb,
        "rss_mb_end": last["rss"] / mb,
        "rss_growth_mb_per_h": slope,
        "threads": [first["threads"], last["threads"], max(s["threads"] for s in f.after)],
        "fds": [first["fds"], last["fds"], max(s["fds"] for s in f.after)],
        "none_refs": [samples[0]["none_refs"], last["none_refs"]],
        "none_refs_per_h": none_slope,
        "sqlite_mb_per_h": f.slope_per_h("sqlite_mem", mb),
        "stall_percentiles_ms": {str(p): v for p, v in spread.items()},
        "stall_ms_after_warmup": stall_after,
        "stall_ms_all": stall_all,
        "analyst": {k: last[k] for k in ("selections", "tabs", "pages", "scrolls", "approved")},
        "checks": checks,
        "targets_met": all(checks.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.5, help="demo seconds per model call")
    parser.add_argument(
        "--retain-minutes", type=float, default=3.0, help="archive runs finished this long ago"
    )
    parser.add_argument("--warmup-minutes", type=float, default=None)
    parser.add_argument(
        "--hibernated",
        type=int,
        default=0,
        help="runs left hibernated at their approvals throughout (the worker's load)",
    )
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--xvfb", action="store_true", help="use the display in DISPLAY")
    parser.add_argument("--report-only", action="store_true", help="exit 0 on missed targets")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--dir", default=str(REPO / "bench" / "out"), help="scratch folder")
    parser.add_argument("--keep", action="store_true", help="keep the scratch data folder")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--trace-stalls",
        action="store_true",
        help="record the GUI thread's stack at each stall (stalls.txt; use with --keep)",
    )
    parser.add_argument(
        "--headless",
        action="store_true",
        help="a worker process alone, no app: this script approves what waits",
    )
    parser.add_argument("--app", help=argparse.SUPPRESS)
    parser.add_argument("--stats", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.app:
        return app_main(
            Path(args.app),
            Path(args.stats),
            args.seconds,
            args.sample_seconds,
            args.seed,
            args.trace_stalls,
        )
    return drive_headless(args) if args.headless else drive(args)


if __name__ == "__main__":
    raise SystemExit(main())
