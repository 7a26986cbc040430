"""Workspace file tools on a real file system: confinement, idempotence, PDFs."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from desktop_agent.domain.errors import LeaseLost
from desktop_agent.engine.control import run_tool
from desktop_agent.tools.files import AppendNote, ListFiles, ReadFile, SearchFiles, WriteFile
from desktop_agent.tools.workspace import confine
from tests.tools.conftest import MakeCtx
from tests.tools.servers import make_pdf

SECRET = "TOPSECRET-7f3a"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder next to the workspace holding a secret."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text(SECRET)
    return path


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "a/../../outside/secret.txt",
        "..\\outside\\secret.txt",
        "./../outside/secret.txt",
        "/etc/passwd",
        "C:\\Windows\\win.ini",
        "c:/windows/win.ini",
        "C:relative.txt",
        "\\\\server\\share\\secret.txt",
        "//server/share/secret.txt",
        "~/secret.txt",
        "~root/.ssh/id_rsa",
        "notes\x00.md",
        "../ws-evil/secret.txt",  # a sibling whose name starts like the workspace's
        "a" * 5000,
    ],
)
def test_paths_leading_outside_are_refused(
    path: str, make_ctx: MakeCtx, outside: Path, ws: Path
) -> None:
    (ws.parent / "ws-evil").mkdir()
    (ws.parent / "ws-evil" / "secret.txt").write_text(SECRET)
    ctx = make_ctx()
    for tool, args in (
        (ReadFile(), {"path": path}),
        (WriteFile(), {"path": path, "content": "pwned"}),
        (AppendNote(), {"path": path, "text": "pwned"}),
        (ListFiles(), {"path": path}),
        (SearchFiles(), {"query": "TOPSECRET", "path": path}),
    ):
        res = run_tool(tool, args, ctx)
        assert res.is_error, (tool.name, path, res.content)
        assert "invalid arguments" in res.content
        assert SECRET not in res.content
    assert (outside / "secret.txt").read_text() == SECRET
    assert not (ws.parent / "pwned").exists()


def test_a_symlinked_file_leading_outside_is_refused(
    make_ctx: MakeCtx, outside: Path, ws: Path
) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    ctx = make_ctx()
    read = run_tool(ReadFile(), {"path": "link.txt"}, ctx)
    assert read.is_error and "outside the workspace" in read.content
    write = run_tool(WriteFile(), {"path": "link.txt", "content": "pwned"}, ctx)
    assert write.is_error
    append = run_tool(AppendNote(), {"path": "LINK.txt".lower(), "text": "pwned"}, ctx)
    assert append.is_error
    assert (outside / "secret.txt").read_text() == SECRET
    listing = run_tool(ListFiles(), {}, ctx)
    assert "link.txt" not in listing.content
    found = run_tool(SearchFiles(), {"query": "TOPSECRET"}, ctx)
    assert SECRET not in found.content


def test_a_symlinked_parent_folder_leading_outside_is_refused(
    make_ctx: MakeCtx, outside: Path, ws: Path
) -> None:
    (ws / "docs").symlink_to(outside, target_is_directory=True)
    ctx = make_ctx()
    assert run_tool(ReadFile(), {"path": "docs/secret.txt"}, ctx).is_error
    assert run_tool(WriteFile(), {"path": "docs/new.md", "content": "x"}, ctx).is_error
    assert run_tool(AppendNote(), {"path": "docs/notes.md", "text": "x"}, ctx).is_error
    assert run_tool(ListFiles(), {"path": "docs"}, ctx).is_error
    assert not (outside / "new.md").exists() and not (outside / "notes.md").exists()
    # Walking the workspace does not follow the link either.
    assert "secret" not in run_tool(ListFiles(), {}, ctx).content
    assert SECRET not in run_tool(SearchFiles(), {"query": "TOPSECRET"}, ctx).content


def test_a_dangling_link_cannot_create_a_file_outside(
    make_ctx: MakeCtx, outside: Path, ws: Path
) -> None:
    (ws / "report.md").symlink_to(outside / "created-by-agent.md")
    res = run_tool(WriteFile(), {"path": "report.md", "content": "x"}, make_ctx())
    assert res.is_error
    assert not (outside / "created-by-agent.md").exists()


def test_a_symlink_loop_is_an_error_not_a_crash(make_ctx: MakeCtx, ws: Path) -> None:
    (ws / "a").symlink_to(ws / "b")
    (ws / "b").symlink_to(ws / "a")
    ctx = make_ctx()
    for args in ({"path": "a"}, {"path": "a/../../outside/secret.txt"}):
        res = run_tool(ReadFile(), args, ctx)
        assert res.is_error


def test_links_that_stay_inside_are_followed(make_ctx: MakeCtx, ws: Path) -> None:
    (ws / "real.md").write_text("inside text")
    (ws / "alias.md").symlink_to(ws / "real.md")
    (ws / "sub").mkdir()
    (ws / "sub" / "up").symlink_to(ws, target_is_directory=True)
    ctx = make_ctx()
    assert "inside text" in run_tool(ReadFile(), {"path": "alias.md"}, ctx).content
    assert "inside text" in run_tool(ReadFile(), {"path": "sub/up/real.md"}, ctx).content


def test_case_tricks_do_not_reach_a_sibling_folder(
    make_ctx: MakeCtx, tmp_path: Path, ws: Path
) -> None:
    upper = tmp_path / ws.name.upper()
    try:
        upper.mkdir()
    except FileExistsError:
        # Case-insensitive file system: WS *is* the workspace, and stays usable as such.
        assert confine(ws, f"../{ws.name.upper()}/x.md") == ws / "x.md"
        return
    (upper / "secret.txt").write_text(SECRET)
    ctx = make_ctx()
    for path in (f"../{upper.name}/secret.txt", f"..\\{upper.name}\\secret.txt"):
        res = run_tool(ReadFile(), {"path": path}, ctx)
        assert res.is_error and SECRET not in res.content
    assert run_tool(WriteFile(), {"path": f"../{upper.name}/x", "content": "x"}, ctx).is_error


def test_writing_the_same_content_again_changes_nothing(make_ctx: MakeCtx, ws: Path) -> None:
    ctx = make_ctx()
    first = run_tool(WriteFile(), {"path": "out/report.md", "content": "hello\n"}, ctx)
    assert not first.is_error and "wrote out/report.md" in first.content
    before = os.stat(ws / "out" / "report.md")
    again = run_tool(WriteFile(), {"path": "out/report.md", "content": "hello\n"}, ctx)
    assert "already has this content" in again.content and "unchanged" in again.content
    after = os.stat(ws / "out" / "report.md")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not [p for p in (ws / "out").iterdir() if p.name.startswith(".tmp-")]


def test_appending_the_same_note_after_a_crash_is_not_duplicated(
    make_ctx: MakeCtx, ws: Path
) -> None:
    ctx = make_ctx()
    run_tool(AppendNote(), {"text": "- first"}, ctx)
    run_tool(AppendNote(), {"text": "- second"}, ctx)
    # The same step run again after a crash (attempt 2) finds its own note: not repeated.
    repeat = run_tool(AppendNote(), {"text": "- second"}, dataclasses.replace(ctx, attempt=2))
    assert repeat.content == "appended 9 characters to notes.md"
    assert (ws / "notes.md").read_text() == "- first\n- second\n"
    # A new step that appends the same text on purpose does append it.
    run_tool(AppendNote(), {"text": "- second"}, make_ctx(seq=4))
    assert (ws / "notes.md").read_text() == "- first\n- second\n- second\n"


def test_reads_text_markdown_and_a_real_pdf(make_ctx: MakeCtx, ws: Path) -> None:
    (ws / "a.md").write_text("# Title\nSome *markdown*.\n")
    (ws / "paper.pdf").write_bytes(make_pdf("Revenue grew 12 percent (Q3)"))
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    ctx = make_ctx()
    md = run_tool(ReadFile(), {"path": "a.md"}, ctx)
    assert md.content.startswith("# Title\nSome *markdown*.")
    assert md.data["sha256"]
    pdf = run_tool(ReadFile(), {"path": "paper.pdf"}, ctx)
    assert not pdf.is_error
    assert "Revenue grew 12 percent (Q3)" in pdf.content
    broken = ws / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nnot really a pdf")
    assert run_tool(ReadFile(), {"path": "broken.pdf"}, ctx).is_error
    assert "binary" in run_tool(ReadFile(), {"path": "blob.bin"}, ctx).content


def test_long_files_are_read_in_chunks(make_ctx: MakeCtx, ws: Path) -> None:
    (ws / "long.txt").write_text("x" * 250_000)
    ctx = make_ctx()
    first = run_tool(ReadFile(), {"path": "long.txt"}, ctx)
    assert "offset=100000" in first.content
    last = run_tool(ReadFile(), {"path": "long.txt", "offset": 200_000}, ctx)
    assert last.content.count("x") == 50_000


def test_write_checks_the_version_it_overwrites(make_ctx: MakeCtx, ws: Path) -> None:
    ctx = make_ctx()
    (ws / "plan.md").write_text("v1\n")
    read = run_tool(ReadFile(), {"path": "plan.md"}, ctx)
    sha = read.data["sha256"][:16]
    assert f"[file sha256: {sha}]" in read.content
    args = {"path": "plan.md", "content": "v2\n", "expected_sha256": sha}
    tool = WriteFile()
    assert tool.validate(args, ctx) is None
    (ws / "plan.md").write_text("someone else's v1b\n")  # the world changed after approval
    problem = tool.validate(args, ctx)
    assert problem is not None and "changed since it was read" in problem
    refused = run_tool(tool, args, ctx)
    assert refused.is_error and (ws / "plan.md").read_text() == "someone else's v1b\n"
    (ws / "plan.md").write_text("v1\n")
    assert not run_tool(tool, args, ctx).is_error
    # Repeated after a crash: the file already holds the new version; nothing to refuse,
    # and the step reports what it did, like the attempt that died.
    repeat = run_tool(tool, args, dataclasses.replace(ctx, attempt=2))
    assert not repeat.is_error and repeat.content.startswith("wrote plan.md")


def test_search_finds_lines_and_list_shows_sizes(make_ctx: MakeCtx, ws: Path) -> None:
    (ws / "a.md").write_text("alpha\nThe Market grew\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "b.txt").write_text("market share\n")
    (ws / ".cache").mkdir()
    (ws / ".cache" / "c.md").write_text("market hidden\n")
    ctx = make_ctx()
    found = run_tool(SearchFiles(), {"query": "market"}, ctx).content.splitlines()
    assert found == ["a.md:2: The Market grew", "sub/b.txt:1: market share"]
    listing = run_tool(ListFiles(), {}, ctx).content
    assert "a.md  22 bytes" in listing and "sub/b.txt" in listing and ".cache" not in listing


def test_a_symlink_loop_in_the_workspace_is_skipped_with_a_note_when_listing(
    make_ctx: MakeCtx, ws: Path
) -> None:
    (ws / "q3.md").write_text("# Q3\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "risks.txt").write_text("Supply risk.\n")
    os.symlink("loop-b", ws / "loop-a")
    os.symlink("loop-a", ws / "loop-b")
    res = run_tool(ListFiles(), {}, make_ctx())
    assert not res.is_error, res.content
    lines = res.content.splitlines()
    assert "q3.md  5 bytes" in lines and "sub/risks.txt  13 bytes" in lines
    assert "[skipped loop-a: a symlink loop]" in lines
    assert "[skipped loop-b: a symlink loop]" in lines


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_write_whose_lease_is_gone_leaves_the_file_and_no_temporary(
    make_ctx: MakeCtx, ws: Path
) -> None:
    (ws / "report.md").write_text("the new owner's version\n")

    def taken() -> None:
        raise LeaseLost("run1 was taken over by another worker")

    ctx = dataclasses.replace(make_ctx(), check_lease=taken)
    for tool, args in (
        (WriteFile(), {"path": "report.md", "content": "a late version\n"}),
        (AppendNote(), {"path": "report.md", "text": "a late note"}),
    ):
        with pytest.raises(LeaseLost):
            run_tool(tool, args, ctx)
        assert (ws / "report.md").read_text() == "the new owner's version\n"
        assert _hidden(ws) == []


def test_a_repeat_removes_the_temporary_file_of_its_dead_attempt(
    make_ctx: MakeCtx, ws: Path
) -> None:
    # What a worker killed between writing its temporary file and renaming it leaves.
    (ws / ".report.md.run1-3.4242.tmp").write_text("half of it")
    (ws / ".report.md.run1-30.4242.tmp").write_text("another step's, still in progress")
    ctx = dataclasses.replace(make_ctx(), attempt=2)
    res = run_tool(WriteFile(), {"path": "report.md", "content": "whole\n"}, ctx)
    assert not res.is_error, res.content
    assert (ws / "report.md").read_text() == "whole\n"
    assert _hidden(ws) == [".report.md.run1-30.4242.tmp"]
