"""The main window's rooms: one controller per feature, built and wired by the window.

:class:`~desktop_agent.gui.mainwindow.MainWindow` is the frame (toolbar, menus, the tabs on
the left, the splitter, the status bar, the clock and the window's life); each room owns
its widgets, its state and its reads and writes, which always run on the window's task
runner (:mod:`desktop_agent.gui.tasks`), never on the GUI thread. A room reaches another
only through the window (:class:`~desktop_agent.gui.desk.host.Desk`).

* :mod:`~.host`: what the rooms use of the window.
* :mod:`~.runs`: the run list, the selection, archived and imported runs, tags, and a run
  (or one of its steps) opened from elsewhere.
* :mod:`~.detail`: the selected run's pane (header, timeline, inspector, time axis), its
  steps as polled, notes on steps, and its forks, forecast and batch wait read off-thread.
* :mod:`~.approvals`: the approvals inbox, the approval dialogs, the header's banner and
  the count in the tab, the toolbar and the window's title.
* :mod:`~.controls`: the run controls (enabled as the run allows) and what the commands
  report.
* :mod:`~.new_run`: the new-run dialog, the model catalogue, the tools, the offline demo.
* :mod:`~.history`: compare, fork from a step, run again, export and import.
* :mod:`~.search`: Search all runs and Find.
* :mod:`~.usage`: the usage window.
* :mod:`~.settings`: the settings dialog, the API key and the palette.
* :mod:`~.worker`: the worker's status, recovery after a crash, the crash report.
* :mod:`~.alerts`: the tray icon, desktop notifications and the notices.
* :mod:`~.closing`: closing to the tray, the question before closing, quit everything.
"""
