"""Fork from a step, in the app: where a fork can be made, the dialog, and the new run.

The step chosen in the timeline may be one a fork cannot follow (a tool call inside a
model turn): the fork is then offered from the nearest step that can
(:func:`desktop_agent.client.forks.fork_options`, read off the GUI thread), and the
dialog says so ("Fork from step 17, before this model turn"); a note is offered only
where one can follow, an edit only where the next step is a tool call. The fork made, the
window selects it at once.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QWidget

from desktop_agent.client import forks as client_forks
from desktop_agent.client.api import Client
from desktop_agent.client.forks import ForkOptions
from desktop_agent.domain import JSON, Run
from desktop_agent.domain.errors import plain_error
from desktop_agent.gui.dialogs.fork import ForkDialog
from desktop_agent.gui.tasks import TaskRunner


class Forking(QObject):
    """The window's forks: options read in the background, the dialog, the fork made.

    Args:
        client: the app's client.
        tasks: the task runner (every read and write off the GUI thread).
        window: the dialogs' parent.
        show_error: how the window tells a failure.
        made: called with the new run once it exists (the window selects it).
    """

    def __init__(
        self,
        client: Client,
        tasks: TaskRunner,
        window: QWidget,
        show_error: Callable[[str], None],
        made: Callable[[Run], None],
    ) -> None:
        super().__init__(window)
        self.client, self.tasks, self.window = client, tasks, window
        self.show_error, self.made = show_error, made
        self.dialog: ForkDialog | None = None

    def fork_from_step(self, run_id: str, seq: int) -> None:
        """Find how ``run_id`` can be forked from step ``seq``, then open the dialog."""
        client = self.client

        def read() -> ForkOptions:
            return client_forks.fork_options(client, run_id, seq)

        self.tasks.submit(read, self._on_options, lambda exc: self.show_error(plain_error(exc)))

    def open_dialog(self, options: ForkOptions) -> ForkDialog:
        """The fork dialog for ``options`` (one at a time)."""
        if self.dialog is not None:
            self.dialog.close_discarding()
            self.dialog.deleteLater()
        dialog = ForkDialog(
            options.run_id,
            options.at_seq,
            options.next_call,
            self.window,
            moved=options.moved,
            note_problem=options.note_problem,
        )
        dialog.fork_requested.connect(self._on_dialog_fork_requested)
        self.dialog = dialog
        dialog.open()
        return dialog

    def _on_options(self, options: ForkOptions) -> None:
        if options.problem:
            self.show_error(options.problem)
            return
        self.open_dialog(options)

    @Slot(str, int, object, object)
    def _on_dialog_fork_requested(
        self, run_id: str, seq: int, note: str | None, args: JSON
    ) -> None:
        dialog, client = self.dialog, self.client

        def make() -> Run:
            return client_forks.fork(client, run_id, seq, note=note, edited_arguments=args)

        def done(run: Run) -> None:
            if dialog is not None:
                dialog.close_discarding()
            self.made(run)

        def failed(exc: Exception) -> None:
            if dialog is not None:
                dialog.show_error(plain_error(exc))

        self.tasks.submit(make, done, failed)
