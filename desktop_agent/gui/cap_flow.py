"""The monthly spend cap from the window: save a new cap, then resume the runs it held.

:meth:`~desktop_agent.gui.commands.RunCommands.open_cap_dialog` opens the dialog and
connects it here; the writes run on the window's task pool.
"""

from __future__ import annotations

from collections.abc import Callable

from desktop_agent.client import cap
from desktop_agent.client.api import Client
from desktop_agent.client.messages import plain_error
from desktop_agent.domain import Run
from desktop_agent.domain.units import format_usd
from desktop_agent.gui.dialogs.cap import CapDialog
from desktop_agent.gui.tasks import TaskRunner


def wire_cap_dialog(
    dialog: CapDialog,
    client: Client,
    tasks: TaskRunner,
    done: Callable[[str], None],
    failed: Callable[[str], None],
) -> None:
    """Connect ``dialog``'s requests: a new cap saved, then the held runs resumed.

    ``done`` and ``failed`` get the message for the status bar.
    """

    def raise_to(usd: float) -> None:
        new = usd or None
        tasks.submit(
            lambda: cap.set_cap(client, new),
            lambda settings: saved(settings.monthly_spend_cap_usd),
            lambda exc: dialog.show_error(plain_error(exc)),
        )

    def saved(usd: float | None) -> None:
        done(f"Monthly spend cap {f'set to {format_usd(usd)}' if usd else 'off'}")
        dialog.cap_saved(usd)

    def resume() -> None:
        def resumed(runs: list[Run]) -> None:
            dialog.accept()
            done(f"Resumed {len(runs)} run{'s' if len(runs) != 1 else ''} the cap held")

        def refused(exc: Exception) -> None:
            dialog.show_error(plain_error(exc))
            failed(plain_error(exc))

        tasks.submit(lambda: cap.resume_held(client), resumed, refused)

    dialog.raise_requested.connect(raise_to)
    dialog.resume_requested.connect(resume)
