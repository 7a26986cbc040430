"""A new run's choice of Anthropic server tools: on or off, and web search's domain lists.

Plain functions over names and strings (the client checks a run's options with them; the
engine's :mod:`desktop_agent.engine.request` puts the lists on the tool definition).
Sources: Anthropic's "Web search tool" page (Messages API > Tools): ``allowed_domains`` or
``blocked_domains``, never both in one request; domains without a scheme, subdomains
included, sub-paths taken; and a model takes the tool where the Models API lists
``capabilities.server_tools.web_search`` as supported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


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
