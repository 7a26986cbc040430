"""Malformed command lines, JSON and settings files: exit code 2 and one line, never a traceback.

A few samples run the real ``desktop-agent`` process (so the exit code and the streams are
the ones a user sees, including argv bytes that are not UTF-8); the fuzzing calls
``cli.main(argv)`` in-process, where thousands of argument lists are cheap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop_agent.cli import commands as cli
from desktop_agent.config import Settings
from tests.faults.strategies import JSONISH, TEXT

REPO = Path(__file__).resolve().parents[2]


def run_cli(db: Path, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DESKTOP_AGENT_DEMO_DELAY": "0"}
    env.pop("ANTHROPIC_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        timeout=60,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def assert_one_line_error(code: int, err: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("desktop-agent: error: "), err
    assert "Traceback" not in err


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "agent.db"
    Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
    return path


SAMPLES: list[tuple[str | bytes, ...]] = [
    ("frobnicate",),
    ("show",),
    ("show", "no-such-run"),
    ("run", "goal", "--max-cost", "ten dollars"),
    ("run", "goal", "--max-steps", "1.5"),
    ("run", "goal", "--max-time", "5 parsecs"),
    ("run", "   "),
    ("run", "goal", "--model", "gpt-99"),
    ("run", "goal", "--tools", "read_file,teleport"),
    ("approve", "r.1.1", "--edit", '{"path": "x", "content": '),
    ("approve", "r.1.1", "--edit", "[1, 2"),
    ("reject", "r.1.1"),
    ("budget", "abc", "--add-cost", "NaNx"),
    ("resolve", "abc", "explode"),
    ("runs", "--status", "sleeping"),
    ("runs", "--limit", "many"),
    ("steer", "abc", "note \udcff".encode("utf-8", "surrogateescape")),
    ("run", b"goal \xff\xfe not utf-8", "--detach"),
    ("worker", "--max-runs", "0"),
    ("worker", "--max-runs", "-3"),
]


@pytest.mark.parametrize("args", SAMPLES, ids=lambda a: " ".join(map(repr, a))[:60])
def test_malformed_command_lines_get_one_line_and_exit_2(db: Path, args: tuple[str, ...]) -> None:
    result = run_cli(db, *args)
    assert_one_line_error(result.returncode, result.stderr.decode("utf-8", "replace"))


def test_json_mode_reports_the_error_as_one_json_line(db: Path) -> None:
    result = run_cli(db, "approve", "r.1.1", "--edit", "{oops", "--json")
    assert result.returncode == 2
    (line,) = result.stdout.decode().strip().splitlines()
    assert json.loads(line)["code"] == "invalid_input"
    assert "Traceback" not in result.stderr.decode()


def test_a_folder_or_garbage_given_as_the_database_is_a_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    assert_one_line_error(*_code_err(run_cli(folder, "runs")))
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(4096))
    result = run_cli(junk, "runs")
    assert_one_line_error(*_code_err(result))
    assert "backup" in result.stderr.decode()  # the user is told what to do about it


def _code_err(result: subprocess.CompletedProcess[bytes]) -> tuple[int, str]:
    return result.returncode, result.stderr.decode("utf-8", "replace")


# --------------------------------------------------------------------------- fuzzing

# Commands that start processes, windows or read the terminal are left out: ``run`` (it
# spawns a worker), ``worker``, ``gui`` (also what no command means) and ``key set``.
# Their parsing is the same parser.
SAFE_COMMANDS = [
    "runs",
    "show",
    "pause",
    "resume",
    "cancel",
    "stop",
    "steer",
    "answer",
    "approvals",
    "approve",
    "reject",
    "budget",
    "resolve",
    "frobnicate",
]
FLAGS = [
    "--json",
    "--status",
    "--limit",
    "--search",
    "--full",
    "--edit",
    "--reason",
    "--add-cost",
    "--add-steps",
    "--add-time",
    "--add-tokens",
    "--bogus",
    "--",
]


def _safe_token(token: str) -> bool:
    # No --db (it would write wherever it points), no --help (it exits 0 by design).
    low = token.lower()
    return not low.startswith(("--d", "--h", "-h")) and token != "-"


TOKEN = st.one_of(
    st.sampled_from(FLAGS),
    TEXT,
    JSONISH.map(lambda v: json.dumps(v)[:200]),
    st.text(max_size=12).map(lambda s: "--" + s),
    st.sampled_from(["-1", "0", "1e309", "nan", "inf", "12abc", "30m", "r.1.1", "probe", "key"]),
).filter(_safe_token)
ARGV = st.tuples(st.sampled_from(SAFE_COMMANDS), st.lists(TOKEN, max_size=6)).map(
    lambda t: [t[0], *t[1]]
)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=ARGV)
def test_fuzzed_command_lines_never_raise(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.setenv("DESKTOP_AGENT_DB", str(db))
    capsys.readouterr()
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3), (argv, code)
    assert "Traceback" not in err
    if code == 2:
        options = argv[: argv.index("--")] if "--" in argv else argv  # after --, operands
        if "--json" in options:
            assert json.loads(out.strip().splitlines()[-1])["error"]
        else:
            assert_one_line_error(code, err)


GARBAGE_SETTINGS = st.one_of(
    st.binary(max_size=64),
    JSONISH.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(
        st.sampled_from(
            ["durability", "workers", "default_model", "default_max_cost_usd", "extra", "x"]
        ),
        JSONISH,
        min_size=1,
    ).map(lambda d: json.dumps(d).encode()),
)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(content=GARBAGE_SETTINGS)
def test_garbage_settings_file_is_a_clear_error_or_ignored(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    db = tmp_path_factory.mktemp("settings") / "agent.db"
    (db.parent / "settings.json").write_bytes(content)
    capsys.readouterr()
    code = cli.main(["--db", str(db), "runs"])
    _out, err = capsys.readouterr()
    if code != 0:
        assert_one_line_error(code, err)
        assert "settings" in err
    # Whatever happened, the settings file is still there, untouched, for the user to fix.
    assert (db.parent / "settings.json").read_bytes() == content
