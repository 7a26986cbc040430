"""What a model step says of Anthropic's server tools, as plain lines for the analyst.

Read from the step the engine recorded: the uses the API counted
(``api.server_tool_use``), the code execution container (``api.container``, and the
intent's ``container`` when a new one replaced an expired one), the container time priced
(``api.code_execution``), and the files the code wrote, saved into the workspace
(``files``: path, size, SHA-256, or why one could not be saved).
"""

from __future__ import annotations

from typing import Any

from desktop_agent.domain.models import size_words
from desktop_agent.llm.pricing import SERVER_TOOL_USD

_USES = {
    "web_search_requests": ("web search", "web searches"),
    "web_fetch_requests": ("web fetch", "web fetches"),
}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def server_tool_lines(input_: dict[str, Any], output: dict[str, Any]) -> list[str]:
    """Plain lines (may be empty) of a model step's server tool uses, container and files."""
    found = output.get("api")
    api: dict[str, Any] = found if isinstance(found, dict) else {}
    lines = []
    uses = api.get("server_tool_use")
    for key, n in uses.items() if isinstance(uses, dict) else ():
        one, many = _USES.get(key, (key.removesuffix("_requests"), key))
        count = _count(n)
        if count:
            price = SERVER_TOOL_USD.get(key, 0.0) * count
            paid = f" (${price:.4f})" if price else ""
            lines.append(f"{count} {one if count == 1 else many}{paid}")
    box = api.get("container")
    if isinstance(box, dict) and box.get("id"):
        asked = input_.get("container")
        intent: dict[str, Any] = asked if isinstance(asked, dict) else {}
        gone = box.get("replaces") or intent.get("expired")
        new = " (new: the run's last one had expired)" if gone else ""
        lines.append(f"code execution container {box['id']}{new}")
    priced = api.get("code_execution")
    if isinstance(priced, dict):
        minutes = float(priced.get("billed_s") or 0) / 60
        usd = float(priced.get("usd") or 0)
        cost = f"${usd:.4f}" if usd else "no charge (with web search or fetch)"
        lines.append(f"container time billed: {minutes:.0f} min, {cost}")
    for saved in output.get("files") or []:
        if not isinstance(saved, dict):
            continue
        if saved.get("error"):
            what = saved.get("name") or saved.get("file_id")
            lines.append(f"not saved: {what}: {saved['error']}")
        else:
            size = size_words(_count(saved.get("size")))
            sha = str(saved.get("sha256"))[:12]
            lines.append(f"saved {saved.get('path')} ({size}, sha256 {sha})")
    return lines
