r"""What text an analyst may type: no NUL, no lone surrogate; in a search, no control.

Free text (a goal, a steer note, an answer, an approval's note, a rejection's reason, a
system prompt) keeps what it holds, with two exceptions it cannot hold: a NUL (which
PostgreSQL refuses, and C code reads as the end of the text) and half of a UTF-16
surrogate pair, which is no character and cannot be written as UTF-8. Other control
characters are kept (tabs and line breaks are text; an escape sequence is shown harmless,
as every untrusted text is, by the CLI and the app). A search is typed to be matched:
there, every control character but a tab or a line break (``\t``, ``\n``, ``\r``) is
refused too (C0, DEL, C1: nothing indexed holds one). Refused with a message that says
what and where, before anything is stored or asked.
"""

from __future__ import annotations

import unicodedata

from desktop_agent.domain.errors import InvalidInputError

ALLOWED_CONTROLS = frozenset("\t\n\r")
"""Control characters a search may hold (free text may hold any but NUL)."""


def text_problem(text: str, *, controls: bool = True) -> str | None:
    """What is wrong with ``text`` (see the module), or None.

    Args:
        text: the text.
        controls: whether control characters other than NUL are allowed (free text), or
            only tabs and line breaks (a search).
    """
    for index, ch in enumerate(text):
        if ch in ALLOWED_CONTROLS:
            continue
        category = unicodedata.category(ch)
        at = f"(U+{ord(ch):04X}, character {index + 1})"
        if ch == "\x00":
            return f"contains a NUL character {at}: remove it"
        if category == "Cs":
            return f"contains a lone surrogate {at}, which is not a character: remove it"
        if category == "Cc" and not controls:
            return f"contains a control character {at}: remove it"
    return None


def check_text(text: str, what: str, *, controls: bool = True) -> str:
    """``text`` itself, if it is acceptable (see the module and :func:`text_problem`).

    Args:
        text: what the analyst typed.
        what: what it is, for the message: ``"the search"``, ``"the goal"``.
        controls: False for a search: control characters other than a tab or a line
            break are refused too.

    Raises:
        InvalidInputError: ``text`` is not a string, or holds a NUL or a lone surrogate
            (or, unless ``controls``, another control character).
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be text, not {type(text).__name__}")
    problem = text_problem(text, controls=controls)
    if problem is not None:
        raise InvalidInputError(f"{what} {problem}")
    return text
