"""Smoke test of ``bench/journal_bench.py``: it runs and prints its figures.

Speed is benchmarked, not tested: nothing here asserts a timing or a ratio.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "journal_bench.py"


def test_journal_bench_runs_and_prints_its_figures(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--steps", "30,60", "--repeat", "1", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCH.parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for level in ("FULL", "NORMAL"):
        for n in (30, 60):
            row = re.search(rf"^{level}\s+{n}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x", out, re.M)
            assert row, out
            assert all(float(x) > 0 for x in row.groups())
    assert "target: a journal step at FULL costs <= 1.5x one raw commit:" in out
    assert "target: journal bytes per step do not grow with N (FULL):" in out
    assert list(tmp_path.iterdir()) == []  # scratch databases removed
