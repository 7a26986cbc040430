"""A test that leaves a child process running fails; one that waits for its children passes."""

from __future__ import annotations

import psutil
import pytest

from tests.hygiene.conftest import RunInner

LEAKS = """
import subprocess
import sys
from pathlib import Path

import pytest

KEPT = []  # held past the test: the check, not the garbage collector, must find it


@pytest.fixture(scope="session", autouse=True)
def _reap_kept():
    # After the check killed the child: its Popen learns so, and does not warn "still
    # running" when collected later, inside whichever test of this process runs then.
    yield
    for child in KEPT:
        child.wait(timeout=30)


def test_leaves_a_child_running():
    KEPT.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
    Path("child.pid").write_text(str(KEPT[0].pid))
"""

CLEAN = """
import subprocess
import sys


def test_ends_its_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    child.terminate()
    child.wait(timeout=30)


def test_runs_a_child_to_completion():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


def test_a_child_left_running_fails_the_test_and_is_killed(
    run_inner: RunInner, pytester: pytest.Pytester
) -> None:
    result = run_inner(LEAKS)
    result.assert_outcomes(passed=1, errors=1)
    pid = int((pytester.path / "child.pid").read_text())
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaves_a_child_running*",
            "*the test left child processes running:*",
            f"*process {pid}: *python* -c import time; time.sleep(120)*",
        ]
    )
    assert not psutil.pid_exists(pid), "the leaked child is killed (and reaped) after the report"


def test_children_waited_for_are_not_leaks(run_inner: RunInner) -> None:
    run_inner(CLEAN).assert_outcomes(passed=2)
