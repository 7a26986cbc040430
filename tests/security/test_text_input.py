"""Odd text an analyst types is refused plainly, before anything is stored or asked.

A NUL, half of a UTF-16 surrogate pair, or any control character but a tab or a line
break, in a search, a goal (of a run, a schedule, a batch, a watched folder), a steer
note, an answer, an approval's note, a rejection's reason, a fork's note, or a string of
edited tool-call arguments: an :class:`InvalidInputError` saying what and where, never SQL
text or a ``UnicodeEncodeError``. Text keeps its tabs and line breaks. (Untrusted text
that arrives from files and pages is kept, and shown harmless by the CLI:
``tests/cli/test_small_holes.py``.)
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

UNSTORABLE = list(ODD)
"""What free text (a goal, a note) may not hold either: all of it."""


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


def test_a_goal_keeps_its_tabs_and_line_breaks(client: Client, workspace: Path) -> None:
    goal = "Summarise\tthe notes\r\nthen the memo — café, 数据, 🙂"
    run = client.start_run(goal, model="claude-haiku-4-5", workspace=workspace)
    assert run.goal == goal


@pytest.mark.parametrize("case", ["nul", "escape", "c1"])
def test_schedules_batches_and_watches_refuse_an_odd_goal_and_make_nothing(
    client: Client, tmp_path: Path, case: str
) -> None:
    from desktop_agent.client.schedules import Scheduling

    text, says = ODD[case]
    sched = Scheduling(client)
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "a.md").write_text("note")
    for make in (
        lambda: sched.add_schedule(text, every_s=3600),
        lambda: sched.start_batch(text + " {item}", folder=folder),
        lambda: sched.add_watch(folder, text + " {path}"),
    ):
        with pytest.raises(InvalidInputError) as caught:
            make()
        assert str(caught.value) == f"the goal {says}"
    assert sched.schedules() == [] and sched.batches() == [] and sched.watches() == []
    assert client.runs() == []


@pytest.mark.parametrize("case", ["surrogate", "bell"])
def test_edited_arguments_with_an_odd_string_are_refused_with_its_place(
    client: Client, case: str
) -> None:
    from desktop_agent.client.forks import fork

    text, says = ODD[case]
    edited = {"path": "notes.md", "lines": ["fine", text]}
    with pytest.raises(InvalidInputError) as caught:
        client.approve("no-such-approval", arguments=edited)
    assert str(caught.value) == f"the edited arguments: the string at lines[1] {says}"
    with pytest.raises(InvalidInputError) as caught:
        fork(client, "no-such-run", 1, edited_arguments={text: 1})
    assert str(caught.value) == f"the edited arguments: the string at the top level (a key) {says}"
    with pytest.raises(InvalidInputError) as caught:
        fork(client, "no-such-run", 1, note=text)
    assert str(caught.value) == f"the note {says}"


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


def test_check_text_passes_text_through_and_says_where_a_control_is() -> None:
    from desktop_agent.domain.text import check_text  # here: the rest runs on older code

    text = "Line one\tcolumn\r\nLine two — café, 数据, 🙂 \u200d"
    assert check_text(text, "the goal") is text
    with pytest.raises(InvalidInputError, match=r"U\+001B, character 41"):
        check_text(text[:40] + "\x1b[1m", "the goal")


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
