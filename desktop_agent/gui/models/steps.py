"""The timeline of one run: a list model over :class:`StepEntry` values.

It holds every step of the run (10,000 rows are fine: rows are slim, summaries are made
only for the rows a view asks about, and views use uniform row heights). A model call's
citations are resolved once, the first time its row is asked about (and again only when
the step changes): a paint reads the cached count, never the step's JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import Any

from PySide6.QtCore import QAbstractListModel, QModelIndex, QObject, QPersistentModelIndex, Qt

from desktop_agent.client.report import Reference, entry_references, sources_of
from desktop_agent.client.stepkinds import describe
from desktop_agent.client.timeaxis import in_batch
from desktop_agent.client.views import StepEntry, step_summary
from desktop_agent.domain import StepKind, StepStatus
from desktop_agent.domain.tags import StepNote
from desktop_agent.gui import fmt

Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


class StepRole(IntEnum):
    """Custom data roles of the timeline."""

    ENTRY = Qt.ItemDataRole.UserRole + 1
    """The :class:`StepEntry`."""
    SUMMARY = Qt.ItemDataRole.UserRole + 2
    """One line saying what the step did."""
    RETRIED = Qt.ItemDataRole.UserRole + 3
    """A failed model call that the next step tried again."""
    SEQ = Qt.ItemDataRole.UserRole + 4
    NOTES = Qt.ItemDataRole.UserRole + 5
    """The analyst's notes on the step (a tuple of :class:`StepNote`, empty when none)."""
    SOURCES = Qt.ItemDataRole.UserRole + 6
    """How many distinct sources a model call's answer cites (0: none)."""


