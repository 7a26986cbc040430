"""Search all history (Ctrl+K): every run's steps, goals and approvals, archived runs too.

One field takes the same query as ``desktop-agent search`` (words, "a phrase", prefix*);
a period narrows it. Results are grouped by run: a row per run (its goal and how many
matches), its matches inside (the step, what kind it is, the matching text; the selected
one's snippet below with the match in bold). Arrows walk them; opening one (Return,
double-click; on a run's row, its first match) selects its run in the main window with the
step selected in the timeline and the query's words marked in the step's details; a result
of an archived run offers to bring the run back first. Searching runs on the app's task
pool (the first search after many new steps indexes them), a moment after typing stops.
"""

from __future__ import annotations

import html
import time
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.api import Client
from desktop_agent.client.messages import plain_error
from desktop_agent.client.search import SearchFilters, SearchHit, date_range
from desktop_agent.gui.keyboard import close_on_escape
from desktop_agent.gui.tasks import TaskRunner

PERIODS = (("any time", None), ("today", "today"), ("last 7 days", "last 7 days"),
           ("last 30 days", "last 30 days"))  # fmt: skip
COLUMNS = ("Run / step", "Kind", "Match", "When")
HIT_ROLE = Qt.ItemDataRole.UserRole + 1
DEBOUNCE_MS = 300
"""Quiet time after typing before a search starts."""


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def _items(cells: list[str], hit: SearchHit) -> list[QStandardItem]:
    """A results row: its cells, each holding the hit it opens."""
    row = [QStandardItem(c) for c in cells]
    for item in row:
        item.setEditable(False)
        item.setData(hit, HIT_ROLE)
    return row


def terms(query: str) -> list[str]:
    """The words of a query to mark in an opened step (phrases split, prefixes cut at ``*``)."""
    words = [w.strip('"').rstrip("*") for w in query.split()]
    return [w for w in words if len(w) >= 2 and w.upper() not in ("AND", "OR", "NOT")]


def marked(hit: SearchHit) -> str:
    """The snippet as rich text, its matches in bold."""
    parts, last = [], 0
    for start, end in hit.spans:
        parts.append(html.escape(hit.snippet[last:start]))
        parts.append(f"<b>{html.escape(hit.snippet[start:end])}</b>")
        last = end
    parts.append(html.escape(hit.snippet[last:]))
    return "".join(parts)


