"""Run small test files of our own, in this process, under the hygiene plugin.

The inner run gets the plugin the suite uses (``tests/hygiene/plugin.py``) and the pytest
settings of ``pyproject.toml`` that matter here (warnings filters, markers, Qt), copied
from the file rather than restated, so the tests here prove what the suite really does.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

RunInner = Callable[[str], pytest.RunResult]

_COPIED = ("qt_api", "qt_log_level_fail", "markers", "filterwarnings")


def _inner_pyproject() -> str:
    with (REPO / "pyproject.toml").open("rb") as f:
        options = tomllib.load(f)["tool"]["pytest"]["ini_options"]
    lines = ["[tool.pytest.ini_options]", 'addopts = "--strict-markers -ra -p no:cacheprovider"']
    # A JSON string or list of strings is valid TOML.
    lines += [f"{key} = {json.dumps(options[key])}" for key in _COPIED if key in options]
    return "\n".join(lines) + "\n"


@pytest.fixture
def run_inner(pytester: pytest.Pytester) -> RunInner:
    """Run one test file (its source given) under the hygiene plugin; return the result."""
    pytester.makepyprojecttoml(_inner_pyproject())
    pytester.makeconftest('pytest_plugins = ["tests.hygiene.plugin"]\n')

    def run(source: str) -> pytest.RunResult:
        pytester.makepyfile(test_inner=source)
        return pytester.runpytest()

    return run
