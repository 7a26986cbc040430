"""``desktop-agent import``: a bundle comes into another installation as a read-only run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain.errors import NotFoundError
from tests.conftest import MakeExecutor
from tests.export.conftest import (
    bundle_members,
    cli,
    manifest_of,
    no_secret,
    secret_run,
    write_bundle,
)


@pytest.fixture
def bundle(client: Client, make_executor: MakeExecutor, workspace: Path, tmp_path: Path) -> Path:
    run_id = secret_run(client, make_executor, workspace)
    out = tmp_path / "handed-on.tar.gz"
    result = cli(client.db_path, "export", run_id, "--format", "bundle", "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


def _run_id(bundle: Path) -> str:
    return str(manifest_of(bundle_members(bundle))["run_id"])


def test_import_brings_the_run_in_read_only_show_and_search_find_it(
    bundle: Path, tmp_path: Path
) -> None:
    other = tmp_path / "colleague" / "desktop-agent.db"
    run_id = _run_id(bundle)
    result = cli(other, "import", str(bundle), "--json")
    assert result.returncode == 0, result.stderr
    done = json.loads(result.stdout)
    assert done["run_id"] == run_id and done["status"] == "completed" and done["files"] == 2
    files = other.parent / "imports" / run_id
    assert Path(done["files_dir"]) == files
    assert (files / "report.md").read_text() == "# Q3\nVendors hold 71% of the market.\n"
    assert no_secret((files / "findings.md").read_text())
    shown = cli(other, "show", run_id[:6], "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["run"]["goal"].startswith("Summarise the Q3 vendor notes")
    assert record["run"]["workspace"] == str(files) and record["imported"]["from"] == bundle.name
    found = cli(other, "search", "vendors", "--json")
    assert found.returncode == 0, found.stderr
    assert {(h["run_id"], h["archived"]) for h in json.loads(found.stdout)} == {(run_id, True)}
    for command in ("resume", "cancel", "pause"):
        refused = cli(other, command, run_id)
        assert refused.returncode == 2, command
        assert "archived here, read-only" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    archive = other.parent / "archives" / f"runs-imported-{run_id}.jsonl.gz"
    before = archive.read_bytes()
    refused = cli(other, "db", "unarchive", run_id)  # never into the journal: it would run
    assert refused.returncode == 2, refused.stdout
    assert f"run {run_id} was imported from {bundle.name}: it stays read-only" in refused.stderr
    assert archive.read_bytes() == before
    assert json.loads(cli(other, "runs", "--json").stdout) == []


def test_a_worker_there_runs_its_own_runs_and_never_the_imported_one(
    bundle: Path, tmp_path: Path, workspace: Path
) -> None:
    other = tmp_path / "colleague" / "desktop-agent.db"
    run_id = _run_id(bundle)
    assert cli(other, "import", str(bundle)).returncode == 0
    archive = other.parent / "archives" / f"runs-imported-{run_id}.jsonl.gz"
    before = archive.read_bytes()
    there = Client(other)
    try:
        own = there.start_run("List the files", model="demo", workspace=workspace)
        worker = cli(other, "worker", "--until-idle")  # returns once nothing is runnable
        assert worker.returncode == 0, worker.stderr
        assert there.run(own.id).last_seq > 0  # it ran this installation's own run
        with pytest.raises(NotFoundError, match="read-only"):
            there.run(run_id)
        assert archive.read_bytes() == before
    finally:
        there.close()


def _nothing_written(folder: Path) -> bool:
    return not (folder / "imports").exists() and not list(folder.glob("archives/*"))


def test_import_refuses_what_is_not_a_sound_new_bundle_and_writes_nothing(
    bundle: Path, tmp_path: Path, client: Client
) -> None:
    other = tmp_path / "colleague" / "desktop-agent.db"
    other.parent.mkdir()
    members = bundle_members(bundle)
    manifest = manifest_of(members)
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a bundle")
    newer = tmp_path / "newer.tar.gz"
    write_bundle(
        newer, {**members, "manifest.json": json.dumps({**manifest, "version": 99}).encode()}
    )
    damaged = tmp_path / "damaged.tar.gz"
    write_bundle(damaged, {**members, "files/report.md": b"# Q3\nVendors hold 12%.\n"})
    cases = [
        (text_file, "is not a desktop-agent bundle"),
        (newer, "made by a newer desktop-agent"),
        (damaged, "damaged: files/report.md does not match its checksum"),
        (tmp_path / "missing.tar.gz", "no file"),
    ]
    for path, message in cases:
        result = cli(other, "import", str(path))
        assert result.returncode == 2, path
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert _nothing_written(other.parent), path
    here = cli(client.db_path, "import", str(bundle))  # the run is in this database
    assert here.returncode == 2 and "is already here (in this database)" in here.stderr
    assert not (client.db_path.parent / "imports").exists()
    assert cli(other, "import", str(bundle)).returncode == 0
    twice = cli(other, "import", str(bundle))
    assert twice.returncode == 2 and "already here (among the archived runs)" in twice.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths in the tar")
def test_a_bundle_whose_files_leave_their_folder_is_refused(bundle: Path, tmp_path: Path) -> None:
    members = bundle_members(bundle)
    manifest = manifest_of(members)
    evil = b"x"
    import hashlib

    listed = {**manifest["files"], "../evil.md": {"sha256": hashlib.sha256(evil).hexdigest()}}
    crafted = tmp_path / "crafted.tar.gz"
    write_bundle(
        crafted,
        {
            **members,
            "../evil.md": evil,
            "manifest.json": json.dumps({**manifest, "files": listed}).encode(),
        },
    )
    other = tmp_path / "colleague" / "desktop-agent.db"
    result = cli(other, "import", str(crafted))
    assert result.returncode == 2 and "outside its files folder" in result.stderr
    assert not (tmp_path / "colleague" / "evil.md").exists()
