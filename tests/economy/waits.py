"""Helpers for tests of what an analyst sees of economy mode.

A run left waiting in a Message Batch (queued, then sent), and a catalogue whose model
lists no batches.
"""

from __future__ import annotations

import copy
import time

from desktop_agent.client.api import Client
from desktop_agent.domain import Run, RunStatus, WaitReason
from desktop_agent.engine.ports import BatchEntry, RunPatch, batch_custom_id
from desktop_agent.llm.catalogue import snapshot_models
from desktop_agent.persistence.batches import BatchBook, SqlBatchQueue
from desktop_agent.persistence.catalogue import save_models

NO_BATCH = "claude-sonnet-5-5"
"""The model the catalogue of :func:`without_batches` lists without Message Batches."""


def wait_in_batch(client: Client, run: Run, queued_at: float) -> None:
    """The run's first model turn queued for the next batch, the run waiting for it."""
    entry = BatchEntry(batch_custom_id(run.id, 1, 1), run.id, 1, 1, "queued", queued_at)
    SqlBatchQueue(client.store.db).enqueue(entry, run.model, {"model": run.model})
    patch = RunPatch(status=RunStatus.WAITING, wait_reason=WaitReason.BATCH, status_message="")
    client.store.commit(run.id, patch=patch)


def send_batch(client: Client, batch_id: str, at: float) -> None:
    """Every queued request sent in one batch, ``batch_id``, at ``at``."""
    book = BatchBook(client.store.db)
    claim = book.claim(at, 100, 10_000_000)
    assert claim is not None, "nothing queued to send"
    book.submitted(claim, batch_id, at, at, at + 60)


def without_batches(client: Client, model: str = NO_BATCH) -> None:
    """Store the shipped catalogue with ``model``'s ``batch`` capability unsupported."""
    models = copy.deepcopy(snapshot_models())
    for m in models:
        if m["id"] == model:
            m["capabilities"]["batch"] = {"supported": False}
    save_models(client.store.db, models, time.time())
