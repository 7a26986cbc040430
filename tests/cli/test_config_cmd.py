"""``desktop-agent config get|set|unset``: the Settings dialog's settings from the terminal.

Values are read by the setting's type and checked as the dialog checks them; a bad key or
value changes nothing and says what is valid; secrets are refused with the command that
handles them; a change is saved where workers read it (the monthly cap at once).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_agent.cli import main
from desktop_agent.config import EDITABLE, Settings, settings_path
from desktop_agent.worker.compose import CapReader
from tests.cli.test_cli import cli


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "agent.db"
    Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
    return path


def run(db: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--db", str(db), "config", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_get_lists_every_setting_of_the_dialog_with_meaning_and_default_marked(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, _ = run(db, capsys, "get")
    assert code == 0
    lines = text.splitlines()
    for info in EDITABLE:
        (line,) = [x for x in lines if x.split()[:1] == [info.name]]
        assert info.meaning in line
    (model,) = [x for x in lines if x.split()[:1] == ["default_model"]]
    assert model.split()[1:3] == ["*", "demo"]  # the default, marked
    (cost,) = [x for x in lines if x.split()[:1] == ["default_max_cost_usd"]]
    assert cost.split()[1:3] == ["no", "limit"]  # saved as none here: not the default

    code, out, _ = run(db, capsys, "get", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == {i.name for i in EDITABLE}
    assert rows["default_max_cost_usd"]["value"] is None
    assert rows["default_max_cost_usd"]["default"] == 5.0
    assert rows["default_max_cost_usd"]["is_default"] is False
    assert rows["monthly_spend_cap_usd"]["applies"] == "at_once"
    assert rows["ask_unsafe"]["applies"] == "worker_start"


@pytest.mark.parametrize(
    ("key", "text", "stored", "shown"),
    [
        ("default_max_cost_usd", "$12.50", 12.5, "12.50"),
        ("palette", "Dark", "dark", "dark"),
        ("default_max_steps", "40", 40, "40"),
        ("default_max_time_s", "1h30m", 5400.0, "1h30m"),
        ("approval_deadline_s", "30m", 1800.0, "30m"),
        ("ask_unsafe", "no", False, "no"),
        ("notify_finished", "false", False, "no"),
        ("approval_default", "Approve", "approve", "approve"),
        ("durability", "normal", "NORMAL", "NORMAL"),
        ("monthly_spend_cap_usd", "50", 50.0, "50.00"),
        ("webhook_url", "https://hooks.example.com/T0/secret", None, "https://hooks.example.com/…"),
        ("default-model", "claude-haiku-4-5", "claude-haiku-4-5", "claude-haiku-4-5"),
    ],
)
def test_set_parses_by_type_saves_and_says_old_and_new(
    db: Path, capsys: pytest.CaptureFixture[str], key: str, text: str, stored: object, shown: str
) -> None:
    name = key.replace("-", "_")
    code, out, err = run(db, capsys, "set", key, text)
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith(f"{name}: ") and first.endswith(f" → {shown}")
    value = getattr(Settings.load(db), name)
    assert value == (stored if stored is not None or name != "webhook_url" else text)
    assert "applies " in out
    code, out, _ = run(db, capsys, "get", name, "--json")
    data = json.loads(out)
    assert data["shown"] == shown and data["is_default"] == (value == getattr(Settings(), name))
    assert "secret" not in out  # a webhook's path may hold its secret: never shown


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        ("default_max_cost_usd", "abc", "an amount of dollars"),
        ("default_max_cost_usd", "-3", "above 0"),
        ("default_max_cost_usd", "20000", "at most 10,000"),
        ("default_max_cost_usd", "nan", "an amount of dollars"),
        ("monthly_spend_cap_usd", "2000000", "at most 1,000,000"),
        ("default_max_steps", "2.5", "a whole number"),
        ("default_max_time_s", "soon", "a duration such as"),
        ("ask_overwrite", "maybe", "yes or no"),
        ("close_action", "minimise", "one of tray, quit"),
        ("palette", "blue", "one of system, light, dark"),
        ("webhook_url", "ftp://x.example", "an http:// or https:// address"),
        ("default_model", "gpt-4", "not a model new runs can use"),
    ],
)
def test_a_bad_value_says_what_is_expected_and_changes_nothing(
    db: Path, capsys: pytest.CaptureFixture[str], key: str, text: str, expected: str
) -> None:
    before = settings_path(db).read_bytes()
    code, _, err = run(db, capsys, "set", key, text)
    assert code == 2
    assert err.startswith("desktop-agent: error: ") and expected in err, err
    assert settings_path(db).read_bytes() == before


def test_a_bad_key_lists_close_matches_and_every_valid_key(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = settings_path(db).read_bytes()
    code, _, err = run(db, capsys, "set", "default_max_cost", "3")
    assert code == 2
    assert "did you mean default_max_cost_usd" in err
    assert "valid keys: " + ", ".join(i.name for i in EDITABLE) in err
    code, _, err = run(db, capsys, "get", "colour")
    assert code == 2 and "no such setting" in err and "valid keys: " in err
    assert settings_path(db).read_bytes() == before


@pytest.mark.parametrize(
    ("key", "command"),
    [("api_key", "desktop-agent key set"), ("api-token", "desktop-agent api-token")],
)
def test_secrets_are_neither_shown_nor_set_and_the_right_command_is_named(
    db: Path, capsys: pytest.CaptureFixture[str], key: str, command: str
) -> None:
    before = settings_path(db).read_bytes()
    for args in (("get", key), ("set", key, "sk-ant-xxxxxxxxxxxxxxxxxxxxxxxx")):
        code, out, err = run(db, capsys, *args)
        assert code == 2 and out == ""
        assert "secret" in err and command in err
        assert "sk-ant" not in err
    assert settings_path(db).read_bytes() == before


def test_unset_puts_the_default_back(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(db, capsys, "unset", "default_max_steps")
    assert code == 0 and out.startswith("default_max_steps: no limit → 200")
    assert Settings.load(db).default_max_steps == 200
    code, out, _ = run(db, capsys, "unset", "default_max_steps", "--json")
    data = json.loads(out)
    assert data["changed"] is False and data["is_default"] is True


def test_durability_is_refused_for_a_server_database(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (db.parent / "database.url").write_text("postgresql+psycopg://me@db.example/agent\n")
    code, _, err = run(db, capsys, "set", "durability", "NORMAL")
    assert code == 2 and "on PostgreSQL" in err
    assert Settings.load(db).durability == "FULL"


def test_a_running_worker_reads_the_new_cap_at_once(db: Path) -> None:
    """The worker's cap reader (as ``worker/compose.py`` wires it) sees the CLI's change."""
    reader = CapReader(Settings.load(db), db)
    assert reader() is None
    done = cli(db, "config", "set", "monthly_spend_cap_usd", "25")
    assert done.returncode == 0, done.stderr
    assert "monthly_spend_cap_usd: no cap → 25.00" in done.stdout
    assert "applies at once" in done.stdout
    assert reader() == 25.0
    done = cli(db, "config", "set", "monthly_spend_cap_usd", "off")
    assert done.returncode == 0, done.stderr
    assert reader() is None


def test_help_says_when_each_setting_applies(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["config", "--help"])
    text = capsys.readouterr().out
    for info in EDITABLE:
        assert info.name in text
    at_once = text.split("at once:")[1].split("to runs started")[0]
    assert "monthly_spend_cap_usd" in at_once and "ask_unsafe" not in at_once
    worker = text.split("when a worker next starts")[1].split("when the desktop app")[0]
    assert "approval_deadline_s" in worker and "webhook_url" in worker
    assert "desktop-agent key set" in text and "desktop-agent api-token" in text


def test_a_bad_settings_file_is_reported_once_and_fixed_by_a_set(tmp_path: Path) -> None:
    db = tmp_path / "data" / "agent.db"
    db.parent.mkdir()
    raw = '{"workers": "lots", "close_action": "quit", "monthly_spend_cap_usd": -1}'
    settings_path(db).write_text(raw)

    def cli_(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "desktop_agent", "--db", str(db), "config", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    got = cli_("get", "monthly_spend_cap_usd")
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("monthly_spend_cap_usd = 0.00")  # nothing is spent
    assert got.stderr.count("the settings file had 2 problem(s)") == 1  # said once
    assert 'workers = "lots"' in got.stderr and "monthly_spend_cap_usd = -1" in got.stderr
    (kept,) = db.parent.glob("settings.json.bad-*")
    assert kept.read_text() == raw and str(kept) in got.stderr

    fixed = cli_("set", "monthly_spend_cap_usd", "25")
    assert fixed.returncode == 0, fixed.stderr
    after = Settings.load(db)
    assert after.problems == [] and after.monthly_spend_cap_usd == 25.0
    assert after.close_action == "quit"  # the good value of the bad file survived
    assert list(db.parent.glob("settings.json.bad-*")) == [kept]
    assert "problem" not in cli_("get").stderr
