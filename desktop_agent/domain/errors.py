"""One root for our errors, split on two axes.

Environment problems the user can fix (``KnownError``) are shown as a message; anything else
is our bug. Independently, ``TransientError`` may succeed when tried again and
``PermanentError`` will not.
"""

from __future__ import annotations

import re


class DesktopAgentError(Exception):
    """Root of every error this package raises on purpose.

    Attributes:
        code: short stable identifier, used for UI text and ``--json`` output.
    """

    code = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        """The human-readable message."""
        return str(self)


class KnownError(DesktopAgentError):
    """A problem of the environment or of the input, shown to the user as is."""


class BugError(DesktopAgentError):
    """Something that should never happen: a crash report, not a message."""


class TransientError(DesktopAgentError):
    """May succeed if tried again later.

    Attributes:
        retry_after: seconds the other side asked us to wait, if it said.
    """

    def __init__(self, message: str, *, code: str | None = None, retry_after: float | None = None):
        super().__init__(message, code=code)
        self.retry_after = retry_after


class PermanentError(DesktopAgentError):
    """Will fail the same way when tried again."""


class NotFoundError(KnownError):
    """A run, step or approval id that does not exist."""

    code = "not_found"


class InvalidInputError(KnownError):
    """Input that does not parse or does not validate."""

    code = "invalid_input"


class InvalidStateError(KnownError):
    """A command that does not apply to the run's current status."""

    code = "invalid_state"


class StorageError(KnownError):
    """The database cannot be opened, read or written.

    Its code says what stopped it when that is known: ``disk_full``, ``locked`` (by
    another process), ``read_only``, ``damaged``; ``storage`` otherwise.
    """

    code = "storage"


_STORAGE_PROBLEMS = {
    "disk_full": "the disk was full",
    "locked": "the database was locked by another process",
    "read_only": "the database was read-only",
    "damaged": "the database was damaged",
}


def storage_problem(code: str) -> str:
    """What stopped a write, in words and in the past tense, from a StorageError's code."""
    return _STORAGE_PROBLEMS.get(code, "the database could not be written")


class UnrecordedOutcomeError(StorageError):
    """An effect ran, but the commit of its outcome failed: the journal shows it started.

    Raised by the engine in place of the StorageError that stopped the commit (same
    message and code), so that whoever parks the run can say later why the effect's
    step is open: not a crash, but storage that failed right after the effect.

    Attributes:
        seq: the effect's step.
    """

    def __init__(self, cause: StorageError, seq: int) -> None:
        super().__init__(str(cause), code=cause.code)
        self.seq = seq


class SchemaTooNewError(StorageError):
    """The database was written by a newer release of desktop-agent."""

    code = "schema_too_new"


class NondeterminismError(BugError):
    """The journal does not match the step the engine is about to take."""

    code = "nondeterminism"


class RateLimitedError(TransientError):
    """The model API asked us to slow down (429) or is overloaded (529)."""

    code = "rate_limited"


class ApiConnectionError(TransientError):
    """The model API could not be reached, or answered with a server error."""

    code = "api_unavailable"


class AuthenticationError(PermanentError):
    """The API key is missing or rejected (401/403)."""

    code = "auth"


class BadRequestError(PermanentError):
    """The model API rejected the request itself (400)."""

    code = "bad_request"


class ControlFlowInterrupt(BaseException):
    """Root of the interrupts that unwind a run at a boundary.

    A ``BaseException`` so that ``except Exception`` in tool code cannot swallow it.
    """


class RunCancelled(ControlFlowInterrupt):
    """The analyst cancelled the run."""


class LeaseLost(ControlFlowInterrupt):
    """This worker no longer holds the run: another worker claimed it since (fencing).

    Raised by a journal write, a lease renewal or an effect's last check that finds the
    run's lease owned by someone else or at a newer epoch. It ends the activation at
    once and writes nothing to the run: the new owner's journal stands. A
    ``BaseException`` (as :class:`RunCancelled`) so that tool code and model adapters
    that catch ``Exception`` cannot swallow it.
    """


_SQL = re.compile(r"\s*\[SQL:.*|\s*\(Background on this error at:.*", re.DOTALL)
"""What SQLAlchemy appends to a driver's message: the statement, its parameters, a link."""

_WRAPPER = re.compile(r"^\((?:[A-Za-z_][\w.]*)\)\s*")
"""The driver's exception class SQLAlchemy puts in front, e.g. ``(sqlite3.IntegrityError)``."""


def plain_error(exc: BaseException, empty: str = "something went wrong") -> str:
    """What went wrong, for a user: no SQL statement, no Python exception names.

    Database drivers put the failing statement and its parameters into their message, and
    SQLAlchemy prefixes it with the driver's exception class: both are cut off here. A
    ``KeyError``, whose text is only the key, says which key was missing. The result is
    one line; ``empty`` when the exception says nothing at all (the caller words what
    happened). Log the exception's class where it is caught, for whoever debugs.
    """
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return " ".join(f"missing key {exc.args[0]!r}".split())
    text = _SQL.sub("", str(exc)).strip()
    text = _WRAPPER.sub("", text).strip()
    return " ".join(text.split()) or empty
