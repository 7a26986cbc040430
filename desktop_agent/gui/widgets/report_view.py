"""The run's final report, rendered, in a tab of the run's detail.

The report (:mod:`desktop_agent.client.report`) is built off the GUI thread by whoever
owns the task runner (:class:`ReportLoader`); this widget only shows it: its Markdown
rendered by :mod:`desktop_agent.client.report_html`, each ``[n]`` a link, the numbered
references under it, uncited sentences tinted (the legend says so). A click on a
reference, or on a step named in the list, asks for that step (:attr:`step_requested`).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QUrl, Signal, Slot
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLabel, QTextBrowser, QVBoxLayout, QWidget

from desktop_agent.client.api import Client
from desktop_agent.client.report import Report, run_report
from desktop_agent.client.report_html import Renderer
from desktop_agent.gui.tasks import TaskRunner

REF, STEP = "ref", "step"
"""The schemes of the view's links: ``ref:3`` (a reference), ``step:12`` (a step)."""


def uncited_tint(palette: QPalette) -> QColor:
    """The background of an uncited sentence: amber, light or dark with the palette."""
    dark = palette.color(QPalette.ColorRole.Base).lightness() < 128
    return QColor("#5c4a12") if dark else QColor("#ffe9a8")


class ReportView(QWidget):
    """Shows one run's report.

    Signals:
        step_requested: a reference (or a step in the list) was clicked: the step's seq.
    """

    step_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.report: Report | None = None
        self.run_id: str | None = None
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.browser = QTextBrowser(self)
        self.browser.setOpenLinks(False)
        self.browser.anchorClicked.connect(self._on_browser_anchor_clicked)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.label)
        layout.addWidget(self.browser, 1)
        self.show_report(None, None)

    def show_loading(self, run_id: str) -> None:
        """Say that ``run_id``'s report is being read (its last one stays until then)."""
        if run_id != self.run_id:
            self.show_report(run_id, None, "Reading the report…")

    def show_report(self, run_id: str | None, report: Report | None, note: str = "") -> None:
        """Show ``report`` of ``run_id`` (None: the run has none yet, or no run)."""
        self.run_id, self.report = run_id, report
        if report is None:
            self.label.setText(
                note
                or (
                    "No report yet: the run has written no report file and given no answer."
                    if run_id
                    else "No run selected."
                )
            )
            self.browser.clear()
            return
        cut = " · cut: only its beginning is shown" if report.truncated else ""
        self.label.setText(
            f"{report.source_words()} · {report.coverage_words()}{cut}. Click [n] to select "
            "the step that read the source."
        )
        self._render()

    def _render(self) -> None:
        if self.report is None:
            return
        tint = uncited_tint(self.palette()).name()
        link = self.palette().color(QPalette.ColorRole.Link).name()
        self.browser.document().setDefaultStyleSheet(
            f".uncited {{ background-color: {tint}; }} a.ref {{ color: {link}; "
            "text-decoration: none; font-weight: bold; }"
        )
        render = Renderer(lambda n: f"{REF}:{n}", lambda seq: f"{STEP}:{seq}")
        html = render.body(self.report)
        if self.report.references or self.report.uncited:
            html += "<h3>References</h3>" + render.references(self.report)
        bar = self.browser.verticalScrollBar()
        at = bar.value()
        self.browser.setHtml(html)
        bar.setValue(at)

    def refresh_colors(self) -> None:
        """Redo the tint after a light/dark switch."""
        self._render()

    def anchor_step(self, href: str) -> int | None:
        """The step a link of the view leads to (None: not one of its links)."""
        scheme, _, value = href.partition(":")
        if not value.isdigit():
            return None
        if scheme == STEP:
            return int(value)
        if scheme == REF and self.report is not None:
            ref = self.report.reference(int(value))
            return ref.step if ref is not None else None
        return None

    @Slot(QUrl)
    def _on_browser_anchor_clicked(self, url: QUrl) -> None:
        seq = self.anchor_step(url.toString())
        if seq is not None:
            self.step_requested.emit(seq)


class ReportLoader:
    """Reads a run's report on the task runner and hands it to a view on the GUI thread.

    Args:
        client: the app's client.
        tasks: the window's task runner.
        view: where the report goes.
    """

    def __init__(self, client: Client, tasks: TaskRunner, view: ReportView) -> None:
        self.client, self.tasks, self.view = client, tasks, view
        self.loading = False

    def load(self, run_id: str, then: Callable[[], None] | None = None) -> None:
        """Read ``run_id``'s report off the GUI thread, then show it (if still wanted)."""
        client = self.client
        self.loading = True
        self.view.show_loading(run_id)

        def show(report: Report | None) -> None:
            self.loading = False
            if self.view.run_id == run_id:
                self.view.show_report(run_id, report)
            if then is not None:
                then()

        def failed(exc: Exception) -> None:
            self.loading = False
            if self.view.run_id == run_id:
                self.view.show_report(run_id, None, f"The report could not be read: {exc}")

        self.tasks.submit(lambda: run_report(client, run_id), show, failed)
