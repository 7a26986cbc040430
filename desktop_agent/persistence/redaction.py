"""What never leaves the journal as it is: anything that looks like an API key.

The API key is never stored in the database, but a model or a web page can still put one
into a tool's arguments or result. Archives, exports and the search index all pass what
they copy through :func:`redact`, so a key that slipped into the journal is not copied on.
"""

from __future__ import annotations

import re
from typing import Any

KEY_LIKE = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
"""An Anthropic API key (or anything shaped like one)."""

REDACTED = "[redacted]"


def redact(value: Any) -> Any:
    """``value`` with every string that looks like an Anthropic API key replaced."""
    if isinstance(value, str):
        return KEY_LIKE.sub(REDACTED, value)
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value
