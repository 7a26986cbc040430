"""What a model accepts, as the API's own catalogue (``GET /v1/models``) says.

Requests are built from a model's :class:`ModelEntry` rather than from a hand-kept list of
modes: the catalogue says which ``thinking`` types a model takes (``false`` exactly when a
request that sends it gets a 400), which effort levels, which context-management
strategies, and the largest ``max_tokens``. The entry is read from the API's JSON as it is
(``capabilities.thinking.types.adaptive.supported`` and so on) and written back in the same
shape, so a stored catalogue is the API's answer, not our reading of it.

Prices are not in the catalogue (the API does not serve them): see ``llm/pricing.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

EFFORT_LEVELS: tuple[str, ...] = ("low", "medium", "high", "xhigh", "max")
"""Every value of ``output_config.effort``, lowest first."""

BETWEEN_TOOLS_EFFORTS = frozenset({"low", "medium", "high"})
"""Effort levels at which ``thinking: between_tools`` is accepted (not xhigh, max)."""

THINKING_TYPES: tuple[str, ...] = ("adaptive", "between_tools", "disabled", "enabled")
"""The ``thinking.type`` values a request may send."""

SERVER_COMPACTION = "compact_20260112"
"""The context-management strategy under which the API writes a conversation's summary."""

LIFECYCLES = ("active", "deprecated", "retired")

_DATED = re.compile(r"(.+)-\d{8}")


def undated(model: str) -> str | None:
    """The alias of a dated model id (``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4-5``).

    Only a date suffix (eight digits) is dropped: ``claude-opus-5-5`` is never read as a
    date of ``claude-opus-5``. None when ``model`` carries no date.
    """
    dated = _DATED.fullmatch(model)
    return dated.group(1) if dated else None


def _map(node: Any) -> Mapping[str, Any]:
    return node if isinstance(node, Mapping) else {}


def _supported(node: Any) -> bool:
    return isinstance(node, Mapping) and node.get("supported") is True


def _time(value: Any) -> float | None:
    """Epoch seconds of an RFC 3339 time (None when absent or unreadable)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One model of the catalogue.

    Attributes:
        id: the model id requests name.
        display_name: the name the API gives it.
        lifecycle: ``active``, ``deprecated`` or ``retired`` (retired: requests fail).
        deprecated_at, retires_at: epoch seconds, or None.
        max_input_tokens: the context window.
        max_tokens: the largest ``max_tokens`` a request may ask for.
        thinking_types: the ``thinking.type`` values the model accepts.
        efforts: the effort levels it accepts (empty: no ``output_config.effort``).
        context_management: the strategies it lists (``compact_20260112`` …).
        features: other capabilities it lists as supported (``batch``, ``citations``,
            ``pdf_input``, ``image_input``, ``structured_outputs``, ``web_search``,
            ``code_execution`` …).
        raw: the API's JSON for this model, kept to be stored and shown as it came.
    """

    id: str
    display_name: str
    lifecycle: str
    deprecated_at: float | None
    retires_at: float | None
    max_input_tokens: int | None
    max_tokens: int | None
    thinking_types: frozenset[str]
    efforts: tuple[str, ...]
    context_management: frozenset[str]
    features: frozenset[str]
    raw: Mapping[str, Any]

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ModelEntry:
        """An entry from one element of the API's ``data`` list.

        Raises:
            ValueError: the element has no ``id``.
        """
        model_id = data.get("id")
        if not isinstance(model_id, str) or not model_id:
            raise ValueError("a catalogue entry without an id")
        caps = _map(data.get("capabilities"))
        thinking = _map(caps.get("thinking"))
        types = _map(thinking.get("types"))
        effort = _map(caps.get("effort"))
        context = _map(caps.get("context_management"))
        features = {
            name
            for name, node in caps.items()
            if name not in ("thinking", "effort", "context_management") and _supported(node)
        }
        server = caps.get("server_tools")
        if isinstance(server, Mapping):
            features |= {n for n, node in server.items() if _supported(node)}
        lifecycle = str(data.get("lifecycle") or "active")
        return cls(
            id=model_id,
            display_name=str(data.get("display_name") or model_id),
            lifecycle=lifecycle if lifecycle in LIFECYCLES else "active",
            deprecated_at=_time(data.get("deprecated_at")),
            retires_at=_time(data.get("retires_at")),
            max_input_tokens=_int(data.get("max_input_tokens")),
            max_tokens=_int(data.get("max_tokens")),
            thinking_types=frozenset(t for t in THINKING_TYPES if _supported(types.get(t))),
            efforts=tuple(e for e in EFFORT_LEVELS if _supported(effort.get(e)))
            if effort.get("supported") is True
            else (),
            context_management=frozenset(
                name for name, node in context.items() if name != "supported" and _supported(node)
            ),
            features=frozenset(features),
            raw=dict(data),
        )

    def accepts_thinking(self, kind: str) -> bool:
        """Whether a request may send ``thinking: {"type": kind}``."""
        return kind in self.thinking_types

    def accepts_effort(self, effort: str) -> bool:
        """Whether ``output_config.effort`` may be ``effort``."""
        return effort in self.efforts

    def has(self, feature: str) -> bool:
        """Whether the catalogue lists ``feature`` (``batch``, ``citations`` …) as supported."""
        return feature in self.features

    @property
    def server_compaction(self) -> bool:
        """Whether the API can write this model's conversation summaries (signed blocks).

        The beta catalogue says it directly (``capabilities.compaction.summarize``, the
        on-demand ``compaction`` parameter); without that key, the context-management
        strategy ``compact_20260112`` stands for it.
        """
        caps = self.raw.get("capabilities")
        compaction = caps.get("compaction") if isinstance(caps, Mapping) else None
        if isinstance(compaction, Mapping):
            return _supported(compaction.get("summarize"))
        return SERVER_COMPACTION in self.context_management

    @property
    def retired(self) -> bool:
        """Requests naming a retired model fail."""
        return self.lifecycle == "retired"

    @property
    def deprecated(self) -> bool:
        """Still served, headed for retirement."""
        return self.lifecycle == "deprecated"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
