#!/usr/bin/env bash
# Build the one-folder bundle: dist/desktop-agent/ (desktop-agent.app too on macOS).
#
#     bash packaging/build_bundle.sh [PYTHON]
#
# PYTHON is the interpreter of an environment where desktop-agent is installed (default: the
# project's .venv, made by packaging/dev.sh). PyInstaller is installed into it when missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${1:-}"
if [[ -z "$PY" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python
  elif [[ -x .venv/Scripts/python.exe ]]; then PY=.venv/Scripts/python.exe
  else echo "no .venv here: run 'bash packaging/dev.sh' first, or pass a Python" >&2; exit 2
  fi
fi
PYINSTALLER_VERSION=6.22.3
if ! "$PY" -c "import PyInstaller, sys; sys.exit(PyInstaller.__version__ != '$PYINSTALLER_VERSION')" 2>/dev/null; then
  echo "installing PyInstaller $PYINSTALLER_VERSION"
  "$PY" -m pip install --quiet "pyinstaller==$PYINSTALLER_VERSION"
fi
"$PY" -m PyInstaller --noconfirm --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/desktop-agent.spec
OUT=dist/desktop-agent
echo "bundle: $OUT ($(du -sh "$OUT" | cut -f1))"
if [[ -d dist/desktop-agent.app ]]; then
  echo "app: dist/desktop-agent.app ($(du -sh dist/desktop-agent.app | cut -f1))"
fi
