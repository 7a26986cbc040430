"""``desktop-agent install-desktop-entry``: the entry a Linux desktop reads, and it launches.

The real command runs in a child process with ``XDG_DATA_HOME`` in a temporary folder. The
installed desktop file is read back with a parser written from the desktop entry spec (not
with the installer's own code), its Exec line is run as a launcher would, and the app it
starts is ended by its pid.
"""

from __future__ import annotations

import configparser
import os
import shutil
import signal
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from desktop_agent import __version__, config
from desktop_agent.cli import desktop_entry
from tests.helpers.polling import wait_for

REPO = Path(__file__).resolve().parents[2]
APP_ID = "io.desktopagent.DesktopAgent"
SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def install(
    data_home: Path, *args: str, command: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI: ``install-desktop-entry ARGS`` with ``XDG_DATA_HOME=data_home``."""
    env = {**os.environ, "XDG_DATA_HOME": str(data_home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*(command or [sys.executable, "-m", "desktop_agent"]), "install-desktop-entry", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=REPO,
    )


def read_entry(path: Path) -> dict[str, str]:
    """The ``[Desktop Entry]`` group of a desktop file, keys as written."""
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text(encoding="utf-8"))
    assert parser.sections() == ["Desktop Entry"]
    return dict(parser["Desktop Entry"])


def unescape(value: str) -> str:
    r"""A string value's escapes (``\s \n \t \r \\``), as the spec reads them."""
    out, chars = [], iter(value)
    for c in chars:
        if c == "\\":
            nxt = next(chars)
            out.append({"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}.get(nxt, nxt))
        else:
            out.append(c)
    return "".join(out)


def split_exec(value: str) -> list[str]:
    """The arguments of an Exec value per the spec: quotes, escapes, field codes dropped."""
    text = unescape(value)
    args: list[str] = []
    current: list[str] | None = None
    quoted = False
    chars = iter(text)
    for c in chars:
        if quoted:
            if c == "\\":
                current_add = next(chars)
                assert current_add in '"`$\\', f"bad escape \\{current_add} in {value!r}"
                assert current is not None
                current.append(current_add)
            elif c == '"':
                quoted = False
            else:
                assert current is not None
                current.append(c)
        elif c == " ":
            if current is not None:
                args.append("".join(current))
            current = None
        else:
            current = current if current is not None else []
            if c == '"':
                quoted = True
            else:
                assert c not in "\\'`$", f"reserved {c!r} outside quotes in {value!r}"
                current.append(c)
    assert not quoted, f"unbalanced quotes in {value!r}"
    if current is not None:
        args.append("".join(current))
    return [_field_codes(a) for a in args if a not in {f"%{x}" for x in "fFuUick"}]


def _field_codes(arg: str) -> str:
    out, chars = [], iter(arg)
    for c in chars:
        if c == "%":
            code = next(chars)
            assert code == "%", f"field code %{code} inside an argument"
        out.append(c)
    return "".join(out)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def ours(data_home: Path) -> list[Path]:
    """Every file the installer writes, spelled out here independently of it."""
    icons = data_home / "icons" / "hicolor"
    return [
        data_home / "applications" / f"{APP_ID}.desktop",
        data_home / "metainfo" / f"{APP_ID}.metainfo.xml",
        *(icons / f"{n}x{n}" / "apps" / "desktop-agent.png" for n in SIZES),
        icons / "scalable" / "apps" / "desktop-agent.svg",
    ]


def test_the_installed_entry_starts_the_command_with_the_icon_in_every_size(
    tmp_path: Path,
) -> None:
    data_home = tmp_path / "share"
    done = install(data_home)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    for path in ours(data_home):
        assert path.is_file(), path
        assert f"wrote {path}" in done.stdout
    entry = read_entry(data_home / "applications" / f"{APP_ID}.desktop")
    assert entry["Type"] == "Application"
    assert entry["Terminal"] == "false"
    assert entry["StartupWMClass"] == "desktop-agent"  # the app's applicationName
    command = Path(split_exec(entry["Exec"])[0])
    assert command.is_absolute() and command.is_file() and os.access(command, os.X_OK)
    assert command.name == "desktop-agent"
    assert unescape(entry["TryExec"]) == str(command)
    icon = entry["Icon"]
    for n in SIZES:
        assert png_size(data_home / "icons" / "hicolor" / f"{n}x{n}" / "apps" / f"{icon}.png") == (
            n,
            n,
        )
    svg = data_home / "icons" / "hicolor" / "scalable" / "apps" / f"{icon}.svg"
    assert svg.read_bytes() == (desktop_entry.resource_root() / "icons" / "app.svg").read_bytes()
    assert "log out and in again" in done.stdout.splitlines()[-1]


@pytest.mark.skipif(shutil.which("appstreamcli") is None, reason="appstreamcli is not installed")
def test_the_installed_metainfo_is_valid_appstream_for_this_version(tmp_path: Path) -> None:
    data_home = tmp_path / "share"
    assert install(data_home).returncode == 0
    metainfo = data_home / "metainfo" / f"{APP_ID}.metainfo.xml"
    checked = subprocess.run(
        ["appstreamcli", "validate", "--no-net", "--strict", str(metainfo)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = metainfo.read_text(encoding="utf-8")
    assert f"<id>{APP_ID}</id>" in text
    assert f'<launchable type="desktop-id">{APP_ID}.desktop</launchable>' in text
    assert f'<release version="{__version__}"' in text


def test_uninstall_removes_what_it_installed_and_nothing_else(tmp_path: Path) -> None:
    data_home = tmp_path / "share"
    assert install(data_home).returncode == 0
    neighbours = [
        data_home / "applications" / "other-app.desktop",
        data_home / "icons" / "hicolor" / "48x48" / "apps" / "other-app.png",
        data_home / "metainfo" / "other.app.metainfo.xml",
    ]
    for path in neighbours:
        path.write_text("someone else's\n")
    done = install(data_home, "--uninstall")
    assert done.returncode == 0, done.stderr
    for path in ours(data_home):
        assert not path.exists(), path
        assert f"removed {path}" in done.stdout
    for path in neighbours:
        assert path.read_text() == "someone else's\n"
    again = install(data_home, "--uninstall")
    assert again.returncode == 0 and "no desktop entry was installed" in again.stdout


def test_a_target_that_cannot_be_written_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    data_home = tmp_path / "share"
    blocker = data_home / "icons" / "hicolor" / "512x512"  # a file where a folder must go
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder\n")
    done = install(data_home)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "cannot write" in lines[0] and "512x512" in lines[0] and "--prefix" in lines[0]
    assert "Traceback" not in done.stderr and "Error" not in done.stderr
    written = sorted(p for p in data_home.rglob("*") if p.is_file() and p != blocker)
    assert written == []


@pytest.mark.parametrize(
    "path",
    [
        "/opt/desktop agent/bin/desktop-agent",
        '/home/a "quoted" $HOME `x` 100% \\ back/desktop-agent',
        "/plain/path/desktop-agent",
    ],
)
def test_exec_quoting_reads_back_as_the_same_path(path: str) -> None:
    template = "[Desktop Entry]\nExec=desktop-agent\nTryExec=desktop-agent\n"
    text = desktop_entry.desktop_file(template, Path(path))
    exec_line = next(line for line in text.splitlines() if line.startswith("Exec="))
    assert split_exec(exec_line.removeprefix("Exec=")) == [path]


@pytest.fixture
def launched() -> Iterator[list[psutil.Process]]:
    """Processes a test started through the entry; each is killed if still alive."""
    procs: list[psutil.Process] = []
    yield procs
    for proc in procs:
        try:
            family = [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            family = [proc]
        for p in family:
            if p.is_running():
                p.kill()
    psutil.wait_procs(procs, timeout=30)


def test_the_installed_entry_launches_the_app(
    tmp_path: Path, launched: list[psutil.Process]
) -> None:
    # The command is reached through a folder whose name needs quoting in Exec.
    folder = tmp_path / "my apps"
    folder.mkdir()
    link = folder / "desktop-agent"
    link.symlink_to(Path(sys.executable).parent / "desktop-agent")
    data_home = tmp_path / "share"
    assert install(data_home, command=[str(link)]).returncode == 0
    entry = read_entry(data_home / "applications" / f"{APP_ID}.desktop")
    argv = split_exec(entry["Exec"])
    assert argv == [str(link)]

    db = tmp_path / "data" / "desktop-agent.db"
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "DESKTOP_AGENT_DB": str(db),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
    }
    env.pop("PYTHONPATH", None)  # as a launcher starts it: the installed command alone
    child = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    app = psutil.Process(child.pid)
    launched.append(app)
    marker = config.log_dir(db) / f"app-session-{child.pid}.json"
    # Up: its session began, its database is open, and its window's supervisor, which
    # runs on the event loop, started the worker.
    helpers = wait_for(
        lambda: (
            (marker.exists() and db.exists() and app.children(recursive=True))
            or child.poll() is not None
        ),
        what="the app started by the entry to open its database and start its worker",
    )
    assert child.poll() is None, child.communicate()[1]
    assert isinstance(helpers, list)
    launched.extend(helpers)
    app.send_signal(signal.SIGTERM)
    child.wait(timeout=30)
    for helper in helpers:
        if helper.is_running():
            helper.terminate()
    psutil.wait_procs(helpers, timeout=30)
    assert child.stderr is not None
    child.stderr.close()  # its pipe, once every writer is gone


def test_an_installed_package_finds_the_files_inside_itself(tmp_path: Path) -> None:
    # The layout of a wheel: resources/ inside the package, no checkout around it.
    site = tmp_path / "site"
    package = site / "desktop_agent"
    shutil.copytree(REPO / "desktop_agent", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "resources", package / "resources")
    data_home = tmp_path / "share"
    env = {**os.environ, "XDG_DATA_HOME": str(data_home), "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-m", "desktop_agent", "install-desktop-entry"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert all(path.is_file() for path in ours(data_home))
