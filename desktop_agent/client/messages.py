"""Messages as a user should read them, for the CLI and the app alike.

:func:`plain_error` lives with the errors themselves (the engine and the worker word their
messages with it too); it is re-exported here for the CLI and the app.
"""

from __future__ import annotations

from desktop_agent.domain import Run, RunStatus
from desktop_agent.domain.errors import plain_error

__all__ = ["note_delivery", "plain_error"]


def note_delivery(run: Run) -> str:
    """When a note sent now to ``run`` reaches the agent ("": at the run's next step).

    A note never follows a step still open: to a run in doubt about a step, it waits for
    the analyst's decision (``resolve``), then is delivered; to a run that waits, is
    paused, stopped or needs attention, it is delivered when the run goes on.
    """
    if run.status == RunStatus.NEEDS_ATTENTION and run.attention_seq is not None:
        return (
            f"it waits while step {run.attention_seq} is in doubt and is delivered once you "
            "decide about it"
        )
    if run.status == RunStatus.NEEDS_ATTENTION:
        return "delivered when the run goes on (it needs attention)"
    if run.status in (RunStatus.WAITING, RunStatus.PAUSED, RunStatus.STOPPED):
        return f"delivered when the run goes on (it is {run.status})"
    return ""
