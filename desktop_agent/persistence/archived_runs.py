"""Archived and imported runs as the run list and ``show`` read them: from the archive files.

Retention (:mod:`.archive`) moves finished runs out of the journal into gzip-compressed
JSON-lines files in ``archives/``; an import (:mod:`.imports`) writes a bundle's run into a
file of its own there, ``runs-imported-RUN_ID.jsonl.gz``. Neither is in the ``runs`` table,
so the live run list never shows them: this module lists them from the files, newest file
first (a run archived twice counts once, as its newest record), leaving out the runs that
are in the database again (an unarchived run's file stays as it was).

Records are mapped to the domain's :class:`~desktop_agent.domain.Run` and
:class:`~desktop_agent.domain.Step` with the journal's own mapping, so an archived run
prints, and serialises to JSON, as a live one does. A column a record lacks (one written
by an older release) reads as the column's empty value.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from sqlalchemy import RowMapping, Table, select

from desktop_agent.domain import Run, RunStatus, Step
from desktop_agent.persistence.db import Database
from desktop_agent.persistence.mapping import run_from_row, step_from_row
from desktop_agent.persistence.redaction import redact
from desktop_agent.persistence.tables import runs, steps

IMPORTED_PREFIX = "runs-imported-"
"""File names of imported runs start so (one record per file)."""

_JSON_COLUMNS: dict[Table, tuple[str, ...]] = {
    runs: ("spec", "budget"),
    steps: ("input", "output", "salvaged"),
}
_RUN_HEAD = '{"format": '
"""How an archive line the archiver wrote starts (``json.dumps`` of its record)."""


@dataclass(frozen=True)
class ArchivedListing:
    """One archived run as the run list shows it.

    Attributes:
        run: the run as archived.
        imported: brought in from another installation (read-only: never unarchived).
        path: the archive file holding its record.
    """

    run: Run
    imported: bool
    path: Path


def _row(table: Table, item: dict[str, Any]) -> RowMapping:
    """``item`` as a row of ``table``: every column present, JSON columns as text."""
    row: dict[str, Any] = {}
    for column in table.c:
        value = item.get(column.key)
        if value is None and not column.nullable:
            try:
                kind = column.type.python_type
            except NotImplementedError:  # a type without one: text
                kind = str
            value = kind() if kind in (int, float, str) else ""
        if column.key in _JSON_COLUMNS.get(table, ()) and value is not None:
            value = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        row[column.key] = value
    return cast(RowMapping, row)


def run_of(record: dict[str, Any]) -> Run:
    """The run of an archive record."""
    return run_from_row(_row(runs, record["run"]))


def steps_of(record: dict[str, Any]) -> list[Step]:
    """The steps of an archive record, in order."""
    rows = [r for r in record.get("steps") or [] if isinstance(r, dict)]
    return [step_from_row(_row(steps, r)) for r in sorted(rows, key=lambda r: int(r["seq"]))]


def is_imported(path: Path, record: dict[str, Any]) -> bool:
    """Whether the record was imported from another installation."""
    return bool(record.get("imported")) or path.name.startswith(IMPORTED_PREFIX)


def _files(folder: Path) -> list[Path]:
    """The archive files, newest first (imported runs' files, one run each, after)."""
    if not folder.is_dir():
        return []
    return sorted(folder.glob("runs-*.jsonl.gz"), reverse=True)


def _run_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The ``run`` object of each record of ``path`` (``imported`` too), read lightly.

    A line the archiver wrote starts with its format and the run's row: only that part is
    decoded, not the steps after it. Any other line is decoded whole.
    """
    decoder = json.JSONDecoder()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            at = line.find('"run": ', 0, 200) if line.startswith(_RUN_HEAD) else -1
            if at >= 0:
                with contextlib.suppress(ValueError):
                    run, _end = decoder.raw_decode(line, at + len('"run": '))
                    if isinstance(run, dict):
                        yield {"run": run}
                        continue
            record = json.loads(line)
            if isinstance(record, dict) and isinstance(record.get("run"), dict):
                yield {"run": record["run"], "imported": record.get("imported")}


def _in_database(db: Database, ids: Iterable[str]) -> set[str]:
    wanted = list(ids)
    found: set[str] = set()
    with db.read() as conn:
        for start in range(0, len(wanted), 500):
            stmt = select(runs.c.id).where(runs.c.id.in_(wanted[start : start + 500]))
            found.update(str(i) for i in conn.execute(stmt).scalars())
    return found


def list_archived(
    db: Database,
    folder: Path,
    *,
    imported_only: bool = False,
    statuses: Iterable[RunStatus] | None = None,
    search: str | None = None,
    limit: int = 500,
) -> list[ArchivedListing]:
    """Archived runs (imported ones included), newest first, as :meth:`SqlStore.list_runs`.

    ``statuses`` and ``search`` (in the goal or the id, case-insensitive) filter as the
    live list's do; a damaged archive file is passed over, the others are still read.
    """
    wanted = {str(s) for s in statuses} if statuses is not None else None
    needle = search.lower() if search else ""
    found: dict[str, ArchivedListing] = {}
    for path in _files(folder):
        if imported_only and not path.name.startswith(IMPORTED_PREFIX):
            continue
        try:
            records = list(_run_rows(path))
        except (OSError, ValueError, EOFError):
            continue
        for record in records:
            row = record["run"]
            run_id = str(row.get("id", ""))
            if not run_id or run_id in found:
                continue
            if wanted is not None and str(row.get("status")) not in wanted:
                continue
            goal = str(row.get("goal", "")).lower()
            if needle and needle not in goal and needle not in run_id.lower():
                continue
            try:
                run = run_of({"run": redact(row)})
            except (KeyError, TypeError, ValueError):
                continue  # not a run this release can read
            found[run_id] = ArchivedListing(run, is_imported(path, record), path)
    back = _in_database(db, found)
    listed = sorted(
        (item for run_id, item in found.items() if run_id not in back),
        key=lambda item: item.run.created_at,
        reverse=True,
    )
    return listed[: max(0, int(limit))]
