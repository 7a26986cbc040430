"""Fixtures of the server tool tests, as tests/llm and tests/gui have them.

The fake API and Claude adapters, and the main window.
"""

from __future__ import annotations

from tests.gui.conftest import open_window
from tests.llm.conftest import make_model, start_fake

__all__ = ["make_model", "open_window", "start_fake"]
