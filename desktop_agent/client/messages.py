"""Error messages as a user should read them, for the CLI and the app alike.

:func:`plain_error` lives with the errors themselves (the engine and the worker word their
messages with it too); it is re-exported here for the CLI and the app.
"""

from __future__ import annotations

from desktop_agent.domain.errors import plain_error

__all__ = ["plain_error"]
