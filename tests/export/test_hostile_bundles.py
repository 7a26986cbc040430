"""Hostile bundles: refused with a plain message, and nothing written anywhere.

Each bundle below is a sound export with one thing changed (a member name that leads out
of its folder, a link, a device, a name twice, a bomb, ids this database already has…).
For each, the import is refused through the client (and for several through the CLI:
exit status 2, one line), a sentinel file at the absolute path the bundle aims at keeps
its content, nothing new appears anywhere under the test's folder, and the database
holds the same rows as before.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import sys
import tarfile
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from desktop_agent.cli.commands import main
from desktop_agent.client.api import Client
from desktop_agent.client.export import BundleLimits, bundle_bytes, import_bundle
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.persistence.tables import (
    approvals,
    commands,
    run_events,
    runs,
    search_docs,
    search_runs,
    steps,
)
from tests.conftest import MakeExecutor
from tests.export.conftest import bundle_members, secret_run
from tests.helpers.sqlite_template import migrated_database

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths in the tar")

SENTINEL = b"keep me\n"


@dataclass(frozen=True)
class Entry:
    """One member of a crafted bundle: its name, bytes and tar type (and link target)."""

    name: str
    data: bytes = b"x"
    type: bytes = tarfile.REGTYPE
    linkname: str = ""
    listed: bool = True
    """Whether the manifest lists it (with its checksum)."""


def write_tar(path: Path, manifest: dict[str, Any], members: list[Entry], level: int = 9) -> None:
    """A ``.tar.gz`` of the manifest, then ``members`` exactly as given."""
    with tarfile.open(path, "w:gz", compresslevel=level) as tar:
        head = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(head)
        tar.addfile(info, io.BytesIO(head))
        for m in members:
            info = tarfile.TarInfo(m.name)
            info.type = m.type
            info.linkname = m.linkname
            regular = m.type in (tarfile.REGTYPE, tarfile.AREGTYPE)
            info.size = len(m.data) if regular else 0
            tar.addfile(info, io.BytesIO(m.data) if regular else None)


def craft(
    good: Path, path: Path, extra: list[Entry], *, record: Any = None, raw: bytes = b""
) -> Path:
    """``good`` with ``extra`` members added (listed in the manifest), or another record."""
    members = bundle_members(good)
    manifest = json.loads(members.pop("manifest.json"))
    if record is not None:
        members["run.jsonl"] = json.dumps(record).encode() + b"\n"
    if raw:
        members["run.jsonl"] = raw
    entries = [Entry(n, d) for n, d in members.items()] + extra
    manifest["files"] = {
        e.name: {"sha256": hashlib.sha256(e.data).hexdigest(), "bytes": len(e.data)}
        for e in entries
        if e.listed and e.type in (tarfile.REGTYPE, tarfile.AREGTYPE)
    }
    write_tar(path, manifest, entries)
    return path


def _record(good: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(bundle_members(good)["run.jsonl"])
    return record


def _renamed(good: Path, new_id: str, *, keep_step_owner: bool = False) -> dict[str, Any]:
    """The good record under another run id: its approval ids (and maybe a step) kept."""
    record = _record(good)
    old = record["run"]["id"]
    record["run"]["id"] = new_id
    for key in ("steps", "approvals", "events", "commands"):
        for row in record.get(key) or []:
            row["run_id"] = new_id
    if keep_step_owner:
        record["steps"][0]["run_id"] = old
    return record


@pytest.fixture
def good(client: Client, make_executor: MakeExecutor, workspace: Path, tmp_path: Path) -> Path:
    """A sound bundle of a finished run (with an approval and two written files)."""
    run_id = secret_run(client, make_executor, workspace)
    _info, data = bundle_bytes(client, run_id)
    folder = tmp_path / "bundles"
    folder.mkdir()
    (folder / "good.tar.gz").write_bytes(data)
    return folder / "good.tar.gz"


@pytest.fixture
def there(tmp_path: Path) -> Iterator[Client]:
    """A colleague's installation: its own data folder under the test's folder."""
    path = migrated_database(tmp_path / "colleague" / "desktop-agent.db")
    other = Client(path)
    yield other
    other.close()


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    """A file outside every data folder that a hostile bundle aims at."""
    path = tmp_path / "victim" / "evil"
    path.parent.mkdir()
    path.write_bytes(SENTINEL)
    return path


def state(tmp_path: Path, client: Client) -> tuple[Any, ...]:
    """Every file under the test's folder (but the databases) and the rows of the database."""
    files: dict[str, Any] = {}
    for p in sorted(tmp_path.rglob("*")):
        if p.name.startswith("desktop-agent.db"):
            continue  # the database (and its journal files) is compared by its rows
        rel = p.relative_to(tmp_path).as_posix()
        if p.is_symlink():
            files[rel] = ("link", str(p.readlink()))
        elif p.is_file():
            files[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            files[rel] = "folder"
    tables = (runs, steps, approvals, run_events, commands, search_runs, search_docs)
    with client.store.db.read() as conn:
        counts = [conn.execute(select(func.count()).select_from(t)).scalar() for t in tables]
    return files, counts, [r.id for r in client.runs()]


def refused(
    tmp_path: Path,
    client: Client,
    bundle: Path,
    message: str,
    limits: BundleLimits | None = None,
) -> None:
    """The import is refused with ``message``, and nothing changed anywhere."""
    before = state(tmp_path, client)
    with pytest.raises(InvalidInputError) as caught:
        if limits is None:
            import_bundle(client, bundle)
        else:
            import_bundle(client, bundle, limits)
    assert message in str(caught.value), str(caught.value)
    assert "nothing imported" in str(caught.value)
    assert state(tmp_path, client) == before
    data = client.db_path.parent
    assert not list(data.glob(".import-*")) and not list(data.glob("imports/*"))


def refused_by_cli(
    tmp_path: Path, client: Client, bundle: Path, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``desktop-agent import`` exits 2 with one line holding ``message``; nothing changed."""
    before = state(tmp_path, client)
    capsys.readouterr()
    assert main(["--db", str(client.db_path), "import", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert "internal error" not in err
    assert state(tmp_path, client) == before


def test_a_good_bundle_still_imports(good: Path, there: Client, tmp_path: Path) -> None:
    done = import_bundle(there, good)
    data = there.db_path.parent
    assert done.files == 2 and done.files_dir == data / "imports" / done.run_id
    assert (done.files_dir / "report.md").read_text() == "# Q3\nVendors hold 71% of the market.\n"
    assert done.archive.is_file()
    assert not list(data.glob(".import-*")) and not list(data.glob("imports/.*"))
    assert there.runs() == []  # read-only: never in the journal


def test_a_file_after_double_slash_never_reaches_its_absolute_path(
    good: Path, there: Client, tmp_path: Path, sentinel: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = craft(good, tmp_path / "bundles" / "abs.tar.gz", [Entry(f"files//{sentinel}")])
    refused(tmp_path, there, bundle, f"'files//{sentinel}' is outside its files folder")
    refused_by_cli(tmp_path, there, bundle, "is outside its files folder", capsys)
    assert sentinel.read_bytes() == SENTINEL


CASES: list[tuple[str, list[Entry], str]] = [
    ("three slashes", [Entry("files///{sentinel}")], "outside its files folder"),
    ("absolute", [Entry("{sentinel}")], "is an absolute path"),
    ("dot-dot", [Entry("files/../../victim/evil")], "a '..' part"),
    ("dot-dot deep", [Entry("files/a/../../../victim/evil")], "a '..' part"),
    ("backslash dot-dot", [Entry("files\\..\\..\\victim\\evil")], "a '..' part"),
    ("backslash", [Entry("files\\notes.md")], "uses backslashes"),
    ("leading backslash", [Entry("\\{sentinel}")], "is an absolute path"),
    ("unc", [Entry("\\\\server\\share\\evil")], "is an absolute path"),
    ("unc under files", [Entry("files/\\\\server\\share\\evil")], "outside its files folder"),
    ("drive", [Entry("files/C:/Windows/evil")], "names a drive"),
    ("drive relative", [Entry("files/C:evil")], "names a drive"),
    ("drive at top", [Entry("C:/evil")], "outside its files folder"),
    ("stream", [Entry("files/report.md:evil")], "names a drive or a stream"),
    ("dot", [Entry("files/./evil")], "a '.' part"),
    ("empty part", [Entry("files/a//evil")], "an empty part"),
    ("trailing slash", [Entry("files/evil/")], "an empty part"),
    ("folder itself", [Entry("files")], "outside its files folder"),
    ("top level", [Entry("evil.sh")], "outside its files folder"),
    ("control", [Entry("files/ev\nil")], "control characters"),
    ("reserved", [Entry("files/CON.md")], "no folder can hold on Windows"),
    ("trailing dot", [Entry("files/evil.")], "no folder can hold on Windows"),
    (
        "symlink",
        [Entry("files/link", b"", tarfile.SYMTYPE, "{sentinel}")],
        "is a symbolic link",
    ),
    (
        "symlink then through it",
        [Entry("files/l", b"", tarfile.SYMTYPE, "/"), Entry("files/l{sentinel}")],
        "is a symbolic link",
    ),
    ("hardlink", [Entry("files/hard", b"", tarfile.LNKTYPE, "{sentinel}")], "is a hard link"),
    ("char device", [Entry("files/tty", b"", tarfile.CHRTYPE)], "is a device file"),
    ("block device", [Entry("files/sda", b"", tarfile.BLKTYPE)], "is a device file"),
    ("fifo", [Entry("files/pipe", b"", tarfile.FIFOTYPE)], "is a named pipe"),
    ("folder entry", [Entry("files/sub", b"", tarfile.DIRTYPE)], "is a folder entry"),
    ("twice", [Entry("files/report.md", b"other")], "is in it twice"),
    ("twice in another case", [Entry("files/REPORT.md")], "is in it twice (as"),
    ("file and folder", [Entry("files/report.md/evil")], "is both a file and the folder"),
    ("unlisted", [Entry("files/extra.md", listed=False)], "do not match its manifest"),
]


@pytest.mark.parametrize(("entries", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_name_or_kind_of_member_is_refused_and_nothing_is_written(
    good: Path,
    there: Client,
    tmp_path: Path,
    sentinel: Path,
    entries: list[Entry],
    message: str,
) -> None:
    extra = [
        Entry(
            e.name.replace("{sentinel}", str(sentinel)),
            e.data,
            e.type,
            e.linkname.replace("{sentinel}", str(sentinel)),
            e.listed,
        )
        for e in entries
    ]
    bundle = craft(good, tmp_path / "bundles" / "hostile.tar.gz", extra)
    refused(tmp_path, there, bundle, message)
    assert sentinel.read_bytes() == SENTINEL


def test_the_refusals_the_readme_promises(good: Path, there: Client, tmp_path: Path) -> None:
    members = bundle_members(good)
    manifest = json.loads(members["manifest.json"])
    folder = tmp_path / "bundles"
    newer = folder / "newer.tar.gz"
    rest = [Entry(n, d) for n, d in members.items() if n != "manifest.json"]
    write_tar(newer, {**manifest, "version": 99}, rest)
    damaged = folder / "damaged.tar.gz"
    write_tar(damaged, manifest, [Entry(e.name, e.data + b"!") for e in rest])
    text = folder / "notes.tar.gz"
    text.write_text("not a bundle")
    not_json = folder / "bad-manifest.tar.gz"
    write_tar(not_json, {**manifest, "files": ["run.jsonl"]}, rest)
    refused(tmp_path, there, newer, "made by a newer desktop-agent")
    refused(tmp_path, there, damaged, "is damaged")
    refused(tmp_path, there, text, "is not a desktop-agent bundle")
    refused(tmp_path, there, not_json, "do not match its manifest")
    deep = craft(good, folder / "deep.tar.gz", [], raw=b"[" * 100_000 + b"]" * 100_000)
    refused(tmp_path, there, deep, "its run.jsonl is not a run record")
    odd = craft(good, folder / "odd.tar.gz", [], raw=b'{"format": 1, "run": []}')
    refused(tmp_path, there, odd, "its run.jsonl is not a run record")


def test_a_run_already_here_is_refused(
    good: Path, client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = _record(good)["run"]["id"]
    refused(tmp_path, client, good, f"run {run_id} is already here (in this database)")
    refused_by_cli(tmp_path, client, good, "is already here", capsys)


def test_approval_ids_already_here_are_refused_not_an_internal_error(
    good: Path, client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = craft(good, tmp_path / "bundles" / "copy.tar.gz", [], record=_renamed(good, "copy1"))
    refused(tmp_path, client, bundle, "run copy1 is already here in part: its approval")
    refused_by_cli(tmp_path, client, bundle, "is already here in part", capsys)


def test_rows_of_another_run_are_refused(good: Path, client: Client, tmp_path: Path) -> None:
    record = _renamed(good, "copy2", keep_step_owner=True)
    record["approvals"] = []
    bundle = craft(good, tmp_path / "bundles" / "foreign.tar.gz", [], record=record)
    refused(tmp_path, client, bundle, "one of its steps belongs to run")


def test_a_record_the_index_cannot_take_leaves_nothing_behind(
    good: Path, there: Client, tmp_path: Path
) -> None:
    record = _record(good)
    record["steps"][0]["seq"] = {"not": "a number"}
    bundle = craft(good, tmp_path / "bundles" / "odd.tar.gz", [], record=record)
    refused(tmp_path, there, bundle, "nothing imported")
    data = there.db_path.parent
    assert not (data / "imports").exists() and not (data / "archives").exists()


def test_sizes_are_capped_per_member_in_all_and_by_ratio(
    good: Path, there: Client, tmp_path: Path
) -> None:
    folder = tmp_path / "bundles"
    small = BundleLimits(member_bytes=100_000, total_bytes=150_000, ratio_floor=10**9)
    big = craft(good, folder / "big.tar.gz", [Entry("files/big.bin", b"\0" * 100_001)])
    refused(tmp_path, there, big, "'files/big.bin' is 100,001 bytes", small)
    refused(tmp_path, there, big, "at most 100,000 bytes per file, 150,000 bytes in all", small)
    many = [Entry(f"files/part{i}.bin", b"\0" * 60_000) for i in range(3)]
    total = craft(good, folder / "total.tar.gz", many)
    refused(tmp_path, there, total, "its files come to more than", small)
    counted = BundleLimits(members=3)
    refused(tmp_path, there, craft(good, folder / "n.tar.gz", many), "more than 3 files", counted)
    ratio = BundleLimits(ratio=10, ratio_floor=50_000)
    refused(tmp_path, there, total, "unpacks to more than 10× its", ratio)


def test_a_bomb_is_refused_before_it_is_read_whole(
    good: Path, there: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """20 MiB of zeros packed into kilobytes: refused by the ratio, never held in memory."""
    members = bundle_members(good)
    manifest = json.loads(members.pop("manifest.json"))
    zeros = b"\0" * (20 * 1024 * 1024)
    manifest["files"]["files/zeros.bin"] = {"sha256": hashlib.sha256(zeros).hexdigest()}
    bomb = tmp_path / "bundles" / "bomb.tar.gz"
    write_tar(
        bomb,
        manifest,
        [*(Entry(n, d) for n, d in members.items()), Entry("files/zeros.bin", zeros)],
    )
    del zeros
    assert bomb.stat().st_size < 200_000
    tracemalloc.start()
    try:
        refused(tmp_path, there, bomb, "unpacks to more than 100× its")
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 1024 * 1024, peak  # less than the member alone (20 MiB): never read whole
    refused_by_cli(tmp_path, there, bomb, "at most 64 MiB per file, 256 MiB in all", capsys)


def test_a_member_larger_than_the_cap_is_refused_from_its_header(
    good: Path, there: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    members = bundle_members(good)
    manifest = json.loads(members.pop("manifest.json"))
    huge = tmp_path / "bundles" / "huge.tar.gz"
    with gzip.open(huge, "wb", compresslevel=1) as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        for name, data in [("manifest.json", json.dumps(manifest).encode()), *members.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("files/huge.bin")
        info.size = 65 * 1024 * 1024
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    refused(tmp_path, there, huge, "'files/huge.bin' is 68,157,440 bytes")
    refused_by_cli(tmp_path, there, huge, "64 MiB per file", capsys)
