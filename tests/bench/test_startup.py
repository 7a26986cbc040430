"""Smoke test of ``bench/startup.py``: the worker's and the app's start, each figure reported.

A tiny run (one sample, a database of 5 runs for the app); nothing judges a target.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "startup.py"


def test_the_worker_and_the_app_starts_are_reported(tmp_path: Path) -> None:
    pytest.importorskip("PySide6")
    out = tmp_path / "startup.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            *("--repeat", "1", "--app", "--runs", "5", "--only", "worker,app"),
            *("--dir", str(tmp_path), "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parents[1],
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())["this"]
    cases = (
        "worker: spawn to ready",
        "app: empty database, list filled",
        "app: 5 runs, list filled",
    )
    for case in cases:
        assert figures[case]["median_s"] > 0, case
        assert case in proc.stdout
    for phase in ("imports done", "window shown", "list filled"):
        child = figures[f"app: 5 runs, list filled / child: {phase}"]["median_s"]
        assert 0 < child <= figures["app: 5 runs, list filled"]["median_s"]
    assert "libraries loaded by then:" in proc.stdout
    assert not list(tmp_path.glob("startup-*")), "the scratch folder is removed"
