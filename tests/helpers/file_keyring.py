"""A file-backed keyring for CLI and worker subprocesses in tests.

Selected with ``PYTHON_KEYRING_BACKEND=tests.helpers.file_keyring.FileKeyring`` (and the
repository root on ``PYTHONPATH``); the file is named by ``DESKTOP_AGENT_TEST_KEYRING``.
It stores passwords in plain JSON, so it exists only for tests: the real OS keyring is
never touched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import keyring.backend
import keyring.errors

ENV = "DESKTOP_AGENT_TEST_KEYRING"


class FileKeyring(keyring.backend.KeyringBackend):
    """Passwords in the JSON file named by ``DESKTOP_AGENT_TEST_KEYRING``."""

    priority = 1

    def _path(self) -> Path:
        value = os.environ.get(ENV)
        if not value:
            raise keyring.errors.KeyringError(f"{ENV} is not set")
        return Path(value)

    def _load(self) -> dict[str, str]:
        path = self._path()
        if not path.exists():
            return {}
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
        return {str(k): str(v) for k, v in data.items()}

    def _save(self, data: dict[str, str]) -> None:
        path = self._path()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}\n{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}\n{username}"] = password
        self._save(data)

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}\n{username}", None) is None:
            raise keyring.errors.PasswordDeleteError("no such password")
        self._save(data)
