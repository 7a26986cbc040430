"""The Report tab: the run's report rendered, uncited sentences tinted, references clickable."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor, QTextDocument
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.widgets.report_view import uncited_tint
from tests.gui.conftest import open_window, select, window  # noqa: F401  (the window fixtures)
from tests.report.journals import cited_run


def _fragment(doc: QTextDocument, want: str, *, href: bool) -> tuple[int, str]:
    """Where the first fragment whose anchor (or text) is ``want`` is, and its background."""
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            f = it.fragment()
            fmt = f.charFormat()
            found = fmt.anchorHref() == want if href else want in f.text()
            if found:
                return f.position() + f.length() // 2, fmt.background().color().name()
            it += 1
        block = block.next()
    raise AssertionError(f"no fragment {want!r} in the report")


def test_the_report_tab_renders_the_report_and_a_reference_selects_its_source_step(
    qtbot: QtBot,
    window: MainWindow,  # noqa: F811
    client: Client,
    workspace: Path,
) -> None:
    run = cited_run(client, workspace)
    select(qtbot, window, run.run_id)
    detail = window.detail
    qtbot.waitUntil(lambda: detail.model.row_of(run.last) >= 0)
    view = detail.report_view
    detail.inspector.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.report is not None and view.run_id == run.run_id)
    doc = view.browser.document()
    text = doc.toPlainText()
    assert "Q3 market" in text and "# Q3" not in text and "**" not in text  # rendered
    assert "The market grew 4% in 2025, says Alpha. [1]" in text
    assert "[2] beta.txt, chars 120–142" in text
    assert "report.md, written at step 5 · 3 of 5 sentences cited" in view.label.text()
    tint = uncited_tint(view.palette()).name()
    assert _fragment(doc, "Three vendors lead the field.", href=False)[1] == tint
    assert _fragment(doc, "Churn fell by a third", href=False)[1] != tint
    detail.select_step(1)
    position, _ = _fragment(doc, "ref:2", href=True)
    cursor = QTextCursor(doc)
    cursor.setPosition(position)
    at = view.browser.cursorRect(cursor).center()
    QTest.mouseClick(
        view.browser.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at
    )
    qtbot.waitUntil(lambda: (e := detail.current_entry()) is not None and e.seq == 3)
    assert detail.current_entry() is not None and detail.current_entry().name == "read_file"  # type: ignore[union-attr]
