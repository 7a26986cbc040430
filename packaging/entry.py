"""The bundle's entry point: the same ``desktop-agent`` command as the console script.

With no subcommand it opens the desktop app; ``worker`` runs a worker (the app starts its
worker as this same executable); every other subcommand is the CLI.
"""

import sys

from desktop_agent.cli import main

if __name__ == "__main__":
    sys.exit(main())