class StepTimelineModel(QAbstractListModel):
    """The steps of the selected run, in journal order.

    Args:
        parent: owner.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.run_id: str | None = None
        self._rows: list[StepEntry] = []
        self._by_seq: dict[int, int] = {}
        self._open: set[int] = set()
        self._summaries: dict[int, str] = {}
        self._references: dict[int, tuple[tuple[Reference, ...], int]] = {}
        """Per step seen: its citations resolved and how many distinct sources they name."""
        self._notes: dict[int, tuple[StepNote, ...]] = {}

    # ------------------------------------------------------------------ Qt API

    def rowCount(self, parent: Index = _ROOT) -> int:
        """Number of steps (a flat list)."""
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        """What a row shows for ``role``."""
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        entry = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return f"#{entry.seq} {describe(entry.kind).label} {self.summary(index.row())}"
        if role == StepRole.ENTRY:
            return entry
        if role == StepRole.SUMMARY:
            return self.summary(index.row())
        if role == StepRole.RETRIED:
            return self.retried(index.row())
        if role == StepRole.SEQ:
            return entry.seq
        if role == StepRole.NOTES:
            return self._notes.get(entry.seq, ())
        if role == StepRole.SOURCES:
            return self._cited(index.row())[1]
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(index.row(), entry)
        return None

    def _tooltip(self, row: int, entry: StepEntry) -> str:
        parts = [f"Step {entry.seq}: {entry.kind.value} {entry.name} ({entry.status.value})"]
        if entry.attempt > 1:
            parts.append(f"attempt {entry.attempt}")
        if self.retried(row):
            parts.append("failed, then retried by the next step")
        if entry.duration_s is not None:
            parts.append(f"took {fmt.short_duration(entry.duration_s)}")
        if entry.error:
            parts.append(entry.error)
        refs = self.references(row)
        if refs:
            files = sources_of(refs)
            parts.append(
                f"cites {_count(len(files), 'source')} in {_count(len(refs), 'passage')}: "
                + ", ".join(files)
            )
        parts += [f"✎ {n.text}" for n in self._notes.get(entry.seq, ())]
        return "\n".join(parts)

    # ------------------------------------------------------------------ queries

    def summary(self, row: int) -> str:
        """The summary line of ``row`` (made on first use, then cached)."""
        entry = self._rows[row]
        text = self._summaries.get(entry.seq)
        if text is None:
            text = step_summary(entry)
            if entry.seq in self._notes:
                text = f"✎ {text}"  # the analyst wrote a note on it (the inspector shows it)
            self._summaries[entry.seq] = text
        return text

    def references(self, row: int) -> tuple[Reference, ...]:
        """The citations of ``row``'s answer, resolved (on first use, then cached)."""
        return self._cited(row)[0]

    def _cited(self, row: int) -> tuple[tuple[Reference, ...], int]:
        entry = self._rows[row]
        found = self._references.get(entry.seq)
        if found is None:
            refs = entry_references(entry)
            found = self._references[entry.seq] = (refs, len(sources_of(refs)))
        return found

    def notes(self, seq: int) -> tuple[StepNote, ...]:
        """The analyst's notes on step ``seq``."""
        return self._notes.get(seq, ())

    def set_notes(self, notes: Iterable[StepNote]) -> None:
        """The run's notes as last read: the rows whose notes changed are repainted."""
        grouped: dict[int, list[StepNote]] = {}
        for note in notes:
            grouped.setdefault(note.seq, []).append(note)
        new = {seq: tuple(found) for seq, found in grouped.items()}
        if new == self._notes:
            return
        changed = {s for s in new.keys() | self._notes.keys() if new.get(s) != self._notes.get(s)}
        self._notes = new
        for seq in changed:
            self._summaries.pop(seq, None)
            row = self._by_seq.get(seq)
            if row is not None:
                index = self.index(row)
                self.dataChanged.emit(index, index)

    def retried(self, row: int) -> bool:
        """Whether ``row`` is a failed model call that the next step tried again."""
        entry = self._rows[row]
        if entry.kind != StepKind.MODEL_CALL or entry.status != StepStatus.FAILED:
            return False
        return row + 1 < len(self._rows) and self._rows[row + 1].kind == StepKind.MODEL_CALL

    def entry(self, row: int) -> StepEntry:
        """The step at ``row``."""
        return self._rows[row]

    def entries(self) -> Sequence[StepEntry]:
        """Every step, in order."""
        return tuple(self._rows)

    def row_of(self, seq: int) -> int:
        """Row of step ``seq``, or -1."""
        return self._by_seq.get(seq, -1)

    def resume_seq(self) -> int:
        """The first step a poll must read again: the oldest open one, else the next new."""
        if self._open:
            return min(self._open)
        return (self._rows[-1].seq + 1) if self._rows else 1

    def has_open(self) -> bool:
        """Whether some step has its intent but no outcome yet."""
        return bool(self._open)

    def streaming(self) -> StepEntry | None:
        """The open model call (or compaction) whose output is being produced, if any."""
        for seq in sorted(self._open, reverse=True):
            entry = self._rows[self._by_seq[seq]]
            if entry.kind in (StepKind.MODEL_CALL, StepKind.COMPACTION) and not in_batch(entry):
                return entry  # a call in a Message Batch streams nothing
        return None

    # ------------------------------------------------------------------ updates

    def reset(self, run_id: str | None, entries: Iterable[StepEntry] = ()) -> None:
        """Show another run (or none)."""
        self.beginResetModel()
        self._rows = list(entries)
        self._by_seq = {e.seq: i for i, e in enumerate(self._rows)}
        self._open = {e.seq for e in self._rows if e.is_open}
        self._summaries = {}
        self._references = {}
        if run_id != self.run_id:
            self._notes = {}
        self.run_id = run_id
        self.endResetModel()

    def merge(self, entries: Iterable[StepEntry]) -> int:
        """Replace steps that changed and append new ones; returns how many were added."""
        new: list[StepEntry] = []
        for entry in entries:
            i = self._by_seq.get(entry.seq)
            if i is None:
                new.append(entry)
                continue
            if self._rows[i] == entry:
                continue
            self._rows[i] = entry
            self._summaries.pop(entry.seq, None)
            self._references.pop(entry.seq, None)
            self._track_open(entry)
            index = self.index(i)
            self.dataChanged.emit(index, index)
            if i > 0 and entry.kind == StepKind.MODEL_CALL:
                before = self.index(i - 1)  # its "retried" mark may have changed
                self.dataChanged.emit(before, before)
        if new:
            start = len(self._rows)
            self.beginInsertRows(QModelIndex(), start, start + len(new) - 1)
            for offset, entry in enumerate(new):
                self._rows.append(entry)
                self._by_seq[entry.seq] = start + offset
                self._track_open(entry)
            self.endInsertRows()
            if start > 0:
                before = self.index(start - 1)
                self.dataChanged.emit(before, before)
        return len(new)

    def _track_open(self, entry: StepEntry) -> None:
        if entry.is_open:
            self._open.add(entry.seq)
        else:
            self._open.discard(entry.seq)
