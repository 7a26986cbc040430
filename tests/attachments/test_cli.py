"""``desktop-agent run --attach`` and ``show``."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from desktop_agent.client.api import Client
from tests.search.test_cli_search import cli


def _stop_worker(data: dict[str, object]) -> None:
    if data.get("worker_started"):  # run --detach may start a worker: end it
        os.kill(int(str(data["worker_started"])), signal.SIGTERM)


def test_run_attach_two_files_then_show_lists_them(
    client: Client, sources: tuple[Path, Path], tmp_path: Path
) -> None:
    report, data = sources
    ws = tmp_path / "ws"
    result = cli(
        client.db_path, "run", "Read the attachments", "--model", "demo", "--workspace",
        str(ws), "--detach", "--json", "--attach", str(report), str(data),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    started = json.loads(result.stdout)
    _stop_worker(started)
    assert [a["path"] for a in started["attachments"]] == [
        "attachments/report.pdf",
        "attachments/data.csv",
    ]
    assert (ws / "attachments" / "data.csv").read_bytes() == data.read_bytes()
    shown = cli(client.db_path, "show", started["id"])
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if "attachments/" in line]
    assert lines[0].startswith("  attached:  attachments/report.pdf · 1.0 KB · sha256 ")
    assert lines[1].startswith("             attachments/data.csv · 32 bytes · sha256 ")
    as_json = json.loads(cli(client.db_path, "show", started["id"], "--json").stdout)
    assert as_json["attachments"] == started["attachments"]
    assert as_json["attachments"][1]["size"] == 32


def test_a_missing_file_is_a_clear_error_and_no_run_starts(
    client: Client, sources: tuple[Path, Path], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.csv"
    result = cli(
        client.db_path, "run", "Read", "--model", "demo", "--detach",
        "--attach", str(sources[0]), "--attach", str(missing),
    )  # fmt: skip
    assert result.returncode == 2
    assert f"cannot attach {missing}: no such file" in result.stderr
    assert "Traceback" not in result.stderr
    assert client.runs() == []
