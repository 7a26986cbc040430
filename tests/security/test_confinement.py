"""Workspace confinement through the engine: ``..``, absolute paths, symlinks, case tricks.

A scripted model asks the real file tools, in one turn, to read, list, search, write and
append outside the workspace in every way we know. Each call must come back to the model
as an error (or as a listing that shows nothing from outside), no byte of the secret may
reach the model or the journal, and nothing outside the workspace may change.
"""

from __future__ import annotations

import os
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from tests.conftest import MakeExecutor
from tests.helpers.fakes import Reply, ScriptedModel

SECRET = "TOP-SECRET-7f3a9c"


def _tree(tmp: Path) -> tuple[Path, dict[Path, bytes]]:
    ws = tmp / "Work"
    ws.mkdir()
    (ws / "inside.md").write_text("Inside note.\n")
    outside = tmp / "work"  # same name but for case: a different folder here
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (tmp / "secret.txt").write_text(SECRET + "\n")
    os.symlink(outside, ws / "link-dir")
    os.symlink(outside / "secret.txt", ws / "link-file.txt")
    os.symlink(tmp, ws / "up")
    before = {p: p.read_bytes() for p in tmp.rglob("*") if p.is_file() and ws not in p.parents}
    return ws, before


ESCAPES = [
    "../secret.txt",
    "../work/secret.txt",
    "sub/../../secret.txt",
    "./../secret.txt",
    "a/./b/../../../secret.txt",
    "..\\secret.txt",
    "..\\work\\secret.txt",
    "C:\\secret.txt",
    "c:/secret.txt",
    "~/secret.txt",
    "~root/secret.txt",
    "link-dir/secret.txt",
    "LINK-DIR/../link-dir/secret.txt",
    "link-file.txt",
    "up/secret.txt",
    "up/work/secret.txt",
    "../WORK/../work/secret.txt",
    "../Work/../work/secret.txt",
    "secret.txt\x00.md",
]


def test_file_tools_cannot_leave_the_workspace(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    root.mkdir()
    ws, before = _tree(root)
    absolute = [str(root / "secret.txt"), str(root / "work" / "secret.txt"), "/etc/passwd"]
    calls: list[tuple[str, dict[str, object]]] = []
    for path in ESCAPES + absolute:
        calls.append(("read_file", {"path": path}))
        calls.append(("write_file", {"path": path, "content": "overwritten"}))
        calls.append(("append_note", {"path": path, "text": "appended"}))
    for folder in ("link-dir", "up", "..", "../work", str(root)):
        calls.append(("list_files", {"path": folder}))
        calls.append(("search_files", {"query": "SECRET", "path": folder}))
    calls.append(("list_files", {"path": "."}))
    calls.append(("search_files", {"query": "TOP-SECRET"}))
    model = ScriptedModel([Reply("Trying every door.", calls), Reply("Done.")])
    run = client.start_run("Escape", model="claude-haiku-4-5", workspace=ws)
    assert make_executor(model).execute(run.id) == RunStatus.COMPLETED

    results = [
        b for b in model.requests[1].messages[-1]["content"] if b.get("type") == "tool_result"
    ]
    assert len(results) == len(calls)
    for (name, args), res in zip(calls, results, strict=True):
        assert SECRET not in res["content"], (name, args, res["content"])
        if name in ("read_file", "write_file", "append_note"):
            assert res["is_error"], (name, args, res["content"])
    listing = results[-2]["content"]
    assert "inside.md" in listing and "secret" not in listing
    # Nothing outside changed or appeared; the journal never saw the secret.
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ws not in p.parents}
    assert after == before
    for step in client.steps(run.id):
        assert SECRET not in repr(step.output), step
    assert not (root / "etc").exists()
