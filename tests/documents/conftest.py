"""Fixtures of the document tests: the fake API and Claude adapters (as tests/llm has)."""

from __future__ import annotations

from tests.llm.conftest import make_model, start_fake

__all__ = ["make_model", "start_fake"]
