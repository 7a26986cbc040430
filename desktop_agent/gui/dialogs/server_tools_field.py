"""The New run dialog's choice of Anthropic's server tools.

:class:`ServerToolsField` is one row of the form, "Anthropic tools": web search (checked
as the ``web_search`` setting says) with a list of domains it keeps to or keeps away from,
Anthropic's web fetch (in the place of the run's own ``web_fetch``), and code execution
(the attachments go into its container; the files it writes are saved to the workspace's
``outputs``). It reads and writes nothing itself: its choice goes in the request
(:class:`~desktop_agent.gui.dialogs.new_run_request.ServerToolsChoice`), and the client
refuses, with a message the dialog shows, a tool the model does not take.
"""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.config import Settings
from desktop_agent.domain import Run
from desktop_agent.gui.dialogs.new_run_request import ServerToolsChoice, domain_list

SEARCH_TIP = (
    "Anthropic searches the web for the model ($10 per 1,000 searches, on top of tokens). "
    "The domain list limits web search, and web fetch when it is on."
)
FETCH_TIP = (
    "Anthropic fetches pages for the model, in the place of the run's own web_fetch: only "
    "URLs already in the run (given in the goal or found by a search), never private "
    "addresses. No charge beyond the tokens of the pages."
)
CODE_TIP = (
    "Anthropic runs the model's code in a container kept for the run: the attached files "
    "are put in it, and the files the code writes are saved to the workspace's outputs "
    "folder. Container time is billed (five minutes at least per call that uses it). "
    "Not in economy mode."
)


class ServerToolsField(QWidget):
    """Web search and its domains, web fetch and code execution: a row of the form.

    Args:
        parent: the dialog.
        form: the form the field is added to, as its "Anthropic tools" row.
        settings: whether web search starts checked.
    """

    def __init__(self, parent: QWidget, form: QFormLayout, settings: Settings) -> None:
        super().__init__(parent)
        self.search = QCheckBox("Web search", self)
        self.search.setToolTip(SEARCH_TIP)
        self.scope = QComboBox(self)
        self.scope.addItem("only these domains", False)
        self.scope.addItem("never these domains", True)
        self.scope.setAccessibleName("Domain list")
        self.domains = QLineEdit(self)
        self.domains.setPlaceholderText("any domain (e.g. example.com, example.org)")
        self.domains.setAccessibleName("Domains")
        self.domains.setToolTip(SEARCH_TIP)
        self.fetch = QCheckBox("Web fetch (Anthropic's)", self)
        self.fetch.setToolTip(FETCH_TIP)
        self.code = QCheckBox("Code execution (files it writes go to outputs/)", self)
        self.code.setToolTip(CODE_TIP)
        first = QHBoxLayout()
        first.setContentsMargins(0, 0, 0, 0)
        first.addWidget(self.search)
        first.addWidget(self.scope)
        first.addWidget(self.domains, 1)
        second = QHBoxLayout()
        second.setContentsMargins(0, 0, 0, 0)
        second.addWidget(self.fetch)
        second.addSpacing(16)
        second.addWidget(self.code, 1)
        rows = QVBoxLayout(self)
        rows.setContentsMargins(0, 0, 0, 0)
        rows.addLayout(first)
        rows.addLayout(second)
        self.search.toggled.connect(self._on_search_or_fetch_toggled)
        self.fetch.toggled.connect(self._on_search_or_fetch_toggled)
        form.addRow("Anthropic tools", self)
        self.reset(settings)

    def reset(self, settings: Settings) -> None:
        """As a new form has it: web search as the setting says, nothing else."""
        self.search.setChecked(settings.web_search)
        self.scope.setCurrentIndex(0)
        self.domains.clear()
        self.fetch.setChecked(False)
        self.code.setChecked(False)
        self._on_search_or_fetch_toggled()

    def keep(self, run: Run) -> None:
        """Choose as ``run`` was started ("Run again")."""
        spec = run.spec
        self.search.setChecked("web_search" in spec.tool_names)
        blocked = bool(spec.search_blocked_domains)
        self.scope.setCurrentIndex(1 if blocked else 0)
        domains = spec.search_blocked_domains if blocked else spec.search_domains
        self.domains.setText(", ".join(domains))
        self.fetch.setChecked(spec.server_web_fetch)
        self.code.setChecked(spec.code_execution)

    def choice(self) -> ServerToolsChoice:
        """What is chosen (the domains only while a tool they limit is on)."""
        limited = self.search.isChecked() or self.fetch.isChecked()
        return ServerToolsChoice(
            web_search=self.search.isChecked(),
            domains=domain_list(self.domains.text()) if limited else (),
            blocked=bool(self.scope.currentData()),
            web_fetch=self.fetch.isChecked(),
            code_execution=self.code.isChecked(),
        )

    @Slot()
    def _on_search_or_fetch_toggled(self) -> None:
        limited = self.search.isChecked() or self.fetch.isChecked()
        self.scope.setEnabled(limited)
        self.domains.setEnabled(limited)
