"""Rooms a newcomer can enter: no module of the GUI over 500 lines.

The main window grew to 1,136 lines once; it is now composed of feature controllers
(``gui/desk/``). This keeps the GUI's modules at a size one can read in a sitting.
"""

from __future__ import annotations

from pathlib import Path

GUI = Path(__file__).resolve().parents[2] / "desktop_agent" / "gui"
MAX_LINES = 500


def oversized(root: Path, limit: int) -> list[str]:
    """The modules under ``root`` longer than ``limit`` lines, with their lengths."""
    found = []
    for path in sorted(root.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            found.append(f"{path.relative_to(root)}: {n} lines")
    return found


def test_no_gui_module_is_over_500_lines() -> None:
    assert oversized(GUI, MAX_LINES) == []


def test_the_check_finds_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert oversized(tmp_path, MAX_LINES) == [f"sub/long.py: {MAX_LINES + 1} lines"]
