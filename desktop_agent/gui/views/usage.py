"""What all runs spent (View > Usage).

A chart of spend per day (local days), switchable to per model, schedule, batch or mode;
the split by mode (streamed, economy, archived runs apart) and what the prompt cache saved,
net, under the total; totals per mode, model, schedule and batch, each with its calls and
cache saving; this month so far against the monthly spend cap. The same figures as
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
    QProgressBar,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.api import Client
from desktop_agent.client.messages import plain_error
from desktop_agent.client.usage import ARCHIVED, MODE_LABELS, Total, Usage, saving_text
from desktop_agent.client.views import model_label
from desktop_agent.domain import RunStatus
from desktop_agent.domain.units import format_usd
from desktop_agent.gui import theme
from desktop_agent.gui.keyboard import close_on_escape
from desktop_agent.gui.tasks import TaskRunner

PERIODS = ((7, "Last 7 days"), (30, "Last 30 days"), (90, "Last 90 days"))
GROUPS = (("day", "Per day"), ("model", "Per model"), ("agent", "Per agent"),
          ("schedule", "Per schedule"), ("batch", "Per batch"),
          ("mode", "Per mode"))  # fmt: skip
COLUMNS = ["", "Cost", "Tokens in", "Tokens out", "Calls", "Runs", "Cache saved"]
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
    """Spend as bars, the highest amount as the scale.

    Every day of the period (days without spend at zero), or one bar per model, schedule
    or batch, costliest first, each labelled with its name and amount.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bars: list[tuple[str, float]] = []
        self.per_day = True
        self.setMinimumHeight(200)

    def sizeHint(self) -> QSize:
        """Wide and short."""
        return QSize(720, 220)

    def set_days(self, days: list[tuple[str, float]]) -> None:
        """Show ``(day, dollars)`` pairs, oldest first; only the ends are labelled."""
        self.bars, self.per_day = days, True
        self.update()

    def set_groups(self, groups: list[tuple[str, float]]) -> None:
        """Show ``(name, dollars)`` pairs as they come, each bar labelled."""
        self.bars, self.per_day = groups, False
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        """Bars with the highest amount as the scale."""
        painter = QPainter(self)
        pal = self.palette()
        fm = painter.fontMetrics()
        rect = QRectF(self.rect()).adjusted(8, 8, -8, -fm.height() - 10)
        top = max((v for _d, v in self.bars), default=0.0)
        painter.setPen(pal.color(QPalette.ColorRole.Text))
        if not self.bars or top <= 0:
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, "Nothing was spent in this period")
            return
        if self.per_day:  # groups carry their amounts above their bars
            painter.drawText(
                rect.adjusted(0, -4, 0, 0), Qt.AlignmentFlag.AlignLeft, format_usd(top)
            )
        width = rect.width() / len(self.bars)
        color = theme.status_color(RunStatus.RUNNING, pal)
        room = rect.height() - 2 * fm.height()
        for i, (_label, value) in enumerate(self.bars):
            h = (value / top) * room
            gap = 1.0 if self.per_day else min(12.0, width / 6)
            bar = QRectF(
                rect.left() + i * width + gap, rect.bottom() - h, max(1.0, width - 2 * gap), h
            )
            painter.fillRect(bar, color)
            if not self.per_day:
                above = QRectF(bar.left() - gap, bar.top() - fm.height() - 2, width, fm.height())
                painter.drawText(above, Qt.AlignmentFlag.AlignHCenter, format_usd(value))
        if self.per_day:
            for i in (0, len(self.bars) - 1):
                label = self.bars[i][0][5:]
                x = rect.left() + i * width
                align = Qt.AlignmentFlag.AlignLeft if i == 0 else Qt.AlignmentFlag.AlignRight
                box = QRectF(x if i == 0 else x - 60 + width, rect.bottom() + 4, 60, fm.height())
                painter.drawText(box, align, label)
            return
        for i, (label, _value) in enumerate(self.bars):
            text = fm.elidedText(label, Qt.TextElideMode.ElideMiddle, int(width) - 4)
            box = QRectF(rect.left() + i * width, rect.bottom() + 4, width, fm.height())
            painter.drawText(box, Qt.AlignmentFlag.AlignHCenter, text)


def month_text(usage: Usage) -> str:
    """This month so far, against the cap if one is set."""
    month = time.strftime("%B %Y", time.localtime(usage.month_start))
    spent = format_usd(usage.month)
    if usage.cap_usd is None:
        return f"{month} so far: {spent} (no monthly spend cap: set one in Settings)"
    share = usage.month / usage.cap_usd * 100 if usage.cap_usd > 0 else 100.0
    return f"{month} so far: {spent} of the {format_usd(usage.cap_usd)} monthly cap ({share:.0f}%)"


def simulated_text(usage: Usage) -> str:
    """The demo model's simulated spend, said apart ("" when there is none)."""
    sim = usage.simulated
    if not sim.calls and not sim.runs:
        return ""
    return (
        f" (not counted: {format_usd(sim.cost_usd)} simulated by the demo model in "
        f"{len(sim.runs)} run(s))"
    )


def signed_usd(amount: float) -> str:
    """Dollars, with a minus sign in front when negative."""
    return f"-{format_usd(-amount)}" if amount < 0 else format_usd(amount)


def mode_label(mode: str) -> str:
    """A mode's name as the window shows it (capitalised)."""
    label = MODE_LABELS.get(mode, mode)
    return label[:1].upper() + label[1:]


