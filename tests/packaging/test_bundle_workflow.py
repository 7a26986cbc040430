"""The bundle workflow is ready to run as it stands, and runs the commands we run here.

``.github/workflows/bundle.yml`` builds and smoke-tests the bundle on Linux, macOS and
Windows runners. It cannot run here, so it is checked the ways that can: against the
published schema of workflow files (``check-jsonschema``'s vendored copy, offline), and
for its steps being the same commands as the Linux build and smoke test
(``packaging/README.md``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "bundle.yml"
CHECKER = Path(sys.executable).with_name("check-jsonschema")


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    """The workflow schema's verdict on ``path``."""
    return subprocess.run(
        [str(CHECKER), "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_workflow_is_valid_against_the_workflow_schema() -> None:
    result = validate(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_refuses_a_broken_workflow(tmp_path: Path) -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    broken = tmp_path / "bundle.yml"
    broken.write_text(text.replace("timeout-minutes: 45", "timeout-minutes: soon"))
    assert validate(broken).returncode != 0
    broken.write_text(text.replace("    runs-on:", "    run-on:"))
    assert validate(broken).returncode != 0


def test_the_workflow_builds_and_smoke_tests_as_we_do_here_on_three_systems() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    readme = (REPO / "packaging" / "README.md").read_text(encoding="utf-8")
    assert "bash packaging/build_bundle.sh" in readme
    assert "packaging/smoke_bundle.py" in readme
    runs = re.findall(r"^\s+run: \|?\n?((?:.|\n)*?)(?=^\s+- |\Z)", text, re.MULTILINE)
    commands = "\n".join(runs)
    assert re.search(r"^\s*bash packaging/build_bundle\.sh\s*$", commands, re.MULTILINE)
    assert re.search(r'"\$PY" packaging/smoke_bundle\.py dist/desktop-agent', commands)
    matrix = re.search(r"os: \[(.*)\]", text)
    assert matrix is not None
    systems = [s.strip() for s in matrix.group(1).split(",")]
    assert [s.split("-")[0] for s in systems] == ["ubuntu", "macos", "windows"]
