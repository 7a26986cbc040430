"""A warning raised during a test fails it (the filters of pyproject.toml)."""

from __future__ import annotations

from tests.hygiene.conftest import RunInner


def test_a_warning_fails_the_test(run_inner: RunInner) -> None:
    result = run_inner(
        """
import warnings


def test_warns():
    warnings.warn("this API is going away", DeprecationWarning, stacklevel=1)


def test_quiet():
    pass
"""
    )
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*DeprecationWarning: this API is going away*"])


def test_an_exception_no_one_could_catch_fails_the_test(run_inner: RunInner) -> None:
    result = run_inner(
        """
import gc


class Broken:
    def __del__(self):
        raise RuntimeError("raised while being collected")


def test_collects_a_broken_object():
    Broken()
    gc.collect()
"""
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: raised while being collected*"])
