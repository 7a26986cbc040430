"""Smoke test of ``bench/cost_bench.py``: every variant runs and prints its figures.

The bench runs on a clock moved by hand and a fake API whose usage follows the request, so
its dollars are the same on any machine: a batch item in economy mode costs half of the
streamed one when both read the cache alike, and the bench must say so.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cost_bench.py"


def test_every_variant_runs_and_economy_items_cost_half(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--steps", "16", "--items", "3", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parents[1],
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for label in (
        "streamed, product's cache choice",
        "streamed, 5-minute writes",
        "economy, 1-hour writes (product)",
        "economy, 5-minute writes",
        "streamed items",
        "economy items (product)",
    ):
        assert label in out, out
    ratio = re.search(r"economy / streamed, per batch item: ([0-9.]+)x", out)
    assert ratio is not None, out
    assert float(ratio.group(1)) == 0.5, out
