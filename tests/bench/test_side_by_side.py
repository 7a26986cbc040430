"""Smoke test of ``bench/side_by_side.py``: it runs our systems and says what it skipped.

Speed is benchmarked, not tested: nothing here asserts a timing or a ratio.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "side_by_side.py"


def test_side_by_side_runs_and_prints_figures_and_ratios(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            *("--steps", "40,80", "--repeat", "1", "--dir", str(tmp_path)),
            *("--systems", "raw,journal,engine,langgraph"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=BENCH.parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for label in ("sqlite3 raw commit", "desktop-agent journal", "desktop-agent engine"):
        for n in (40, 80):
            row = re.search(rf"^{label}\s+{n}\s+(\d+)\s+([\d.]+)\s+(\d+)", out, re.M)
            assert row, out
            assert float(row.group(2)) > 0 and int(row.group(3)) > 0
    assert re.search(r"N=80\s+desktop-agent engine\s+time ×\s*[\d.]+", out), out
    assert re.search(r"desktop-agent journal\s+×\s*[\d.]+\s+linear", out), out
    if importlib.util.find_spec("langgraph") is None:
        assert re.search(r"^LangGraph sqlite sync\s+40  not installed", out, re.M), out
    else:
        assert re.search(r"^LangGraph sqlite sync\s+40\s+40\s+[\d.]+", out, re.M), out
