"""A key wrapped over lines (or split by spaces) is redacted whole, wherever redaction is.

The rule is :mod:`desktop_agent.persistence.redaction`'s: after ``sk-ant-`` and its run of
``[A-Za-z0-9_-]``, a wrap (spaces, or one line break with spaces around it) followed by a
run that is key material (a letter in it, not a plain word) is more of the key. Here: the
rule on both sides, then a run whose model text, tool result and written file hold keys
wrapped every way, exported as HTML, Markdown and a bundle, and searched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.export import bundle_bytes, export
from desktop_agent.domain import RunStatus
from desktop_agent.persistence.redaction import REDACTED, redact
from tests.conftest import MakeExecutor, drain
from tests.export.conftest import bundle_members
from tests.helpers import postgres
from tests.helpers.fakes import Reply, ScriptedModel

HEAD = "sk-ant-api03-" + "Hq7Kd2Wm" * 6
"""The first line of a wrapped key (60 characters, as a terminal 60 wide wraps it)."""

WRAPS = {
    "lf": "\n",
    "crlf": "\r\n",
    "space-then-lf": " \n",
    "lf-then-indent": "\n    ",
    "crlf-then-tab": "\r\n\t",
    "space": " ",
    "json-escaped-lf": "\\n",
}
"""How a key's two halves are joined: the ways text wraps or splits a key."""

TAILS = {style: f"Tl{i}x" + "Xv4Tn8Rb" * 6 for i, style in enumerate(WRAPS)}
"""The second half of the key for each wrap (about 48 characters, distinct per style)."""

PROSE = "Please rotate this key before Friday."


def wrapped(style: str) -> str:
    return HEAD + WRAPS[style] + TAILS[style]


def leaked(text: str) -> list[str]:
    """What of the keys is in ``text``: the head, or a tail (by its wrap style)."""
    parts = ["Hq7Kd2Wm"] + [t[:12] for t in TAILS.values()] + ["Xv4Tn8Rb"]
    return [p for p in parts if p in text]


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("style", list(WRAPS))
def test_a_wrapped_key_is_redacted_whole(style: str) -> None:
    assert redact(f"key: {wrapped(style)}") == f"key: {REDACTED}"


def test_a_key_wrapped_over_three_lines_and_inside_its_prefix_is_one_key() -> None:
    assert redact(HEAD + "\n" + "Ab3dEf6h" * 6 + "\n" + "9kLmN0pQ" * 2) == REDACTED
    assert redact("sk-an\nt-api03-" + "Ab3dEf6h" * 4) == REDACTED
    assert redact("sk-ant-api\n03-Ab3dEf6h") == REDACTED  # the first line alone is short


@pytest.mark.parametrize("style", ["lf", "crlf", "space-then-lf", "lf-then-indent"])
def test_prose_on_the_line_after_a_key_survives(style: str) -> None:
    brk = WRAPS[style]
    assert redact(HEAD + brk + PROSE) == REDACTED + brk + PROSE
    assert redact(wrapped(style) + "\n" + PROSE) == REDACTED + "\n" + PROSE
    for line in ("rotated on 2026-11-20", "README updated", "follow-up: NOTE_TO_SELF", "AA"):
        assert redact(HEAD + brk + line) == REDACTED + brk + line


def test_words_after_a_key_on_the_same_line_survive() -> None:
    assert redact(f"use {HEAD} in the config") == f"use {REDACTED} in the config"
    assert redact(f"{wrapped('lf')} and then more") == f"{REDACTED} and then more"


def test_what_is_no_key_is_left_alone() -> None:
    for text in ("sk-ant-short", "ask-ant-\nLater", "task list\nAb3dEf6h", "sk-ant-\n\nAb3dEf6h"):
        assert redact(text) == text


# --------------------------------------------------------------------------- where it applies


@pytest.fixture
def leaky_run(client: Client, make_executor: MakeExecutor, workspace: Path) -> str:
    """A finished run whose file read, model text and written file hold wrapped keys."""
    notes = "".join(f"{style}: {wrapped(style)}\n{PROSE}\n" for style in WRAPS)
    (workspace / "notes.txt").write_text(notes, newline="")
    run = client.start_run("Summarise the notes", model="claude-haiku-4-5", workspace=workspace)
    text = "Found " + wrapped("crlf") + "\r\n" + PROSE
    replies = [
        Reply("Reading.", [("read_file", {"path": "notes.txt"})]),
        Reply(text, [("write_file", {"path": "copy.md", "content": notes})]),
        Reply("Done."),
    ]
    drain(client.store, make_executor(ScriptedModel(replies)))
    for approval in client.approvals():
        client.approve(approval.id)
    drain(client.store, make_executor(ScriptedModel(replies[2:])))
    assert client.run(run.id).status == RunStatus.COMPLETED
    steps = json.dumps([s.output for s in client.steps(run.id)], default=str)
    assert "Xv4Tn8Rb" in steps  # the journal holds the keys: the exports must not
    return run.id


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_html_and_markdown_carry_no_part_of_a_wrapped_key(
    client: Client, leaky_run: str, fmt: str
) -> None:
    _run, text = export(client, leaky_run, fmt)
    assert leaked(text) == []
    assert REDACTED in text and "Please rotate this key before Friday." in text