def modes_text(usage: Usage) -> str:
    """The period's spend split by mode, one part per mode that spent ("" when none)."""
    parts = []
    for mode, t in usage.by_mode.items():
        if not t.calls and not t.runs:
            continue
        count = f"{len(t.runs)} run(s)" if mode == ARCHIVED else f"{t.calls} call(s)"
        parts.append(f"{mode_label(mode)}: {format_usd(t.cost_usd)} in {count}")
    return " · ".join(parts)


def cache_text(usage: Usage) -> str:
    """What the prompt cache saved in the period, net ("" when no call was made)."""
    t = usage.total
    if not t.calls:
        return ""
    said = saving_text(t.cache_saving_usd)
    return (
        f"{said[:1].upper()}{said[1:]} (net: cache reads at their price instead of the input "
        "price, less what cache writes cost above it; archived runs not included)"
    )


def _item(label: str, t: Total, *, archived: bool = False) -> QTreeWidgetItem:
    calls = "" if archived else str(t.calls)
    saved = "" if archived else signed_usd(t.cache_saving_usd)
    return QTreeWidgetItem(
        [label, format_usd(t.cost_usd), f"{t.input_tokens:,}", f"{t.output_tokens:,}", calls,
         str(len(t.runs)), saved]
    )  # fmt: skip


class UsageWindow(QWidget):
    """Spend and tokens across runs (see the module's docstring)."""

    def __init__(self, client: Client, tasks: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        close_on_escape(self)
        self.setWindowTitle("Usage")
        self.client, self.tasks = client, tasks
        self.closed = False
        self.usage: Usage | None = None
        self.period = QComboBox(self)
        for days, label in PERIODS:
            self.period.addItem(label, days)
        self.period.setCurrentIndex(1)
        self.period.currentIndexChanged.connect(self._on_period_current_index_changed)
        self.group = QComboBox(self)
        for key, label in GROUPS:
            self.group.addItem(label, key)
        self.group.currentIndexChanged.connect(self._on_group_current_index_changed)
        self.now = time.time()
        self.total = QLabel("Reading…", self)
        self.modes = QLabel("", self)
        self.modes.setWordWrap(True)
        self.cache = QLabel("", self)
        self.cache.setWordWrap(True)
        self.month = QLabel("", self)
        self.month_bar = QProgressBar(self)
        self.month_bar.setTextVisible(False)
        self.month_bar.setMaximumHeight(10)
        self.month_bar.hide()
        self.chart = DailyChart(self)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setColumnWidth(0, 280)
        bar = QHBoxLayout()
        bar.addWidget(self.total, 1)
        bar.addWidget(self.group)
        bar.addWidget(self.period)
        month = QHBoxLayout()
        month.addWidget(self.month)
        month.addWidget(self.month_bar, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.modes)
        layout.addWidget(self.cache)
        layout.addLayout(month)
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

    @Slot(int)
    def _on_group_current_index_changed(self, _index: int) -> None:
        if self.usage is not None:
            self.show_chart(self.usage)

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

        self.tasks.submit(lambda: client.usage(since), shown, failed)

    def show_usage(self, usage: Usage, now: float) -> None:
        """Fill the chart and the table."""
        self.usage, self.now = usage, now
        t = usage.total
        self.total.setText(
            f"{format_usd(t.cost_usd)} in {t.calls} model call(s) of {len(t.runs)} run(s); "
            f"{t.input_tokens:,} tokens in, {t.output_tokens:,} out" + simulated_text(usage)
        )
        self.modes.setText(modes_text(usage))
        self.modes.setVisible(bool(self.modes.text()))
        self.cache.setText(cache_text(usage))
        self.cache.setVisible(bool(self.cache.text()))
        self.show_month(usage)
        self.show_chart(usage)
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
        spent = [(m, t) for m, t in usage.by_mode.items() if t.calls or t.runs]
        if spent:
            head = QTreeWidgetItem(["Per mode"])
            for mode, total in spent:  # in a fixed order: streamed, economy, archived
                head.addChild(_item(mode_label(mode), total, archived=mode == ARCHIVED))
            self.tree.addTopLevelItem(head)
            head.setExpanded(True)

    def show_month(self, usage: Usage) -> None:
        """The month's spend, and a gauge of it against the cap when one is set."""
        self.month.setText(month_text(usage))
        cap = usage.cap_usd
        self.month_bar.setVisible(cap is not None)
        if cap is not None:
            self.month_bar.setRange(0, 1000)
            self.month_bar.setValue(min(1000, round(usage.month / cap * 1000)) if cap else 1000)

    def show_chart(self, usage: Usage) -> None:
        """Bars of the chosen grouping: every day of the period, or the groups' totals."""
        key = str(self.group.currentData())
        if key == "day":
            self.chart.set_days(
                [(d, usage.by_day[d].cost_usd if d in usage.by_day else 0.0)
                 for d in days_of(usage.since, self.now)]
            )  # fmt: skip
            return
        if key == "mode":
            spent = [(m, t) for m, t in usage.by_mode.items() if t.calls or t.runs]
            self.chart.set_groups([(mode_label(m), t.cost_usd) for m, t in spent])
            return
        name = model_label if key == "model" else str
        groups = sorted(usage.group(key).items(), key=lambda kv: -kv[1].cost_usd)
        self.chart.set_groups([(name(k), t.cost_usd) for k, t in groups])
