"""Archived and imported runs, read from the archive files: listed and shown, never run.

An archived run left the journal for an archive file in ``archives/`` beside the database
(``db archive``, or retention); ``db unarchive`` brings it back. An imported run was
brought in from another installation (``import``) and stays read-only: it is never put
in the journal, so nothing here can run, change or unarchive it. Both are read here for
``runs --archived``/``--imported``, ``show`` and the app's run list, with the same
:class:`~desktop_agent.domain.Run` and :class:`~desktop_agent.domain.Step` as live runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop_agent.client.stepkinds import model_text
from desktop_agent.domain import Run, RunStatus, Step, StepKind
from desktop_agent.persistence.archive import find_archived
from desktop_agent.persistence.archived_runs import (
    ArchivedListing,
    is_imported,
    list_archived,
    run_of,
    steps_of,
)

if TYPE_CHECKING:
    from desktop_agent.client.api import Client

__all__ = ["ArchivedListing", "ArchivedView", "archived_runs", "read_archived"]


@dataclass(frozen=True)
class ArchivedView:
    """An archived (or imported) run's whole record, as the domain reads a live one.

    Attributes:
        run: the run.
        steps: its journal, in order.
        imported: brought in from another installation: read-only, never unarchived.
        imported_from: the bundle's file name, when imported.
        path: the archive file.
        record: the record as archived (for ``--json``).
    """

    run: Run
    steps: tuple[Step, ...]
    imported: bool
    imported_from: str
    path: Path
    record: dict[str, Any]

    @property
    def report(self) -> str:
        """What the run reported: its report step's text, else the model's last answer."""
        for step in reversed(self.steps):
            if step.kind == StepKind.REPORT and isinstance(step.output, dict):
                text = step.output.get("report")
                if isinstance(text, str) and text.strip():
                    return text
        for step in reversed(self.steps):
            if step.kind == StepKind.MODEL_CALL:
                text = model_text(step.output)
                if text:
                    return text
        return ""


def archives_folder(client: Client) -> Path:
    """Where the database's archive files are."""
    return client.db_path.parent / "archives"


def archived_runs(
    client: Client,
    *,
    imported_only: bool = False,
    statuses: Iterable[RunStatus] | None = None,
    search: str | None = None,
    limit: int = 500,
) -> list[ArchivedListing]:
    """Archived runs (imported ones included, marked), newest first.

    Only imported ones with ``imported_only``. Blocking (it reads the archive files):
    never on the GUI thread.
    """
    return list_archived(
        client._db,
        archives_folder(client),
        imported_only=imported_only,
        statuses=statuses,
        search=search,
        limit=limit,
    )


def read_archived(client: Client, run_id: str) -> ArchivedView | None:
    """The archived record of ``run_id`` (id or unique prefix), or None.

    Raises:
        InvalidInputError: the prefix names several archived runs.
    """
    found = find_archived(archives_folder(client), run_id)
    if found is None:
        return None
    record = found.record
    imported = record.get("imported")
    source = imported.get("from") if isinstance(imported, dict) else None
    return ArchivedView(
        run_of(record),
        tuple(steps_of(record)),
        is_imported(found.path, record),
        str(source or ""),
        found.path,
        record,
    )