def test_a_bundle_carries_no_part_of_a_wrapped_key(
    client: Client, leaky_run: str, tmp_path: Path
) -> None:
    _info, data = bundle_bytes(client, leaky_run)
    path = tmp_path / "run.tar.gz"
    path.write_bytes(data)
    members = bundle_members(path)
    assert "files/copy.md" in members
    for name, body in members.items():
        text = body.decode()
        assert leaked(text) == [], name
    assert PROSE in members["files/copy.md"].decode()
    record = members["run.jsonl"].decode()
    assert PROSE in record and REDACTED in record


def test_search_neither_indexes_nor_shows_a_wrapped_key(client: Client, leaky_run: str) -> None:
    for style, tail in TAILS.items():
        assert client.search(tail) == [], style
        assert client.search(tail[:12] + "*") == [], style
    hits = client.search('"rotate this key"')
    assert {h.run_id for h in hits} == {leaky_run} and hits
    for hit in hits:
        assert leaked(hit.snippet) == [], hit.snippet
    assert any(REDACTED.strip("[]") in h.snippet for h in hits)


# --------------------------------------------------------------------------- older text


def test_a_half_key_left_by_the_older_rule_goes_when_text_passes_through_again() -> None:
    old = f"key: {REDACTED}\n{TAILS['lf']}\n{PROSE}"  # what the first-line-only rule left
    assert redact(old) == f"key: {REDACTED}\n{PROSE}"
    assert redact(f"{REDACTED} was here\n{PROSE}") == f"{REDACTED} was here\n{PROSE}"


@pytest.mark.parametrize("backend", postgres.BACKENDS)
def test_the_upgrade_removes_half_keys_from_the_search_index(tmp_path: Path, backend: str) -> None:
    from alembic import command
    from sqlalchemy import insert, select

    from desktop_agent.persistence.tables import search_docs, search_runs

    folder = tmp_path / "data"
    with postgres.database_for(folder, backend):
        path = folder / "desktop-agent.db"
        client = Client(path)
        db = client.store.db
        tail = TAILS["lf"]
        row = {"run_id": "r1", "seq": 3, "source": "step", "kind": "tool_call", "tool": "x"}
        bodies = {
            "half": f"token {REDACTED}\n{tail}\n{PROSE}",
            "clean": f"nothing to see\n{PROSE}",
        }
        with db.write() as conn:
            conn.execute(
                insert(search_runs).values(run_id="r1", status="completed", created_at=1000.0)
            )
            for n, body in enumerate(bodies.values()):
                conn.execute(insert(search_docs).values(**row, at=1000.0 + n, body=body))
        with db.writer.connect() as conn:
            command.downgrade(db._alembic_config(conn), "0010")
            conn.commit()
        client.close()

        client = Client(path)  # upgraded again
        try:
            with client.store.db.read() as conn:
                docs = conn.execute(select(search_docs.c.id, search_docs.c.body)).all()
            assert sorted(b for _i, b in docs) == sorted(
                [f"token {REDACTED}\n{PROSE}", bodies["clean"]]
            )
            assert client.search(tail) == []  # not a word of the index any more
            assert leaked("\n".join(b for _i, b in docs)) == []
            assert [h.seq for h in client.search("rotate")] == [3, 3]
        finally:
            client.close()


def test_an_archived_run_from_an_older_release_is_read_without_its_half_keys(
    tmp_path: Path,
) -> None:
    import gzip

    from desktop_agent.persistence.archive import find_archived

    old = {"run": {"id": "r-old", "goal": "g"}, "steps": [{"output": f"{REDACTED}\n{TAILS['lf']}"}]}
    with gzip.open(tmp_path / "runs-2026-01.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps(old) + "\n")
    found = find_archived(tmp_path, "r-old")
    assert found is not None
    assert found.record["steps"][0]["output"] == REDACTED
    assert leaked(json.dumps(found.record)) == []


def test_log_lines_are_redacted_traceback_and_all(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    script = (
        "import logging, sys\n"
        "from desktop_agent.cli import commands\n"
        "commands.main(['--db', sys.argv[1], 'runs'])\n"
        "log = logging.getLogger('desktop_agent.worker')\n"
        "log.error('the server said: %s', sys.argv[2])\n"
        "try:\n"
        "    raise RuntimeError('header was ' + sys.argv[2])\n"
        "except RuntimeError:\n"
        "    log.exception('a call failed')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(repo), "DESKTOP_AGENT_AUTOSTART_WORKER": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "data" / "d.db"), wrapped("lf")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    assert "the server said: [redacted]" in done.stderr
    assert "RuntimeError: header was [redacted]" in done.stderr  # the traceback too
    assert leaked(done.stderr) == []
