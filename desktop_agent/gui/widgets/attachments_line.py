"""The run header's line of attachments.

"Attachments: a.pdf, b.csv", with each file's path, size and checksum in its tooltip;
hidden for a run without any.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from desktop_agent.domain import Run


def attachments_words(run: Run) -> str:
    """``Attachments: a.pdf, b.csv`` (their names in the workspace), or "" when none."""
    names = [a.path.rsplit("/", 1)[-1] for a in run.spec.attachments]
    return f"Attachments: {', '.join(names)}" if names else ""


def attachments_tip(run: Run) -> str:
    """Each attachment's path, size and SHA-256, as rich text for a tooltip."""
    rows = "".join(
        f"<tr><td><code>{html.escape(a.path)}</code></td><td>{html.escape(a.size_words)}</td>"
        f"<td><code>sha256 {a.sha256}</code></td></tr>"
        for a in run.spec.attachments
    )
    return (
        "<p>Files given at the start, copied into the workspace:</p>"
        f"<table cellspacing='6'>{rows}</table>"
    )


class AttachmentsLine(QLabel):
    """The attachments of the run shown (see the module's docstring)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hide()

    def show_run(self, run: Run | None) -> None:
        """Show ``run``'s attachments (None, or none: hidden)."""
        text = attachments_words(run) if run is not None else ""
        self.setText(text)
        self.setToolTip(attachments_tip(run) if run is not None and text else "")
        self.setVisible(bool(text))
