"""Fixtures of the agents tests: a Claude Code configuration folder under the test's tmp."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.claude_code_sessions import ClaudeCodeFolder


@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClaudeCodeFolder:
    """An empty Claude Code configuration folder, named by ``CLAUDE_CONFIG_DIR``."""
    folder = ClaudeCodeFolder(tmp_path / "claude-config")
    folder.projects.mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(folder.root))
    return folder
