"""The one way out of the checks: ``leaks_ok``, with a reason, for the kinds it names."""

from __future__ import annotations

import threading

from tests.hygiene.conftest import RunInner

RELEASE = threading.Event()

SOURCE = """
import threading

import pytest

from tests.hygiene.test_marker import RELEASE


def leak():
    threading.Thread(target=RELEASE.wait, args=(60,), name="excused").start()


@pytest.mark.leaks_ok("the thread belongs to a pool the library keeps", kinds=("threads",))
def test_excused_for_threads():
    leak()


@pytest.mark.leaks_ok("excused for processes only", kinds=("processes",))
def test_excused_for_something_else():
    leak()


@pytest.mark.leaks_ok()
def test_without_a_reason():
    pass
"""


def test_leaks_ok_excuses_only_the_kinds_it_names_and_needs_a_reason(run_inner: RunInner) -> None:
    try:
        result = run_inner(SOURCE)
    finally:
        RELEASE.set()
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_excused_for_something_else*",
            "*thread 'excused'*",
            "*ERROR at teardown of test_without_a_reason*",
            "*@pytest.mark.leaks_ok needs a reason*",
        ]
    )
