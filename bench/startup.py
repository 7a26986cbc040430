"""Start-up time of the command line, of the main modules' imports and of the worker.

Usage::

    .venv/bin/python bench/startup.py [--repeat 7] [--dir bench/out] [--app] [--runs 500]
                                      [--only NAME,...] [--compare TREE | --before REV]
                                      [--json PATH]

Every figure is a fresh process of this interpreter, timed from spawn to exit (wall time,
``time.perf_counter``), ``--repeat`` times; the cases run in rounds, one of each per round,
so background load on a shared machine hits them alike. Printed per case: the median, the
spread (min–max), the median's ratio to the baseline's median, ``python -c "import
desktop_agent"`` (the interpreter's own start plus the package's empty ``__init__``), and
the median CPU time (user + system) of the sample's processes: on a loaded machine the wall
times stretch with the load, the CPU times much less.

- ``--help`` and a parse error (an unknown command): ``python -m desktop_agent`` (there is
  no ``--version``).
- ``runs`` on a new data folder (``DESKTOP_AGENT_DB`` in a fresh folder each time: the
  database is created and migrated) and on an empty database made beforehand; with
  ``DESKTOP_AGENT_AUTOSTART_WORKER=0`` so no worker is started.
- The worker: ``python -m desktop_agent worker`` on the empty database, from spawn to its
  announce line on stderr (``worker ID on PATH``, printed once it has its id, right before
  it polls for runs to claim), then stopped with SIGTERM.
- Imports: ``python -X importtime -c "import M"`` for the main modules, the sum of the
  self times it reports (median of the repeats) and how many modules it loaded, and
  which of the heavy libraries (SQLAlchemy, Alembic, the Anthropic SDK, httpx, MCP,
  PySide6) came along.

- With ``--app``, the app's cold start (``QT_QPA_PLATFORM=offscreen``): a fresh process of
  ``bench/app_start.py`` (the CLI's parser, then ``desktop_agent.gui.app.main`` with no
  worker started) from spawn until the main window is shown and its first poll has filled
  the run list, on an empty database and on one with ``--runs`` runs (500; each waiting at
  an approval, copied from one demo run as ``bench/idle_worker.py`` does). The child also
  says when its imports were done and when the window was first visible.

``--only`` keeps the cases whose names contain one of the given words (``--only app``).
``--compare TREE`` measures another tree alike (``git archive COMMIT | tar -x -C TREE``),
the two alternately within each round: the figures of the code before a change, in the
same run. ``--before REV`` does the extraction itself: the tree of the git revision REV
(``git archive``) in the scratch folder, measured as ``--compare`` would, so that
``--before HEAD`` prints a change's figures before and after it. Both trees' bytecode is
compiled first (``compileall``), so that neither pays for compiling in its first sample.
``--json`` writes the medians too. The home and XDG folders of the children point into a
scratch folder under ``--dir`` (default ``bench/out``, git-ignored), so nothing of the
user's data folder is read. This is a report, not a test: the exit status is 0.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DIR = Path(__file__).resolve().parent / "out"
ROOT = Path(__file__).resolve().parent.parent
APP_DRIVER = Path(__file__).resolve().parent / "app_start.py"
HEAVY = ("sqlalchemy", "alembic", "anthropic", "httpx2", "mcp", "PySide6")
MODULES = (
    "desktop_agent",
    "desktop_agent.cli.commands",
    "desktop_agent.client.api",
    "desktop_agent.worker.main",
    "desktop_agent.httpapi.app",
)
CLI_TARGET_S = 0.3
WORKER_TIMEOUT_S = 60.0
APP_TIMEOUT_S = 120.0


@dataclass
class Case:
    """One figure: a name, the code it runs, and how to take one sample of it (seconds)."""

    name: str
    sample: Callable[[], float]
    code: str = "this"
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """CPU seconds (user + system) of the sample's child processes."""
    phases: dict[str, list[float]] = field(default_factory=dict)
    """Figures the child reported besides (the app's: imports done, window shown)."""
    notes: set[str] = field(default_factory=set)


def _env(home: Path, db: Path | None = None, code: Path = ROOT) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DESKTOP_AGENT_", "XDG_")) and k != "ANTHROPIC_API_KEY"
    }
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CACHE_HOME=str(home / "cache"),
        DESKTOP_AGENT_AUTOSTART_WORKER="0",
        PYTHONPATH=str(code),
    )
    if db is not None:
        env["DESKTOP_AGENT_DB"] = str(db)
    return env


