"""The history room: compare two runs, fork from a step, run again, export and import.

What a run did is the base of the next: two runs side by side in a compare window; a fork
from a step of the timeline (:mod:`desktop_agent.gui.forking`, where it can be made read
off the GUI thread); Run again, the new-run dialog filled as the run was started; a run
written out or a bundle brought in (:mod:`desktop_agent.gui.exporting`). A run made here
is selected as soon as it exists.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from desktop_agent.domain import Run
from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.dialogs.new_run import NewRunDialog
from desktop_agent.gui.exporting import Exporting
from desktop_agent.gui.forking import Forking
from desktop_agent.gui.views.compare import CompareWindow


class HistoryRoom(QObject):
    """Compare, fork, run again, export and import.

    Args:
        window: the main window.
        parent: the main window (the dialogs' parent; its status bar says what was done).

    Attributes:
        exporting: export and import.
        forking: fork from a step.
        compare_windows: the compare windows opened (closed ones dropped at the next).
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.parent_window = parent
        self.compare_windows: list[CompareWindow] = []
        self.exporting = Exporting(
            window.client, window.tasks, parent, self._selected_run, window.show_error
        )
        self.forking = Forking(
            window.client, window.tasks, parent, window.show_error, self._on_fork_made
        )
        a = window.acts
        a["compare"].triggered.connect(self._on_compare_triggered)
        a["run_again"].triggered.connect(self._on_run_again_triggered)
        a["fork_step"].triggered.connect(self._on_fork_step_triggered)
        a["export"].triggered.connect(self.exporting.ask_export)
        a["import"].triggered.connect(self.exporting.ask_import)

    def _selected_run(self) -> Run | None:
        selected = self.window.runs_room.selected
        return selected.run if selected is not None else None

    # ------------------------------------------------------------------ compare

    @Slot()
    def _on_compare_triggered(self) -> None:
        chosen = self.window.runs_room.run_list.selected_run_ids()
        if len(chosen) != 2:
            self.window.show_error("Select two runs to compare them (Ctrl+click the second one).")
            return
        self.open_compare(*chosen)

    def open_compare(self, run_a: str, run_b: str) -> CompareWindow:
        """Open a window comparing two runs (older first when both are listed)."""
        model = self.window.runs_room.runs_model
        a, b = model.get(run_a), model.get(run_b)
        if a is not None and b is not None and a.run.created_at > b.run.created_at:
            run_a, run_b = run_b, run_a
        w = self.window
        window = CompareWindow(w.client, w.tasks, run_a, run_b, self.parent_window)
        self.compare_windows = [c for c in self.compare_windows if not c.closed] + [window]
        window.show()
        return window

    # ------------------------------------------------------------------ fork, run again

    @Slot()
    def _on_fork_step_triggered(self) -> None:
        entry = self.window.detail_room.detail.current_entry()
        selected = self.window.runs_room.selected
        if selected is None or entry is None:
            self.window.show_error("Select a step in the timeline to fork the run from it.")
            return
        self.forking.fork_from_step(selected.run.id, entry.seq)

    def _on_fork_made(self, run: Run) -> None:
        """The new fork opens at once: selected, its header saying what it shares."""
        self.window.statusBar().showMessage(
            f"Forked run {run.forked_from} at step {run.forked_at_seq}: {run.id}", 30_000
        )
        self.window.new_run_room.run_started(run)

    @Slot()
    def _on_run_again_triggered(self) -> None:
        selected = self.window.runs_room.selected
        if selected is not None:
            self.run_again(selected.run)

    def run_again(self, run: Run) -> NewRunDialog:
        """Open New run filled as ``run`` was started, to change what should change."""
        dialog = self.window.new_run_room.open_new_run()
        dialog.prefill(run)
        return dialog

    # ------------------------------------------------------------------ export

    def export_run(self, run_id: str, path: Path, fmt: str) -> None:
        """Write the run as ``fmt`` to ``path`` (see :mod:`desktop_agent.gui.exporting`)."""
        self.exporting.export_run(run_id, path, fmt)

    def import_bundle(self, path: Path) -> None:
        """Bring a bundle in, read-only (see :mod:`desktop_agent.gui.exporting`)."""
        self.exporting.import_bundle(path)
