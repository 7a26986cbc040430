"""A new run's choice of Anthropic server tools: on or off, and web search's domain lists.

Plain functions over names and strings (the client checks a run's options with them; the
engine's :mod:`desktop_agent.engine.request` puts the lists on the tool definition).
Sources: Anthropic's "Web search tool" page (Messages API > Tools): ``allowed_domains`` or
``blocked_domains``, never both in one request; domains without a scheme, subdomains
included, sub-paths taken; and a model takes the tool where the Models API lists
``capabilities.server_tools.web_search`` as supported. The "Web fetch tool" and "Code
execution tool" pages (read 2026-11-27) list the same models; the Models API reports
``server_tools.code_execution`` and no web fetch entry (SDK 2.14's
``ServerToolsCapability``), so web fetch goes where code execution does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from desktop_agent.domain.catalogue import ModelEntry

CATALOGUE_NAME: dict[str, str] = {
    "web_search": "web_search",
    "web_fetch": "code_execution",
    "code_execution": "code_execution",
}
"""The ``capabilities.server_tools`` entry that says whether a model takes each server
tool (by the tool's API name); web fetch stands in for itself when the catalogue lists it."""

RUN_NAMES: dict[str, str] = {"server_web_fetch": "web_fetch"}
"""A run's tool name → the API's name, where they differ (our own tool is ``web_fetch``)."""


def takes_server_tool(entry: ModelEntry | None, name: str) -> bool:
    """Whether the model of ``entry`` takes the server tool ``name`` (the API's name).

    Read from ``capabilities.server_tools`` as the API wrote it (the top-level
    ``capabilities.code_execution`` is another thing: programmatic tool calling). A model
    the catalogue does not know takes it (the API will say if it does not); an entry
    stored before ``server_tools`` existed falls back to its feature set.
    """
    if entry is None:
        return True
    caps = entry.raw.get("capabilities")
    server = caps.get("server_tools") if isinstance(caps, Mapping) else None
    if not isinstance(server, Mapping):
        return entry.has(CATALOGUE_NAME.get(name, name))
    for key in (name, CATALOGUE_NAME.get(name, name)):
        node: Any = server.get(key)
        if isinstance(node, Mapping):
            return node.get("supported") is True
    return False


def added_server_tools(
    names: Sequence[str],
    *,
    web_fetch: bool,
    code_execution: bool,
    economy: bool,
    entry: ModelEntry | None,
    model: str,
    refuse: Callable[[str], Exception],
) -> tuple[list[str], str]:
    """A new run's tool names with the web fetch and code execution it chose, and a notice.

    A tool is chosen by its option or by its name among ``names`` (``server_web_fetch``,
    ``code_execution``). Anthropic's web fetch takes the place of our own ``web_fetch``:
    the API refuses two tools of one name, and our fetcher, beside it, would let the model
    reach any URL it makes up, which the server tool's rule (only URLs already in the
    conversation) is there to prevent. Runs without it keep our own (its private-address
    policy unchanged).

    Raises:
        Exception: ``refuse(message)`` when the model's catalogue entry does not list a
            chosen tool, or code execution is asked for in economy mode.
    """
    out = list(names)
    notices: list[str] = []
    if web_fetch or "server_web_fetch" in out:
        if not takes_server_tool(entry, "web_fetch"):
            raise refuse(server_tool_refusal(model, "web fetch"))
        if "web_fetch" in out:
            out.remove("web_fetch")
            notices.append(
                "Anthropic's web fetch takes the place of the run's own web_fetch "
                "(it fetches only URLs already in the conversation)"
            )
        if "server_web_fetch" not in out:
            out.append("server_web_fetch")
    if code_execution or "code_execution" in out:
        if not takes_server_tool(entry, "code_execution"):
            raise refuse(server_tool_refusal(model, "code execution"))
        if economy:
            raise refuse(
                "code execution cannot run in economy mode: its container expires while a "
                "turn waits in a batch, and the files it writes are saved as each turn "
                "arrives; turn one of the two off"
            )
        if "code_execution" not in out:
            out.append("code_execution")
    return out, "; ".join(notices)


def server_tool_refusal(model: str, tool: str) -> str:
    """Why a run asking for a server tool its model does not take is refused."""
    return (
        f"{model} does not take Anthropic's {tool} (its catalogue entry does not list it): "
        f"choose another model, or start the run without {tool}"
    )


def web_search_choice(
    names: Sequence[str],
    wanted: bool | None,
    allowed: Sequence[str] | None,
    blocked: Sequence[str] | None,
    *,
    model_takes_it: bool,
    refuse: Callable[[str], Exception],
) -> tuple[list[str], tuple[str, ...], tuple[str, ...], str]:
    """A new run's tool names and web search domains, and a notice for the analyst.

    ``wanted`` True adds ``web_search`` to ``names``, False removes it, None keeps the
    names (the default tool set holds it when the setting is on). A model whose catalogue
    entry does not list web search goes without it, and the notice says so.

    The domain lists follow the web search tool's page: domains go without a scheme
    (``example.com``, which covers its subdomains; a sub-path such as ``example.com/blog``
    is taken), and a request takes ``allowed_domains`` or ``blocked_domains``, not both.

    Raises:
        Exception: ``refuse(message)`` when both lists are given, or a domain has a
            scheme or a space, or is empty.
    """
    lists: list[tuple[str, ...]] = []
    for values in (allowed, blocked):
        out: list[str] = []
        for raw in values or ():
            domain = str(raw).strip().lower()
            if not domain or "://" in domain or any(c.isspace() for c in domain):
                raise refuse(
                    f"web search domain {raw!r}: give a bare domain such as example.com "
                    "(no scheme; its subdomains are included)"
                )
            if domain not in out:
                out.append(domain)
        lists.append(tuple(out))
    if lists[0] and lists[1]:
        raise refuse(
            "web search takes allowed domains or blocked domains, not both: "
            "give one of the two lists"
        )
    chosen = [n for n in names if n != "web_search"]
    if not (wanted is True or (wanted is None and "web_search" in names)):
        return chosen, lists[0], lists[1], ""
    if not model_takes_it:
        return chosen, lists[0], lists[1], server_tools_notice("web search")
    kept = list(names) if "web_search" in names else [*chosen, "web_search"]
    return kept, lists[0], lists[1], ""


def server_tools_notice(tool: str) -> str:
    """What a run is told when its model's catalogue entry does not list a server tool."""
    return (
        f"the model does not take {tool} (its catalogue entry does not list it): "
        "the run goes without it"
    )
