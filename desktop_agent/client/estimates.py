"""Forecasts asked for before anything starts, of a run and of a batch's items.

A run's: ``run --estimate``, the HTTP API's ``POST /v1/runs/estimate``; a batch's over all
its items: ``batch start --estimate``.

The options are checked as starting would check them (a refused option is refused here
too); nothing is written, no workspace is made and no worker is started. The figures are
:func:`~desktop_agent.client.forecast.forecast`'s.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Unpack

from desktop_agent.client.api import Client, RunSpecOptions
from desktop_agent.client.forecast import Forecast, forecast
from desktop_agent.client.schedules import RunOptions, Scheduling, batch_source


def estimate_run(
    client: Client,
    *,
    template: str | None = None,
    items: int = 1,
    concurrency: int | None = None,
    **options: Unpack[RunSpecOptions],
) -> Forecast:
    """The forecast for a run started with ``options`` (:meth:`Client.start_run`'s).

    The mode is the options' (``economy``). ``template``, ``items`` and ``concurrency``:
    see :func:`forecast`.

    Raises:
        InvalidInputError: an option that starting the run would refuse.
    """
    spec, _budget = client.prepare_run(**options)
    return forecast(client, spec, template=template, items=items, concurrency=concurrency)


def estimate_batch(
    sched: Scheduling,
    goal: str,
    *,
    folder: str | Path | None = None,
    pattern: str = "*",
    lines: str | Path | None = None,
    concurrency: int = 4,
    options: RunOptions | None = None,
    economy: bool | None = None,
) -> Forecast:
    """The forecast for all items of the batch :meth:`Scheduling.start_batch` would make.

    The items are listed as starting the batch would list them (and refused alike);
    ``economy`` as for :func:`estimate_run`.
    """
    items, _source = batch_source(folder, pattern, lines)
    opts = dataclasses.replace(options or RunOptions(), workspace=None)  # nothing is made
    spec = sched.template(goal, opts).spec
    wanted: Any = economy if economy is not None else getattr(options, "economy", None)
    if wanted is not None:
        spec = dataclasses.replace(spec, economy=bool(wanted))
    return forecast(sched.client, spec, items=len(items), concurrency=concurrency)
