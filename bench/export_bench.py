"""How long exporting a long run takes (``desktop-agent export RUN --format html|md``).

Writes a run of ``--steps`` steps (model calls and tool calls alternating, with realistic
text) through the real store into a scratch database, then times
:func:`desktop_agent.client.export.export` to HTML and to Markdown (median of
``--repeat``), against reading the run's steps alone (the baseline any export pays).
Target: a 10,000-step run to HTML in under 3 s.

    .venv/bin/python bench/export_bench.py [--steps 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
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
from desktop_agent.client.export import export  # noqa: E402
from desktop_agent.client.views import timeline_entries  # noqa: E402
from desktop_agent.config import Settings  # noqa: E402
from desktop_agent.domain import RunStatus  # noqa: E402
from desktop_agent.engine.ports import RunPatch  # noqa: E402


def _median(repeat: int, fn: object) -> float:
    assert callable(fn)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="export-bench-") as tmp:
        db = Path(tmp) / "data" / "desktop-agent.db"
        Settings(durability="NORMAL").save(db)
        client = Client(db)
        store = client._store
        _new_run(store)
        store.commit(RUN_ID, intents=[_intent(1)], patch=RunPatch(status=RunStatus.RUNNING))
        for n in range(1, args.steps + 1):
            store.commit(RUN_ID, outcome=_outcome(n, 300), intents=[_intent(n + 1)])
        read = _median(args.repeat, lambda: timeline_entries(client, RUN_ID))
        html = _median(args.repeat, lambda: export(client, RUN_ID, "html"))
        md = _median(args.repeat, lambda: export(client, RUN_ID, "md"))
        size = len(export(client, RUN_ID, "html")[1].encode())
        client.close()
    print(f"export of a {args.steps:,}-step run, median of {args.repeat}:")
    print(f"  reading the steps  {read:6.2f} s")
    print(f"  HTML               {html:6.2f} s  ({html / read:.1f}x reading; {size:,} bytes)")
    print(f"  Markdown           {md:6.2f} s  ({md / read:.1f}x reading)")


if __name__ == "__main__":
    main()
