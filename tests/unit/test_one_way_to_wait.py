"""The suite waits one way: :mod:`tests.helpers.polling`, never a polling loop of a module's own.

A loop of its own that polls (reads the clock and sleeps, or only sleeps until something
holds) picks its own timeout, often too short for a loaded machine, and says nothing of what
it waited for when it gives up. Read here with :mod:`ast`, every ``while`` loop of a test
module outside ``tests/helpers`` that pauses (``time.sleep``, ``qtbot.wait``,
``QApplication.processEvents``, ``threading.Event().wait``) and either reads the clock or
does nothing but pause is such a loop, unless :data:`ALLOWED` says why it is not a wait.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

HELPERS = "helpers"
"""``tests/helpers``: where the one way to wait lives (and its fakes, which may be slow)."""

CLOCKS = {"monotonic", "monotonic_ns", "time", "time_ns", "perf_counter", "perf_counter_ns"}
"""Functions of the ``time`` module that read the clock."""

ALLOWED: dict[tuple[str, str], str] = {
    # (module under tests/, function holding the loop): why the loop is not a wait.
    ("chaos/slow_write.py", "_StallingFile.write"): (
        "the slow write is what is simulated: it stalls in the worker child, and the test "
        "kills the child in there"
    ),
    ("chaos/slow_write.py", "_stall_until_go"): (
        "runs in the worker child, as part of a fake tool: it stalls until the test says go "
        "(at most STALL_S) and then goes on; the test's own waits are wait_until"
    ),
    ("chaos/test_chaos.py", "_run_chaos"): (
        "the chaos period itself: how long it lasts is the experiment; the wait for the runs "
        "to end after it is wait_until"
    ),
    ("postgres/test_chaos_workers.py", "_drive"): (
        "the strike loop: strikes at random moments for a set time, the outage included; "
        "nothing is awaited"
    ),
    ("hygiene/plugin.py", "no_leaked_processes"): (
        "a check after each test, not a wait in one: a test's child processes get a grace "
        "to exit, and what is still running then is reported (and killed) by the check"
    ),
}


def _is_clock(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr in CLOCKS and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in {"monotonic", "perf_counter"}


def _is_pause(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "sleep"
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in {"sleep", "qWait"}:
        return True
    if func.attr == "processEvents":
        return bool(call.args)  # with a time to spend: a pause that serves events
    if func.attr == "wait":  # qtbot.wait(ms), threading.Event().wait(s)
        receiver = func.value
        return isinstance(receiver, ast.Call) or (
            isinstance(receiver, ast.Name) and receiver.id == "qtbot"
        )
    return False


def _own_calls(loop: ast.While) -> list[ast.Call]:
    """Calls in the loop's test and body, not in functions defined inside it."""
    calls: list[ast.Call] = []
    todo: list[ast.AST] = [loop.test, *loop.body, *loop.orelse]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        if isinstance(node, ast.Call):
            calls.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return calls


def _only_pauses(loop: ast.While) -> bool:
    """``while not ready(): sleep(...)``: a poll with no timeout at all."""
    return all(
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _is_pause(s.value)
        for s in loop.body
    )


def polling_loops(source: str) -> list[tuple[str, int]]:
    """The polling loops of a module's source: (function holding it, line) of each."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, [*where, child.name])
                continue
            if isinstance(child, ast.While):
                calls = _own_calls(child)
                if any(_is_pause(c) for c in calls) and (
                    any(_is_clock(c) for c in calls) or _only_pauses(child)
                ):
                    found.append((".".join(where) or "<module>", child.lineno))
            visit(child, where)

    visit(ast.parse(source), [])
    return found


def _suite_loops() -> dict[tuple[str, str], int]:
    loops: dict[tuple[str, str], int] = {}
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(TESTS).as_posix()
        if name.startswith(f"{HELPERS}/"):
            continue
        for where, line in polling_loops(path.read_text(encoding="utf-8")):
            loops[(name, where)] = line
    return loops


def test_no_test_module_polls_in_a_loop_of_its_own() -> None:
    own = [
        f"tests/{name}:{line} in {where}"
        for (name, where), line in _suite_loops().items()
        if (name, where) not in ALLOWED
    ]
    assert not own, (
        "wait with tests.helpers.polling (wait_until, wait_for, wait_status, wait_worker, "
        "qt_wait_until...), or say in ALLOWED why this loop is not a wait:\n" + "\n".join(own)
    )


def test_every_allowed_loop_is_still_there() -> None:
    loops = _suite_loops()
    # A module that is not there has no loop to allow; one that is must still have it.
    stale = sorted(k for k in ALLOWED if (TESTS / k[0]).exists() and k not in loops)
    assert not stale, f"ALLOWED names loops that are gone: {stale}"


def test_the_checker_finds_a_clocked_loop() -> None:
    source = (
        "import time\n"
        "def test_x(client):\n"
        "    deadline = time.monotonic() + 5\n"
        "    while client.busy() and time.monotonic() < deadline:\n"
        "        time.sleep(0.01)\n"
    )
    assert polling_loops(source) == [("test_x", 4)]


def test_the_checker_finds_a_loop_that_only_sleeps_until_something_holds() -> None:
    source = (
        "import threading\n"
        "class Lab:\n"
        "    def ready(self, store):\n"
        "        while not store.list_workers():\n"
        "            threading.Event().wait(0.02)\n"
    )
    assert polling_loops(source) == [("Lab.ready", 4)]


def test_the_checker_finds_a_loop_that_serves_qt_events_against_the_clock() -> None:
    source = (
        "import time\n"
        "def _settle(window):\n"
        "    end = time.time() + 30\n"
        "    while window.tasks.busy:\n"
        "        if time.time() > end:\n"
        "            break\n"
        "        QApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)\n"
    )
    assert polling_loops(source) == [("_settle", 4)]


def test_the_checker_leaves_waits_and_working_loops_alone() -> None:
    source = (
        "import time\n"
        "def test_y(lab, stop):\n"
        "    wait_until(lambda: lab.done(), what='the runs to end')\n"
        "    while not stop.is_set():\n"  # works, does not only pause, reads no clock
        "        lab.strike()\n"
        "        time.sleep(0.5)\n"
        "    while lab.pending():\n"  # a clock read in a function defined in the loop
        "        def late() -> float:\n"
        "            return time.monotonic()\n"
        "        lab.take(late)\n"
    )
    assert polling_loops(source) == []
