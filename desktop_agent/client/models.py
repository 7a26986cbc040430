"""The models an analyst can pick, and what the program knows of each.

The app and the CLI read the catalogue a worker stored in the database (``GET /v1/models``
as the API last answered), or, before any worker read it, the copy shipped with the
program. ``desktop-agent models --refresh`` reads it from the API with the analyst's key.
Prices and documented defaults come from the price table (the API does not serve them).

A run is checked against its model's entry before it starts: a retired model is refused
with the replacement its page recommends, an effort the model does not take is refused
with the ones it does, and a deprecated model is started with a notice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from desktop_agent.domain.catalogue import EFFORT_LEVELS, ModelEntry
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.llm.catalogue import Catalogue, fetch_with_key, snapshot_models
from desktop_agent.llm.pricing import model_info, price_label
from desktop_agent.persistence.catalogue import load_models, save_models
from desktop_agent.persistence.db import Database

DEMO = "demo"


@dataclass(frozen=True)
class ModelRow:
    """One model as the New run dialog, ``desktop-agent models`` and the API show it.

    Attributes:
        id: the model id.
        name: the API's display name.
        lifecycle: ``active``, ``deprecated`` or ``retired``.
        retires_at: epoch seconds, or None.
        replacement: the model its page recommends instead ("" for none).
        context_window: tokens per request.
        max_output: most output tokens per call.
        thinking: the thinking types it takes (``adaptive``, ``between_tools`` …).
        efforts: the effort levels it takes, lowest first.
        default_effort: the effort it runs at when a run sets none ("" if unknown).
        features: other capabilities the catalogue lists (``batch``, ``citations`` …).
        price: "$I / $O per million tokens", or "price unknown".
    """

    id: str
    name: str
    lifecycle: str
    retires_at: float | None
    replacement: str
    context_window: int | None
    max_output: int | None
    thinking: tuple[str, ...]
    efforts: tuple[str, ...]
    default_effort: str
    features: tuple[str, ...]
    price: str

    @property
    def notice(self) -> str:
        """What the analyst is told when picking it ("" for an active model)."""
        instead = f"; use {self.replacement} instead" if self.replacement else ""
        when = _day(self.retires_at)
        if self.lifecycle == "retired":
            return f"{self.id} is retired: requests to it fail{instead}"
        if self.lifecycle == "deprecated":
            retires = f", retires {when}" if when else ""
            return f"{self.id} is deprecated{retires}{instead}"
        return ""

    def to_json(self) -> dict[str, object]:
        """The row as ``--json`` and the HTTP API print it."""
        return {
            "id": self.id,
            "name": self.name,
            "lifecycle": self.lifecycle,
            "retires_at": _day(self.retires_at) or None,
            "replacement": self.replacement or None,
            "context_window": self.context_window,
            "max_output": self.max_output,
            "thinking": list(self.thinking),
            "efforts": list(self.efforts),
            "default_effort": self.default_effort or None,
            "features": list(self.features),
            "price": self.price,
            "notice": self.notice or None,
        }


@dataclass(frozen=True)
class ModelList:
    """The catalogue as read: its rows, where it came from and when."""

    rows: list[ModelRow]
    source: str
    read_at: float

    def to_json(self) -> dict[str, object]:
        """As ``--json`` prints it."""
        return {
            "source": self.source,
            "read_at": _when(self.read_at),
            "models": [r.to_json() for r in self.rows],
        }


def _day(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch, UTC).date().isoformat() if epoch else ""


def _when(epoch: float) -> str | None:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds") if epoch else None


def row_of(entry: ModelEntry) -> ModelRow:
    """The row for one catalogue entry, with the table's prices and defaults."""
    info = model_info(entry.id)
    return ModelRow(
        id=entry.id,
        name=entry.display_name,
        lifecycle=entry.lifecycle,
        retires_at=entry.retires_at,
        replacement=info.replacement,
        context_window=entry.max_input_tokens,
        max_output=entry.max_tokens,
        thinking=tuple(sorted(entry.thinking_types)),
        efforts=entry.efforts,
        default_effort=info.default_effort,
        features=tuple(sorted(entry.features)),
        price=price_label(entry.id),
    )


def stored_catalogue(db: Database) -> Catalogue:
    """The catalogue a worker stored, or the shipped one when none was."""
    models, read_at = load_models(db)
    if models:
        return Catalogue(models, read_at=read_at, source="database")
    return Catalogue()


def list_models(
    db: Database, *, refresh_key: str | None = None, include_retired: bool = False
) -> ModelList:
    """Every model, current ones first; read from the API first when ``refresh_key`` is given.

    Raises:
        InvalidInputError: the API refused the key or could not be reached (with why).
    """
    if refresh_key is not None:
        models = fetch_with_key(refresh_key)
        now = time.time()
        save_models(db, models, now)
        catalogue = Catalogue(models, read_at=now, source="api")
    else:
        catalogue = stored_catalogue(db)
    rows = [row_of(e) for e in catalogue.entries() if include_retired or not e.retired]
    order = {"active": 0, "deprecated": 1, "retired": 2}
    rows.sort(key=lambda r: order.get(r.lifecycle, 3))
    return ModelList(rows, catalogue.source, catalogue.read_at)


def check_model(db: Database, model: str, effort: str, *, economy: bool = False) -> str:
    """Refuse a model or effort that cannot work; return a notice for a deprecated model.

    A model the catalogue does not know is let through (a newer model than this release
    knows, or one a key has early access to): the API will say if it is wrong.

    Raises:
        InvalidInputError: the model is retired, the effort is not one it takes, or
            ``economy`` is asked of a model whose entry does not list Message Batches.
    """
    if effort and effort not in EFFORT_LEVELS:
        raise InvalidInputError(f"unknown effort {effort!r}: use one of {', '.join(EFFORT_LEVELS)}")
    if model == DEMO:
        return ""
    entry = stored_catalogue(db).entry(model)
    if entry is None:
        return ""
    row = row_of(entry)
    if entry.retired:
        raise InvalidInputError(row.notice + " (see `desktop-agent models`)")
    if effort and not entry.accepts_effort(effort):
        takes = ", ".join(entry.efforts) if entry.efforts else "none (it has no effort setting)"
        raise InvalidInputError(f"{model} does not take effort {effort!r}; it takes: {takes}")
    if economy and not entry.has("batch"):
        raise InvalidInputError(economy_refusal(model))
    return row.notice


def economy_refusal(model: str) -> str:
    """Why ``model``, whose catalogue entry lists no Message Batches, has no economy mode."""
    return (
        f"{model} does not take Message Batches (its catalogue entry does not list them): "
        "choose a model that does for economy mode, or run this one streamed"
    )


def can_batch(db: Database, model: str) -> bool:
    """Whether runs of ``model`` can be in economy mode (each turn in a Message Batch).

    Not the demo (it runs on this machine), nor a model whose catalogue entry does not list
    batches; a model the catalogue does not know is given the benefit of the doubt.
    """
    if model == DEMO:
        return False
    entry = stored_catalogue(db).entry(model)
    return entry is None or entry.has("batch")


__all__ = [
    "ModelList",
    "ModelRow",
    "can_batch",
    "check_model",
    "economy_refusal",
    "list_models",
    "row_of",
    "snapshot_models",
    "stored_catalogue",
]
