"""The wheel holds the whole app: built from the sources, installed away from the checkout.

``python -m build`` makes the sdist and then the wheel from that sdist (so a file missing
from the sdist is missing from the wheel too), without build isolation: the build backend
is the setuptools of the project's virtualenv (the dev extras), nothing is downloaded. The
build works on a copy of the files an sdist is made of, so the checkout gets no ``build/``.

The wheel goes into a fresh virtualenv outside the checkout. To stay quick and offline,
that virtualenv has no pip of its own and takes the wheel with ``--no-deps`` (pip runs from
the project's virtualenv with ``--python``); the dependencies (Qt, SQLAlchemy, ...) come
from the project's site-packages through a ``.pth`` file. A ``.pth`` line only adds a
folder to ``sys.path``: the ``.pth`` files inside that folder, among them the editable
install's import hook, are not run, so ``desktop_agent`` can only come from the wheel.
Every check runs in that virtualenv with the working directory outside the checkout and no
``PYTHONPATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from desktop_agent.client.api import Client

REPO = Path(__file__).resolve().parents[2]
SDIST_INPUTS = ("pyproject.toml", "README.md", "desktop_agent", "resources")
"""What the sdist is made of: the package, the resources mapped into it, the metadata."""
RESOURCES_ENV = "DESKTOP_AGENT_RESOURCES"


@dataclass(frozen=True)
class Installed:
    """A virtualenv holding only the wheel, and a folder outside the checkout to run in."""

    python: Path
    command: Path
    package: Path
    workdir: Path
    env: dict[str, str]


def _run(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env=env,
    )


def _copy_sources(target: Path) -> Path:
    target.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SDIST_INPUTS:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=skip)
        else:
            shutil.copy2(source, target / name)
    return target


def _build(root: Path) -> Path:
    """The wheel of a copy of the sources, made from their sdist."""
    src = _copy_sources(root / "src")
    dist = root / "dist"
    done = _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, src, cwd=root)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(list(dist.glob("desktop_agent-*.tar.gz"))) == 1
    (wheel,) = dist.glob("desktop_agent-*.whl")
    return wheel


def _install(wheel: Path, venv: Path) -> Path:
    """A pip-less virtualenv with ``wheel`` in it and our dependencies on its path."""
    done = _run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert done.returncode == 0, done.stderr
    python = venv / "bin" / "python"
    site = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip()
    )
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site / "project_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    pip = (sys.executable, "-m", "pip", "--python", python)
    done = _run(*pip, "install", "-q", "--no-deps", "--no-index", wheel)
    assert done.returncode == 0, done.stderr
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel built from the sources, installed in a fresh virtualenv."""
    root = tmp_path_factory.mktemp("wheel")
    python = _install(_build(root), root / "venv")
    workdir = root / "elsewhere"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        QT_QPA_PLATFORM="offscreen",
        DESKTOP_AGENT_DEMO_DELAY="0",
        # The installed app must not read or write the keyring of whoever runs the tests.
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        XDG_CONFIG_HOME=str(workdir / "config"),
        XDG_DATA_HOME=str(workdir / "share"),
    )
    env.pop(RESOURCES_ENV, None)
    where = _run(
        python, "-c", "import desktop_agent; print(desktop_agent.__file__)", cwd=workdir, env=env
    )
    assert where.returncode == 0, where.stderr
    package = Path(where.stdout.strip()).parent
    return Installed(python, python.parent / "desktop-agent", package, workdir, env)


def _files(root: Path) -> set[Path]:
    return {
        p.relative_to(root)
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_the_installed_package_is_the_wheel_and_holds_every_file(installed: Installed) -> None:
    venv = installed.python.parent.parent
    assert installed.package.is_relative_to(venv), installed.package
    assert not installed.package.is_relative_to(REPO)
    shipped = _files(installed.package)
    # Every module, migration (versions/*.py, script.py.mako) and py.typed of the checkout.
    missing = _files(REPO / "desktop_agent") - shipped
    assert not missing, f"not in the wheel: {sorted(map(str, missing))}"
    # The whole resources tree, every kind of file: icons, hicolor PNGs, desktop entry.
    resources = {Path("resources") / p for p in _files(REPO / "resources")}
    assert not resources - shipped, sorted(map(str, resources - shipped))
    for wanted in ("resources/icons/app.svg", "py.typed", "persistence/migrations/script.py.mako"):
        assert Path(wanted) in shipped
    assert any(p.match("resources/icons/hicolor/*/apps/*.png") for p in resources)
    assert any(p.match("resources/desktop/*.desktop") for p in resources)


FIND_ICONS = """
import json
from PySide6.QtWidgets import QApplication
from desktop_agent.gui.resources import app_icon, icon_path, resource_dir
app = QApplication([])
print(json.dumps({
    "dir": str(resource_dir()),
    "app": str(icon_path("app")),
    "drawn": not app_icon().pixmap(32, 32).isNull(),
}))
"""


def test_the_installed_app_finds_its_icons(installed: Installed) -> None:
    done = _run(installed.python, "-c", FIND_ICONS, cwd=installed.workdir, env=installed.env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["dir"] == str(installed.package / "resources"), found
    assert Path(found["app"]) == installed.package / "resources" / "icons" / "app.svg"
    assert found["drawn"]


def _schema(db: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
            "ORDER BY type, name"
        ).fetchall()
        version = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    return [*rows, ("alembic_version", str(version), None)]


def test_the_installed_cli_migrates_a_new_database_and_finishes_a_demo_run(
    installed: Installed, client: Client, db_path: Path
) -> None:
    db = installed.workdir / "data" / "x.db"
    listed = _run(installed.command, "--db", db, "runs", cwd=installed.workdir, env=installed.env)
    assert listed.returncode == 0, listed.stderr
    # Every migration shipped: the schema is the one the checkout's migrations make.
    assert _schema(db) == _schema(db_path)
    workspace = installed.workdir / "ws"
    workspace.mkdir()
    (workspace / "notes.md").write_text("Alpha says the market grew 4% in 2025.\n")
    goal = "Summarise the notes"
    ran = _run(
        *(installed.command, "--db", db, "run", goal, "--model", "demo", "--yes"),
        *("--workspace", workspace),
        cwd=installed.workdir,
        env=installed.env,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ": completed" in ran.stdout, ran.stdout
    assert (workspace / "report.md").is_file()


def test_the_installed_package_installs_its_desktop_entry(installed: Installed) -> None:
    prefix = installed.workdir / "prefix"
    done = _run(
        installed.command,
        *("install-desktop-entry", "--prefix", prefix),
        cwd=installed.workdir,
        env=installed.env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(prefix.rglob("*.desktop"))
    assert list(prefix.rglob("hicolor/*/apps/*.png"))
