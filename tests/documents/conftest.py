"""Fixtures of the document tests: the fake API, Claude adapters, the database.

The first two as tests/llm has them; the database is SQLite, or the test server where a
module runs on both (as tests/search).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import postgres
from tests.llm.conftest import make_model, start_fake
from tests.tools.conftest import make_ctx, ws
from tests.tools.servers import http_server

__all__ = ["http_server", "make_ctx", "make_model", "start_fake", "ws"]


@pytest.fixture
def backend() -> str:
    """The database of the test: SQLite, unless its module runs on both (``BACKENDS``)."""
    return "sqlite"


@pytest.fixture
def db_path(tmp_path: Path, backend: str) -> Iterator[Path]:
    """The client's database: a SQLite file, or a fresh database on the test server."""
    path = tmp_path / "data" / "desktop-agent.db"
    with postgres.database_for(path.parent, backend):
        yield path
