"""Tags on runs and the analyst's notes on steps: what a valid one is.

A tag is 1 to :data:`TAG_MAX` characters of ASCII letters, digits, ``-``, ``_``, ``.`` and
``:``, beginning with a letter or a digit (so that ``+tag`` and ``-tag`` read as changes
on the command line); tags compare case-insensitively and are kept lowercase. A note is
text an analyst typed (checked as every typed text is) of at most :data:`NOTE_MAX`
characters. Neither is part of a run's journal: the agent never reads them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.text import check_text

TAG_MAX = 40
"""The longest tag, in characters."""

TAGS_PER_RUN = 50
"""The most tags one run may carry."""

NOTE_MAX = 10_000
"""The longest note on a step, in characters."""

_TAG = re.compile(rf"[a-z0-9][a-z0-9_.:-]{{0,{TAG_MAX - 1}}}")


def normalize_tag(text: str) -> str:
    """``text`` as a tag (stripped, lowercase); raises InvalidInputError saying what is wrong."""
    tag = str(text).strip().lower()
    if _TAG.fullmatch(tag) is None:
        shown = tag if len(tag) <= 60 else tag[:57] + "..."
        raise InvalidInputError(
            f"{shown!r} is not a tag: use 1-{TAG_MAX} letters, digits, '-', '_', '.' or ':', "
            "beginning with a letter or a digit"
        )
    return tag


def split_tags(text: str) -> list[str]:
    """The tags typed in one line, separated by commas or spaces (``"q3, urgent"``)."""
    return [part for part in re.split(r"[,\s]+", str(text)) if part]


def normalize_tags(texts: Iterable[str]) -> tuple[str, ...]:
    """Every tag of ``texts`` checked, lowercase, once each, sorted; raises InvalidInputError."""
    found = {normalize_tag(text) for text in texts}
    if len(found) > TAGS_PER_RUN:
        raise InvalidInputError(f"{len(found)} tags: a run carries at most {TAGS_PER_RUN}")
    return tuple(sorted(found))


def check_note(text: str) -> str:
    """A note's text, stripped; raises InvalidInputError when empty, too long or not text."""
    note = check_text(str(text), "the note").strip()
    if not note:
        raise InvalidInputError("the note is empty: write what you noticed about the step")
    if len(note) > NOTE_MAX:
        raise InvalidInputError(f"the note has {len(note):,} characters: at most {NOTE_MAX:,}")
    return note


@dataclass(frozen=True, slots=True)
class StepNote:
    """The analyst's note on one step of a run (never part of the conversation).

    Attributes:
        id: the note's number (in the order notes were written).
        run_id: the run.
        seq: the step it is about.
        text: what the analyst wrote.
        created_at: when, in seconds since the epoch.
    """

    id: int
    run_id: str
    seq: int
    text: str
    created_at: float
