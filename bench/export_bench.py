"""How long exporting a long run takes (``desktop-agent export RUN --format html|md|bundle``).

Writes a run of ``--steps`` steps (model calls and tool calls alternating, with realistic
text) through the real store into a scratch database, then times
:func:`desktop_agent.client.export.export` to HTML and to Markdown and
:func:`~desktop_agent.client.export.bundle_bytes` (min and median of ``--repeat``),
against reading the run's steps alone (the baseline any export pays). Target: a
10,000-step run to HTML in under 3 s. When ``chromium`` is on the PATH, the page is then
opened headless and a screenshot saved (``--shot``, default ``bench/out/export-10k.png``),
to look at: the page must open and read as the app does.

    .venv/bin/python bench/export_bench.py [--steps 10000] [--repeat 5] [--shot PNG]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from journal_bench import RUN_ID, _intent, _new_run, _outcome  # noqa: E402

from desktop_agent.client.api import Client  # noqa: E402
from desktop_agent.client.export import bundle_bytes, export  # noqa: E402
from desktop_agent.client.views import timeline_entries  # noqa: E402
from desktop_agent.config import Settings  # noqa: E402
from desktop_agent.domain import RunStatus  # noqa: E402
from desktop_agent.engine.ports import RunPatch  # noqa: E402


def _timed(repeat: int, fn: object) -> tuple[float, float]:
    """Min and median seconds of ``repeat`` calls of ``fn``."""
    assert callable(fn)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def screenshot(page: Path, png: Path) -> str:
    """Open ``page`` in headless Chromium and save a screenshot; what happened, in words."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return "no chromium on this machine: no screenshot"
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="export-bench-profile-") as profile:
        argv = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", f"--user-data-dir={profile}", f"--screenshot={png}",
            "--window-size=1400,2000", page.as_uri(),
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        took = time.perf_counter() - start
    if done.returncode != 0 or not png.is_file():
        return f"chromium failed ({done.returncode}): {done.stderr.strip()[-200:]}"
    return f"opened in headless chromium and shot in {took:.1f} s: {png}"


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shot", type=Path, default=REPO / "bench" / "out" / "export-10k.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="export-bench-") as tmp:
        db = Path(tmp) / "data" / "desktop-agent.db"
        Settings(durability="NORMAL").save(db)
        client = Client(db)
        store = client.store
        _new_run(store)
        store.commit(RUN_ID, intents=[_intent(1)], patch=RunPatch(status=RunStatus.RUNNING))
        for n in range(1, args.steps + 1):
            store.commit(RUN_ID, outcome=_outcome(n, 300), intents=[_intent(n + 1)])
        read = _timed(args.repeat, lambda: timeline_entries(client, RUN_ID))
        html = _timed(args.repeat, lambda: export(client, RUN_ID, "html"))
        md = _timed(args.repeat, lambda: export(client, RUN_ID, "md"))
        bundle = _timed(args.repeat, lambda: bundle_bytes(client, RUN_ID))
        page = export(client, RUN_ID, "html")[1]
        path = Path(tmp) / "run.html"
        path.write_text(page, encoding="utf-8")
        size = len(page.encode())
        bundle_size = len(bundle_bytes(client, RUN_ID)[1])
        client.close()
        shot = screenshot(path, args.shot)
    print(f"export of a {args.steps:,}-step run, min / median of {args.repeat}:")
    print(f"  reading the steps  {read[0]:6.2f} / {read[1]:6.2f} s")
    for name, (low, mid), note in (
        ("HTML", html, f"{size:,} bytes"),
        ("Markdown", md, ""),
        ("bundle", bundle, f"{bundle_size:,} bytes"),
    ):
        extra = f"; {note}" if note else ""
        print(f"  {name:<18} {low:6.2f} / {mid:6.2f} s  ({mid / read[1]:.1f}x reading{extra})")
    print(f"  {shot}")


if __name__ == "__main__":
    main()
