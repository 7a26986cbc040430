"""Settings: the API key (OS keyring), defaults for new runs, approvals, and the app itself.

Keyring calls can block (a locked keyring may prompt), so they run as tasks off the GUI
thread; the dialog only shows their outcome.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop_agent import config
from desktop_agent.client.messages import plain_error
from desktop_agent.client.views import ModelChoice
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.domain.units import format_duration, parse_duration
from desktop_agent.gui import resources, theme
from desktop_agent.gui.sizing import keep_minimum_size
from desktop_agent.gui.widgets.mcp_servers import McpServersPage
from desktop_agent.secrets import ENV_VAR, KeyStatus, KeyStore, mask

RunTask = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[Exception], None]], None]
"""Runs a function off the GUI thread, then one of the two callbacks on it."""

_KEY_SHAPE = re.compile(r"^sk-ant-[A-Za-z0-9_\-]{20,}$")


def key_format_problem(key: str) -> str | None:
    """What is wrong with the shape of an Anthropic API key, or None if it looks right."""
    key = key.strip()
    if not key:
        return "no key entered"
    if any(c.isspace() for c in key):
        return "the key contains spaces or line breaks"
    if not key.startswith("sk-ant-"):
        return "Anthropic API keys start with sk-ant-"
    if not _KEY_SHAPE.match(key):
        return "the key is too short or contains characters keys do not have"
    return None


DURABILITY = [
    ("FULL", "Full: every recorded step survives a power cut (recommended)"),
    ("NORMAL", "Normal: faster; the last steps may be lost on a power cut, never on a crash"),
]
CLOSE_ACTIONS = [
    ("tray", "Keep the app in the tray; runs go on"),
    ("quit", "Close the app; runs go on in the background worker"),
]


KEY_NOTE_KEYRING = (
    "The key is stored in the OS keyring, never in the database, the settings file or "
    "logs. “Test key” checks its format offline; it does not contact Anthropic (the "
    "first model call of a run does)."
)
KEY_NOTE_SESSION = (
    "With no OS keyring, a key saved here is kept for this session only, never in the "
    "database, the settings file or logs. “Test key” checks its format offline; it does "
    "not contact Anthropic (the first model call of a run does)."
)
"""What the key page says of where a key goes (it once said both at once)."""


class SettingsDialog(QDialog):
    """Edit the settings stored beside the database, and the API key.

    Args:
        settings: the current settings (copied, not changed in place).
        db_path: the database, whose folder holds the settings and the data.
        models: models for the default-model picker.
        run_task: runs keyring calls off the GUI thread.
        keys: the key store.
        parent: owner.

    Signals:
        saved: the analyst saved (the new :class:`Settings`).
        key_saved: a key was stored (where: ``keyring`` or ``session``).
    """

    saved = Signal(object)
    key_saved = Signal(str)

    def __init__(
        self,
        settings: Settings,
        db_path: Path,
        models: Sequence[ModelChoice],
        run_task: RunTask,
        keys: KeyStore | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setWindowIcon(resources.icon("settings"))
        self.settings = settings.model_copy(deep=True)
        self.db_path = db_path
        self.run_task = run_task
        self.keys = keys or KeyStore()
        tabs = QTabWidget(self)
        tabs.addTab(self._key_tab(), resources.icon("key"), "API key")
        tabs.addTab(self._runs_tab(models), resources.icon("new-run"), "New runs")
        tabs.addTab(self._app_tab(), resources.icon("settings"), "App")
        self.mcp_page = McpServersPage(db_path, run_task, self)
        tabs.addTab(self.mcp_page, resources.icon("settings"), "MCP servers")
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        self.error = QLabel(self)
        self.error.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(tabs, 1)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        self.resize(max(640, self.sizeHint().width()), self.sizeHint().height())
        keep_minimum_size(self)
        self.refresh_key_status()

    def show_notice_channel(self, channel: str) -> None:
        """Say where notices go on this desktop (the tray, desktop notifications, ...)."""
        self.notice_channel.setText(f"Notifications go to {channel} on this desktop.")

    # ------------------------------------------------------------------ tabs

    def _key_tab(self) -> QWidget:
        page = QWidget(self)
        self.key_status = QLabel("Checking the key store…", page)
        self.key_status.setWordWrap(True)
        self.notice = QFrame(page)
        self.notice.setObjectName("no_secure_store_notice")
        self.notice.setFrameShape(QFrame.Shape.StyledPanel)
        notice_text = QLabel(
            "<b>No secure store.</b> This system has no OS keyring (such as GNOME Keyring, "
            "KWallet, macOS Keychain or Windows Credential Manager). A key saved now is kept "
            f"for this session only. To keep it, set {ENV_VAR} in the environment of the app "
            "and of the worker.",
            self.notice,
        )
        notice_text.setWordWrap(True)
        QVBoxLayout(self.notice).addWidget(notice_text)
        pal = self.notice.palette()
        warn = theme.warning_color(pal)
        pal.setColor(QPalette.ColorRole.WindowText, warn)
        self.notice.setPalette(pal)
        self.notice.hide()
        self.key = QLineEdit(page)
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("sk-ant-…")
        self.show_key = QCheckBox("Show", page)
        self.show_key.toggled.connect(self._on_show_key_toggled)
        self.save_key = QPushButton(resources.icon("key"), "Save key", page)
        self.test_key = QPushButton("Test key", page)
        self.delete_key = QPushButton("Delete stored key", page)
        self.save_key.clicked.connect(self._on_save_key_clicked)
        self.test_key.clicked.connect(self._on_test_key_clicked)
        self.delete_key.clicked.connect(self._on_delete_key_clicked)
        self.key_result = QLabel(page)
        self.key_result.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.key, 1)
        row.addWidget(self.show_key)
        buttons = QHBoxLayout()
        for b in (self.save_key, self.test_key, self.delete_key):
            buttons.addWidget(b)
        buttons.addStretch(1)
        note = QLabel(KEY_NOTE_KEYRING, page)
        note.setWordWrap(True)
        self.key_note = note
        """Where a saved key goes: the keyring, or (with none) this session only."""
        layout = QVBoxLayout(page)
        layout.addWidget(self.key_status)
        layout.addWidget(self.notice)
        layout.addLayout(row)
        layout.addLayout(buttons)
        layout.addWidget(self.key_result)
        layout.addStretch(1)
        layout.addWidget(note)
        return page

    def _runs_tab(self, models: Sequence[ModelChoice]) -> QWidget:
        page = QWidget(self)
        s = self.settings
        self.model = QComboBox(page)
        for m in models:
            status = f" ({m.lifecycle})" if m.lifecycle != "active" else ""
            self.model.addItem(m.label + ("  — demo" if m.is_demo else status), m.id)
        self.model.setCurrentIndex(max(0, self.model.findData(s.default_model)))
        self.cost = QDoubleSpinBox(page)
        self.cost.setRange(0, 10_000)
        self.cost.setPrefix("$ ")
        self.cost.setSpecialValueText("no limit")
        self.cost.setValue(s.default_max_cost_usd or 0)
        self.steps = QSpinBox(page)
        self.steps.setRange(0, 1_000_000)
        self.steps.setSpecialValueText("no limit")
        self.steps.setValue(s.default_max_steps or 0)
        self.time = QLineEdit(format_duration(s.default_max_time_s) if s.default_max_time_s else "")
        self.time.setPlaceholderText("no limit (e.g. 2h, 3d)")
        self.monthly_cap = QDoubleSpinBox(page)
        self.monthly_cap.setRange(0, 1_000_000)
        self.monthly_cap.setPrefix("$ ")
        self.monthly_cap.setSpecialValueText("no cap")
        self.monthly_cap.setValue(s.monthly_spend_cap_usd or 0)
        self.monthly_cap.setToolTip(
            "What all runs together may spend in a calendar month; a run that would pass it "
            "waits until you raise the cap and resume it, or stop it"
        )
        self.ask_unsafe = QCheckBox("Ask before every tool whose effect cannot be undone", page)
        self.ask_unsafe.setChecked(s.ask_unsafe)
        self.ask_overwrite = QCheckBox("Ask before a write that overwrites different content", page)
        self.ask_overwrite.setChecked(s.ask_overwrite)
        self.watch_code = QCheckBox("Bring in Claude Code's sessions as they grow", page)
        self.watch_code.setChecked(s.claude_code_watch)
        self.watch_code.setToolTip(
            "Workers import new and grown sessions every half minute, read-only "
            "(as desktop-agent import claude-code does)"
        )
        self.deadline = QLineEdit(
            format_duration(s.approval_deadline_s) if s.approval_deadline_s else ""
        )
        self.deadline.setPlaceholderText("none: approvals wait until you decide")
        self.default_action = QComboBox(page)
        self.default_action.addItem("reject the call", "reject")
        self.default_action.addItem("approve the call", "approve")
        self.default_action.setCurrentIndex(
            max(0, self.default_action.findData(s.approval_default))
        )
        form = QFormLayout(page)
        form.addRow("Default model", self.model)
        form.addRow("Cost budget", self.cost)
        form.addRow("Step budget", self.steps)
        form.addRow("Time budget", self.time)
        form.addRow("Monthly spend cap", self.monthly_cap)
        form.addRow(QLabel("<b>Approvals</b>", page))
        form.addRow(self.ask_unsafe)
        form.addRow(self.ask_overwrite)
        form.addRow("Approval deadline", self.deadline)
        form.addRow("At the deadline", self.default_action)
        form.addRow(QLabel("<b>Your other Claude agents</b>", page))
        form.addRow(self.watch_code)
        return page

    def _app_tab(self) -> QWidget:
        page = QWidget(self)
        s = self.settings
        folder = QLineEdit(str(self.db_path.parent), page)
        folder.setReadOnly(True)
        self.data_folder = folder
        open_folder = QPushButton(resources.icon("folder"), "Open", page)
        open_folder.clicked.connect(self._on_open_folder_clicked)
        row = QHBoxLayout()
        row.addWidget(folder, 1)
        row.addWidget(open_folder)
        where = QLabel(
            "To use another data folder, start the app with <code>--db PATH</code> or set "
            "<code>DESKTOP_AGENT_DB</code>; each folder keeps its own runs and settings. "
            "<code>--db postgresql://user@host:5432/name</code> shares a PostgreSQL database "
            "with other workers and analysts.",
            page,
        )
        where.setWordWrap(True)
        url = config.database_url(self.db_path)
        self.database = QLineEdit(
            f"PostgreSQL: {url}" if url else f"SQLite file: {self.db_path}", page
        )
        self.database.setReadOnly(True)
        self.database.setCursorPosition(0)  # the kind of database first, not the URL's end
        self.database.setToolTip(self.database.text())
        self.durability = QComboBox(page)
        for key, label in DURABILITY:
            self.durability.addItem(label, key)
        self.durability.setCurrentIndex(max(0, self.durability.findData(s.durability.upper())))
        if url:
            # SQLite's setting: a server commits as its own configuration says.
            self.durability.setEnabled(False)
            self.durability.setToolTip(
                "On PostgreSQL the server decides how commits reach the disk "
                "(its fsync and synchronous_commit settings), not this choice."
            )
        self.close_action = QComboBox(page)
        for key, label in CLOSE_ACTIONS:
            self.close_action.addItem(label, key)
        self.close_action.setCurrentIndex(max(0, self.close_action.findData(s.close_action)))
        self.notify_user = QCheckBox("a run needs me (approval, question, budget, attention)", page)
        self.notify_user.setChecked(s.notify_needs_user)
        self.notify_done = QCheckBox("a run finishes", page)
        self.notify_done.setChecked(s.notify_finished)
        self.notify_failed = QCheckBox("a run fails", page)
        self.notify_failed.setChecked(s.notify_failed)
        self.webhook = QLineEdit(s.webhook_url, page)
        self.webhook.setPlaceholderText("optional: https://… receives the same notifications")
        form = QFormLayout(page)
        form.addRow("Database", self.database)
        form.addRow("Data folder", row)
        form.addRow("", where)
        form.addRow("Durability", self.durability)
        form.addRow("Closing the window", self.close_action)
        form.addRow("Notify me when", self.notify_user)
        form.addRow("", self.notify_done)
        form.addRow("", self.notify_failed)
        self.notice_channel = QLabel(page)
        form.addRow("", self.notice_channel)
        form.addRow("Webhook", self.webhook)
        durability_note = (
            "Durability is the SQLite file's: on PostgreSQL the server's settings decide."
            if url
            else "Durability applies when the app and worker next start."
        )
        form.addRow("", QLabel(durability_note, page))
        return page

    # ------------------------------------------------------------------ key

    def refresh_key_status(self) -> None:
        """Read where the key comes from (off the GUI thread)."""
        keys = self.keys

        def read() -> tuple[KeyStatus, str]:
            status = keys.status()
            key = keys.get() if status.present else None
            return status, mask(key) if key else ""

        self.run_task(read, self._on_key_status, self._on_key_failed)

    def _on_key_status(self, result: tuple[KeyStatus, str]) -> None:
        status, masked = result
        text = status.message.split(";")[0]
        self.key_status.setText(f"Key: {text}" + (f" ({masked})." if masked else "."))
        self.notice.setVisible(not status.secure_store)
        self.key_note.setText(KEY_NOTE_KEYRING if status.secure_store else KEY_NOTE_SESSION)
        self.delete_key.setEnabled(status.source in ("keyring", "session"))

    def _on_key_failed(self, exc: Exception) -> None:
        self.key_result.setText(f"The key store failed: {exc}")

    @Slot(bool)
    def _on_show_key_toggled(self, shown: bool) -> None:
        mode = QLineEdit.EchoMode.Normal if shown else QLineEdit.EchoMode.Password
        self.key.setEchoMode(mode)

    @Slot()
    def _on_save_key_clicked(self) -> None:
        key = self.key.text().strip()
        problem = key_format_problem(key)
        if problem == "no key entered":
            self.key_result.setText("Paste a key first.")
            return
        keys = self.keys
        self.save_key.setEnabled(False)
        self.run_task(lambda: keys.set(key), self._on_key_set, self._on_key_set_failed)

    def _on_key_set(self, where: str) -> None:
        self.save_key.setEnabled(True)
        self.key.clear()
        if where == "keyring":
            self.key_result.setText("Saved in the OS keyring.")
        else:
            self.key_result.setText(
                "No secure store exists here: the key is kept for this session only."
            )
        self.key_saved.emit(where)
        self.refresh_key_status()

    def _on_key_set_failed(self, exc: Exception) -> None:
        self.save_key.setEnabled(True)
        self.key_result.setText(str(exc))

    @Slot()
    def _on_test_key_clicked(self) -> None:
        typed = self.key.text().strip()
        if typed:
            self._show_test(typed)
            return
        self.run_task(self.keys.get, self._on_key_read, self._on_key_failed)

    def _on_key_read(self, key: str | None) -> None:
        if not key:
            self.key_result.setText("No key is set: paste one and press Save key.")
            return
        self._show_test(key)

    def _show_test(self, key: str) -> None:
        problem = key_format_problem(key)
        if problem:
            self.key_result.setText(f"✘ {mask(key)}: {problem}.")
        else:
            self.key_result.setText(
                f"✔ {mask(key)} has the format of an Anthropic API key (checked offline; "
                "whether Anthropic accepts it shows at the first model call)."
            )

    @Slot()
    def _on_delete_key_clicked(self) -> None:
        self.run_task(self.keys.delete, self._on_key_deleted, self._on_key_failed)

    def _on_key_deleted(self, had: bool) -> None:
        self.key_result.setText("The stored key was deleted." if had else "No key was stored.")
        self.refresh_key_status()

    # ------------------------------------------------------------------ save

    @Slot()
    def _on_open_folder_clicked(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.db_path.parent)))

    def collect(self) -> Settings:
        """The edited settings (raises InvalidInputError with a readable message)."""
        t = self.time.text().strip()
        d = self.deadline.text().strip()
        url = self.webhook.text().strip()
        if url and not url.startswith(("http://", "https://")):
            raise InvalidInputError("the webhook must be an http:// or https:// address")
        return self.settings.updated(
            {
                "default_model": str(self.model.currentData()),
                "default_max_cost_usd": self.cost.value() or None,
                "default_max_steps": self.steps.value() or None,
                "default_max_time_s": parse_duration(t) if t else None,
                "monthly_spend_cap_usd": self.monthly_cap.value() or None,
                "ask_unsafe": self.ask_unsafe.isChecked(),
                "ask_overwrite": self.ask_overwrite.isChecked(),
                "claude_code_watch": self.watch_code.isChecked(),
                "approval_deadline_s": parse_duration(d) if d else None,
                "approval_default": str(self.default_action.currentData()),
                "durability": str(self.durability.currentData()),
                "close_action": str(self.close_action.currentData()),
                "notify_needs_user": self.notify_user.isChecked(),
                "notify_finished": self.notify_done.isChecked(),
                "notify_failed": self.notify_failed.isChecked(),
                "webhook_url": url,
            }
        )

    @Slot()
    def _on_buttons_accepted(self) -> None:
        try:
            new = self.collect()
        except InvalidInputError as exc:
            self._show_error(plain_error(exc))
            return
        path = self.db_path

        def save() -> Settings:
            new.save(path)
            return new

        self.buttons.setEnabled(False)
        self.run_task(save, self._on_saved, self._on_save_failed)

    def _on_saved(self, settings: Settings) -> None:
        self.saved.emit(settings)
        self.accept()

    def _on_save_failed(self, exc: Exception) -> None:
        self.buttons.setEnabled(True)
        self._show_error(f"Could not save the settings: {exc}")

    def _show_error(self, message: str) -> None:
        pal = self.error.palette()
        pal.setColor(QPalette.ColorRole.WindowText, theme.status_color(RunStatus.FAILED, pal))
        self.error.setPalette(pal)
        self.error.setText(message)
