"""``desktop-agent schedule|batch|watch|db`` as a user types them (the real parser and main)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.cli import main
from desktop_agent.client.api import Client
from desktop_agent.persistence.db import head_revision


def run_cli(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--db", str(db), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def as_json(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> Any:
    code, out, err = run_cli(capsys, db, *args, "--json")
    assert code == 0, err or out
    return json.loads(out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "61 9 * * *"], "invalid cron expression '61 9 * * *': Error validating"),
        (["--cron", "0 9 * *"], "4 field(s), expected five fields"),
        (["--cron", "0 9 * * 9"], "day of week 9 is not between 0 and 7"),
        (["--cron", "0 0 30 2 *"], "never fires"),
        (["--cron", "0 9 * * *", "--tz", "Mars/Olympus"], "unknown time zone"),
        (["--every", "soon"], "invalid duration 'soon'"),
        (["--every", "0.5s"], "at least 1 second"),
        (["--cron", "0 9 * * *", "--every", "1h"], "not allowed with argument"),
    ],
)
def test_bad_schedules_get_one_line_errors(
    capsys: pytest.CaptureFixture[str], client: Client, args: list[str], message: str
) -> None:
    code, out, err = run_cli(capsys, client.db_path, "schedule", "add", "x", *args, "--no-worker")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("desktop-agent: error: ")
    assert message in err


def test_schedule_lifecycle(capsys: pytest.CaptureFixture[str], client: Client) -> None:
    db = client.db_path
    made = as_json(
        capsys, db, "schedule", "add", "Weekday digest", "--cron", "0 9 * * 1-5",
        "--model", "demo", "--max-steps", "30", "--overlap", "queue", "--no-worker",
    )  # fmt: skip
    assert made["cron"] == "0 9 * * 1-5" and made["overlap"] == "queue" and not made["paused"]
    code, out, _ = run_cli(capsys, db, "schedule", "add", "Hourly", "--every", "1h", "--no-worker")
    assert code == 0 and "every 3600s" in out
    listed = as_json(capsys, db, "schedule", "list")
    assert [s["name"] for s in listed] == ["Weekday digest", "Hourly"]
    sid = made["id"]
    assert as_json(capsys, db, "schedule", "pause", sid[:7])["paused"] is True
    assert as_json(capsys, db, "schedule", "resume", sid)["paused"] is False
    code, out, _ = run_cli(capsys, db, "schedule", "remove", sid)
    assert code == 0 and out.strip() == f"schedule {sid} removed"
    code, _, err = run_cli(capsys, db, "schedule", "pause", sid)
    assert code == 2 and "no schedule" in err
    code, out, _ = run_cli(capsys, db, "schedule", "list")
    assert "Hourly" in out and "Weekday" not in out


def test_batch_start_status_and_retry(
    capsys: pytest.CaptureFixture[str], client: Client, tmp_path: Path
) -> None:
    db = client.db_path
    lines = tmp_path / "urls.txt"
    lines.write_text("https://a.example\nhttps://b.example\n\nhttps://c.example\n")
    code, out, _ = run_cli(
        capsys, db, "batch", "start", "Check {item}", "--lines", str(lines), "--no-worker"
    )
    assert code == 0 and "3 items" in out
    batch_id = out.split()[1].rstrip(":")
    status = as_json(capsys, db, "batch", "status", batch_id)
    assert status["progress"]["total"] == 3 and status["progress"]["pending"] == 3
    assert [i["item"] for i in status["items"]] == [f"https://{c}.example" for c in "abc"]
    code, out, _ = run_cli(capsys, db, "batch", "status", batch_id)
    assert out.splitlines()[0].startswith(f"batch {batch_id}: 0 / 3 done")
    assert "pending" in out.splitlines()[1] and "https://a.example" in out.splitlines()[1]
    code, _, err = run_cli(capsys, db, "batch", "retry", batch_id)
    assert code == 2 and "no failed or cancelled item" in err
    code, _, err = run_cli(capsys, db, "batch", "retry", batch_id, "--item", "9")
    assert code == 2 and "has no item 9" in err
    code, _, err = run_cli(capsys, db, "batch", "start", "x", "--folder", str(tmp_path / "no"))
    assert code == 2 and "is not a folder" in err


def test_watch_and_db_commands(
    capsys: pytest.CaptureFixture[str], client: Client, tmp_path: Path
) -> None:
    db = client.db_path
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    made = as_json(capsys, db, "watch", "add", str(inbox), "Read {name}", "--no-worker")
    assert made["folder"] == str(inbox) and made["every_s"] == 10.0
    assert [w["id"] for w in as_json(capsys, db, "watch", "list")] == [made["id"]]
    info = as_json(capsys, db, "db", "info")
    assert info["revision"] == head_revision() and info["rows"]["watches"] == 1
    code, out, _ = run_cli(capsys, db, "db", "vacuum")
    assert code == 0 and out.startswith("vacuumed: ")
    code, out, _ = run_cli(capsys, db, "db", "archive", "--older-than", "30d")
    assert code == 0 and out.strip() == "no run finished more than 30d00h ago"
    code, _, err = run_cli(capsys, db, "db", "archive", "--older-than", "soon")
    assert code == 2 and "invalid duration" in err
    assert as_json(capsys, db, "watch", "remove", made["id"])["action"] == "removed"
