"""Signed webhooks: how the worker signs a notification, and how a receiver checks one.

Every POST to ``Settings.webhook_url`` carries a header

    X-Desktop-Agent-Signature: t=1767225600,v1=5257a869e7ec…(64 hex digits)

where ``t`` is when it was signed (Unix seconds) and ``v1`` the hex HMAC-SHA256, keyed with
the data folder's webhook secret (``desktop-agent webhook-secret show``), of
``f"{t}.".encode() + body``: the exact bytes of the body, as received, before any JSON
parsing. A receiver recomputes it and compares in constant time (a forged or altered body
fails), and refuses a timestamp too far from its own clock (a recorded request replayed
later fails). The header may carry several ``v1`` values; one matching is enough.

Standard library only, so that a receiver can import :func:`verify` (or copy it: see
``docs/webhooks.md``).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable
from typing import Any, Protocol

HEADER = "X-Desktop-Agent-Signature"
"""The signature's header."""

SCHEME = "v1"
"""HMAC-SHA256 over ``f"{t}.".encode() + body``, in hex."""

TOLERANCE_S = 300.0
"""How far a signature's time may be from the receiver's clock by default."""


class SignatureError(ValueError):
    """A request that does not carry a valid, fresh signature (the message says why)."""


class Headers(Protocol):
    """Request headers: a dict, ``http.server``'s ``self.headers``, a framework's."""

    def items(self) -> Iterable[tuple[str, Any]]:
        """Name and value pairs."""
        ...


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The ``v1`` signature of ``body`` signed at ``timestamp``."""
    return hmac.new(
        secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The value of the :data:`HEADER` for ``body`` (signed now unless ``timestamp``)."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},{SCHEME}={signature(secret, t, body)}"


def _header(headers: Headers | str) -> str:
    if isinstance(headers, str):
        return headers
    wanted = HEADER.lower()
    for name, value in headers.items():
        if str(name).lower() == wanted:
            return str(value)
    raise SignatureError(f"no {HEADER} header")


def verify(
    secret: str,
    headers: Headers | str,
    body: bytes,
    *,
    tolerance_s: float = TOLERANCE_S,
    now: float | None = None,
) -> int:
    """Check a received webhook; returns the time it was signed (Unix seconds).

    Args:
        secret: the webhook secret (``desktop-agent webhook-secret show``).
        headers: the request's headers (names in any case), or the header's value itself.
        body: the request's body exactly as received.
        tolerance_s: the largest difference allowed between the signature's time and
            ``now`` (either way).
        now: the receiver's clock (default: ``time.time()``).

    Raises:
        SignatureError: no or a malformed header, a time outside the tolerance, or no
            signature matching ``secret`` and ``body``.
    """
    value = _header(headers)
    timestamp: int | None = None
    candidates: list[str] = []
    for part in value.split(","):
        key, sep, item = part.strip().partition("=")
        if not sep:
            continue
        if key == "t":
            try:
                timestamp = int(item)
            except ValueError:
                raise SignatureError(f"{HEADER} has a malformed time {item!r}") from None
        elif key == SCHEME:
            candidates.append(item.strip())
    if timestamp is None:
        raise SignatureError(f"{HEADER} has no time (t=)")
    if not candidates:
        raise SignatureError(f"{HEADER} has no {SCHEME} signature")
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance_s:
        raise SignatureError(
            f"the signature's time is {abs(clock - timestamp):.0f} s away from now "
            f"(more than {tolerance_s:.0f} s): a replay, or a clock far off"
        )
    expected = signature(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, c) for c in candidates):
        raise SignatureError("no signature matches: a wrong secret, or an altered body")
    return timestamp
