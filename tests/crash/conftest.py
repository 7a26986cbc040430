"""Fixtures of the crash tests: a lab per test, uninterrupted reference runs per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crash.harness import SOURCES_3, SOURCES_8, Lab, Reference, reference_run
from tests.helpers import postgres


@pytest.fixture(params=postgres.BACKENDS)
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lab]:
    """A fresh database with crash-test settings, as a SQLite file or on PostgreSQL."""
    with postgres.database_for(tmp_path / "data", request.param):
        lab = Lab(tmp_path)
        yield lab
        lab.close()


@pytest.fixture(scope="session")
def reference_3(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The demo over three sources, uninterrupted."""
    return reference_run(tmp_path_factory.mktemp("reference-3"), SOURCES_3)


@pytest.fixture(scope="session")
def reference_8(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The demo over eight sources, uninterrupted."""
    return reference_run(tmp_path_factory.mktemp("reference-8"), SOURCES_8)