class SearchWindow(QWidget):
    """Search all history (see the module's docstring).

    Args:
        client: the app's client.
        tasks: the app's task pool.

    Signals:
        open_requested: ``(run_id, seq, words)`` of the result to open (seq 0: the run
            itself; ``words``: the query's, to mark in the step).
        unarchive_requested: ``(run_id, seq)`` of an archived run's result: bring the run
            back, then open it.
    """

    open_requested = Signal(str, int, object)
    unarchive_requested = Signal(str, int)

    def __init__(self, client: Client, tasks: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Search all runs")
        close_on_escape(self)
        self.client, self.tasks = client, tasks
        self.closed = False
        self.hits: list[SearchHit] = []
        self._asked = 0
        self.query = QLineEdit(self)
        self.query.setPlaceholderText('words, "a phrase" or a prefix* — tool results too')
        self.query.setClearButtonEnabled(True)
        self.query.textChanged.connect(self._on_query_text_changed)
        self.query.returnPressed.connect(self._on_query_return_pressed)
        self.period = QComboBox(self)
        for label, _value in PERIODS:
            self.period.addItem(label)
        self.period.currentIndexChanged.connect(self._on_period_current_index_changed)
        self.status = QLabel("Type to search every run's steps, goals and approvals.", self)
        self.model = QStandardItemModel(0, len(COLUMNS), self)
        self.model.setHorizontalHeaderLabels(list(COLUMNS))
        self.table = QTreeView(self)
        """The results: a row per run, its matches inside."""
        self.table.setModel(self.model)
        self.table.setUniformRowHeights(True)
        self.table.setAlternatingRowColors(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(2, header.ResizeMode.Stretch)
        fm = self.fontMetrics()
        self.table.setColumnWidth(0, 320)
        self.table.setColumnWidth(1, fm.horizontalAdvance("model_call") + 20)
        self.table.setColumnWidth(3, fm.horizontalAdvance("2026-11-24 00:00") + 24)
        self.table.doubleClicked.connect(self._on_table_double_clicked)
        self.table.activated.connect(self._on_table_double_clicked)
        down = QShortcut(QKeySequence(Qt.Key.Key_Down), self.query)
        down.setContext(Qt.ShortcutContext.WidgetShortcut)
        down.activated.connect(self._on_query_down_activated)
        self.snippet = QLabel(self)
        self.snippet.setTextFormat(Qt.TextFormat.RichText)
        self.snippet.setWordWrap(True)
        self.open_button = QPushButton("Open", self)
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._on_open_button_clicked)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row_changed)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self.search)
        bar = QHBoxLayout()
        bar.addWidget(self.query, 1)
        bar.addWidget(self.period)
        foot = QHBoxLayout()
        foot.addWidget(self.snippet, 1)
        foot.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.status)
        layout.addWidget(self.table, 1)
        layout.addLayout(foot)
        self.setMinimumSize(720, 420)
        self.resize(1000, 600)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Stop the typing timer; answers still on their way are dropped."""
        self.closed = True
        self._debounce.stop()
        super().closeEvent(event)

    # ------------------------------------------------------------------ searching

    @Slot(str)
    def _on_query_text_changed(self, _text: str) -> None:
        self._debounce.start()

    @Slot()
    def _on_query_down_activated(self) -> None:
        """Down in the words goes to the results (the first one, if none is current)."""
        if not self.model.rowCount():
            return
        if not self.table.currentIndex().isValid():
            self.table.setCurrentIndex(self._first_match())
        self.table.setFocus(Qt.FocusReason.OtherFocusReason)

    @Slot()
    def _on_query_return_pressed(self) -> None:
        self._debounce.stop()
        self.search()

    @Slot(int)
    def _on_period_current_index_changed(self, _index: int) -> None:
        self.search()

    def search(self) -> None:
        """Search now with what the field and the period say (on the task pool).

        A search typed and then asked for at once (Return) is not asked again when the
        typing's pause runs out.
        """
        self._debounce.stop()
        text = self.query.text().strip()
        if not text:
            self.model.setRowCount(0)
            self.hits = []
            self.status.setText("Type to search every run's steps, goals and approvals.")
            return
        period = PERIODS[self.period.currentIndex()][1]
        since = date_range(time.time(), since=period)[0] if period else None
        client, filters = self.client, SearchFilters(since=since)
        self._asked += 1
        asked = self._asked
        self.status.setText("Searching…")

        def done(hits: list[SearchHit]) -> None:
            if not self.closed and asked == self._asked:
                self.show_hits(hits)

        def failed(exc: Exception) -> None:
            if not self.closed and asked == self._asked:
                self.status.setText(plain_error(exc))

        self.tasks.submit(lambda: client.search(text, filters, 200), done, failed)

    def show_hits(self, hits: list[SearchHit]) -> None:
        """Fill the results with ``hits``, grouped by run (in the order runs first match)."""
        self.hits = list(hits)
        self.model.removeRows(0, self.model.rowCount())
        groups: dict[str, list[SearchHit]] = {}
        for hit in hits:
            groups.setdefault(hit.run_id, []).append(hit)
        for run_hits in groups.values():
            first = run_hits[0]
            goal = first.goal + (" (archived)" if first.archived else "")
            n = len(run_hits)
            newest = max(h.at for h in run_hits)
            run_row = _items([goal, "", f"{n} match{'es' if n != 1 else ''}", _when(newest)], first)
            for item in run_row:
                font = item.font()
                font.setBold(True)
                item.setFont(font)
            for hit in run_hits:
                step = f"#{hit.seq}" if hit.seq else "goal"
                run_row[0].appendRow(_items([step, hit.kind, hit.snippet, _when(hit.at)], hit))
            self.model.appendRow(run_row)
        self.table.expandAll()
        self.status.setText(
            f"{len(hits)} match{'es' if len(hits) != 1 else ''} in {len(groups)} run(s)"
            if hits
            else "No matches: try fewer words, a prefix like report*, or any time."
        )
        if hits:
            self.table.setCurrentIndex(self._first_match())

    def _first_match(self) -> QModelIndex:
        """The first match of the first run (its row inside the run's)."""
        run = self.model.index(0, 0)
        return self.model.index(0, 0, run) if self.model.rowCount(run) else run

    def current_hit(self) -> SearchHit | None:
        """The result the keyboard is on (a run's row: its first match)."""
        return self._hit_at(self.table.currentIndex())

    # ------------------------------------------------------------------ opening

    def _hit_at(self, index: QModelIndex | QPersistentModelIndex) -> SearchHit | None:
        if not index.isValid():
            return None
        item = self.model.itemFromIndex(self.model.index(index.row(), 0, index.parent()))
        hit: Any = item.data(HIT_ROLE) if item is not None else None
        return hit if isinstance(hit, SearchHit) else None

    @Slot(QModelIndex, QModelIndex)
    def _on_current_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        hit = self._hit_at(current)
        self.open_button.setEnabled(hit is not None)
        if hit is None:
            self.snippet.clear()
            return
        self.open_button.setText("Bring back and open" if hit.archived else "Open")
        self.snippet.setText(marked(hit))

    @Slot()
    def _on_open_button_clicked(self) -> None:
        self.open_hit(self._hit_at(self.table.currentIndex()))

    @Slot(QModelIndex)
    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        self.open_hit(self._hit_at(index))

    def open_hit(self, hit: SearchHit | None) -> None:
        """Open ``hit``'s run at its step (an archived run is brought back first)."""
        if hit is None:
            return
        if hit.archived:
            self.unarchive_requested.emit(hit.run_id, hit.seq)
        else:
            self.open_requested.emit(hit.run_id, hit.seq, terms(self.query.text()))
