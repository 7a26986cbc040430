"""Attachments at the client: copied and checksummed, clashes, names, limits, all or nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from desktop_agent.client import attachments as attaching
from desktop_agent.client.api import Client
from desktop_agent.client.attachments import AttachmentSource, Limits, safe_name
from desktop_agent.client.forks import fork
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.models import Attachment
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_files_are_copied_checksummed_and_recorded_with_the_run(
    client: Client, sources: tuple[Path, Path], tmp_path: Path
) -> None:
    report, data = sources
    ws = tmp_path / "ws"
    run = client.start_run("Read them", model="demo", workspace=ws, attachments=[report, data])
    assert run.spec.attachments == (
        Attachment("report.pdf", "attachments/report.pdf", report.stat().st_size, sha(report)),
        Attachment("data.csv", "attachments/data.csv", data.stat().st_size, sha(data)),
    )
    for source, record in zip(sources, run.spec.attachments, strict=True):
        copy = ws / record.path
        assert copy.read_bytes() == source.read_bytes()
        assert source.exists()  # copied, never moved
    assert client.run(run.id).spec.attachments == run.spec.attachments  # kept in the spec
    assert sorted(p.name for p in (ws / "attachments").iterdir()) == ["data.csv", "report.pdf"]


def test_a_taken_name_gets_a_number_and_nothing_is_overwritten(
    client: Client, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    (ws / "attachments").mkdir(parents=True)
    (ws / "attachments" / "notes.txt").write_text("the earlier run's notes")
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "notes.txt").write_text("first")
    (two / "notes.txt").write_text("second")
    run = client.start_run(
        "Compare", model="demo", workspace=ws, attachments=[one / "notes.txt", two / "notes.txt"]
    )
    assert [a.path for a in run.spec.attachments] == [
        "attachments/notes-2.txt",
        "attachments/notes-3.txt",
    ]
    assert [a.name for a in run.spec.attachments] == ["notes.txt", "notes.txt"]
    assert (ws / "attachments" / "notes.txt").read_text() == "the earlier run's notes"
    assert (ws / "attachments" / "notes-2.txt").read_text() == "first"
    assert (ws / "attachments" / "notes-3.txt").read_text() == "second"


@pytest.mark.parametrize("name", ["../escape.txt", "/etc/passwd", "..", "sub/x.txt", "a\\b.txt",
                                  "C:evil.txt"])  # fmt: skip
def test_a_name_that_is_a_path_is_refused_and_nothing_is_started(
    client: Client, sources: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    ws = tmp_path / "ws"
    with pytest.raises(InvalidInputError, match="plain file name"):
        client.start_run(
            "Escape", model="demo", workspace=ws, attachments=[AttachmentSource(sources[1], name)]
        )
    assert client.runs() == []
    assert not (tmp_path / "escape.txt").exists()
    assert not (ws / "attachments").exists()


def test_names_are_made_portable() -> None:
    assert safe_name('a?b"c<d>|e*.txt') == "a_b_c_d__e_.txt"
    assert safe_name("CON.txt") == "_CON.txt"
    assert safe_name("report. ") == "report"
    assert safe_name("tab\there.csv") == "tab_here.csv"
    long = safe_name("x" * 300 + ".csv")
    assert len(long) == attaching.MAX_NAME_CHARS and long.endswith(".csv")


def test_limits_name_the_file_and_the_limit_and_nothing_is_started(
    client: Client, sources: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    report, data = sources  # report: 1040 bytes, data: 32 bytes
    monkeypatch.setattr(attaching, "LIMITS", Limits(per_file=1000, total=1100, files=2))
    with pytest.raises(InvalidInputError) as too_big:
        client.start_run("Read", model="demo", attachments=[data, report])
    assert str(report) in str(too_big.value) and "limit of 1000 bytes per file" in str(
        too_big.value
    )
    monkeypatch.setattr(attaching, "LIMITS", Limits(per_file=2000, total=1050, files=2))
    with pytest.raises(InvalidInputError) as over_total:
        client.start_run("Read", model="demo", attachments=[data, report])
    assert str(report) in str(over_total.value) and "1.0 KB in all" in str(over_total.value)
    monkeypatch.setattr(attaching, "LIMITS", Limits(files=1))
    with pytest.raises(InvalidInputError, match="at most 1 attachments"):
        client.start_run("Read", model="demo", attachments=[data, report])
    assert client.runs() == []
    # A run without a workspace of its own gets none: no folder was left behind either.
    made = client.db_path.parent / "workspaces"
    assert not made.exists() or list(made.iterdir()) == []


def test_a_missing_file_stops_everything_before_any_copy(
    client: Client, sources: tuple[Path, Path], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    with pytest.raises(InvalidInputError, match="no such file"):
        client.start_run("Read", model="demo", workspace=ws, attachments=[sources[0], "gone.csv"])
    assert client.runs() == [] and not (ws / "attachments").exists()
    with pytest.raises(InvalidInputError, match="it is a folder"):
        client.start_run("Read", model="demo", workspace=ws, attachments=[tmp_path])


def test_a_copy_failing_half_way_leaves_nothing_behind(
    client: Client, sources: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    real_copy = attaching._copy
    calls: list[Path] = []

    def failing(item: attaching.Checked, target: Path, limits: Limits) -> tuple[int, str]:
        calls.append(item.path)
        if len(calls) == 2:
            target.write_bytes(b"half")  # what a failing disk leaves
            raise InvalidInputError(f"cannot attach {item.path}: No space left on device")
        return real_copy(item, target, limits)

    monkeypatch.setattr(attaching, "_copy", failing)
    with pytest.raises(InvalidInputError, match="No space left"):
        client.start_run("Read", model="demo", workspace=ws, attachments=list(sources))
    assert calls == list(sources)
    assert client.runs() == []
    assert ws.is_dir() and list(ws.iterdir()) == []  # no copy, no staging, no folder


def test_when_the_run_cannot_be_recorded_the_copies_are_taken_back(
    client: Client, sources: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    (ws / "attachments").mkdir(parents=True)
    (ws / "attachments" / "keep.txt").write_text("another run's")

    def broken(run: object) -> None:
        raise OSError("database is locked")

    monkeypatch.setattr(client.store, "create_run", broken)
    with pytest.raises(OSError, match="locked"):
        client.start_run("Read", model="demo", workspace=ws, attachments=list(sources))
    assert [p.name for p in (ws / "attachments").iterdir()] == ["keep.txt"]


def test_run_again_keeps_the_attachments_where_they_are(
    client: Client, sources: tuple[Path, Path], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    first = client.start_run("Read", model="demo", workspace=ws, attachments=list(sources))
    again = client.run_again(first.id)
    assert again.spec.attachments == first.spec.attachments
    assert sorted(p.name for p in (ws / "attachments").iterdir()) == ["data.csv", "report.pdf"]
    # The agent changed one in the shared workspace: the new run records what it is given.
    (ws / "attachments" / "data.csv").write_text("region,revenue\nnorth,13\n")
    third = client.run_again(first.id)
    changed = third.spec.attachments[1]
    assert (
        changed.sha256 == sha(ws / "attachments" / "data.csv") != first.spec.attachments[1].sha256
    )
    (ws / "attachments" / "report.pdf").unlink()
    with pytest.raises(InvalidInputError, match=r"report\.pdf: no such file"):
        client.run_again(first.id)


def test_a_fork_keeps_the_attachments_and_the_workspace(
    client: Client, sources: tuple[Path, Path], tmp_path: Path, make_executor: MakeExecutor
) -> None:
    ws = tmp_path / "ws"
    parent = client.start_run(
        "Read", model="demo", workspace=ws, tools=["read_file"], attachments=list(sources)
    )
    drain(client.store, make_executor(ScriptedModel([Reply("Read both.")])))
    assert client.run(parent.id).status == RunStatus.COMPLETED
    child = fork(client, parent.id, 1, note="look again")
    assert child.workspace == parent.workspace
    assert child.spec.attachments == parent.spec.attachments
