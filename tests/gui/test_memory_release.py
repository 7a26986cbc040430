"""The window gives free heap pages back every few minutes (``desktop_agent.memory``)."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent import memory
from tests.gui.conftest import OpenWindow


def test_the_window_releases_free_memory_on_its_clock(
    qtbot: QtBot, open_window: OpenWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(memory, "TRIM_EVERY_S", 2)  # every other tick of the 1 s clock

    def release() -> bool:
        calls.append(True)
        return True

    monkeypatch.setattr(memory, "release_free_memory", release)
    open_window()
    qtbot.waitUntil(lambda: len(calls) >= 2, timeout=30_000)
