"""Text an analyst types that no store can hold is refused plainly, before it is used.

A NUL or half of a UTF-16 surrogate pair in a search, a goal, a steer note, an answer, an
approval's note or a rejection's reason, and any control character but a tab or a line
break in a search: an :class:`InvalidInputError` saying what and where, never SQL text or
a ``UnicodeEncodeError``. Free text keeps its tabs, line breaks and other controls (shown
harmless by the CLI: ``tests/cli/test_small_holes.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain.errors import InvalidInputError

REPO = Path(__file__).resolve().parents[2]

ODD = {
    "nul": ("a\x00b", "contains a NUL character (U+0000, character 2): remove it"),
    "surrogate": (
        "caf\udce9",
        "contains a lone surrogate (U+DCE9, character 4), which is not a character: remove it",
    ),
    "bell": ("ring\x07", "contains a control character (U+0007, character 5): remove it"),
    "escape": ("\x1b[2Jhi", "contains a control character (U+001B, character 1): remove it"),
    "del": ("x\x7f", "contains a control character (U+007F, character 2): remove it"),
    "c1": ("x\x85y", "contains a control character (U+0085, character 2): remove it"),
}
"""Odd text, and what the message says of it after what it is ("the search", ...)."""

UNSTORABLE = ["nul", "surrogate"]
"""What free text (a goal, a note) may not hold either."""


def _plain(message: str) -> None:
    assert "\n" not in message
    for word in ("SELECT", "sqlite", "MATCH", "codec", "Traceback"):
        assert word not in message


@pytest.mark.parametrize("case", list(ODD))
def test_a_search_with_an_odd_character_is_refused_plainly(client: Client, case: str) -> None:
    text, says = ODD[case]
    with pytest.raises(InvalidInputError) as caught:
        client.search(text)
    assert str(caught.value) == f"the search {says}"
    _plain(str(caught.value))
    with pytest.raises(InvalidInputError) as caught:
        client.search(f'"quarterly report" {text}')
    _plain(str(caught.value))


@pytest.mark.parametrize("case", UNSTORABLE)
def test_a_goal_with_an_odd_character_is_refused_and_no_run_is_made(
    client: Client, workspace: Path, case: str
) -> None:
    text, says = ODD[case]
    with pytest.raises(InvalidInputError) as caught:
        client.start_run(text, model="claude-haiku-4-5", workspace=workspace)
    assert str(caught.value) == f"the goal {says}"
    assert client.runs() == []


def test_a_goal_keeps_its_tabs_line_breaks_and_other_controls(
    client: Client, workspace: Path
) -> None:
    goal = "Summarise\tthe notes\r\nthen the memo \x1b[2J\x07"
    run = client.start_run(goal, model="claude-haiku-4-5", workspace=workspace)
    assert run.goal == goal


@pytest.mark.parametrize("case", UNSTORABLE)
def test_a_steer_note_with_an_odd_character_is_refused(
    client: Client, workspace: Path, case: str
) -> None:
    run = client.start_run("Summarise the notes", model="claude-haiku-4-5", workspace=workspace)
    text, says = ODD[case]
    with pytest.raises(InvalidInputError) as caught:
        client.steer(run.id, text)
    assert str(caught.value) == f"the note {says}"
    assert not client.has_pending_commands(run.id)
    client.steer(run.id, "look at\tthe memo\nfirst")  # tabs and line breaks are fine
    assert client.has_pending_commands(run.id)


@pytest.mark.parametrize(
    ("what", "call"),
    [
        ("the answer", lambda c, t: c.answer("no-such-run", t)),
        ("the note", lambda c, t: c.approve("no-such-approval", note=t)),
        ("the note", lambda c, t: c.approve_all(["no-such-approval"], note=t)),
        ("the reason", lambda c, t: c.reject("no-such-approval", t)),
    ],
)
def test_answers_and_decisions_are_checked_before_anything_is_looked_up(
    client: Client, what: str, call: Callable[[Client, str], object]
) -> None:
    for case in UNSTORABLE:
        text, says = ODD[case]
        with pytest.raises(InvalidInputError) as caught:
            call(client, text)
        assert str(caught.value) == f"{what} {says}"


def test_check_text_passes_free_text_through() -> None:
    from desktop_agent.domain.text import check_text  # here: the rest runs on older code

    text = "Line one\tcolumn\r\nLine two — café, 数据, 🙂 \x1b[1m"
    assert check_text(text, "the goal") is text
    with pytest.raises(InvalidInputError, match=r"U\+001B, character 41"):
        check_text(text, "the search", controls=False)


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LC_ALL": "C.UTF-8"}
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def test_the_cli_refuses_an_odd_search_in_one_line_with_exit_2(client: Client) -> None:
    result = _cli(client.db_path, "search", "report\x07")
    assert result.returncode == 2, result.stderr
    says = b"the search contains a control character (U+0007, character 7): remove it"
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert b"Traceback" not in result.stderr and b"OperationalError" not in result.stderr


def test_a_system_prompt_with_a_nul_is_refused(client: Client, workspace: Path) -> None:
    with pytest.raises(InvalidInputError) as caught:
        client.start_run(
            "Summarise", model="claude-haiku-4-5", workspace=workspace, system_prompt="Be\x00"
        )
    says = "contains a NUL character (U+0000, character 3): remove it"
    assert str(caught.value) == f"the system prompt {says}"
    assert client.runs() == []
