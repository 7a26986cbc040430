"""The analyst's annotations, for the app, the CLI and the HTTP API: tags and step notes.

Tags label runs (``desktop-agent tag RUN +q3 -draft``, ``runs --tag q3``); a note is what
the analyst noticed about one step (``desktop-agent note RUN 12 "source is stale"``).
Neither reaches the agent (a message to the agent is a steer note), neither is a step of
the journal, and an archived run is read-only: it takes neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from desktop_agent.client.api import Client
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.tags import StepNote, check_note, normalize_tag, normalize_tags
from desktop_agent.persistence import tagging


@dataclass(frozen=True)
class TagChange:
    """What a ``tag`` command did.

    Attributes:
        run_id: the run.
        tags: its tags now, sorted.
        added: tags it did not carry before.
        removed: tags it no longer carries.
    """

    run_id: str
    tags: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


def parse_changes(changes: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``+tag`` (or a bare ``tag``) to add, ``-tag`` to remove: the tags to add and remove.

    Raises:
        InvalidInputError: a change names no valid tag, or both adds and removes one.
    """
    add: list[str] = []
    remove: list[str] = []
    for change in changes:
        text = str(change).strip()
        if text.startswith("-"):
            remove.append(normalize_tag(text[1:]))
        else:
            add.append(normalize_tag(text.removeprefix("+")))
    both = sorted(set(add) & set(remove))
    if both:
        raise InvalidInputError(f"{', '.join(both)} is both added and removed: say which")
    return tuple(sorted(set(add))), tuple(sorted(set(remove)))


def change_tags(
    client: Client, run_id: str, add: Sequence[str] = (), remove: Sequence[str] = ()
) -> TagChange:
    """Add and remove tags of a run (id or unique prefix); nothing changes on a bad tag.

    Raises:
        NotFoundError: no such run, or it is archived (read-only).
        InvalidInputError: a tag is not valid, or the run would carry too many.
    """
    adding, removing = normalize_tags(add), normalize_tags(remove)
    run = client.run(run_id)
    now = client._store.now()
    after = tagging.change_tags(client._db, run.id, adding, removing, now)
    before = set(run.tags)
    return TagChange(
        run.id,
        after,
        tuple(t for t in after if t not in before),
        tuple(sorted(before - set(after))),
    )


def set_tags(client: Client, run_id: str, tags: Sequence[str]) -> TagChange:
    """Give a run exactly ``tags`` (the app's Tags… prompt)."""
    wanted = normalize_tags(tags)
    run = client.run(run_id)
    gone = tuple(t for t in run.tags if t not in wanted)
    return change_tags(client, run.id, wanted, gone)


def add_note(client: Client, run_id: str, seq: int, text: str) -> StepNote:
    """Write the analyst's note on step ``seq`` of a run (any state; never sent to the agent).

    Raises:
        NotFoundError: no such run or step, or the run is archived (read-only).
        InvalidInputError: the note is empty, too long or not text.
    """
    note = check_note(text)
    run = client.run(run_id)
    return tagging.add_note(client._db, run.id, int(seq), note, client._store.now())


def step_notes(client: Client, run_id: str) -> list[StepNote]:
    """The notes on a run's steps (id or unique prefix), by step, in the order written."""
    return tagging.notes_of(client._db, client.run(run_id).id)


def notes_by_step(notes: Iterable[StepNote]) -> dict[int, tuple[StepNote, ...]]:
    """Notes grouped by the step they are about."""
    out: dict[int, list[StepNote]] = {}
    for note in notes:
        out.setdefault(note.seq, []).append(note)
    return {seq: tuple(found) for seq, found in out.items()}


def note_json(note: StepNote) -> dict[str, object]:
    """A note as plain data (``--json``, the HTTP API)."""
    return {
        "id": note.id,
        "run_id": note.run_id,
        "seq": note.seq,
        "text": note.text,
        "created_at": note.created_at,
    }
