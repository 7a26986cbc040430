"""Fixtures of the restore tests: a lab (database, HTTP sink, CLI) per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.restore.lab import RestoreLab
from tests.tools.servers import HttpServer


@pytest.fixture
def lab(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[RestoreLab]:
    server = HttpServer()
    lab = RestoreLab(tmp_path, server, capsys)
    yield lab
    lab.close()
    server.close()
