"""Every module imports where POSIX-only modules do not exist (Windows).

``fcntl``, ``termios`` and ``resource`` exist on Linux and macOS only. Each module of the
package is imported in a child process in which our own code cannot import them: a
module that does so at import time fails here, as it would on Windows. Third-party
packages keep theirs (psutil's Linux part imports ``resource``; on Windows it takes its
Windows part), so only imports made by ``desktop_agent`` itself are refused.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

POSIX_ONLY = ("fcntl", "termios", "resource")

CHECK = """
import builtins, importlib, os, pkgutil, sys

POSIX_ONLY = set(sys.argv[1].split(","))
real_import = builtins.__import__

def refusing_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    if importer.split(".")[0] == sys.argv[2] and name.split(".")[0] in POSIX_ONLY:
        raise ModuleNotFoundError(f"No module named {name!r} (as on Windows)")
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = refusing_import
package = importlib.import_module(sys.argv[2])
failed = []
names = [m.name for m in pkgutil.walk_packages(package.__path__, sys.argv[2] + ".")]
for name in names:
    if name.endswith(".migrations.env"):  # runs inside alembic only
        continue
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
print("\\n".join(failed) if failed else f"all {len(names)} modules imported")
"""


def check(package: str, root: Path) -> str:
    """Import every module of ``package`` (found under ``root``) with the POSIX-only refused."""
    out = subprocess.run(
        [sys.executable, "-c", CHECK, ",".join(POSIX_ONLY), package],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=root,
        env={"PYTHONPATH": str(root), "QT_QPA_PLATFORM": "offscreen", "PATH": ""},
        check=True,
    )
    return out.stdout.strip()


def test_no_module_imports_a_posix_only_module_at_import_time() -> None:
    report = check("desktop_agent", REPO)
    assert report.startswith("all ") and report.endswith(" modules imported"), report


def test_the_check_fails_a_module_that_imports_fcntl_at_the_top(tmp_path: Path) -> None:
    pkg = tmp_path / "portable_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fine.py").write_text("def lock():\n    import fcntl\n")  # at call time: fine
    (pkg / "posix_only.py").write_text("import fcntl\n")
    (pkg / "also_posix.py").write_text("from resource import getrusage\n")
    report = check("portable_probe", tmp_path)
    assert "portable_probe.posix_only" in report
    assert "portable_probe.also_posix" in report
    assert "portable_probe.fine" not in report
