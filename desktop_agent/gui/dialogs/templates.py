"""Dialogs that make a run template: a schedule, a batch, a watched folder.

Each is the new-run form (goal, model, workspace, tools, approval policy, budgets) with a
section of its own: when a schedule fires, which items a batch runs over, which folder is
watched. What they check as the analyst types (cron expressions, intervals, how many items
a folder holds) is checked again by :class:`~desktop_agent.client.schedules.Scheduling`
when the request is made; its message then shows in the dialog.

Each dialog has its module: the shared form in :mod:`.template_form`, schedules in
:mod:`.schedule`, batches in :mod:`.batch`, watched folders in :mod:`.watch`. Their names
are imported from here as before.
"""

from __future__ import annotations

from desktop_agent.gui.dialogs.batch import (
    ECONOMY_CONCURRENCY,
    STREAMED_CONCURRENCY,
    BatchDialog,
    BatchRequest,
)
from desktop_agent.gui.dialogs.schedule import OVERLAPS, ScheduleDialog, ScheduleRequest
from desktop_agent.gui.dialogs.template_form import RunTask, TemplateDialog, run_options
from desktop_agent.gui.dialogs.watch import WatchDialog, WatchRequest

__all__ = [
    "ECONOMY_CONCURRENCY",
    "OVERLAPS",
    "STREAMED_CONCURRENCY",
    "BatchDialog",
    "BatchRequest",
    "RunTask",
    "ScheduleDialog",
    "ScheduleRequest",
    "TemplateDialog",
    "WatchDialog",
    "WatchRequest",
    "run_options",
]
