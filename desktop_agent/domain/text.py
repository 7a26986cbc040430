r"""What text an analyst may type: no NUL, no lone surrogate, no control but tabs and breaks.

Everything an analyst types (a goal, a steer note, an answer, an approval's note, a
rejection's reason, a system prompt, a search, the strings of an edited tool call) is
checked before anything is stored or asked, and refused with a message that says what is
wrong and where:

- a NUL, which PostgreSQL refuses and C code reads as the end of the text;
- half of a UTF-16 surrogate pair, which is no character and cannot be written as UTF-8;
- any other control character but a tab or a line break (``\t``, ``\n``, ``\r``): C0,
  DEL and C1. Nothing typed needs one; pasted from a terminal, an escape sequence would
  otherwise travel to the model, into reports and back to other terminals.

Format characters (zero-width joiners in emoji, directional marks in mixed scripts) are
text and kept; every untrusted text is still shown harmless by the CLI and the app.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from desktop_agent.domain.errors import InvalidInputError

ALLOWED_CONTROLS = frozenset("\t\n\r")
"""Control characters text may hold."""


def text_problem(text: str) -> str | None:
    """What is wrong with ``text`` (see the module), or None."""
    for index, ch in enumerate(text):
        if ch in ALLOWED_CONTROLS:
            continue
        category = unicodedata.category(ch)
        at = f"(U+{ord(ch):04X}, character {index + 1})"
        if ch == "\x00":
            return f"contains a NUL character {at}: remove it"
        if category == "Cs":
            return f"contains a lone surrogate {at}, which is not a character: remove it"
        if category == "Cc":
            return f"contains a control character {at}: remove it"
    return None


def check_text(text: str, what: str) -> str:
    """``text`` itself, if it is acceptable (see the module and :func:`text_problem`).

    Args:
        text: what the analyst typed.
        what: what it is, for the message: ``"the search"``, ``"the goal"``.

    Raises:
        InvalidInputError: ``text`` is not a string, or holds a NUL, a lone surrogate or
            a control character other than a tab or a line break.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} must be text, not {type(text).__name__}")
    problem = text_problem(text)
    if problem is not None:
        raise InvalidInputError(f"{what} {problem}")
    return text


def check_json_text(value: Any, what: str) -> Any:
    """``value`` itself, if every string in it (keys too) is acceptable text.

    For JSON an analyst edited (a tool call's arguments): the message names the path of
    the string at fault, e.g. ``the edited arguments: the string at body.lines[2]
    contains a control character (U+0007, character 5): remove it``.

    Raises:
        InvalidInputError: a string in ``value`` is not acceptable (see :func:`check_text`).
    """

    def walk(node: Any, path: str) -> None:
        if isinstance(node, str):
            problem = text_problem(node)
            if problem is not None:
                where = f"the string at {path}" if path else "the string"
                raise InvalidInputError(f"{what}: {where} {problem}")
        elif isinstance(node, dict):
            for key, item in node.items():
                walk(key, f"{path} (a key)" if path else "the top level (a key)")
                walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{path}[{index}]")

    walk(value, "")
    return value
