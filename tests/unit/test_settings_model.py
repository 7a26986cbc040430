"""Settings: one typed model, validated once when the file is read; a bad file is kept aside.

A bad value does not stop the app, the CLI or a worker: it is replaced (by its default,
a spending cap by 0), the file as it was is copied aside once, and the problems are
reported. Assignments and updates are validated too, and nothing in the package reads
settings by string key any more.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from desktop_agent import config
from desktop_agent.config import Settings
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.worker.compose import CapReader

PACKAGE = Path(__file__).resolve().parents[2] / "desktop_agent"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "desktop-agent.db"


def _write(db: Path, content: str | bytes) -> Path:
    path = config.settings_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def _kept(db: Path) -> list[Path]:
    return sorted(db.parent.glob("settings.json.bad-*"))


def test_no_file_is_the_defaults_and_no_problem(db: Path) -> None:
    settings = Settings.load(db)
    assert settings == Settings() and settings.problems == [] and settings.kept_at is None
    assert not _kept(db)


def test_a_file_that_is_not_json_is_kept_aside_once_and_runs_spend_nothing(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    raw = b'{"default_model": "claude-haiku-4-5", '  # cut short by a crashed editor
    path = _write(db, raw)
    with caplog.at_level(logging.WARNING, logger="desktop_agent.config"):
        settings = Settings.load(db)
    assert settings.default_model == "demo"  # a default
    assert settings.monthly_spend_cap_usd == 0.0  # not "no cap": nothing is spent
    assert settings.replaced("monthly_spend_cap_usd") and settings.replaced("workers")
    assert len(settings.problems) == 1 and "not valid JSON" in settings.problems[0]
    (kept,) = _kept(db)
    assert kept.read_bytes() == raw and settings.kept_at == kept
    assert path.read_bytes() == raw  # the file itself is untouched until saved
    assert "kept at" in caplog.text and str(kept) in caplog.text
    # Read again (another command, the worker): the same copy, and the report said once.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="desktop_agent.config"):
        again = Settings.load(db)
    assert again.kept_at == kept and _kept(db) == [kept]
    assert caplog.text == ""


@pytest.mark.parametrize("content", ["[1, 2]", '"tray"', "null", "3"])
def test_json_that_is_no_object_is_a_problem_too(db: Path, content: str) -> None:
    _write(db, content)
    settings = Settings.load(db)
    assert "holds a JSON" in settings.problems[0]
    assert _kept(db)[0].read_text() == content


def test_a_bad_value_is_replaced_alone_and_named_with_what_it_was(db: Path) -> None:
    _write(
        db,
        json.dumps(
            {
                "default_model": "claude-haiku-4-5",
                "workers": "many",
                "durability": "SOMETIMES",
                "smtp_port": 70_000,
                "mcp_servers": [{"name": "crm", "command": "crm-mcp"}],
            }
        ),
    )
    settings = Settings.load(db)
    assert settings.default_model == "claude-haiku-4-5"  # the good values are kept
    assert settings.mcp_servers == [{"name": "crm", "command": "crm-mcp"}]
    assert (settings.workers, settings.durability, settings.smtp_port) == (8, "FULL", None)
    report = "\n".join(settings.problems)
    assert 'workers = "many"' in report and "using the default, 8" in report
    assert 'durability = "SOMETIMES"' in report and "'FULL' or 'NORMAL'" in report
    assert "smtp_port = 70000" in report
    assert not settings.replaced("default_model") and settings.replaced("workers")
    assert "desktop-agent config set" in settings.problem_report()


def test_an_unreadable_cap_stops_spending_instead_of_lifting_the_cap(db: Path) -> None:
    _write(db, json.dumps({"monthly_spend_cap_usd": "fifty dollars"}))
    settings = Settings.load(db)
    assert settings.monthly_spend_cap_usd == 0.0
    assert "nothing is spent" in settings.problems[0]


def test_a_running_worker_keeps_its_last_good_cap_when_the_file_goes_bad(db: Path) -> None:
    _write(db, json.dumps({"monthly_spend_cap_usd": 40}))
    reader = CapReader(Settings.load(db), db)
    assert reader() == 40
    _write(db, json.dumps({"monthly_spend_cap_usd": 55}))
    assert reader() == 55  # raised in Settings: seen without a restart
    _write(db, json.dumps({"monthly_spend_cap_usd": -3, "workers": 2}))
    assert reader() == 55  # a cap it cannot read keeps the last good one
    _write(db, "not json")
    assert reader() == 55


def test_saving_writes_a_valid_file_and_the_bad_one_stays_aside(db: Path) -> None:
    raw = json.dumps({"workers": 0, "palette": "dark"})
    _write(db, raw)
    settings = Settings.load(db)
    settings.save(db)
    assert settings.problems == [] and settings.kept_at is None
    reread = Settings.load(db)
    assert reread.problems == [] and reread.workers == 8 and reread.palette == "dark"
    assert [p.read_text() for p in _kept(db)] == [raw]


def test_unknown_names_are_kept_and_a_typo_is_pointed_out(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write(db, json.dumps({"defualt_model": "claude-haiku-4-5", "future_knob": {"a": 1}}))
    with caplog.at_level(logging.WARNING, logger="desktop_agent.config"):
        settings = Settings.load(db)
    assert settings.problems == [] and not _kept(db)  # not a bad file: nothing to keep aside
    assert settings.unknown_names() == ["defualt_model", "future_knob"]
    assert "did you mean default_model?" in caplog.text
    settings.save(db)  # a newer version's setting survives an older version's save
    saved = json.loads(config.settings_path(db).read_text())
    assert saved["future_knob"] == {"a": 1} and saved["defualt_model"] == "claude-haiku-4-5"


def test_a_secret_written_into_the_file_is_not_used_and_leaves_it_on_save(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write(db, json.dumps({"smtp_host": "mail.example.test", "smtp_password": "hunter2"}))
    with caplog.at_level(logging.WARNING, logger="desktop_agent.config"):
        settings = Settings.load(db)
    assert "looks like a secret" in caplog.text and "hunter2" not in caplog.text
    assert "smtp_password" not in settings.model_dump() and not _kept(db)
    settings.save(db)
    assert "hunter2" not in config.settings_path(db).read_text()


def test_older_files_with_an_extra_section_are_lifted_into_the_model(db: Path) -> None:
    _write(db, json.dumps({"extra": {"model_attempts": 3, "http_timeout_s": 4.5, "odd": 1}}))
    settings = Settings.load(db)
    assert (settings.model_attempts, settings.http_timeout_s) == (3, 4.5)
    assert settings.unknown_names() == ["extra"]  # what was not a setting stays kept
    assert settings.model_dump()["extra"] == {"odd": 1}


def test_assignments_and_updates_are_validated() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.workers = 0
    with pytest.raises(ValidationError):
        settings.approval_default = "maybe"  # type: ignore[assignment]
    with pytest.raises(ValidationError):
        settings.http_timeout_s = float("nan")
    with pytest.raises(InvalidInputError, match=r"webhook_url: .*http:// or https://"):
        settings.updated({"webhook_url": "hooks.example.test/x"})
    changed = settings.updated({"workers": 3, "webhook_url": "https://hooks.example.test/x"})
    assert (changed.workers, settings.workers) == (3, 8)  # a copy; the original is unchanged
    assert isinstance(changed, Settings)


def test_every_default_is_valid_and_round_trips_through_the_file(db: Path) -> None:
    Settings().save(db)
    assert Settings.load(db) == Settings()
    assert Settings.load(db).problems == []


_UNTYPED_READ = re.compile(r"settings\s*(?:\.get\(|\[\s*[\"'])")


def test_nothing_in_the_package_reads_settings_by_string_key() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _UNTYPED_READ.search(line)
    ]
    assert offenders == []


def test_the_untyped_read_check_finds_one() -> None:
    assert _UNTYPED_READ.search('    value = rs.cfg.settings.get("model_attempts", 5)')
    assert _UNTYPED_READ.search("    host = ctx.settings['smtp_host']")
    assert not _UNTYPED_READ.search("    host = ctx.settings.smtp_host")


def test_what_the_dialog_and_config_edit_matches_the_model() -> None:
    """The editing aids (kinds, choices) describe fields of the one model, with its values."""
    from typing import get_args

    for info in config.EDITABLE:
        field = Settings.model_fields[info.name]  # a KeyError names a setting that is gone
        if info.kind == "choice":
            allowed = {a for a in get_args(field.annotation) if isinstance(a, str)}
            assert set(info.choices) == allowed, info.name
        # Every value config set accepts, the model accepts: parse, then update.
        sample = {"usd": "12.5", "count": "7", "duration": "2h", "bool": "no", "url": "none"}
        text = info.choices[-1] if info.kind == "choice" else sample.get(info.kind, "demo")
        Settings().updated({info.name: config.parse_setting(info, text)})
