"""Fixtures of the store conformance suite: every test runs once per store implementation.

:func:`store_factory` is parametrized over :data:`~tests.store.backends.BACKENDS`; a test
that takes it (or :func:`store`) runs against each implementation, and is skipped with the
implementation's reason where it cannot be tested here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_agent.persistence.store import SqlStore
from tests.store.backends import BACKENDS, StoreFactory


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Handles on a fresh, empty database of one implementation."""
    backend = BACKENDS[request.param](tmp_path)
    reason = backend.unavailable()
    if reason is not None:
        pytest.skip(reason)
    factory = StoreFactory(backend)
    try:
        yield factory
    finally:
        factory.close()
        backend.discard()


@pytest.fixture
def store(store_factory: StoreFactory) -> SqlStore:
    """The store under test (this suite's own: not the client's store of the root conftest)."""
    return store_factory.handle.store
