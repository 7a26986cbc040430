"""The run header: goal, model, status, budget gauges and the agent's plan.

Its parts live beside it: the gauge and the wait banner in :mod:`.header_parts`, the
words it shows in :mod:`.header_text`, the elided label in :mod:`.elided`; their names
are imported from here as before.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from PySide6.QtCore import QSize, Qt, Signal, Slot
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client.economy import BatchWait, batch_wait_words
from desktop_agent.client.forecast import Forecast, versus_words
from desktop_agent.client.views import RunRow, cache_words, model_label, run_settings_words
from desktop_agent.domain import MONTHLY_CAP_REACHED, Approval, Run, RunStatus, WaitReason
from desktop_agent.domain.placement import describe
from desktop_agent.gui import fmt, resources, theme
from desktop_agent.gui.controls import Control
from desktop_agent.gui.widgets.attachments_line import AttachmentsLine
from desktop_agent.gui.widgets.elided import ElidedLabel, fit_value, wrap_elided
from desktop_agent.gui.widgets.header_parts import Gauge, WaitBanner
from desktop_agent.gui.widgets.header_text import (
    TIME_EXPLAINED,
    TOKENS_EXPLAINED,
    WALL_EXPLAINED,
    agent_label,
    agent_words,
    call_summary,
    ratio,
    short_workspace,
    span,
    without_repeat,
)

__all__ = [
    "BATCH_REREAD_S",
    "TIME_EXPLAINED",
    "TOKENS_EXPLAINED",
    "WALL_EXPLAINED",
    "ElidedLabel",
    "Gauge",
    "RunHeader",
    "WaitBanner",
    "call_summary",
    "fit_value",
    "span",
    "without_repeat",
    "wrap_elided",
]


BATCH_REREAD_S = 5.0
"""How often the header reads again where a queued turn is (sent without a run change)."""


class RunHeader(QWidget):
    """Goal, model, status, budget gauges and plan of the selected run.

    Args:
        parent: owner.

    Signals:
        open_workspace_requested: the analyst clicked the workspace link (its path).
        review_requested: the banner's Review was pressed (the :class:`Approval`).
        control_requested: the banner's Answer or Extend budget was pressed (a
            :class:`~desktop_agent.gui.controls.Control`).
        run_link_activated: the analyst clicked the run a fork comes from, or one of its
            forks (that run's id).
    """

    run_link_activated = Signal(str)
    open_workspace_requested = Signal(str)
    review_requested = Signal(object)
    control_requested = Signal(object)
    batch_wait_wanted = Signal(str)
    """A run waiting in a Message Batch is shown: read where its turn is (off the GUI
    thread) and give it to :meth:`show_batch_wait`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.row: RunRow | None = None
        self.batch_wait: tuple[str, float, BatchWait | None] | None = None
        """(run id, the row's ``updated_at``, where its turn is) of a run in a batch."""
        self._batch_again = 0.0
        self.pending: tuple[Approval, ...] = ()
        """The selected run's approvals waiting for the analyst, oldest first."""
        self.banner = WaitBanner(self)
        self.banner.activated.connect(self._on_banner_activated)
        self.icon = QLabel(self)
        self.icon.setFixedSize(24, 24)
        self.title = ElidedLabel(self, lines=2)  # a goal of a sentence or two reads whole
        font = self.title.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.title.setFont(font)
        self.model = QLabel(self)
        self.status = QLabel(self)
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details = QLabel(self)
        self.details.setTextFormat(Qt.TextFormat.RichText)
        self.details.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.details.linkActivated.connect(self.open_workspace_requested)
        self.attachments = AttachmentsLine(self)
        """The files given to the run at its start (hidden when none)."""
        self.lineage = QLabel(self)
        """Where a fork comes from and the runs made from this one (links to them)."""
        self.lineage.setTextFormat(Qt.TextFormat.RichText)
        self.lineage.setWordWrap(True)
        self.lineage.linkActivated.connect(self._on_lineage_link_activated)
        self._forks: tuple[tuple[str, int | None], ...] = ()
        self._inherited = 0.0
        self.forecast_label = QLabel(self)
        """Once the run has ended: its cost and time beside the forecast made at its start."""
        self.forecast_label.setWordWrap(True)
        self.forecast_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.forecast_label.hide()
        self.forecast: Forecast | None = None
        """The forecast kept with the shown run, once read (None: not read yet, or none)."""
        self.gauges = {
            name: Gauge(name, self, note_line=name in ("Worked", "Tokens"))
            for name in ("Cost", "Steps", "Worked", "Tokens")
        }
        self.gauges["Tokens"].explanation = TOKENS_EXPLAINED
        self._worked_seen: tuple[str, float, float] | None = None
        """The shown run's id, its recorded time worked, and when that value was first read."""
        self.plan = QLabel(self)
        self.plan.setTextFormat(Qt.TextFormat.RichText)
        self.plan.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.plan.setWordWrap(True)
        self.plan.setMinimumWidth(220)
        self.plan.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

        top = QHBoxLayout()
        top.addWidget(self.icon)
        top.addWidget(self.title, 1)
        top.addWidget(self.model)
        gauges = QGridLayout()
        gauges.setHorizontalSpacing(16)
        for i, gauge in enumerate(self.gauges.values()):
            gauges.addWidget(gauge, i // 2, i % 2)
        left = QVBoxLayout()
        left.addWidget(self.status)
        left.addWidget(self.details)
        left.addWidget(self.attachments)
        left.addWidget(self.lineage)
        left.addWidget(self.forecast_label)
        left.addLayout(gauges)
        left.addStretch(1)
        columns = QHBoxLayout()
        columns.addLayout(left, 3)
        columns.addWidget(self.plan, 2)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(8, 6, 8, 6)
        outer.addWidget(self.banner)
        # The title spans the header, above the plan's column: in the left column alone it
        # had three fifths of the width and was cut where the whole goal would have fitted.
        outer.addLayout(top)
        outer.addLayout(columns)
        self.show_row(None)

    def show_pending(self, approvals: Sequence[Approval]) -> None:
        """The approvals of the shown run that wait for the analyst (decided ones left out)."""
        pending = tuple(approvals)
        if pending != self.pending:
            self.pending = pending
            self._show_banner()

    def _show_banner(self) -> None:
        run = self.row.run if self.row else None
        if self.pending:
            first = self.pending[0]
            more = f" (and {len(self.pending) - 1} more)" if len(self.pending) > 1 else ""
            text = f"Waiting for your approval: {call_summary(first)}{more}"
            self.banner.show_wait(text, "Review", "approve")
        elif run is not None and run.status == RunStatus.WAITING:
            if run.wait_reason == WaitReason.HUMAN_INPUT:
                question = run.status_message.removeprefix("Question for you: ")
                self.banner.show_wait(f"The agent asks you: {question}", "Answer", "answer")
            elif run.wait_reason == WaitReason.BUDGET:
                if run.status_message.startswith(MONTHLY_CAP_REACHED):
                    self.banner.show_wait(run.status_message, "Raise the cap…", "budget")
                else:
                    text = f"Budget reached: {run.status_message}"
                    self.banner.show_wait(text, "Extend budget", "budget")
            else:
                self.banner.hide()
        else:
            self.banner.hide()

    @Slot()
    def _on_banner_activated(self) -> None:
        run = self.row.run if self.row else None
        if self.pending:
            self.review_requested.emit(self.pending[0])
        elif run is not None and run.wait_reason == WaitReason.HUMAN_INPUT:
            self.control_requested.emit(Control.ANSWER)
        elif run is not None and run.wait_reason == WaitReason.BUDGET:
            self.control_requested.emit(Control.EXTEND_BUDGET)

    def show_row(self, row: RunRow | None) -> None:
        """Show ``row`` (None: a hint to select a run)."""
        if row is None or self.row is None or row.run.id != self.row.run.id:
            self.pending = ()  # another run's approvals are not this one's
            self._forks, self._inherited = (), 0.0  # nor its forks
            self.forecast = None  # nor its forecast
        self.row = row
        self._show_banner()
        self.attachments.show_run(row.run if row is not None else None)
        if row is None:
            self.icon.clear()
            self.title.set_full_text("No run selected")
            self.model.setText("")
            self.status.setText("Select a run in the list, or start one with New run (Ctrl+N).")
            self.details.setText("")
            for gauge in self.gauges.values():
                gauge.set_value("—", None)
            self.plan.setText("")
            self.lineage.hide()
            self.forecast_label.hide()
            return
        run = row.run
        self.icon.setPixmap(
            resources.icon(theme.status_icon_name(run.status)).pixmap(QSize(22, 22))
        )
        self.title.set_full_text(run.title or run.goal)
        self.title.setToolTip(run.goal)
        self.model.setText(self._model_chip(run))
        self._show_status(run)
        link_color = self.palette().color(QPalette.ColorRole.Link).name()
        agent = agent_words(run)
        self.details.setText(
            (f"<b>{html.escape(agent)}</b><br>" if agent else "")
            + f"Run <code>{run.id}</code> · started {fmt.clock(run.started_at or run.created_at)}"
            f" · workspace <a style='color:{link_color}' href='{html.escape(run.workspace)}'>"
            f"{html.escape(short_workspace(run.workspace))}</a>"
            + (
                f" · tags <b>{html.escape(' '.join('#' + t for t in run.tags))}</b>"
                if run.tags
                else ""
            )
        )
        session = f"\nsession {run.spec.session_id}" if run.spec.session_id else ""
        self.details.setToolTip(run.workspace + session)
        self._show_lineage()
        self._show_forecast()
        self._gauges(run)
        self.plan.setText(self._plan_html(row))

    def _show_status(self, run: Run) -> None:
        """The status line; a run waiting in a batch says where its turn is."""
        color = theme.status_color(run.status, self.palette()).name()
        text = run.status_message
        if run.status == RunStatus.WAITING and run.wait_reason == WaitReason.BATCH:
            known = self.batch_wait
            if known is None or known[:2] != (run.id, run.updated_at):
                self.batch_wait = (run.id, run.updated_at, None)
                self.batch_wait_wanted.emit(run.id)
            elif known[2] is not None:
                text = "In economy mode: " + batch_wait_words(known[2], time.time())
        label = theme.status_text(run)
        text = without_repeat(label, text)
        message = f" — {html.escape(text)}" if text else ""
        shown = f"<span style='color:{color}; font-weight:bold'>{label}</span>"
        if self.status.text() != shown + message:  # the tick asks every second
            self.status.setText(shown + message)

    def show_batch_wait(self, run_id: str, wait: BatchWait | None) -> None:
        """Where the shown run's turn is in the batch queue (read off the GUI thread)."""
        run = self.row.run if self.row else None
        if run is None or run.id != run_id:
            return
        self.batch_wait = (run.id, run.updated_at, wait)
        self._show_status(run)

    def show_forks(self, run_id: str, forks: Sequence[Run], inherited_usd: float = 0.0) -> None:
        """The runs made from ``run_id``, and what its shared prefix cost.

        Read off the GUI thread; ignored once another run is shown.
        """
        if self.row is None or self.row.run.id != run_id:
            return
        self._forks = tuple((f.id, f.forked_at_seq) for f in forks)
        self._inherited = inherited_usd
        self._show_lineage()

    def show_forecast(self, run_id: str, forecast: Forecast | None) -> None:
        """The forecast kept with ``run_id`` at its start (read off the GUI thread).

        Shown beside the actual figures once the run has ended; ignored once another run
        is shown.
        """
        if self.row is None or self.row.run.id != run_id:
            return
        self.forecast = forecast
        self._show_forecast()

    def _show_forecast(self) -> None:
        run = self.row.run if self.row else None
        f = self.forecast
        if run is None or f is None or not run.status.is_terminal:
            self.forecast_label.hide()
            return
        self.forecast_label.setText(versus_words(f, run))
        self.forecast_label.setToolTip(f"Forecast made when the run started, {f.explain}")
        self.forecast_label.show()

    def _show_lineage(self) -> None:
        run = self.row.run if self.row else None
        if run is None:
            return
        color = self.palette().color(QPalette.ColorRole.Link).name()

        def link(run_id: str) -> str:
            return (
                f"<a style='color:{color}' href='{html.escape(run_id)}'>{html.escape(run_id)}</a>"
            )

        parts = []
        if run.forked_from and run.forked_at_seq:
            shared = f"steps 1–{run.forked_at_seq}" if run.forked_at_seq > 1 else "step 1"
            paid = f" ({shared} inherited"
            paid += f", {fmt.format_usd(self._inherited)} paid by it)" if self._inherited else ")"
            parts.append(f"Forked from {link(run.forked_from)} at step {run.forked_at_seq}{paid}")
        elif run.forked_from:
            parts.append(f"Run again of {link(run.forked_from)}")
        if self._forks and self.row is not None:
            made = ", ".join(
                f"{link(i)} ({f'step {at}' if at else 'run again'})" for i, at in self._forks
            )
            parts.append(f"Forks: {made}")
        self.lineage.setText("<br>".join(parts))
        self.lineage.setVisible(bool(parts))

    @Slot(str)
    def _on_lineage_link_activated(self, run_id: str) -> None:
        self.run_link_activated.emit(run_id)

    def _model_chip(self, run: Run) -> str:
        """The model, how it was asked to work (effort, thinking) and where the run runs."""
        where = "" if run.placement == "any" else f" · runs on {describe(run.placement)}"
        settings = "" if run.spec.agent else run_settings_words(run)  # our loop's settings
        muted = self.palette().color(QPalette.ColorRole.PlaceholderText).name()
        how = f" <span style='color:{muted}'>· {html.escape(settings)}</span>" if settings else ""
        if run.is_demo:
            color = theme.warning_color(self.palette()).name()
            label = model_label(run.model)
            return (
                f"<span style='color:{color}; font-weight:bold'>{label}</span>{how}"
                f"{html.escape(where)}"
            )
        agent = agent_label(run)
        by = f"{html.escape(agent)} · " if agent else ""
        return f"{by}{html.escape(model_label(run.model))}{how}{html.escape(where)}"

    def _gauges(self, run: Run) -> None:
        b = run.budget
        sim = " (simulated)" if run.is_demo else ""
        cost = fmt.format_usd(run.cost_usd)
        limit = f" of {fmt.format_usd(b.max_cost_usd)}" if b.max_cost_usd else ""
        self.gauges["Cost"].set_value(f"{cost}{limit}{sim}", ratio(run.cost_usd, b.max_cost_usd))
        steps = f"{run.last_seq}" + (f" of {b.max_steps}" if b.max_steps else "")
        self.gauges["Steps"].set_value(steps, ratio(run.last_seq, b.max_steps))
        self._time_gauge(run)
        total = run.usage.total
        limit_k = f" of {fmt.tokens(b.max_tokens)}" if b.max_tokens else ""
        self.gauges["Tokens"].set_value(
            fmt.tokens(total) + limit_k, ratio(total, b.max_tokens), cache_words(run.usage)
        )

    def tick(self) -> None:
        """Once a second: the time worked of a working run moves on, and a batch wait's age."""
        if self.row is not None and self.row.run.status == RunStatus.RUNNING:
            self._time_gauge(self.row.run)
        elif self.row is not None and self.batch_wait is not None and self.batch_wait[2]:
            wait = self.batch_wait[2]
            if wait.state in ("queued", "submitting") and time.monotonic() >= self._batch_again:
                # Sent by a worker without a change to the run's row: look again.
                self._batch_again = time.monotonic() + BATCH_REREAD_S
                self.batch_wait_wanted.emit(self.row.run.id)
            self._show_status(self.row.run)

    def worked_seconds(self, run: Run, now: float) -> float:
        """The time the run worked, as its time budget counts it (the engine's ``elapsed_s``).

        The recorded total moves at each step's commit; while the run works, the time since
        that total was first read here is added, so the gauge moves between commits too.
        """
        if run.budget.count_waiting_time and run.started_at is not None:
            return max(0.0, (run.finished_at or now) - run.started_at)
        seen = self._worked_seen
        if seen is None or seen[0] != run.id or seen[1] != run.active_seconds:
            seen = self._worked_seen = (run.id, run.active_seconds, now)
        if run.status != RunStatus.RUNNING:
            return run.active_seconds
        return run.active_seconds + max(0.0, now - seen[2])

    def _time_gauge(self, run: Run) -> None:
        now = time.time()
        worked = self.worked_seconds(run, now)
        limit = run.budget.max_time_s
        text = span(worked) + (f" / {span(limit)}" if limit else "")
        gauge = self.gauges["Worked"]
        wall = run.budget.count_waiting_time
        label = "Elapsed" if wall else "Worked"
        if label != gauge.label:
            gauge.label = label
            gauge.update()
        gauge.explanation = WALL_EXPLAINED if wall else TIME_EXPLAINED
        gauge.set_value(text, ratio(worked, limit), f"age {span(now - run.created_at)}")

    def _plan_html(self, row: RunRow) -> str:
        if not row.plan:
            ended = row.run.status.is_terminal or row.run.status == RunStatus.STOPPED
            return "<p style='color:gray'>{}</p>".format(
                "The agent made no plan." if ended else "No plan yet."
            )
        done_color = self.palette().color(QPalette.ColorRole.PlaceholderText).name()
        items = []
        for item in row.plan[:12]:
            mark = "☑" if item.done else "☐"
            text = html.escape(item.text)
            style = f" style='color:{done_color}'" if item.done else ""
            items.append(f"<div{style}>{mark} {text}</div>")
        if len(row.plan) > 12:
            items.append(f"<div>… {len(row.plan) - 12} more</div>")
        head = f"<b>Plan</b> ({row.plan_done}/{len(row.plan)} done)"
        return head + "".join(items)
