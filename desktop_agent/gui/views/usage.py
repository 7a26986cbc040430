"""What all runs spent (View > Usage).

A chart of spend per day, and totals per model, schedule and batch: the same figures as
``desktop-agent usage``, read on the task pool.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QRectF, QSize, Qt, Slot
from PySide6.QtGui import QCloseEvent, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.api import Client
from desktop_agent.client.messages import plain_error
from desktop_agent.client.usage import Total, Usage, usage_since
from desktop_agent.client.views import model_label
from desktop_agent.domain import RunStatus
from desktop_agent.domain.units import format_usd
from desktop_agent.gui import theme
from desktop_agent.gui.tasks import TaskRunner

PERIODS = ((7, "Last 7 days"), (30, "Last 30 days"), (90, "Last 90 days"))
DAY = 86400.0


def days_of(since: float, now: float) -> list[str]:
    """Every local calendar day from ``since`` to ``now`` (``YYYY-MM-DD``), oldest first."""
    out: list[str] = []
    t = since
    while t <= now + 1:
        day = time.strftime("%Y-%m-%d", time.localtime(t))
        if not out or out[-1] != day:
            out.append(day)
        t += DAY / 2
    return out


class DailyChart(QWidget):
    """Spend per day as bars, every day of the period shown (days without spend at zero)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.days: list[tuple[str, float]] = []
        self.setMinimumHeight(180)

    def sizeHint(self) -> QSize:
        """Wide and short."""
        return QSize(720, 200)

    def set_days(self, days: list[tuple[str, float]]) -> None:
        """Show ``(day, dollars)`` pairs."""
        self.days = days
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        """Bars with the highest day's amount as the scale."""
        painter = QPainter(self)
        pal = self.palette()
        fm = painter.fontMetrics()
        rect = QRectF(self.rect()).adjusted(8, 8, -8, -fm.height() - 10)
        top = max((v for _d, v in self.days), default=0.0)
        painter.setPen(pal.color(QPalette.ColorRole.Text))
        if not self.days or top <= 0:
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, "Nothing was spent in this period")
            return
        painter.drawText(rect.adjusted(0, -4, 0, 0), Qt.AlignmentFlag.AlignLeft, format_usd(top))
        width = rect.width() / len(self.days)
        color = theme.status_color(RunStatus.RUNNING, pal)
        for i, (_day, value) in enumerate(self.days):
            h = (value / top) * (rect.height() - fm.height())
            bar = QRectF(rect.left() + i * width + 1, rect.bottom() - h, max(1.0, width - 2), h)
            painter.fillRect(bar, color)
        for i in (0, len(self.days) - 1):
            label = self.days[i][0][5:]
            x = rect.left() + i * width
            align = Qt.AlignmentFlag.AlignLeft if i == 0 else Qt.AlignmentFlag.AlignRight
            box = QRectF(x if i == 0 else x - 60 + width, rect.bottom() + 4, 60, fm.height())
            painter.drawText(box, align, label)


def _item(label: str, t: Total) -> QTreeWidgetItem:
    return QTreeWidgetItem(
        [label, format_usd(t.cost_usd), f"{t.input_tokens:,}", f"{t.output_tokens:,}",
         str(len(t.runs))]
    )  # fmt: skip


class UsageWindow(QWidget):
    """Spend and tokens across runs (see the module's docstring)."""

    def __init__(self, client: Client, tasks: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Usage")
        self.client, self.tasks = client, tasks
        self.closed = False
        self.usage: Usage | None = None
        self.period = QComboBox(self)
        for days, label in PERIODS:
            self.period.addItem(label, days)
        self.period.setCurrentIndex(1)
        self.period.currentIndexChanged.connect(self._on_period_current_index_changed)
        self.total = QLabel("Reading…", self)
        self.chart = DailyChart(self)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["", "Cost", "Tokens in", "Tokens out", "Runs"])
        self.tree.setColumnWidth(0, 280)
        bar = QHBoxLayout()
        bar.addWidget(self.total, 1)
        bar.addWidget(self.period)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.chart)
        layout.addWidget(self.tree, 1)
        self.setMinimumSize(640, 480)
        self.resize(900, 640)
        self.reload()

    def closeEvent(self, event: QCloseEvent) -> None:
        """Answers still on their way are dropped."""
        self.closed = True
        super().closeEvent(event)

    @Slot(int)
    def _on_period_current_index_changed(self, _index: int) -> None:
        self.reload()

    def reload(self) -> None:
        """Read the totals of the chosen period (on the task pool)."""
        days = int(self.period.currentData())
        now = time.time()
        since = time.mktime((*time.localtime(now - (days - 1) * DAY)[:3], 0, 0, 0, 0, 0, -1))
        client = self.client

        def shown(usage: Usage) -> None:
            if not self.closed:
                self.show_usage(usage, now)

        def failed(exc: Exception) -> None:
            if not self.closed:
                self.total.setText(f"Could not read the usage: {plain_error(exc)}")

        self.tasks.submit(lambda: usage_since(client, since), shown, failed)

    def show_usage(self, usage: Usage, now: float) -> None:
        """Fill the chart and the table."""
        self.usage = usage
        t = usage.total
        self.total.setText(
            f"{format_usd(t.cost_usd)} in {t.calls} model call(s) of {len(t.runs)} run(s); "
            f"{t.input_tokens:,} tokens in, {t.output_tokens:,} out"
        )
        self.chart.set_days(
            [(d, usage.by_day[d].cost_usd if d in usage.by_day else 0.0)
             for d in days_of(usage.since, now)]
        )  # fmt: skip
        self.tree.clear()
        groups = (
            ("Per model", usage.by_model, model_label),
            ("Per schedule", usage.by_schedule, str),
            ("Per batch", usage.by_batch, str),
        )
        for title, group, name in groups:
            if not group:
                continue
            head = QTreeWidgetItem([title])
            for key, total in sorted(group.items(), key=lambda kv: -kv[1].cost_usd):
                head.addChild(_item(name(key), total))
            self.tree.addTopLevelItem(head)
            head.setExpanded(True)
