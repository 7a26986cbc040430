"""Smaller holes in the command line, each driven through the real CLI.

Budgets that are not numbers, huge limits, internal errors that showed SQL, terminal
control sequences in untrusted text, the disk warnings, and the worker log's permissions.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path
from typing import Any

import psutil
import pytest
import sqlalchemy as sa

from desktop_agent.cli import main
from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.persistence.store import SqlStore
from tests.cli.test_cli import cli


def run_main(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("desktop-agent: error: ")
    for leak in ("SQL", "SELECT", "Traceback", "Error:", "Error (", "internal error ("):
        assert leak not in line, line
    return line


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "agent.db"
    Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
    return path


@pytest.mark.parametrize("amount", ["nan", "inf", "-inf", "-1", "0", "NaN"])
def test_max_cost_that_is_not_a_finite_positive_amount_is_refused(
    capsys: pytest.CaptureFixture[str], db: Path, amount: str
) -> None:
    for argv in (
        ("run", "Summarise", "--model", "demo", "--detach"),
        ("schedule", "add", "Summarise", "--every", "1d", "--model", "demo"),
    ):
        code, out, err = run_main(capsys, db, *argv, f"--max-cost={amount}")
        line = one_line_error(code, err)
        assert "--max-cost" in line and "finite amount above zero" in line
        assert out == ""
    client = Client(db)
    try:
        assert client.runs() == []
        with pytest.raises(InvalidInputError, match="finite number above zero"):
            client.prepare_run(model="demo", max_cost_usd=float(amount))  # the app's path
    finally:
        client.close()


def test_runs_with_a_huge_limit_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    for limit in ("99999999999999999999", "100001", "-5", "0"):
        code, _out, err = run_main(capsys, db, "runs", "--limit", limit)
        assert "--limit" in one_line_error(code, err)
    code, _out, err = run_main(capsys, db, "runs", "--limit", "100000")
    assert code == 0, err


def test_an_internal_error_shows_neither_sql_nor_an_exception_name(
    capsys: pytest.CaptureFixture[str], db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: SqlStore, *_a: Any, **_k: Any) -> Any:
        # A real statement the database refuses (what a huge LIMIT used to do).
        huge = sa.text("SELECT id FROM runs LIMIT 99999999999999999999")
        return self._read(lambda c: c.execute(huge).all())

    monkeypatch.setattr(SqlStore, "list_runs", broken)
    code, _out, err = run_main(capsys, db, "runs")
    line = one_line_error(code, err)
    assert "internal error: datatype mismatch" in line


ESCAPES = ("\x1b]0;pwned\x07", "\x1b[2J", "\x9b")


def _assert_clean(text: str) -> None:
    for bad in ("\x1b", "\x07", "\x9b", "\x9d", "\r"):
        assert bad not in text, repr(text)


def test_untrusted_text_cannot_drive_the_terminal(db: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    evil = "notes\x1b]0;pwned\x07\x1b[2J\x9b.md"
    (ws / evil).write_text("# Q3\x1b]0;pwned\x07\nRevenue\x1b[2J rose\x9b 12%.\n")
    (ws / "plain.md").write_text("# Plain\nNothing odd here.\n")
    typed = "Summarise the notes\x1b]0;pwned\x07\x1b[2J"  # a goal is typed: refused
    refused = cli(db, "run", typed, "--model", "demo", "--workspace", str(ws), "--yes")
    assert refused.returncode == 2, refused.stderr
    assert "the goal contains a control character (U+001B, character 20)" in refused.stderr
    _assert_clean(refused.stdout + refused.stderr)
    ran = cli(db, "run", "Summarise the notes", "--model", "demo", "--workspace", str(ws), "--yes")
    assert ran.returncode == 0, ran.stderr
    _assert_clean(ran.stdout + ran.stderr)
    assert "notes" in ran.stdout
    run_id = ran.stderr.split()[1]
    for args in (("show", run_id, "--full"), ("runs",), ("show", run_id, "--json")):
        shown = cli(db, *args)
        assert shown.returncode == 0, shown.stderr
        _assert_clean(shown.stdout + shown.stderr)
    assert "Summarise the notes" in cli(db, "runs").stdout
    full = cli(db, "show", run_id, "--full").stdout
    assert "pwned" in full  # the text itself is shown, only the controls are gone


def test_low_disk_says_low_and_only_a_really_full_disk_says_full(
    capsys: pytest.CaptureFixture[str], db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.disk_usage
    for free, said in ((700 * 1024, "is low on space (700 KB free)"), (8 * 1024, "is full")):
        monkeypatch.setattr(shutil, "disk_usage", lambda p, f=free: real(p)._replace(free=f))
        code, _out, err = run_main(capsys, db, "runs")
        assert code == 0
        (line,) = err.strip().splitlines()
        assert line.startswith("desktop-agent: warning: the disk holding the database ")
        assert said in line


def test_the_worker_log_is_private(db: Path) -> None:
    logs = db.parent / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "worker.log"
    log.write_text("an older log, readable by others\n")
    log.chmod(0o644)
    client = Client(db)
    try:
        pid = client.spawn_worker(until_idle=True)
        psutil.Process(pid).wait(timeout=60)
    finally:
        client.close()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert log.read_text().startswith("an older log")  # appended to, not replaced
    log.unlink()
    client = Client(db)
    try:
        psutil.Process(client.spawn_worker(until_idle=True)).wait(timeout=60)
    finally:
        client.close()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
