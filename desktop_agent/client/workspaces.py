"""Workspaces as a first-time user meets them: a sample one for the demo, and a check of one.

The sample workspace lets someone try the app before they have an API key or files of
their own: three short supplier notes the offline demo model reads, notes and reports on.
It lives in the data folder and is never overwritten: an analyst may have edited the notes,
and a folder of that name the app did not write is left alone for a fresh one beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.domain import Run
from desktop_agent.domain.errors import InvalidInputError

DEMO_FOLDER = "demo-workspace"
"""The sample workspace's folder name in the data folder."""

DEMO_GOAL = (
    "Compare the three supplier notes and recommend one supplier for the pilot, citing the notes."
)
"""What the demo run is asked to do."""

DEMO_NOTES = {
    "supplier-acme.md": (
        "# Acme Components\n\n"
        "Quoted 12.40 EUR per unit for 10,000 units, delivery in 6 weeks.\n"
        "ISO 9001 certified. Two late deliveries in 2025, both under a week.\n"
    ),
    "supplier-borealis.md": (
        "# Borealis Parts\n\n"
        "Quoted 11.10 EUR per unit, but only from 25,000 units; delivery in 10 weeks.\n"
        "New to the market: no delivery record yet. Offers a free sample batch.\n"
    ),
    "supplier-corvid.md": (
        "# Corvid Industrial\n\n"
        "Quoted 13.05 EUR per unit for 10,000 units, delivery in 3 weeks.\n"
        "On-time record of 99% over four years. Payment terms of 60 days.\n"
    ),
}
"""The sample notes, by file name."""


def _usable(folder: Path) -> bool:
    """Whether ``folder`` may hold the sample: absent, empty, or holding a sample note."""
    if not folder.exists():
        return True
    if not folder.is_dir():
        return False
    names = {p.name for p in folder.iterdir()}
    return not names or bool(names & set(DEMO_NOTES))


def create_demo_workspace(data_dir: Path) -> Path:
    """The sample workspace in ``data_dir``, created if needed; existing notes are kept.

    ``<data_dir>/demo-workspace`` is reused when it holds sample notes (a report the demo
    wrote there before is fine; a deleted note is written again); when it holds something
    else, the next free ``demo-workspace-2``, ``-3``… is used instead.

    Raises:
        InvalidInputError: the folder cannot be created or written.
    """
    for n in range(1, 100):
        folder = data_dir / (DEMO_FOLDER if n == 1 else f"{DEMO_FOLDER}-{n}")
        if _usable(folder):
            break
    else:
        raise InvalidInputError(
            f"no free folder for the sample workspace in {data_dir}: remove old demo folders"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in DEMO_NOTES.items():
            note = folder / name
            if not note.exists():
                note.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError(
            f"cannot write the sample workspace {folder}: {exc.strerror or exc}"
        ) from None
    return folder


def start_demo_run(client: Client) -> Run:
    """Queue a demo-model run on the sample workspace (no API key, nothing to pay)."""
    workspace = create_demo_workspace(Path(client.db_path).parent)
    return client.start_run(DEMO_GOAL, model="demo", workspace=workspace)


class WorkspaceState(StrEnum):
    """What a workspace folder chosen for a run holds."""

    DEFAULT = "default"
    """Left empty: a new folder in the data folder (nothing to warn about)."""
    FILES = "files"
    MISSING = "missing"
    EMPTY = "empty"
    UNREADABLE = "unreadable"
    NOT_A_FOLDER = "not_a_folder"


@dataclass(frozen=True)
class WorkspaceCheck:
    """The state of a workspace path and one line for the analyst (empty when fine)."""

    state: WorkspaceState
    message: str = ""

    @property
    def warns(self) -> bool:
        """The run can start, but the agent will find nothing to work on."""
        return self.state in (
            WorkspaceState.MISSING,
            WorkspaceState.EMPTY,
            WorkspaceState.UNREADABLE,
        )


def check_workspace(text: str) -> WorkspaceCheck:
    """What the workspace ``text`` (as typed; empty: the default) holds for a run."""
    text = text.strip()
    if not text:
        return WorkspaceCheck(WorkspaceState.DEFAULT)
    path = Path(text).expanduser()
    try:
        if not path.exists():
            return WorkspaceCheck(
                WorkspaceState.MISSING,
                "This folder does not exist: it will be created empty, with no files for "
                "the agent.",
            )
        if not path.is_dir():
            return WorkspaceCheck(
                WorkspaceState.NOT_A_FOLDER, "This is a file, not a folder: choose a folder."
            )
        if not any(not p.name.startswith(".") for p in path.iterdir()):
            return WorkspaceCheck(
                WorkspaceState.EMPTY, "This folder is empty: the agent will find no files in it."
            )
    except OSError as exc:
        return WorkspaceCheck(
            WorkspaceState.UNREADABLE,
            f"This folder cannot be read ({exc.strerror or 'no access'}): choose another one.",
        )
    return WorkspaceCheck(WorkspaceState.FILES)
