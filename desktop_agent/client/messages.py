"""Error messages as a user should read them, for the CLI and the app alike."""

from __future__ import annotations

import re

_SQL = re.compile(r"\s*\[SQL:.*|\s*\(Background on this error at:.*", re.DOTALL)
"""What SQLAlchemy appends to a driver's message: the statement, its parameters, a link."""

_WRAPPER = re.compile(r"^\((?:[A-Za-z_][\w.]*)\)\s*")
"""The driver's exception class SQLAlchemy puts in front, e.g. ``(sqlite3.IntegrityError)``."""


def plain_error(exc: BaseException) -> str:
    """What went wrong, for a user: no SQL statement, no Python exception names.

    Database drivers put the failing statement and its parameters into their message, and
    SQLAlchemy prefixes it with the driver's exception class: both are cut off here. The
    result is one line.
    """
    text = _SQL.sub("", str(exc)).strip()
    text = _WRAPPER.sub("", text).strip()
    return " ".join(text.split()) or "something went wrong"
