"""``python -m desktop_agent`` and the ``desktop-agent`` console script."""

from __future__ import annotations

import sys

from desktop_agent.cli import main

if __name__ == "__main__":
    sys.exit(main())
