"""Text formatting shared by the views: times, ages, token counts."""

from __future__ import annotations

import time

from desktop_agent.domain.units import format_duration, format_usd

__all__ = ["ago", "clock", "format_duration", "format_usd", "short_duration", "tokens"]


def clock(ts: float | None, now: float | None = None) -> str:
    """A timestamp as ``14:05`` today, ``Tue 14:05`` this week, else ``2026-11-02``."""
    if not ts:
        return "—"
    now = time.time() if now is None else now
    local = time.localtime(ts)
    today = time.localtime(now)
    if local.tm_yday == today.tm_yday and local.tm_year == today.tm_year:
        return time.strftime("%H:%M", local)
    if 0 <= now - ts < 6 * 86400:
        return time.strftime("%a %H:%M", local)
    return time.strftime("%Y-%m-%d", local)


def ago(ts: float | None, now: float | None = None) -> str:
    """How long ago, compactly: ``just now``, ``12s ago``, ``5m ago``, ``3h ago``."""
    if not ts:
        return "—"
    now = time.time() if now is None else now
    delta = max(0.0, now - ts)
    if delta < 2:
        return "just now"
    if delta < 60:
        return f"{delta:.0f}s ago"
    if delta < 3600:
        return f"{delta // 60:.0f}m ago"
    if delta < 86400:
        return f"{delta // 3600:.0f}h ago"
    return f"{delta // 86400:.0f}d ago"


def short_duration(seconds: float | None) -> str:
    """A step duration: ``120ms``, ``4.2s``, ``3m05s``."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 10:
        return f"{seconds:.1f}s"
    return format_duration(seconds)


def tokens(n: int) -> str:
    """A token count: ``950``, ``12.3k``, ``1.2M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"
