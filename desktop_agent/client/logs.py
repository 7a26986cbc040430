"""The program's log lines pass through the redaction, as archives and exports do.

A key can reach a log line in an error's text (a tool's arguments, a server's answer, a
traceback): :class:`RedactingFormatter` formats the line as usual, then replaces whatever
looks like an API key, wrapped over lines or not
(:func:`~desktop_agent.persistence.redaction.redact_text`). Every entry point's logging
goes through it (see :func:`configure`): the worker's log file is its standard error.
"""

from __future__ import annotations

import logging

from desktop_agent.persistence.redaction import redact_text

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """A formatter whose output, traceback included, has every key-like string replaced."""

    def format(self, record: logging.LogRecord) -> str:
        """The line as :class:`logging.Formatter` makes it, redacted."""
        return redact_text(super().format(record))


def configure(level: str) -> None:
    """Log to standard error at ``level``, every line redacted."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(RedactingFormatter(LOG_FORMAT))
