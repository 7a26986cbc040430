"""Citations on the step that carries them: counted in its timeline row, listed in the inspector.

A run's journal holds an answer citing two documents (the report tests' builder); the
timeline's row of that answer says how many sources it cites, the inspector lists each
citation (file, page or characters, passage) and a click on one selects the step that read
the document.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFont, QImage, QPainter, QTextCursor, QTextDocument
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.report import Reference, entry_references
from desktop_agent.client.views import StepEntry, timeline_entries
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models import steps as steps_model
from desktop_agent.gui.models.steps import StepRole, StepTimelineModel
from desktop_agent.gui.widgets.run_detail import RunDetailPane
from desktop_agent.gui.widgets.timeline import StepDelegate
from tests.gui.conftest import open_window, select, window  # noqa: F401  (the window fixtures)
from tests.report.journals import cited_run


class _Recorder(QPainter):
    """A painter that keeps every text the delegate draws."""

    def __init__(self, image: QImage) -> None:
        super().__init__(image)
        self.texts: list[str] = []

    def drawText(self, *args: object) -> None:  # type: ignore[override]
        self.texts.append(str(args[-1]))
        super().drawText(*args)  # type: ignore[call-overload]


def _painted(model: StepTimelineModel, row: int) -> list[str]:
    """The texts of one timeline row as the delegate paints it."""
    option = QStyleOptionViewItem()
    option.rect = QRect(0, 0, 900, 26)
    option.font = QFont()
    option.state = QStyle.StateFlag.State_Enabled
    image = QImage(900, 26, QImage.Format.Format_RGB32)
    painter = _Recorder(image)
    StepDelegate().paint(painter, option, model.index(row))
    painter.end()
    return painter.texts


def _click_link(detail: RunDetailPane, href: str) -> None:
    """Click, with the mouse, the first link to ``href`` in the inspector's details."""
    browser = detail.inspector.details
    doc: QTextDocument = browser.document()
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            f = it.fragment()
            if f.charFormat().anchorHref() == href:
                cursor = QTextCursor(doc)
                cursor.setPosition(f.position() + f.length() // 2)
                browser.ensureCursorVisible()
                browser.setTextCursor(cursor)
                browser.ensureCursorVisible()
                at = browser.cursorRect(cursor).center()
                QTest.mouseClick(
                    browser.viewport(),
                    Qt.MouseButton.LeftButton,
                    Qt.KeyboardModifier.NoModifier,
                    at,
                )
                return
            it += 1
        block = block.next()
    raise AssertionError(f"no link to {href!r} in the step's details")


def _selected(detail: RunDetailPane) -> int | None:
    entry = detail.current_entry()
    return None if entry is None else entry.seq


def test_a_cited_answer_shows_its_sources_and_a_click_opens_the_step_that_read_one(
    qtbot: QtBot,
    window: MainWindow,  # noqa: F811
    client: Client,
    workspace: Path,
) -> None:
    run = cited_run(client, workspace)
    select(qtbot, window, run.run_id)
    detail = window.detail
    model = detail.model
    qtbot.waitUntil(lambda: model.row_of(run.last) >= 0)

    # The timeline: the answer's row counts its sources; the others say nothing of sources.
    answer = model.index(model.row_of(run.answer))
    assert answer.data(StepRole.SOURCES) == 2
    assert "2 sources" in _painted(model, answer.row())
    assert "cites 2 sources in 2 passages: alpha.pdf, beta.txt" in answer.data(
        Qt.ItemDataRole.ToolTipRole
    )
    for seq in (1, 2, 3, run.last):
        row = model.row_of(seq)
        assert model.index(row).data(StepRole.SOURCES) == 0
        assert not [t for t in _painted(model, row) if t.endswith((" source", " sources"))]

    # The inspector: the answer with its marks, then each citation's file, place, passage.
    assert detail.select_step(run.answer)
    text = detail.inspector.details.toPlainText()
    assert "According to Alpha, the market grew 4% in 2025[1]. Beta adds that" in text
    assert "churn fell by a third[2]. Three vendors lead the field." in text
    listed = text[text.index("Sources cited: 2 sources, 2 passages") :]
    assert "[1]\nalpha.pdf · pp. 3–4 · read at step 2\n“The market grew 4% in 2025.”" in listed
    assert "[2]\nbeta.txt · chars 120–142 · read at step 3\n“Churn fell by a third.”" in listed

    # A click on an entry selects the step that read that document.
    _click_link(detail, "source:3")
    qtbot.waitUntil(lambda: _selected(detail) == 3)
    assert detail.current_entry() is not None and detail.current_entry().name == "read_file"  # type: ignore[union-attr]
    assert "beta.txt" in detail.inspector.details.toPlainText()
    assert detail.select_step(run.answer)
    _click_link(detail, "source:2")
    qtbot.waitUntil(lambda: _selected(detail) == 2)


def test_sources_unknown_are_listed_without_a_link(
    qtbot: QtBot,
    window: MainWindow,  # noqa: F811
    client: Client,
    workspace: Path,
) -> None:
    """An answer recorded without its documents still lists what it cites, by title."""
    run = cited_run(client, workspace, report=None, documents=[])
    select(qtbot, window, run.run_id)
    detail = window.detail
    qtbot.waitUntil(lambda: detail.model.row_of(run.answer) >= 0)
    assert detail.select_step(run.answer)
    text = detail.inspector.details.toPlainText()
    assert "alpha.pdf · pp. 3–4 · read at no known step" in text
    assert "source:" not in detail.inspector.details.toHtml()


def test_the_timeline_resolves_a_steps_citations_once_not_per_paint(
    qtbot: QtBot, client: Client, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = cited_run(client, workspace)
    calls: list[int] = []
    real: Callable[[StepEntry], tuple[Reference, ...]] = entry_references

    def counted(entry: StepEntry) -> tuple[Reference, ...]:
        calls.append(entry.seq)
        return real(entry)

    monkeypatch.setattr(steps_model, "entry_references", counted)
    model = StepTimelineModel()
    entries = timeline_entries(client, run.run_id)
    model.reset(run.run_id, entries)
    row = model.row_of(run.answer)
    for _ in range(5):
        _painted(model, row)
        model.index(row).data(Qt.ItemDataRole.ToolTipRole)
    assert calls == [run.answer]
    # A step that changes is resolved again, once.
    changed = entries[row]
    model.merge([dataclasses.replace(changed, cost_usd=changed.cost_usd + 1)])
    for _ in range(3):
        _painted(model, row)
    assert calls == [run.answer, run.answer]
