"""The model catalogue as a worker last read it from the API (table ``model_catalogue``).

A reading replaces the previous one whole, in one transaction: a model the API no longer
lists is no longer offered. Each row keeps the API's JSON for its model as it came.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, insert, select

from desktop_agent.persistence.db import Database
from desktop_agent.persistence.tables import model_catalogue


def save_models(db: Database, models: Sequence[Mapping[str, Any]], read_at: float) -> int:
    """Replace the stored catalogue with ``models`` (the API's ``data`` list).

    Returns:
        The number of models stored (an empty reading stores nothing and keeps the old one).
    """
    rows = [
        {
            "id": str(m["id"]),
            "position": i,
            "data": json.dumps(dict(m), sort_keys=True),
            "read_at": read_at,
        }
        for i, m in enumerate(models)
        if isinstance(m.get("id"), str) and m.get("id")
    ]
    if not rows:
        return 0
    with db.write() as conn:
        conn.execute(delete(model_catalogue))
        conn.execute(insert(model_catalogue), rows)
    return len(rows)


def load_models(db: Database) -> tuple[list[dict[str, Any]], float]:
    """The stored catalogue and when it was read (``([], 0.0)`` when never)."""
    with db.read() as conn:
        rows = conn.execute(
            select(model_catalogue.c.data, model_catalogue.c.read_at).order_by(
                model_catalogue.c.position
            )
        ).all()
    models: list[dict[str, Any]] = []
    for data, _ in rows:
        try:
            value = json.loads(data)
        except ValueError:
            continue
        if isinstance(value, dict):
            models.append(value)
    return models, (max(r.read_at for r in rows) if rows else 0.0)
