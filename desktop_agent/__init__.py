"""desktop-agent: supervise long-running Claude research agents from the desktop."""

__version__ = "0.1.0"
