"""Fixtures of the tool tests: a tool context over a temporary workspace, local servers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.domain.settings import Settings
from desktop_agent.engine.ports import CancelToken, ToolContext
from tests.helpers.fakes import FakeClock
from tests.tools.servers import http_server, smtp_server

__all__ = ["http_server", "smtp_server"]

MakeCtx = Callable[..., ToolContext]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace inside its own folder (so siblings can be made outside it)."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def make_ctx(ws: Path) -> MakeCtx:
    """Build the context a tool receives, with chosen settings, run and step."""

    def make(run_id: str = "run1", seq: int = 3, **settings: Any) -> ToolContext:
        return ToolContext(
            run_id=run_id,
            seq=seq,
            idempotency_key=f"{run_id}:{seq}",
            workspace=ws,
            clock=FakeClock(),
            cancel=CancelToken(),
            settings=Settings(**settings),
        )

    return make
