r"""What never leaves the journal as it is: anything that looks like an API key.

The API key is never stored in the database, but a model or a web page can still put one
into a tool's arguments or result. Archives, exports, traces and the search index all pass
what they copy through :func:`redact`, so a key that slipped into the journal is not copied
on.

The rule (:func:`redact_text`), exactly:

1. A key starts with ``sk-ant-``; a wrap (below, line breaks only) may fall anywhere
   inside those seven characters too.
2. Then comes a run of the key's alphabet, ``[A-Za-z0-9_-]``, possibly empty.
3. The key goes on across a *wrap* — spaces or tabs, or spaces and tabs around one line
   break (``\n``, ``\r\n``, ``\r``, or the same written as JSON escapes, ``\\n`` ...)
   — when what follows the wrap is a run of the alphabet that is *key material*: it has
   at least one letter and is not a plain word. A plain word is letters that are all
   lower case, Capitalised or ALL CAPS, possibly joined by ``-`` or ``_``
   (``Please``, ``rotate``, ``README``, ``follow-up``, ``NOTE_TO_SELF``); a run of digits
   and dashes (``2026-11-20``) is no key material either. Step 3 repeats: a key wrapped
   over three lines is one key.
4. When the runs of steps 2 and 3 hold at least 8 characters in all, everything from
   ``sk-ant-`` to the end of the last run is replaced by :data:`REDACTED`; the wrap after
   the last run (and whatever follows it) is kept.

5. A :data:`REDACTED` already in the text (written by an older release, whose rule
   stopped at the first wrap) takes the runs of key material after it as step 3 does:
   text redacted before keeps no half of a wrapped key once it passes through again.

So prose on the line after a key survives (its first word is a plain word), and so does a
date or a number there. What may survive of a wrapped key: a part after a wrap that happens
to look like a plain word or a number, such as the ``AA`` that ends every real key (random
key text does so with a chance of about 11% at four characters, 0.6% at eight, 0.03% at
twelve: a wrap leaves a short tail at worst).
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[redacted]"

_ALPHABET = r"[A-Za-z0-9_\-]"
_BREAK = r"(?:\r\n|\r|\n|\\r\\n|\\n|\\r)"
"""A line break, as it is or as a JSON string escapes it."""

_LINE_WRAP = rf"[ \t]*{_BREAK}[ \t]*"
_WRAP = rf"(?:{_LINE_WRAP}|[ \t]+)"

_HEAD = re.compile(
    "".join(re.escape(c) + f"(?:{_LINE_WRAP})?" for c in "sk-ant") + "-" + f"({_ALPHABET}*)"
)
"""``sk-ant-`` (wrapped or not) and the run of the key's alphabet right after it."""

_CONTINUED = re.compile(rf"{_WRAP}({_ALPHABET}+)")
"""A wrap and the run after it (a candidate for more of the key)."""

_WORD_PART = r"(?:[A-Za-z][a-z]*|[A-Z]+)"
_PLAIN_WORD = re.compile(rf"{_WORD_PART}(?:[-_]{_WORD_PART})*[-_]?")
"""A run that reads as a word of prose rather than key material."""

KEY_LIKE = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
"""An Anthropic API key (or anything shaped like one) on one line: what :func:`redact`
always replaces (it also replaces the key's parts after a wrap: see the module's rule)."""

MIN_KEY_CHARS = 8
"""Fewest characters of the key's alphabet after ``sk-ant-`` for the text to be a key."""


def is_key_material(run: str) -> bool:
    """Whether a run of the key's alphabet after a wrap is more of the key (rule, step 3)."""
    return any(c.isalpha() for c in run) and _PLAIN_WORD.fullmatch(run) is None


def redact_text(text: str) -> str:
    """``text`` with every key (wrapped or not, see the module's rule) replaced."""
    out: list[str] = []
    pos = 0
    search_at = 0
    while True:
        head = _HEAD.search(text, search_at)
        if head is None:
            break
        end, chars = head.end(), len(head.group(1))
        while True:
            more = _CONTINUED.match(text, end)
            if more is None or not is_key_material(more.group(1)):
                break
            end, chars = more.end(), chars + len(more.group(1))
        if chars >= MIN_KEY_CHARS:
            out += [text[pos : head.start()], REDACTED]
            pos = search_at = end
        else:
            search_at = head.start() + 1
    if out:
        out.append(text[pos:])
        text = "".join(out)
    return _absorb_tails(text) if REDACTED in text else text


_OLD_MARK = re.compile(re.escape(REDACTED))


def _absorb_tails(text: str) -> str:
    """``text`` with the key material after each :data:`REDACTED` removed (rule, step 5)."""
    out: list[str] = []
    pos = 0
    for mark in _OLD_MARK.finditer(text):
        if mark.start() < pos:
            continue
        end = mark.end()
        while True:
            more = _CONTINUED.match(text, end)
            if more is None or not is_key_material(more.group(1)):
                break
            end = more.end()
        if end > mark.end():
            out += [text[pos : mark.end()]]
            pos = end
    if not out:
        return text  # nothing replaced: the same string, not a copy (texts may be large)
    out.append(text[pos:])
    return "".join(out)


def redact(value: Any) -> Any:
    """``value`` with every string that looks like an Anthropic API key replaced."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value
