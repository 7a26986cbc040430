"""The ``desktop-agent`` command: argument parsing, commands and terminal output.

- :mod:`~desktop_agent.cli.commands`: the parser and one function per command.
- :mod:`~desktop_agent.cli.output`: lines, tables, ``--json`` and following a run live.
- :mod:`~desktop_agent.cli.scheduling`: schedules, batches and folder watches.
- :mod:`~desktop_agent.cli.backup`: backups, restore and the database's health.
- :mod:`~desktop_agent.cli.workers`: starting a background worker for queued work, and saying so.

The CLI reaches the system only through :mod:`desktop_agent.client`, as the GUI does (the
import contracts in ``pyproject.toml`` hold this); ``desktop-agent worker`` hands over to
:mod:`desktop_agent.worker.main`, the worker process itself.

Building the parser, ``--help`` and usage errors import no client, database, SDK or Qt
code: each module imports the client (and ``config``) inside the commands that use it, so
``desktop-agent --help`` starts in a fraction of a second (``bench/startup.py``;
``tests/cli/test_startup_imports.py`` keeps it so).
"""

from desktop_agent.cli.commands import main
from desktop_agent.cli.workers import AUTOSTART_ENV

__all__ = ["AUTOSTART_ENV", "main"]
