"""Smoke test of ``bench/resume.py``: one kill and resume, each figure reported.

Nothing here judges the 0.5 s target (the machine running the suite may be loaded): only
that a worker was killed mid-run, a new one took the run over and stepped it, and that
every figure was measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "resume.py"


def test_one_kill_and_resume_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "resume.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--repeat", "1", "--dir", str(tmp_path), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parents[1],
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    figures = report["this"]["figures"]
    names = (
        "spawn to ready",
        "ready to claimed",
        "claimed to step",
        "spawn to step",
        "CPU: spawn to ready",
        "CPU: spawn to step",
        "floor: python -c pass",
        "floor: import sqlalchemy",
        "floor: import persistence.store",
    )
    for name in names:
        assert figures[name]["median_s"] >= 0, name
        assert name in proc.stdout
    assert figures["spawn to step"]["median_s"] >= figures["spawn to ready"]["median_s"]
    # Same machine: the killed worker is found dead by its pid, not by its lease's expiry.
    assert report["this"]["takeover"] == ["pid gone (marked stopped by the new worker)"]
    assert isinstance(report["target_met"], bool)
    assert "target: spawn to the next step <= 0.5 s" in proc.stdout
    assert not list(tmp_path.glob("resume-*")), "the scratch folder is removed"
