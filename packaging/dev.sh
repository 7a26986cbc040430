#!/usr/bin/env bash
# Set up desktop-agent from a fresh clone, then start the app or run every check.
#
#   bash packaging/dev.sh app     set up, then start the desktop app
#   bash packaging/dev.sh test    set up, then run ruff, mypy, import-linter and pytest
#   bash packaging/dev.sh setup   set up only
#
# Setting up means: the Debian libraries Qt needs (when missing and apt is usable),
# a virtualenv in .venv, and the Python packages (re-installed when pyproject.toml changes).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
VENV="${DESKTOP_AGENT_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
MODE="${1:-app}"
shift || true

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

QT_LIBS=(libegl1 libgl1 libx11-6 libdbus-1-3 libfontconfig1 libfreetype6 libglib2.0-0
         libxkbcommon0 fonts-dejavu-core)
XCB_LIBS=(libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-render-util0
          libxcb-render0 libxcb-shape0 libxcb-util1 libxcb-xkb1 libxkbcommon-x11-0 xvfb xauth)

# chromium: the HTML export is opened in headless Chromium (tests/helpers/chromium.py).
TEST_PKGS=(postgresql dbus chromium)

APT_UPDATED=0
apt_install() {
    # Install the Debian packages given that are missing, when apt can be used.
    command -v dpkg-query >/dev/null 2>&1 || return 0
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        say "installing Debian packages: ${missing[*]}"
        if [ "$APT_UPDATED" = 0 ]; then
            apt-get update -qq >/dev/null
            APT_UPDATED=1
        fi
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
    else
        say "warning: missing Debian packages: ${missing[*]}"
        say "install them with: sudo apt-get install ${missing[*]}"
    fi
}

ensure_python() {
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
        apt_install python3
    fi
    "$PYTHON" - <<'PY' || { echo "desktop-agent needs Python 3.11 or newer" >&2; exit 2; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY
    if ! "$PYTHON" -c "import venv, ensurepip" >/dev/null 2>&1; then
        apt_install python3-venv
    fi
}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating virtualenv in $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    local stamp="$VENV/.desktop-agent-installed" want
    want="$(cat pyproject.toml | "$VENV/bin/python" -c 'import hashlib,sys;print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        say "installing Python packages"
        "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
        "$VENV/bin/python" -m pip install -q -e ".[dev]"
        echo "$want" > "$stamp"
    fi
}

setup() {
    ensure_python
    apt_install "${QT_LIBS[@]}"
    if [ "$MODE" = app ]; then
        apt_install "${XCB_LIBS[@]}"
    fi
    if [ "$MODE" = test ]; then
        # The PostgreSQL tests start a throwaway server of their own (tests/helpers/postgres.py);
        # the notification tests start a private D-Bus session bus.
        apt_install "${TEST_PKGS[@]}"
    fi
    ensure_venv
}

run_tests() {
    export QT_QPA_PLATFORM=offscreen
    # Installed above: a test that needs the browser fails here rather than skipping.
    export DESKTOP_AGENT_REQUIRE_CHROMIUM=1
    local bin="$VENV/bin"
    say "ruff check";          "$bin/ruff" check .
    say "ruff format --check"; "$bin/ruff" format --check .
    say "mypy --strict";       "$bin/mypy"
    say "import-linter";       "$bin/lint-imports"
    # Three workers on two cores: about a quarter of a two-worker run's time is spent waiting
    # (child processes starting, servers, lease expiries), which a third worker fills;
    # worksteal keeps the long tests from piling up on one worker at the end.
    say "pytest";              "$bin/pytest" -n 3 --dist worksteal "$@"
}

start_app() {
    if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ] && [ "$(uname)" = Linux ] \
        && [ -z "${QT_QPA_PLATFORM:-}" ]; then
        say "no display found: starting the app on a virtual display (xvfb-run)"
        exec xvfb-run -a -s "-screen 0 1400x900x24" "$VENV/bin/desktop-agent" "$@"
    fi
    exec "$VENV/bin/desktop-agent" "$@"
}

case "$MODE" in
    setup) setup ;;
    test) setup; run_tests "$@" ;;
    app) setup; start_app "$@" ;;
    *) echo "usage: bash packaging/dev.sh app|test|setup" >&2; exit 2 ;;
esac
