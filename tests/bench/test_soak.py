"""Smoke test of ``bench/soak.py``: a short soak runs the real app and reports every figure.

The full length (30 minutes) is a benchmark, never run here; nothing below judges a target
(the machine running the suite may be loaded): only that the app ran, was driven, and that
each figure was measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


def test_a_short_soak_drives_the_app_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            *("--minutes", "0.4", "--warmup-minutes", "0.1", "--sample-seconds", "2"),
            *("--runs", "4", "--hibernated", "3", "--delay", "0.05", "--retain-minutes", "0.1"),
            *("--report-only", "--json", str(out), "--dir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parents[1],
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())
    assert figures["aborted"] is False
    assert figures["samples"] >= 5
    assert figures["runs_completed"] >= 1
    analyst = figures["analyst"]
    assert analyst["selections"] >= 3 and analyst["tabs"] >= 1 and analyst["approved"] >= 1
    assert figures["rss_mb_after_warmup"] > 10 and figures["threads"][0] >= 1
    assert figures["fds"][0] >= 3
    assert isinstance(figures["none_refs_per_h"], float)
    assert isinstance(figures["sqlite_mb_per_h"], float)
    assert set(figures["stall_percentiles_ms"]) == {"50", "99", "99.9"}
    assert set(figures["checks"]) == {
        "no abort",
        "RSS growth < 2 MB/h",
        "threads flat",
        "descriptors flat",
        "p99.9 stall ≤ 50 ms",
    }
    worker = figures["worker"]
    assert worker["samples"] >= 3 and worker["rss_mb"][0] > 10
    assert worker["threads"][0] >= 1 and worker["fds"][0] >= 3
    assert worker["db_conns"][0] >= 1, "the worker's connections to the database are counted"
    assert set(worker["checks"]) == {
        "one worker throughout",
        "RSS growth < 2 MB/h",
        "threads flat",
        "descriptors flat",
        "connections flat",
    }
    assert figures["runs_hibernated"] == 3
    lines = ["abort: no", "RSS:", "threads:", "event loop: longest stall", "targets:"]
    lines += ["SQLite's memory", "after warm-up", "lateness of a tick", "collections after"]
    lines += ["worker: RSS", "database connections:", "worker targets:", "3 hibernated"]
    for line in lines:
        assert line in proc.stdout
    assert not list(tmp_path.glob("soak-*")), "the scratch folder is removed without --keep"


def test_a_short_headless_soak_judges_the_worker_alone(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--headless",
            *("--minutes", "0.4", "--warmup-minutes", "0.1", "--sample-seconds", "2"),
            *("--runs", "3", "--hibernated", "2", "--delay", "0.05", "--retain-minutes", "0.1"),
            *("--report-only", "--json", str(out), "--dir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parents[1],
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())
    worker = figures["worker"]
    assert worker["samples"] >= 3 and worker["db_conns"][0] >= 1
    assert "one worker throughout" in worker["checks"]
    assert figures["runs_started"] >= 3
    assert "approvals" in proc.stdout and "worker targets:" in proc.stdout
    assert not list(tmp_path.glob("soak-worker-*")), "the scratch folder is removed"
