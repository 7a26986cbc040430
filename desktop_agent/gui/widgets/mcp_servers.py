"""The Settings dialog's MCP servers page: declared servers, their status and their tools.

What it shows comes from the catalogue a worker wrote when it connected (the app does not
connect to servers itself); *Check now* connects from the app's task pool, off the GUI
thread, and shows the fresh catalogue. Servers are declared in ``settings.json``
(``mcp_servers``): the page says so, with an example, when none is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop_agent.client import mcp
from desktop_agent.client.messages import plain_error

RunTask = Callable[..., None]

EXAMPLE = (
    '"mcp_servers": [{"name": "crm", "command": "crm-mcp", "args": ["--readonly"]}, '
    '{"name": "wiki", "url": "https://wiki.example/mcp", '
    '"headers": {"Authorization": "keyring:token"}}]'
)


class McpServersPage(QWidget):
    """Servers, status and tools (see the module's docstring).

    Args:
        db_path: the database whose catalogue and settings are read.
        run_task: the app's task pool (``submit(fn, on_done, on_error)``).
    """

    def __init__(self, db_path: Path, run_task: RunTask, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.db_path = db_path
        self.run_task = run_task
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["Server / tool", "Status / effect", "Description"])
        self.tree.setColumnWidth(0, 240)
        self.tree.setColumnWidth(1, 140)
        self.note = QLabel(self)
        self.note.setWordWrap(True)
        self.check = QPushButton("Check now", self)
        self.check.setToolTip("Connect to every declared server now and list its tools")
        self.check.clicked.connect(self._on_check_clicked)
        bar = QHBoxLayout()
        bar.addWidget(self.note, 1)
        bar.addWidget(self.check)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.tree, 1)
        self.show_catalogue(mcp.catalogue(db_path), mcp.declared(db_path))

    def show_catalogue(self, catalogue: dict[str, Any], declared: int) -> None:
        """Fill the tree from ``catalogue``; the note says when and what to do."""
        self.tree.clear()
        servers = catalogue.get("servers") or []
        self.check.setEnabled(declared > 0)
        if catalogue.get("error"):
            self.note.setText(f"The MCP servers were not started: {catalogue['error']}")
        elif not declared:
            self.note.setText(
                "No MCP servers. Declare them in settings.json beside the database, e.g. "
                f"<code>{EXAMPLE}</code>; secrets as <code>keyring:NAME</code> (see the README)."
            )
        elif not servers:
            self.note.setText(
                f"{declared} server(s) declared, not listed yet: a worker lists them when it "
                "starts, or Check now."
            )
        else:
            when = time.strftime("%H:%M %d %b", time.localtime(catalogue.get("written_at", 0)))
            self.note.setText(
                f"As listed at {when}. New runs can use these tools: tick them in New run."
            )
        for server in servers:
            state = str(server.get("state", "?"))
            item = QTreeWidgetItem(
                [
                    f"{server.get('name')} ({server.get('transport')})",
                    state,
                    str(server.get("message") or ""),
                ]
            )
            for tool in server.get("tools") or []:
                effect = str(tool.get("effect")).replace("_", " ")  # "read only", as New run
                cells = [str(tool.get("name")), effect, str(tool.get("description"))]
                item.addChild(QTreeWidgetItem(cells))
            self.tree.addTopLevelItem(item)
            item.setExpanded(True)

    @Slot()
    def _on_check_clicked(self) -> None:
        self.check.setEnabled(False)
        self.note.setText("Connecting to the servers…")
        db_path = self.db_path

        def done(catalogue: dict[str, Any]) -> None:
            self.show_catalogue(catalogue, mcp.declared(db_path))

        def failed(exc: Exception) -> None:
            self.check.setEnabled(True)
            self.note.setText(f"Could not check the servers: {plain_error(exc)}")

        self.run_task(lambda: mcp.refresh(db_path), done, failed)
