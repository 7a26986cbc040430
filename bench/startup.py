"""Start-up time of the command line, of the main modules' imports and of the worker.

Usage::

    .venv/bin/python bench/startup.py [--repeat 7] [--dir bench/out]

Every figure is a fresh process of this interpreter, timed from spawn to exit (wall time,
``time.perf_counter``), ``--repeat`` times; the cases run in rounds, one of each per round,
so background load on a shared machine hits them alike. Printed per case: the median, the
spread (min–max), and the median's ratio to the baseline's median, ``python -c "import
desktop_agent"`` (the interpreter's own start plus the package's empty ``__init__``).

- ``--help``, a parse error (an unknown command) and the version: ``python -m desktop_agent``.
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

The home and XDG folders of the children point into a scratch folder under ``--dir``
(default ``bench/out``, git-ignored), so nothing of the user's data folder is read. This
is a report, not a test: the exit status is 0.
"""

from __future__ import annotations

import argparse
import os
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
HEAVY = ("sqlalchemy", "alembic", "anthropic", "httpx", "mcp", "PySide6")
MODULES = (
    "desktop_agent",
    "desktop_agent.cli.commands",
    "desktop_agent.client.api",
    "desktop_agent.worker.main",
    "desktop_agent.httpapi.app",
)
CLI_TARGET_S = 0.3
WORKER_TIMEOUT_S = 60.0


@dataclass
class Case:
    """One figure: a name and how to take one sample of it (seconds)."""

    name: str
    sample: Callable[[], float]
    times: list[float] = field(default_factory=list)


def _env(home: Path, db: Path | None = None) -> dict[str, str]:
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
        PYTHONPATH=str(ROOT),
    )
    if db is not None:
        env["DESKTOP_AGENT_DB"] = str(db)
    return env


def _timed(argv: Sequence[str], env: dict[str, str], ok: Sequence[int] = (0,)) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, cwd=ROOT, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in ok:
        raise SystemExit(
            f"{' '.join(argv[1:])} exited {done.returncode}: {done.stderr.decode()[-500:]}"
        )
    return elapsed


def _worker_ready(env: dict[str, str]) -> float:
    """Seconds from spawn to the worker's announce line; the worker is then stopped."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "worker"],
        env=env,
        cwd=ROOT,
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
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
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


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=7, help="samples per figure (default 7)")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="scratch folder")
    args = parser.parse_args(argv)
    repeat = max(1, args.repeat)
    args.dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="startup-", dir=args.dir))
    try:
        return _run(scratch, repeat)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(scratch: Path, repeat: int) -> int:
    home = scratch / "home"
    home.mkdir()
    env = _env(home)
    py = sys.executable
    cli = [py, "-m", "desktop_agent"]
    empty_db = scratch / "empty" / "desktop-agent.db"
    empty_db.parent.mkdir()
    _timed([*cli, "runs"], _env(home, empty_db))  # made and migrated once, before timing
    empty_env = _env(home, empty_db)
    fresh = iter(range(10**9))

    def runs_new_folder() -> float:
        db = scratch / f"new{next(fresh)}" / "desktop-agent.db"
        db.parent.mkdir()
        return _timed([*cli, "runs"], _env(home, db))

    has_version = (
        subprocess.run([*cli, "--version"], env=env, capture_output=True, check=False).returncode
        == 0
    )
    cases = [
        Case(
            "baseline: import desktop_agent",
            lambda: _timed([py, "-c", "import desktop_agent"], env),
        ),
        Case("desktop-agent --help", lambda: _timed([*cli, "--help"], env)),
        Case("parse error (unknown command)", lambda: _timed([*cli, "nosuch"], env, ok=(2,))),
        Case("runs --help", lambda: _timed([*cli, "runs", "--help"], env)),
        Case("runs, empty database", lambda: _timed([*cli, "runs"], empty_env)),
        Case("runs, new data folder", runs_new_folder),
        Case("worker: spawn to ready", lambda: _worker_ready(empty_env)),
    ]
    if has_version:
        cases.insert(2, Case("desktop-agent --version", lambda: _timed([*cli, "--version"], env)))
    for _ in range(repeat):
        for case in cases:
            case.times.append(case.sample())
    profiles: dict[str, list[tuple[float, int, list[str]]]] = {m: [] for m in MODULES}
    for _ in range(repeat):
        for module in MODULES:
            profiles[module].append(_import_profile(module, env))

    print(f"python {sys.version.split()[0]}; {repeat} samples each, fresh processes")
    if not has_version:
        print("(desktop-agent has no --version)")
    base = statistics.median(cases[0].times)
    print(f"{'case':<34} {'median':>11} {'min':>11} {'max':>11}  {'x baseline':>10}")
    for case in cases:
        med = statistics.median(case.times)
        print(
            f"{case.name:<34} {_fmt(med)}  {_fmt(min(case.times))}  {_fmt(max(case.times))}"
            f"  {med / base:9.1f}x"
        )
    print()
    print("imports (python -X importtime -c 'import M': sum of self times, median)")
    print(f"{'module':<30} {'total':>11} {'modules':>8}  heavy libraries loaded")
    for module, samples in profiles.items():
        total = statistics.median(s[0] for s in samples)
        count = samples[-1][1]
        heavy = ", ".join(samples[-1][2]) or "none"
        print(f"{module:<30} {_fmt(total)} {count:>8}  {heavy}")
    print()
    worst = max(
        statistics.median(c.times)
        for c in cases
        if c.name.startswith(("desktop-agent --", "parse error"))
    )
    verdict = "met" if worst <= CLI_TARGET_S else "NOT met"
    print(
        f"target: CLI cold start (--help, parse error) <= {CLI_TARGET_S:.1f} s: {verdict} "
        f"(worst median {worst:.3f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
