"""The model catalogue: the API's ``GET /v1/models`` answer, read, kept and looked up.

Three sources, newest first: what the worker read from the API (at start, daily, and after a
404 naming a model; it also writes it to the database for the app and the CLI), what the
database kept from an earlier read, and the snapshot shipped with the program
(``models_snapshot.json``, in the API's own shape) so that a machine that has never reached
the API still builds valid requests.

A dated id (``claude-sonnet-4-5-20250929``) is looked up under its family when the catalogue
has only the alias.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from desktop_agent.domain.catalogue import ModelEntry, undated
from desktop_agent.domain.errors import InvalidInputError

SNAPSHOT_FILE = "models_snapshot.json"
SNAPSHOT_READ_AT = "2026-11-26"
"""When the shipped snapshot was taken from the documentation and the API's catalogue."""

REFRESH_EVERY_S = 24 * 3600.0
"""How often a worker reads the catalogue again."""


def snapshot_models() -> list[dict[str, Any]]:
    """The shipped catalogue, as the API's ``data`` list."""
    text = resources.files(__package__).joinpath(SNAPSHOT_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    return [dict(m) for m in data["data"]]


def parse_models(models: Iterable[Mapping[str, Any]]) -> dict[str, ModelEntry]:
    """Entries by id; an element the program cannot read is left out, not fatal."""
    out: dict[str, ModelEntry] = {}
    for raw in models:
        try:
            entry = ModelEntry.from_api(raw)
        except (ValueError, TypeError, AttributeError):
            continue
        out[entry.id] = entry
    return out


class Catalogue:
    """The models the program knows, replaced whole when a newer reading arrives.

    Thread-safe: one instance serves every run of a worker.

    Args:
        models: the API's ``data`` list (default: the shipped snapshot).
        read_at: when it was read (epoch seconds; 0 for the snapshot).
        source: ``snapshot``, ``database`` or ``api``, shown with the catalogue.
    """

    def __init__(
        self,
        models: Iterable[Mapping[str, Any]] | None = None,
        *,
        read_at: float = 0.0,
        source: str = "snapshot",
    ) -> None:
        self._lock = threading.Lock()
        self._snapshot = parse_models(snapshot_models())
        self._entries = parse_models(models) if models is not None else dict(self._snapshot)
        self.read_at = read_at
        self.source = source if models is not None else "snapshot"

    def replace(self, models: Iterable[Mapping[str, Any]], *, read_at: float, source: str) -> None:
        """Use a newer reading (an empty one is ignored: the API never lists no model)."""
        entries = parse_models(models)
        if not entries:
            return
        with self._lock:
            self._entries = entries
            self.read_at = read_at
            self.source = source

    def entries(self) -> list[ModelEntry]:
        """Every entry, in the catalogue's order."""
        with self._lock:
            return list(self._entries.values())

    def entry(self, model: str) -> ModelEntry | None:
        """The entry for ``model`` (a dated id maps to its family), or None if unknown."""
        with self._lock:
            entries = self._entries
        for table in (entries, self._snapshot):
            found = _lookup(table, model)
            if found is not None:
                return found
        return None

    def stale(self, now: float | None = None) -> bool:
        """Whether the catalogue is due to be read again."""
        return (now if now is not None else time.time()) - self.read_at >= REFRESH_EVERY_S


def _lookup(entries: Mapping[str, ModelEntry], model: str) -> ModelEntry | None:
    """Exact id first; then a dated id and its alias stand for each other (``undated``)."""
    if model in entries:
        return entries[model]
    alias = undated(model)
    if alias is not None and alias in entries:
        return entries[alias]
    for known, entry in entries.items():
        if undated(known) == model:
            return entry
    return None


COMPACTION_BETA = "compact-2026-09-04"
"""Beta header of on-demand compaction (the ``compaction`` request parameter)."""


def fetch_models(sdk: Any) -> list[dict[str, Any]]:
    """Every model of the catalogue, retired ones included, read through the SDK (all pages).

    The beta listing is used so that each entry says whether the model takes the
    ``compaction`` parameter; retired models are asked for explicitly (the API leaves them
    out by default) so that a run naming one is refused with its replacement.

    Args:
        sdk: an ``anthropic.Anthropic`` client.

    Raises:
        anthropic.APIError: the API refused or could not be reached.
    """
    pages = sdk.beta.models.list(
        limit=1000, lifecycle=["active", "deprecated", "retired"], betas=[COMPACTION_BETA]
    )
    return [model.model_dump(mode="json", exclude_none=False) for model in pages]


SHARED = Catalogue()
"""The process's catalogue: the snapshot until a worker reads a newer one."""


def fetch_with_key(key: str, base_url: str | None = None) -> list[dict[str, Any]]:
    """The API's catalogue read with ``key`` (``base_url``: None for the SDK's default).

    Raises:
        InvalidInputError: no key, the key was refused, or the API could not be reached;
            the message says which and what to do.
    """
    import anthropic  # the SDK is this adapter's; imported when a reading is asked for

    from desktop_agent.http_client import sdk_client

    if not key.strip():
        raise InvalidInputError(
            "no API key: set one with `desktop-agent key set` or ANTHROPIC_API_KEY"
        )
    with sdk_client(30.0) as http:  # closed once read: a reading is a one-off
        sdk = anthropic.Anthropic(
            api_key=key, base_url=base_url, max_retries=1, timeout=http.timeout, http_client=http
        )
        try:
            return fetch_models(sdk)
        except anthropic.AuthenticationError:
            raise InvalidInputError(
                "the API refused the API key: set a valid one with `desktop-agent key set`"
            ) from None
        except anthropic.APIStatusError as exc:
            raise InvalidInputError(
                f"the API refused to list the models ({exc.status_code}: {exc.message})"
            ) from None
        except anthropic.APIConnectionError:
            raise InvalidInputError(
                "the API cannot be reached: the list shown is the one stored earlier"
            ) from None