def _timed(
    argv: Sequence[str], env: dict[str, str], ok: Sequence[int] = (0,), cwd: Path = ROOT
) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, cwd=cwd, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in ok:
        raise SystemExit(
            f"{' '.join(argv[1:])} exited {done.returncode}: {done.stderr.decode()[-500:]}"
        )
    return elapsed


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _worker_ready(env: dict[str, str], cwd: Path = ROOT) -> float:
    """Seconds from spawn to the worker's announce line; the worker is then stopped."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "worker"],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        while True:
            line = proc.stderr.readline()
            if line.startswith("worker ") and " on " in line:
                return time.perf_counter() - start
            if not line:
                raise SystemExit(f"the worker exited ({proc.wait()}) before it was ready")
            if time.perf_counter() - start > WORKER_TIMEOUT_S:
                raise SystemExit("the worker was not ready within a minute")
    finally:
        _stop(proc)


def _app_filled(case: Case, env: dict[str, str], db: Path, expected: int, cwd: Path) -> float:
    """Seconds from spawn to the app's run list filled (``bench/app_start.py``)."""
    env = {**env, "QT_QPA_PLATFORM": "offscreen"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(APP_DRIVER), str(db), str(expected)],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()  # the driver prints nothing else
        elapsed = time.perf_counter() - start
        if not line.startswith("filled "):
            raise SystemExit(f"the app exited ({proc.wait()}) before its run list was filled")
        _word, rows, imported, shown, filled, heavy = line.split()
        if int(rows) < expected:
            raise SystemExit(f"the app listed {rows} runs, not {expected}")
        for name, value in (
            ("child: imports done", imported),
            ("child: window shown", shown),
            ("child: list filled", filled),
        ):
            case.phases.setdefault(name, []).append(float(value))
        case.notes.add(heavy)
        if proc.wait(timeout=APP_TIMEOUT_S) != 0:
            raise SystemExit(f"the app exited with {proc.returncode}")
        return elapsed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _import_profile(module: str, env: dict[str, str]) -> tuple[float, int, list[str]]:
    """``-X importtime`` of ``import module``: total seconds, modules loaded, heavy ones."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    total_us = 0
    count = 0
    tops: set[str] = set()
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.removeprefix("import time:").split("|", 2)
        total_us += int(self_us)
        count += 1
        tops.add(name.strip().split(".")[0])
    return total_us / 1e6, count, [h for h in HEAVY if h in tops]


def _children_cpu() -> float:
    """CPU seconds (user + system) of the child processes waited for so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=7, help="samples per figure (default 7)")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="scratch folder")
    parser.add_argument("--app", action="store_true", help="the app's cold start too")
    parser.add_argument("--runs", type=int, default=500, help="runs of the app's full database")
    parser.add_argument("--only", default="", help="comma-separated words: cases to keep")
    parser.add_argument("--compare", type=Path, help="another tree, measured alternately")
    parser.add_argument("--before", metavar="REV", help="a git revision, measured alternately")
    parser.add_argument("--json", type=Path, help="write the medians here too")
    args = parser.parse_args(argv)
    if args.compare and args.before:
        parser.error("--compare and --before both name the code to compare with: give one")
    args.repeat = max(1, args.repeat)
    args.dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="startup-", dir=args.dir))
    try:
        if args.before:
            args.compare = _extract(args.before, scratch / "before")
        return _run(scratch, args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _extract(rev: str, tree: Path) -> Path:
    """The files of git revision ``rev`` of this repository, written into ``tree``."""
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise SystemExit(f"git archive {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def _compile(code: Path) -> None:
    """Compile the package's bytecode in ``code`` (written even if the environment says not)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(code / "desktop_agent")],
        capture_output=True,
        check=True,
    )


def _full_database(folder: Path, runs: int) -> Path:
    """A database with ``runs`` runs, each waiting at an approval (``idle_worker.build``)."""
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    from idle_worker import build

    db, _decided, _timer = build(folder, max(0, runs - 2), decided=1)
    return db


def _cases(
    label: str, code: Path, scratch: Path, args: argparse.Namespace, full_db: Path | None
) -> list[Case]:
    """The cases of one tree of code."""
    home = scratch / "home"
    env = _env(home, code=code)
    py = sys.executable
    cli = [py, "-m", "desktop_agent"]
    empty_db = scratch / f"empty-{label}" / "desktop-agent.db"
    empty_db.parent.mkdir()
    _timed([*cli, "runs"], _env(home, empty_db, code), cwd=code)  # made and migrated once
    empty_env = _env(home, empty_db, code)
    fresh = iter(range(10**9))

    def runs_new_folder() -> float:
        db = scratch / f"new-{label}-{next(fresh)}" / "desktop-agent.db"
        db.parent.mkdir()
        return _timed([*cli, "runs"], _env(home, db, code), cwd=code)

    cases = [
        Case(
            "baseline: import desktop_agent",
            lambda: _timed([py, "-c", "import desktop_agent"], env),
        ),
        Case("desktop-agent --help", lambda: _timed([*cli, "--help"], env, cwd=code)),
        Case(
            "parse error (unknown command)",
            lambda: _timed([*cli, "nosuch"], env, ok=(2,), cwd=code),
        ),
        Case("runs --help", lambda: _timed([*cli, "runs", "--help"], env, cwd=code)),
        Case("runs, empty database", lambda: _timed([*cli, "runs"], empty_env, cwd=code)),
        Case("runs, new data folder", runs_new_folder),
        Case("worker: spawn to ready", lambda: _worker_ready(empty_env, code)),
    ]
    if args.app:
        app_empty = Case("app: empty database, list filled", lambda: 0.0)
        app_empty.sample = lambda: _app_filled(app_empty, env, empty_db, 0, code)
        cases.append(app_empty)
        if full_db is not None:
            app_full = Case(f"app: {args.runs} runs, list filled", lambda: 0.0)
            app_full.sample = lambda: _app_filled(app_full, env, full_db, args.runs, code)
            cases.append(app_full)
    words = [w.strip() for w in args.only.split(",") if w.strip()]
    kept = [c for c in cases if not words or any(w in c.name for w in words)]
    for case in kept:
        case.code = label
    return kept


def _run(scratch: Path, args: argparse.Namespace) -> int:
    repeat = args.repeat
    home = scratch / "home"
    home.mkdir()
    codes = [("this", ROOT)] + ([("before", args.compare.resolve())] if args.compare else [])
    for _label, code in codes:
        _compile(code)
    full_db = _full_database(scratch / "full", args.runs) if args.app else None
    per_code = {label: _cases(label, code, scratch, args, full_db) for label, code in codes}
    for n in range(repeat):
        order = list(per_code.values())
        for cases in order if n % 2 == 0 else reversed(order):
            for case in cases:
                cpu_before = _children_cpu()
                case.times.append(case.sample())
                case.cpu.append(_children_cpu() - cpu_before)
    profiles: dict[str, list[tuple[float, int, list[str]]]] = {m: [] for m in MODULES}
    if not args.only:
        env = _env(home)
        for _ in range(repeat):
            for module in MODULES:
                profiles[module].append(_import_profile(module, env))

    load = os.getloadavg()
    print(
        f"python {sys.version.split()[0]}; {repeat} samples each, fresh processes; "
        f"{os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, "
        f"nice {os.nice(0)}"
    )
    print(
        f"{'code':<7} {'case':<36} {'median':>11} {'min':>11} {'max':>11}  {'x baseline':>10}"
        f"  {'cpu median':>11}"
    )
    report: dict[str, object] = {"repeat": repeat, "load": list(load)}
    for label, cases in per_code.items():
        base_case = next((c for c in cases if c.name.startswith("baseline")), None)
        base = statistics.median(base_case.times) if base_case else float("nan")
        figures: dict[str, dict[str, float]] = {}
        for case in cases:
            med = statistics.median(case.times)
            figures[case.name] = {
                "median_s": med,
                "min_s": min(case.times),
                "max_s": max(case.times),
                "cpu_median_s": statistics.median(case.cpu),
            }
            print(
                f"{label:<7} {case.name:<36} {_fmt(med)}  {_fmt(min(case.times))}  "
                f"{_fmt(max(case.times))}  "
                + (f"{med / base:9.1f}x" if base_case else f"{'':>10}")
                + f"  {_fmt(statistics.median(case.cpu))}"
            )
            for phase, values in case.phases.items():
                pmed = statistics.median(values)
                figures[f"{case.name} / {phase}"] = {
                    "median_s": pmed,
                    "min_s": min(values),
                    "max_s": max(values),
                }
                print(
                    f"{label:<7}   {phase:<34} {_fmt(pmed)}  {_fmt(min(values))}  "
                    f"{_fmt(max(values))}"
                )
            if case.notes:
                print(f"{label:<7}   libraries loaded by then: {' / '.join(sorted(case.notes))}")
        report[label] = figures
    if args.compare:
        mine, theirs = per_code["this"], per_code["before"]
        for a, b in zip(mine, theirs, strict=True):
            ratio = statistics.median(a.times) / statistics.median(b.times)
            cpu = statistics.median(a.cpu) / statistics.median(b.cpu)
            print(f"{a.name}: this / before = {ratio:.2f}x (CPU {cpu:.2f}x)")
    if not args.only:
        print()
        print("imports (python -X importtime -c 'import M': sum of self times, median)")
        print(f"{'module':<30} {'total':>11} {'modules':>8}  heavy libraries loaded")
        for module, samples in profiles.items():
            total = statistics.median(s[0] for s in samples)
            count = samples[-1][1]
            heavy = ", ".join(samples[-1][2]) or "none"
            print(f"{module:<30} {_fmt(total)} {count:>8}  {heavy}")
    print()
    cli_cases = [
        c for c in per_code["this"] if c.name.startswith(("desktop-agent --", "parse error"))
    ]
    if cli_cases:
        worst = max(statistics.median(c.times) for c in cli_cases)
        verdict = "met" if worst <= CLI_TARGET_S else "NOT met"
        cpu = max(statistics.median(c.cpu) for c in cli_cases)
        figures_said = f", CPU {cpu:.3f} s"
        if args.compare:
            names = {c.name for c in cli_cases}
            theirs = [c for c in per_code["before"] if c.name in names]
            figures_said += (
                f"; before: {max(statistics.median(c.times) for c in theirs):.3f} s, "
                f"CPU {max(statistics.median(c.cpu) for c in theirs):.3f} s"
            )
        print(
            f"target: CLI cold start (--help, parse error) <= {CLI_TARGET_S:.1f} s: {verdict} "
            f"(worst median {worst:.3f} s{figures_said})"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
