"""What the Messages API accepts and refuses, per model: pure rules for the test fake, no HTTP.

Sources: Anthropic's documentation pages (the Sonnet, Opus and Haiku 5.5 pages and migration
guides, preserved thinking and its prefix checks, prompt caching, compaction, task budgets,
the Models API; read 2026-11-26; PDF support, citations and the Files API, read
2026-11-27), and the ``anthropic`` SDK 2.14 types (authoritative for
field names and nesting: ``ModelInfo``, ``ThinkingTypes``, ``EffortCapability``, ``CacheCreation``,
``CacheMiss*``, ``BetaThinkingDroppedInputTransformation``, ``BetaCompactionBlock``).

:func:`validate` checks one request body against :data:`MODELS` and returns the error the API
answers (or ``None``). :class:`Signer` and :func:`check_binding` implement preserved thinking:
every thinking block the fake returns is bound to its model and to everything before it, and
a signed ``compaction`` block stands for exactly the messages it summarized.
:func:`segments` cuts a request into the pieces the prompt cache and the token count work on.

Error messages quoted by the docs or seen verbatim in API answers, kept exact:

* ``model: <id>`` (404 ``not_found_error``, unknown or retired model).
* ``max_tokens: N > M, which is the maximum allowed number of output tokens for <model>``.
* ``A maximum of 4 blocks with cache_control may be provided. Found N.``
* ``"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive"
  and "output_config.effort" to control thinking behavior.`` (seen on Sonnet 5 and Opus 4.8;
  used for every model that refuses ``enabled``).
* ``output_config.effort 'xhigh' is not supported when thinking is disabled on this model.
  Use effort 'high' or below, or enable thinking.`` (seen on Opus 4.8; same pattern for
  ``max`` and for the other models that allow ``disabled`` only at effort high or below).
* ``messages.N.content.M: Invalid `signature` in `thinking` block. The block is bound to a
  different conversation. Remove the block, or set
  `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".``

Unconfirmed messages
--------------------
The docs say these requests fail (or the brief chose the conservative reading) but quote no
text. The fake answers 400 ``invalid_request_error`` with the messages built by the
``_msg_*`` helpers below: each names the parameter and the model. Tests should match key
words, not the whole text:

* ``thinking.type "disabled"`` on a model without it (on Sonnet 5.5 it points to
  ``between_tools``, as the docs say the real one does).
* ``thinking.type "between_tools"`` / ``"adaptive"`` on a model without it; an unknown type.
* ``between_tools`` at effort ``xhigh`` / ``max`` (Sonnet 5.5).
* ``thinking.budget_tokens`` under 1024 or not below ``max_tokens``.
* ``thinking.display`` values; ``"updates"`` without its beta header.
* an unknown ``output_config.effort`` value; effort on a model without effort; a level the
  model does not offer.
* ``temperature`` / ``top_p`` / ``top_k`` away from their defaults on the 2026 models, and
  together with extended thinking on older models.
* assistant prefill (last message from the assistant) on 4.6 and later.
* forced ``tool_choice`` (``any`` / ``tool``), and forced tool use with extended thinking.
* ``cache_control.ttl`` not ``5m`` / ``1h``; a ``1h`` breakpoint after a ``5m`` one.
* a missing beta header for ``compaction``, a compaction block, ``thinking.block_binding``,
  ``output_config.task_budget``.
* ``compaction`` together with ``context_management``; a context management strategy, a
  compaction type or task budgets on a model without them.
* ``role: "system"`` messages on a model without mid-conversation system messages.
* server tools (:func:`_check_server_tools`, after the "Web search tool", "Web fetch
  tool" and "Code execution tool" pages, read 2026-11-27, and the SDK 2.14's
  ``*Tool*Param`` types for each version's fields): a ``type`` other than ``custom`` or a
  documented version of web search, web fetch or code execution; a field outside the
  version's set; a name other than the tool's; ``max_uses`` / ``max_content_tokens``
  below 1; ``allowed_domains`` with ``blocked_domains`` (one or the other per request);
  a tool on a model that does not take it (web search and code execution: the
  catalogue's ``server_tools``; web fetch: the page's model list, the same as code
  execution's). Two tools of one name: ``tools: Tool names must be unique.`` (chosen: the
  wording other integrations quote). A ``container`` that is neither a string nor an
  object of ``id`` / ``skills``; ``container_upload`` blocks (only in user messages, only
  with the code execution tool, naming a file the Files API has: the same refusals as a
  ``file`` source). A ``container`` id the fake never issued, or one that expired, is the
  fake's to refuse (:class:`~tests.helpers.fake_anthropic.FakeAnthropic`): 400
  ``invalid_request_error`` (chosen; the pages do not give the error).
* compaction block errors (misplaced, ambiguous, signature, content, incomplete turn,
  nothing to summarize): the text is invented, the ``error.details.error_code`` values are
  the SDK's (``compaction_block_misplaced``, ``compaction_signature_invalid``, ...).
* ``redacted_thinking`` blocks failing the prefix check get the documented message with
  ``redacted_thinking`` in place of ``thinking``.
* ``document`` blocks (:func:`check_documents`): a wrong ``source.media_type`` ("Input
  should be 'application/pdf'"), a base64 source that is no PDF ("The PDF specified was
  not valid."), a ``file`` source without the Files API beta header, naming an unknown
  file ("File not found: <id>", 400) or an expired one (``error_code`` ``file_expired``,
  the SDK's), a file of another type, a PDF on a model without ``pdf_input``, citations
  on a model without ``citations``, a document in an assistant message, a bad ``title``.
  "Citations must be enabled on all or none of the documents within a request." follows
  the citations page's rule; its wording is not quoted there.

Unconfirmed rules (conservative readings)
-----------------------------------------
* Haiku 5.5 is adaptive-only (the docs say only Sonnet 5.5 accepts ``between_tools``; whether
  Haiku 5.5 accepts ``disabled`` is not documented). Its effort levels are not documented:
  low, medium, high, max (no ``xhigh``).
* A ``1h`` breakpoint may not follow a ``5m`` one in tools → system → messages order (only a
  Bedrock page says so).
* Sampling parameters: ``temperature`` and ``top_p`` are "at default" only when equal to 1;
  any ``top_k`` is away from the default.
* Extended thinking (``enabled``) on the older models refuses ``temperature`` ≠ 1, ``top_k``,
  ``top_p`` < 0.95 and forced tool use (the older extended-thinking rules, not in the notes);
  on the 4.6 models forced tool use is refused with adaptive thinking too.
* Forced ``tool_choice`` is refused on Sonnet 5.5, Opus 5.5, Fable/Mythos 5.1 and 5.2 only
  (the brief's list): Haiku 5.5 and the earlier 2026 models accept it. Progress text comes
  back as thinking on the same models minus Haiku 5.5.
* A top-level ``cache_control`` (automatic caching) puts a breakpoint on the last block and
  is not counted among the 4. The minimum cacheable prompt length is not modeled.
* A compaction request generates no reply, so a last assistant turn is no prefill there.
* ``thinking.display: "updates"`` is accepted only with its beta header, on the models that
  return progress text as thinking.
* Mid-conversation ``role: "system"`` messages: third-party sources only (Opus 4.8 onward,
  Sonnet 5, and the 5.x lineup).
* The compaction and task-budget model lists are the docs' lists, which predate Fable 5.2 /
  Mythos 5.2: those two get neither.
* Cross-model reading: only Fable 5.1 reading Opus 5 and Opus 5.5 blocks is documented; every
  other pair is unreadable (blocks silently dropped).
* Whether ``cache_control`` markers take part in the prefix check is not documented: they are
  left out here, as prompt caching leaves them out.
* Lifecycles: Sonnet 4.5 (deprecated, retires 2026-11-30) is documented. Opus 4.5 is listed
  as legacy in the docs seen, but the SDK 2.14 deprecation table
  (``anthropic/_data/deprecated_models.py``) gives it an end of life on 2027-01-22: it is
  ``deprecated`` here. The same table ends Mythos Preview on 2026-06-30: it is ``retired``
  here (a past date alone does not prove retirement). Opus 4.1 and Sonnet 4 are retired
  (third-party dates).
* Mythos 5.1 / 5.2 specs are not published: they copy Fable 5.1 / 5.2. Opus 4.6–4.8, Sonnet
  4.6 limits, several ``created_at`` dates and the lifecycle dates of the retired models are
  approximate; capabilities other than thinking/effort/context management are assumed.
* Thinking is on (adaptive) by default from Sonnet 5 / Opus 5 on; the 4.x models run without
  thinking when the request has no ``thinking`` field (Opus 4.7/4.8 not confirmed).
* ``count_tokens`` applies :func:`validate` only (no prefix check).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

Lifecycle = Literal["active", "deprecated", "retired"]
ForcedToolChoice = Literal["allowed", "refused", "refused_with_thinking"]
Display = Literal["summarized", "omitted"]

EFFORTS: Final = ("low", "medium", "high", "xhigh", "max")
THINKING_TYPES: Final = ("adaptive", "between_tools", "disabled", "enabled")
CONTEXT_STRATEGIES: Final = (
    "clear_tool_uses_20250919",
    "clear_thinking_20251015",
    "compact_20260112",
)
MIN_BUDGET_TOKENS: Final = 1024
MAX_CACHE_BREAKPOINTS: Final = 4
CACHE_TTLS: Final = {"5m": 300.0, "1h": 3600.0}
LOOKBACK_BLOCKS: Final = 20
"""How many blocks before a breakpoint the cache looks for an earlier entry."""

BETA_COMPACTION: Final = "compact-2026-09-04"
BETA_BLOCK_BINDING: Final = "thinking-binding-controls-2026-08-01"
BETA_TASK_BUDGETS: Final = "task-budgets-2026-03-13"
BETA_DISPLAY_UPDATES: Final = "thinking-display-updates-2026-08-18"
"""Third-party docs only: ``thinking.display: "updates"`` needs it (unconfirmed)."""
BETA_FILES: Final = "files-api-2025-04-14"
"""The Files API pages: every Files API call, and a request naming a ``file_id``, sends it."""
FILE_MAX_BYTES: Final = 500 * 1024 * 1024
"""The Files API's largest file (500 MB)."""
REQUEST_MAX_BYTES: Final = 32 * 1024 * 1024
"""The Messages API's largest request body (32 MB; the PDF support page's limit)."""
DOCUMENT_MEDIA: Final = {"base64": "application/pdf", "text": "text/plain"}

THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class ApiError:
    """An error answer of the API.

    Attributes:
        status: HTTP status.
        type: ``error.type``.
        message: ``error.message``.
        error_code: ``error.details.error_code``, for the codes the SDK knows (e.g.
            ``compaction_signature_invalid``).
    """

    status: int
    type: str
    message: str
    error_code: str | None = None

    def body(self, request_id: str) -> dict[str, Any]:
        """The JSON body the API sends."""
        error: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.error_code is not None:
            error["details"] = {"error_code": self.error_code}
        return {"type": "error", "error": error, "request_id": request_id}


def _bad(message: str, error_code: str | None = None) -> ApiError:
    return ApiError(400, "invalid_request_error", message, error_code)


# --------------------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelRules:
    """What one model accepts, and how it answers.

    Attributes:
        thinking_types: accepted ``thinking.type`` values.
        default_thinking: the type a request without ``thinking`` runs.
        efforts: accepted ``output_config.effort`` levels (empty: no effort parameter).
        thinking_off_max_high: ``disabled`` / ``between_tools`` only at effort high or below.
        refuses_sampling: ``temperature`` / ``top_p`` / ``top_k`` away from default → 400.
        refuses_prefill: a last message from the assistant → 400.
        forced_tool_choice: ``tool_choice`` ``any`` / ``tool``: allowed, refused, or refused
            with extended thinking.
        bound_thinking: thinking blocks are bound to the model and their prefix (preserved
            thinking).
        reads_blocks_of: other models whose bound thinking blocks this model reads.
        progress_as_thinking: text written between tool calls comes back as thinking blocks.
        default_display: ``thinking.display`` when the request leaves it out.
        context_management: accepted ``context_management.edits[].type`` strategies.
        compaction_summarize: accepts ``compaction: {"type": "summarize"}`` (beta).
        task_budgets: accepts ``output_config.task_budget`` (beta).
        system_messages: accepts ``role: "system"`` entries in ``messages``.
    """

    id: str
    display_name: str
    line: str | None
    created_at: str
    max_input_tokens: int
    max_tokens: int
    lifecycle: Lifecycle = "active"
    deprecated_at: str | None = None
    retires_at: str | None = None
    replacement: str | None = None
    aliases: tuple[str, ...] = ()
    thinking_types: frozenset[str] = frozenset({"adaptive"})
    default_thinking: str = "adaptive"
    efforts: tuple[str, ...] = EFFORTS
    default_effort: str | None = "high"
    thinking_off_max_high: bool = False
    refuses_sampling: bool = True
    refuses_prefill: bool = True
    forced_tool_choice: ForcedToolChoice = "allowed"
    bound_thinking: bool = False
    reads_blocks_of: frozenset[str] = frozenset()
    progress_as_thinking: bool = False
    default_display: Display = "omitted"
    context_management: frozenset[str] = frozenset(CONTEXT_STRATEGIES)
    compaction_summarize: bool = True
    task_budgets: bool = True
    system_messages: bool = True
    batch: bool = True
    citations: bool = True
    pdf_input: bool = True
    image_input: bool = True
    structured_outputs: bool = True
    web_search: bool = True
    code_execution_tool: bool = True
    web_fetch: bool = True
    programmatic_tool_calling: bool = True

    @property
    def thinking_off(self) -> frozenset[str]:
        """The accepted types that turn up-front thinking off."""
        return self.thinking_types & {"disabled", "between_tools"}


_CLEAR_ONLY = frozenset({"clear_tool_uses_20250919", "clear_thinking_20251015"})
_NO_XHIGH = ("low", "medium", "high", "max")

# The 2026 models with preserved thinking (Fable/Mythos 5.1+, the 5.5 lineup).
_BOUND = ModelRules(
    id="",
    display_name="",
    line=None,
    created_at="",
    max_input_tokens=1_000_000,
    max_tokens=128_000,
    forced_tool_choice="refused",
    bound_thinking=True,
    progress_as_thinking=True,
)
# The 2026 models before preserved thinking (Opus 4.7 … Mythos 5).
_Y2026 = replace(
    _BOUND, forced_tool_choice="allowed", bound_thinking=False, progress_as_thinking=False
)
# Claude 4.6: extended thinking still accepted (deprecated), prefill refused, sampling allowed.
_C46 = replace(
    _Y2026,
    max_input_tokens=200_000,
    thinking_types=frozenset({"adaptive", "enabled", "disabled"}),
    default_thinking="disabled",
    efforts=_NO_XHIGH,
    refuses_sampling=False,
    forced_tool_choice="refused_with_thinking",
    default_display="summarized",
    task_budgets=False,
    system_messages=False,
)
# Claude 4.5 and older: extended thinking only, no adaptive, sampling and prefill allowed.
_C45 = replace(
    _C46,
    max_tokens=64_000,
    thinking_types=frozenset({"enabled", "disabled"}),
    efforts=(),
    default_effort=None,
    refuses_prefill=False,
    context_management=_CLEAR_ONLY,
    compaction_summarize=False,
)


def _model(base: ModelRules, id: str, name: str, line: str, created: str, **kw: Any) -> ModelRules:
    return replace(base, id=id, display_name=name, line=line, created_at=created, **kw)


_FABLE_52_NOT_LISTED: dict[str, Any] = {
    # The compaction and task-budget pages list models up to Fable/Mythos 5.1 (unconfirmed).
    "context_management": _CLEAR_ONLY,
    "compaction_summarize": False,
    "task_budgets": False,
}

_MODEL_LIST: tuple[ModelRules, ...] = (
    # ---- current models (preserved thinking)
    _model(_BOUND, "claude-fable-5-2", "Claude Fable 5.2", "fable", "2026-11-09T00:00:00Z",
           **_FABLE_52_NOT_LISTED),
    _model(_BOUND, "claude-mythos-5-2", "Claude Mythos 5.2", "mythos", "2026-11-09T00:00:00Z",
           **_FABLE_52_NOT_LISTED),
    _model(_BOUND, "claude-haiku-5-5", "Claude Haiku 5.5", "haiku", "2026-10-07T00:00:00Z",
           # The Haiku 5.5 prompting guide names xhigh and max among its levels.
           default_effort="medium", forced_tool_choice="allowed",
           progress_as_thinking=False),
    _model(_BOUND, "claude-sonnet-5-5", "Claude Sonnet 5.5", "sonnet", "2026-09-28T00:00:00Z",
           thinking_types=frozenset({"adaptive", "between_tools"}), thinking_off_max_high=True),
    _model(_BOUND, "claude-opus-5-5", "Claude Opus 5.5", "opus", "2026-09-14T00:00:00Z",
           default_effort="medium"),
    _model(_BOUND, "claude-fable-5-1", "Claude Fable 5.1", "fable", "2026-08-18T00:00:00Z",
           reads_blocks_of=frozenset({"claude-opus-5", "claude-opus-5-5"})),
    _model(_BOUND, "claude-mythos-5-1", "Claude Mythos 5.1", "mythos", "2026-08-18T00:00:00Z"),
    # ---- legacy models still served
    _model(_Y2026, "claude-opus-5", "Claude Opus 5", "opus", "2026-07-24T00:00:00Z",
           thinking_types=frozenset({"adaptive", "disabled"}), thinking_off_max_high=True),
    _model(_Y2026, "claude-sonnet-5", "Claude Sonnet 5", "sonnet", "2026-06-30T00:00:00Z",
           thinking_types=frozenset({"adaptive", "disabled"}), task_budgets=False),
    _model(_Y2026, "claude-fable-5", "Claude Fable 5", "fable", "2026-06-09T00:00:00Z"),
    _model(_Y2026, "claude-mythos-5", "Claude Mythos 5", "mythos", "2026-06-09T00:00:00Z"),
    _model(_Y2026, "claude-opus-4-8", "Claude Opus 4.8", "opus", "2026-05-12T00:00:00Z",
           thinking_types=frozenset({"adaptive", "disabled"}), default_thinking="disabled",
           thinking_off_max_high=True),
    _model(_Y2026, "claude-opus-4-7", "Claude Opus 4.7", "opus", "2026-04-16T00:00:00Z",
           thinking_types=frozenset({"adaptive", "disabled"}), default_thinking="disabled",
           thinking_off_max_high=True, system_messages=False),
    _model(_C46, "claude-sonnet-4-6", "Claude Sonnet 4.6", "sonnet", "2026-02-17T00:00:00Z",
           max_tokens=64_000, efforts=("low", "medium", "high", "max")),
    _model(_C46, "claude-opus-4-6", "Claude Opus 4.6", "opus", "2026-02-05T00:00:00Z"),
    _model(_C45, "claude-haiku-4-5", "Claude Haiku 4.5", "haiku", "2025-10-15T00:00:00Z",
           aliases=("claude-haiku-4-5-20251001",), programmatic_tool_calling=False),
    # ---- deprecated (the SDK 2.14 warns on both: ``anthropic/_data/deprecated_models.py``
    # gives the end-of-life dates; deprecated_at is approximate)
    _model(_C45, "claude-opus-4-5", "Claude Opus 4.5", "opus", "2025-11-24T00:00:00Z",
           aliases=("claude-opus-4-5-20251101",), efforts=("low", "medium", "high"),
           default_effort="high", lifecycle="deprecated", deprecated_at="2026-10-23T00:00:00Z",
           retires_at="2027-01-22T00:00:00Z", replacement="claude-opus-5-5"),
    _model(_C45, "claude-sonnet-4-5", "Claude Sonnet 4.5", "sonnet", "2025-09-29T00:00:00Z",
           aliases=("claude-sonnet-4-5-20250929",), lifecycle="deprecated",
           deprecated_at="2026-09-28T00:00:00Z", retires_at="2026-11-30T00:00:00Z",
           replacement="claude-sonnet-5-5"),
    # ---- retired (requests get 404 ``model: <id>``)
    _model(_BOUND, "claude-mythos-preview", "Claude Mythos Preview", "mythos",
           "2026-04-07T00:00:00Z", thinking_types=frozenset({"adaptive", "enabled"}),
           bound_thinking=False, progress_as_thinking=False, forced_tool_choice="allowed",
           lifecycle="retired", deprecated_at="2026-04-30T00:00:00Z",
           retires_at="2026-06-30T00:00:00Z"),
    _model(_C45, "claude-opus-4-1", "Claude Opus 4.1", "opus", "2025-08-05T00:00:00Z",
           aliases=("claude-opus-4-1-20250805",), max_tokens=32_000, lifecycle="retired",
           deprecated_at="2026-06-05T00:00:00Z", retires_at="2026-08-05T00:00:00Z",
           replacement="claude-opus-4-8"),
    _model(_C45, "claude-sonnet-4-0", "Claude Sonnet 4", "sonnet", "2025-05-22T00:00:00Z",
           aliases=("claude-sonnet-4-20250514",), lifecycle="retired",
           deprecated_at="2026-04-14T00:00:00Z", retires_at="2026-06-15T00:00:00Z",
           replacement="claude-sonnet-4-6"),
)  # fmt: skip

MODELS: Final[dict[str, ModelRules]] = {m.id: m for m in _MODEL_LIST}
"""Every model the fake knows, by id (alias), in the catalogue's order (newest first)."""

ALIASES: Final[dict[str, str]] = {a: m.id for m in _MODEL_LIST for a in m.aliases}
"""Dated ids → the id they resolve to."""

PRESERVED_THINKING: Final = frozenset(m.id for m in _MODEL_LIST if m.bound_thinking)


def resolve(model: str) -> ModelRules | None:
    """The rules of a model id, alias or dated id (``None`` when unknown)."""
    return MODELS.get(ALIASES.get(model, model))


def catalogue() -> list[ModelRules]:
    """The models newest first (the Models API order)."""
    return sorted(_MODEL_LIST, key=lambda m: m.created_at, reverse=True)


def _supported(flag: bool) -> dict[str, bool]:
    return {"supported": flag}


def model_info(rules: ModelRules, *, beta_compaction: bool = False) -> dict[str, Any]:
    """The Models API entry of a model, in the SDK's ``ModelInfo`` shape.

    Args:
        rules: the model.
        beta_compaction: add the beta-only ``capabilities.compaction`` key.
    """
    types = rules.thinking_types
    capabilities: dict[str, Any] = {
        "batch": _supported(rules.batch),
        "citations": _supported(rules.citations),
        "code_execution": _supported(rules.programmatic_tool_calling),
        "context_management": {
            "supported": bool(rules.context_management),
            **{s: _supported(s in rules.context_management) for s in CONTEXT_STRATEGIES},
        },
        "effort": {
            "supported": bool(rules.efforts),
            **{e: _supported(e in rules.efforts) for e in EFFORTS},
        },
        "image_input": _supported(rules.image_input),
        "pdf_input": _supported(rules.pdf_input),
        "server_tools": {
            "supported": rules.web_search or rules.code_execution_tool,
            "code_execution": _supported(rules.code_execution_tool),
            "web_search": _supported(rules.web_search),
        },
        "structured_outputs": _supported(rules.structured_outputs),
        "thinking": {
            "supported": bool(types & {"adaptive", "enabled"}),
            "types": {t: _supported(t in types) for t in THINKING_TYPES},
        },
    }
    if beta_compaction:
        capabilities["compaction"] = {
            "supported": rules.compaction_summarize,
            "summarize": _supported(rules.compaction_summarize),
        }
    return {
        "type": "model",
        "id": rules.id,
        "display_name": rules.display_name,
        "created_at": rules.created_at,
        "line": rules.line,
        "lifecycle": rules.lifecycle,
        "deprecated_at": rules.deprecated_at,
        "retires_at": rules.retires_at,
        "max_input_tokens": rules.max_input_tokens,
        "max_tokens": rules.max_tokens,
        "capabilities": capabilities,
    }


# --------------------------------------------------------------------------- messages


def _msg_thinking_type(rules: ModelRules, kind: str) -> str:
    model = rules.id
    if kind == "enabled":
        return (
            '"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
        )
    if kind == "disabled" and "between_tools" in rules.thinking_types:
        return (
            f'thinking.type "disabled" is not supported on {model}. To turn off up-front '
            'thinking, send thinking: {"type": "between_tools"} instead.'
        )
    if kind == "disabled":
        return (
            f'thinking.type "disabled" is not supported on {model}: thinking is always on. Omit '
            '`thinking` or send {"type": "adaptive"}, and set output_config.effort.'
        )
    if kind == "between_tools":
        hint = (
            ' Use thinking.type "disabled" to turn thinking off.'
            if "disabled" in (rules.thinking_types)
            else ""
        )
        return f'thinking.type "between_tools" is not supported on {model}.{hint}'
    return (
        f'thinking.type "adaptive" is not supported on {model}. Use thinking.type "enabled" '
        'with budget_tokens, or "disabled".'
    )


def _msg_effort_off(effort: str, kind: str, model: str) -> str:
    if kind == "disabled":
        return (
            f"output_config.effort '{effort}' is not supported when thinking is disabled on this"
            " model. Use effort 'high' or below, or enable thinking."
        )
    return (
        f"output_config.effort '{effort}' is not supported with thinking.type \"between_tools\""
        f" on {model}. Use effort 'high' or below, or adaptive thinking (omit `thinking`)."
    )


def _msg_beta(what: str, header: str) -> str:
    return f"{what}: this feature requires the beta header `anthropic-beta: {header}`."


def beta_headers(headers: Mapping[str, str]) -> frozenset[str]:
    """The betas named in the ``anthropic-beta`` header (comma-separated, any case of name)."""
    raw = next((v for k, v in headers.items() if k.lower() == "anthropic-beta"), "")
    return frozenset(b.strip() for b in raw.split(",") if b.strip())


# --------------------------------------------------------------------------- validation


def validate(
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    count_tokens: bool = False,
    files: Mapping[str, FileRecord] | None = None,
) -> ApiError | None:
    """The error the API answers to this ``POST /v1/messages`` body, or ``None``.

    Checked in order: model (404), max_tokens, messages, beta-gated parameters, compaction,
    context management, thinking, effort, the thinking/effort combinations, sampling,
    tool_choice, prefill, cache_control.

    Args:
        body: the request body (JSON).
        headers: the request headers (``anthropic-beta`` is read).
        count_tokens: the body is a ``POST /v1/messages/count_tokens`` one: no
            ``max_tokens``, and ``compaction`` is accepted and ignored.
        files: the Files API's files by id, for ``document`` blocks with a ``file``
            source (see :func:`check_documents`).
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return _bad("model: Field required")
    rules = resolve(model)
    if rules is None or rules.lifecycle == "retired":
        return ApiError(404, "not_found_error", f"model: {model}")
    betas = beta_headers(headers)
    if count_tokens:
        body = {k: v for k, v in body.items() if k != "compaction"}
    checks = (() if count_tokens else (_check_max_tokens,)) + (
        _check_messages,
        _check_betas,
        _check_compaction,
        _check_context_management,
        _check_thinking,
        _check_effort,
        _check_sampling,
        _check_tool_choice,
        _check_server_tools,
        _check_prefill,
        _check_cache_control,
    )
    for check in checks:
        error = check(body, rules, betas, model)
        if error is not None:
            return error
        if check is _check_messages:
            error = check_documents(body, rules, betas, files or {})
            if error is not None:
                return error
    return None


def thinking_type(body: Mapping[str, Any], rules: ModelRules) -> str:
    """The thinking type a request runs (the model's default when it sends none)."""
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and isinstance(thinking.get("type"), str):
        return str(thinking["type"])
    return rules.default_thinking


def thinking_display(body: Mapping[str, Any], rules: ModelRules) -> str:
    """``thinking.display`` of a request, or the model's default."""
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and isinstance(thinking.get("display"), str):
        return str(thinking["display"])
    return rules.default_display


def effort(body: Mapping[str, Any], rules: ModelRules) -> str | None:
    """``output_config.effort`` of a request, or the model's default."""
    config = body.get("output_config")
    value = config.get("effort") if isinstance(config, Mapping) else None
    return str(value) if value is not None else rules.default_effort


def prefix_mismatch_behavior(body: Mapping[str, Any]) -> str:
    """``thinking.block_binding.prefix_mismatch_behavior`` (``"error"`` by default)."""
    thinking = body.get("thinking")
    binding = thinking.get("block_binding") if isinstance(thinking, Mapping) else None
    value = binding.get("prefix_mismatch_behavior") if isinstance(binding, Mapping) else None
    return str(value) if value else "error"


def _check_max_tokens(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    value = body.get("max_tokens")
    if not isinstance(value, int) or isinstance(value, bool):
        return _bad("max_tokens: Field required")
    if value < 1:
        return _bad(f"max_tokens: {value} must be at least 1")
    if value > rules.max_tokens:
        return _bad(
            f"max_tokens: {value} > {rules.max_tokens}, which is the maximum allowed number of"
            f" output tokens for {model}"
        )
    return None


def _check_messages(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return _bad("messages: at least one message is required")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return _bad(f"messages.{i}: Input should be an object")
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            return _bad(f"messages.{i}.role: Input should be 'user', 'assistant' or 'system'")
        if role == "system" and not rules.system_messages:
            return _bad(
                f"messages.{i}.role: 'system' messages are not supported on {model}. Put "
                "instructions in the top-level `system` parameter."
            )
    return None


def _compaction_blocks(messages: list[Any]) -> list[tuple[int, int, Mapping[str, Any]]]:
    found = []
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if isinstance(block, Mapping) and block.get("type") == "compaction":
                found.append((i, j, block))
    return found


def _check_betas(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    if body.get("compaction") is not None and BETA_COMPACTION not in betas:
        return _bad(_msg_beta("compaction", BETA_COMPACTION))
    if _compaction_blocks(body["messages"]) and BETA_COMPACTION not in betas:
        return _bad(_msg_beta("messages: a `compaction` block", BETA_COMPACTION))
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("block_binding") is not None:
        if BETA_BLOCK_BINDING not in betas:
            return _bad(_msg_beta("thinking.block_binding", BETA_BLOCK_BINDING))
        behavior = prefix_mismatch_behavior(body)
        if behavior not in ("error", "drop_block"):
            return _bad(
                "thinking.block_binding.prefix_mismatch_behavior: Input should be 'error' or "
                f"'drop_block', got '{behavior}'"
            )
    config = body.get("output_config")
    budget = config.get("task_budget") if isinstance(config, Mapping) else None
    if budget is not None:
        if BETA_TASK_BUDGETS not in betas:
            return _bad(_msg_beta("output_config.task_budget", BETA_TASK_BUDGETS))
        if not rules.task_budgets:
            return _bad(f"output_config.task_budget is not supported on {model}.")
        total = budget.get("total") if isinstance(budget, Mapping) else None
        if (
            not isinstance(budget, Mapping)
            or budget.get("type") != "tokens"
            or not isinstance(total, int)
            or total < 1
        ):
            return _bad(
                'output_config.task_budget: expected {"type": "tokens", "total": <positive '
                "integer>}"
            )
    return None


def _check_compaction(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    messages: list[Any] = body["messages"]
    blocks = [b for b in _compaction_blocks(messages) if b[2].get("content") is not None]
    if len(blocks) > 1:
        return _bad(
            "messages: more than one `compaction` block with content. Send only the block the "
            "conversation returned last.",
            "compaction_block_ambiguous",
        )
    for i, j, _ in blocks:
        if (i, j) != (0, 0) or messages[0].get("role") != "assistant":
            return _bad(
                f"messages.{i}.content.{j}: a `compaction` block must be the first block of the "
                "first message, in an assistant message.",
                "compaction_block_misplaced",
            )
    config = body.get("compaction")
    if config is None:
        return None
    if body.get("context_management") is not None:
        return _bad("compaction: cannot be used together with `context_management`.")
    kind = config.get("type") if isinstance(config, Mapping) else None
    if kind != "summarize":
        return _bad(f"compaction.type: Input should be 'summarize', got {kind!r}")
    if not rules.compaction_summarize:
        return _bad(f"compaction: the 'summarize' compaction type is not supported on {model}.")
    if not any(_has_content(m) for m in messages):
        return _bad(
            "compaction: `messages` holds nothing to summarize.", "compaction_nothing_to_summarize"
        )
    last = messages[-1]
    content = last.get("content")
    if (
        last.get("role") == "assistant"
        and isinstance(content, list)
        and content
        and isinstance(content[-1], Mapping)
        and content[-1].get("type") in ("tool_use", "server_tool_use")
    ):
        return _bad(
            "compaction: the last assistant turn is not finished (it ends with a tool call "
            "without its result).",
            "compaction_incomplete_turn",
        )
    return None


def _has_content(message: Any) -> bool:
    content = message.get("content") if isinstance(message, Mapping) else None
    return bool(content)


def _check_context_management(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    config = body.get("context_management")
    edits = config.get("edits") if isinstance(config, Mapping) else None
    for i, edit in enumerate(edits if isinstance(edits, list) else []):
        kind = edit.get("type") if isinstance(edit, Mapping) else None
        if kind not in rules.context_management:
            return _bad(
                f"context_management.edits.{i}.type: strategy {kind!r} is not supported on {model}."
            )
    return None


def _check_thinking(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    thinking = body.get("thinking")
    if thinking is None:
        return None
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind not in THINKING_TYPES:
        return _bad(
            f"thinking.type: {kind!r} is not a thinking type. Expected 'adaptive', "
            "'between_tools', 'disabled' or 'enabled'."
        )
    assert isinstance(thinking, Mapping)
    if kind not in rules.thinking_types:
        return _bad(_msg_thinking_type(rules, str(kind)))
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_BUDGET_TOKENS:
            return _bad(
                f"thinking.enabled.budget_tokens: must be at least {MIN_BUDGET_TOKENS}, got "
                f"{budget!r}"
            )
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and budget >= max_tokens:
            return _bad(
                f"max_tokens must be greater than thinking.budget_tokens ({max_tokens} <= {budget})"
            )
    display = thinking.get("display")
    if display is None or display in ("summarized", "omitted"):
        return None
    if display != "updates" or kind not in ("adaptive", "enabled"):
        return _bad(
            f"thinking.display: {display!r} is not accepted here. Expected 'summarized' or "
            "'omitted'."
        )
    if BETA_DISPLAY_UPDATES not in betas:
        return _bad(_msg_beta('thinking.display "updates"', BETA_DISPLAY_UPDATES))
    if not rules.progress_as_thinking:
        return _bad(f'thinking.display "updates" is not supported on {model}.')
    return None


def _check_effort(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    config = body.get("output_config")
    value = config.get("effort") if isinstance(config, Mapping) else None
    if value is not None:
        if value not in EFFORTS:
            return _bad(
                f"output_config.effort: {value!r} is not an effort level. Expected one of "
                "'low', 'medium', 'high', 'xhigh', 'max'."
            )
        if not rules.efforts:
            return _bad(f"output_config.effort is not supported on {model}.")
        if value not in rules.efforts:
            levels = ", ".join(f"'{e}'" for e in rules.efforts)
            return _bad(
                f"output_config.effort '{value}' is not supported on {model}. Supported levels:"
                f" {levels}."
            )
    kind = thinking_type(body, rules)
    level = effort(body, rules)
    if (
        kind in rules.thinking_off
        and level in ("xhigh", "max")
        and (rules.thinking_off_max_high or kind == "between_tools")
    ):
        return _bad(_msg_effort_off(str(level), kind, model))
    return None


def _check_sampling(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    temperature, top_p, top_k = body.get("temperature"), body.get("top_p"), body.get("top_k")
    if rules.refuses_sampling:
        for name, value, default in (
            ("temperature", temperature, 1),
            ("top_p", top_p, 1),
            ("top_k", top_k, None),
        ):
            if value is not None and value != default:
                return _bad(
                    f"{name}: setting sampling parameters away from their defaults is not "
                    f"supported on {model}. Remove `{name}` (or steer with "
                    "output_config.effort and the prompt)."
                )
        return None
    if thinking_type(body, rules) == "enabled" and (
        (temperature is not None and temperature != 1)
        or top_k is not None
        or (top_p is not None and top_p < 0.95)
    ):
        return _bad(
            f"temperature, top_k and top_p below 0.95 cannot be used with extended thinking "
            f"on {model}."
        )
    return None


WEB_SEARCH_VERSIONS: Final = ("web_search_20250305", "web_search_20260209", "web_search_20260318")
"""The web search tool's versions its page lists (basic; dynamic filtering; response
inclusion control for agentic workflows)."""
WEB_SEARCH_PARAMS: Final = frozenset(
    {
        "type",
        "name",
        "max_uses",
        "allowed_domains",
        "blocked_domains",
        "user_location",
        "cache_control",
        "allowed_callers",
        "defer_loading",
        "strict",
    }
)
"""The fields of a web search tool definition (the tool's page and the SDKs' types)."""


_TOOL_COMMON: Final = frozenset(
    {"type", "name", "allowed_callers", "cache_control", "defer_loading", "strict"}
)
_FETCH_BASE: Final = _TOOL_COMMON | {
    "allowed_domains",
    "blocked_domains",
    "citations",
    "max_content_tokens",
    "max_uses",
    "url_sources",
}
SERVER_TOOL_PARAMS: Final[dict[str, frozenset[str]]] = {
    **{v: WEB_SEARCH_PARAMS for v in WEB_SEARCH_VERSIONS},
    "web_fetch_20250910": _FETCH_BASE,
    "web_fetch_20260209": _FETCH_BASE,
    "web_fetch_20260309": _FETCH_BASE | {"use_cache"},
    "web_fetch_20260318": _FETCH_BASE | {"use_cache", "response_inclusion"},
    "code_execution_20250522": _TOOL_COMMON,
    "code_execution_20250825": _TOOL_COMMON,
    "code_execution_20260120": _TOOL_COMMON,
    "code_execution_20260521": _TOOL_COMMON,
}
"""Each documented server tool version and its fields (the SDK 2.14's ``*Param`` types)."""
WEB_FETCH_VERSIONS: Final = tuple(v for v in SERVER_TOOL_PARAMS if v.startswith("web_fetch_"))
CODE_EXECUTION_VERSIONS: Final = tuple(
    v for v in SERVER_TOOL_PARAMS if v.startswith("code_execution_")
)


def _tool_name(kind: str) -> str:
    """The name a server tool of version ``kind`` must have (``web_fetch_20260318`` → …)."""
    return kind.rsplit("_", 1)[0]


def _takes(rules: ModelRules, name: str) -> bool:
    return {
        "web_search": rules.web_search,
        "web_fetch": rules.web_fetch,
        "code_execution": rules.code_execution_tool,
    }[name]


def _check_server_tools(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    """Server tool definitions (a ``type`` other than ``custom``) in their documented shape.

    One of the versions of :data:`SERVER_TOOL_PARAMS`, named as the tool (``web_search``,
    ``web_fetch``, ``code_execution``), only that version's fields, ``max_uses`` and
    ``max_content_tokens`` positive integers, domain lists of strings, never both lists,
    and only on a model that takes the tool. Any other typed tool this fake does not know
    is refused as the API refuses an unknown tag. Tool names are unique; a ``container``
    has the documented shape; ``container_upload`` blocks need the code execution tool.
    """
    tools = body.get("tools")
    tools = tools if isinstance(tools, list) else []
    names = [t.get("name") for t in tools if isinstance(t, Mapping)]
    if len(names) != len(set(map(str, names))):
        return _bad("tools: Tool names must be unique.")
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind is None or kind == "custom":
            continue
        if kind not in SERVER_TOOL_PARAMS:
            return _bad(
                f"tools.{i}: Input tag '{kind}' found using 'type' does not match any of the "
                f"expected tags: 'custom', {', '.join(repr(v) for v in SERVER_TOOL_PARAMS)}"
            )
        extra = sorted(set(tool) - SERVER_TOOL_PARAMS[kind])
        if extra:
            return _bad(f"tools.{i}.{kind}.{extra[0]}: Extra inputs are not permitted")
        name = _tool_name(str(kind))
        if tool.get("name") != name:
            return _bad(f"tools.{i}.{kind}.name: Input should be '{name}'")
        for field_name in ("max_uses", "max_content_tokens"):
            n = tool.get(field_name)
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
                return _bad(f"tools.{i}.{kind}.{field_name}: Input should be greater than 0")
        citations = tool.get("citations")
        if citations is not None and not (
            isinstance(citations, Mapping) and isinstance(citations.get("enabled"), bool)
        ):
            return _bad(f'tools.{i}.{kind}.citations: expected {{"enabled": <boolean>}}')
        for key in ("allowed_domains", "blocked_domains"):
            domains = tool.get(key)
            if domains is not None and not (
                isinstance(domains, list) and all(isinstance(d, str) for d in domains)
            ):
                return _bad(f"tools.{i}.{kind}.{key}: Input should be a valid list of strings")
        if tool.get("allowed_domains") and tool.get("blocked_domains"):
            return _bad(
                f"tools.{i}: Cannot specify both allowed_domains and blocked_domains in the "
                "same request."
            )
        if not _takes(rules, name):
            what = name.replace("_", " ")
            return _bad(f"tools.{i}: the {what} tool is not supported on {model}.")
    return _check_container(body, tools)


def _check_container(body: Mapping[str, Any], tools: list[Any]) -> ApiError | None:
    """``container`` in its shape; ``container_upload`` blocks only with code execution."""
    box = body.get("container")
    if box is not None and not isinstance(box, str):
        if not isinstance(box, Mapping):
            return _bad("container: Input should be a valid string or object")
        extra = sorted(set(box) - {"id", "skills"})
        if extra:
            return _bad(f"container.{extra[0]}: Extra inputs are not permitted")
    coding = any(
        isinstance(t, Mapping) and str(t.get("type", "")).startswith("code_execution_")
        for t in tools
    )
    for where, role, block in _blocks_of_type(body, "container_upload"):
        if role != "user":
            return _bad(f"{where}: `container_upload` blocks are only accepted in user messages.")
        if not coding:
            return _bad(
                f"{where}: `container_upload` blocks require the code execution tool in `tools`."
            )
        if not isinstance(block.get("file_id"), str) or not block["file_id"]:
            return _bad(f"{where}.file_id: Field required")
        extra = sorted(set(block) - {"type", "file_id", "cache_control"})
        if extra:
            return _bad(f"{where}.{extra[0]}: Extra inputs are not permitted")
    return None


def _blocks_of_type(body: Mapping[str, Any], kind: str) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(path, role, block) of every top-level block of ``kind`` in the messages."""
    found = []
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        content = message.get("content") if isinstance(message, Mapping) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, Mapping) and block.get("type") == kind:
                found.append((f"messages.{i}.content.{j}", str(message.get("role")), block))
    return found


def _check_tool_choice(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind not in ("any", "tool"):
        return None
    if rules.forced_tool_choice == "refused":
        return _bad(
            f"tool_choice.type '{kind}': forced tool use is not supported on {model}. Use "
            "tool_choice 'auto' or 'none'."
        )
    if rules.forced_tool_choice == "refused_with_thinking" and thinking_type(body, rules) in (
        "enabled",
        "adaptive",
    ):
        return _bad(
            f"tool_choice.type '{kind}': forced tool use cannot be combined with thinking on "
            f"{model}. Use tool_choice 'auto' or 'none', or disable thinking."
        )
    return None


def _check_prefill(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    # A compaction request generates no reply, so its last turn is no prefill.
    if not rules.refuses_prefill or body.get("compaction") is not None:
        return None
    if body["messages"][-1].get("role") == "assistant":
        return _bad(
            f"messages: assistant message prefill is not supported on {model}. The last message"
            " must be a user message (use structured outputs or the system prompt instead)."
        )
    return None


def _check_cache_control(
    body: Mapping[str, Any], rules: ModelRules, betas: frozenset[str], model: str
) -> ApiError | None:
    marks = [m for m in _cache_marks(body) if m[0] != "cache_control"]
    if len(marks) > MAX_CACHE_BREAKPOINTS:
        return _bad(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marks)}."
        )
    seen_5m = ""
    for where, mark in _cache_marks(body):
        if not isinstance(mark, Mapping) or mark.get("type") != "ephemeral":
            return _bad(f"{where}.cache_control.type: Input should be 'ephemeral'")
        ttl = mark.get("ttl") or "5m"
        if ttl not in CACHE_TTLS:
            return _bad(f"{where}.cache_control.ttl: {ttl!r} is not a TTL. Use '5m' or '1h'.")
        if ttl == "5m" and not seen_5m:
            seen_5m = where
        if ttl == "1h" and seen_5m:
            return _bad(
                f"{where}.cache_control: a breakpoint with ttl '1h' cannot come after one with "
                f"ttl '5m' ({seen_5m}); longer TTLs must come first in tools, system, messages "
                "order."
            )
    return None


def _cache_marks(body: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every ``cache_control`` of the request, in prompt order, with its path."""
    marks = [(seg.where, seg.mark) for seg in _raw_segments(body) if seg.mark is not None]
    if body.get("cache_control") is not None:
        marks.append(("cache_control", body["cache_control"]))
    return marks


# --------------------------------------------------------------------------- documents


@dataclass
class FileRecord:
    """A file of the Files API, as the fake keeps it.

    Attributes:
        id: ``file_...``.
        filename: the upload's file name.
        mime_type: its MIME type.
        data: its bytes.
        created_at: RFC 3339 time of the upload.
        expired: its ``expires_at`` passed (a test sets it): the bytes are gone.
        downloadable: a file a tool made (code execution), which ``GET
            /v1/files/{id}/content`` serves; uploads are not.
    """

    id: str
    filename: str
    mime_type: str
    data: bytes
    created_at: str
    expired: bool = False
    downloadable: bool = False

    def metadata(self) -> dict[str, Any]:
        """The ``FileMetadata`` object the API answers."""
        return {
            "id": self.id,
            "type": "file",
            "filename": self.filename,
            "mime_type": self.mime_type,
            "size_bytes": len(self.data),
            "created_at": self.created_at,
            "downloadable": self.downloadable,
            "expires_at": "2000-01-01T00:00:00Z" if self.expired else None,
        }


@dataclass(frozen=True)
class Document:
    """A ``document`` block of a request, in ``document_index`` order.

    Attributes:
        where: its path (``messages.1.content.0.content.1``).
        kind: ``pdf`` or ``text``.
        title: its ``title`` (None when absent).
        data: the PDF's bytes, or the text (UTF-8).
        file_id: the ``file`` source's id, if it had one.
        citations: whether ``citations.enabled`` is true.
    """

    where: str
    kind: str
    title: str | None
    data: bytes
    file_id: str | None
    citations: bool


def _document_blocks(body: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(path, role, block) of every ``document`` block, in the order the model reads them.

    Documents are found at a message's top level and inside ``tool_result`` content.
    """
    found: list[tuple[str, str, Mapping[str, Any]]] = []
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, Mapping):
            continue
        role = str(message.get("role"))
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "document":
                found.append((f"messages.{i}.content.{j}", role, block))
            inner = block.get("content") if block.get("type") == "tool_result" else None
            for k, part in enumerate(inner if isinstance(inner, list) else []):
                if isinstance(part, Mapping) and part.get("type") == "document":
                    found.append((f"messages.{i}.content.{j}.content.{k}", role, part))
    return found


def documents(body: Mapping[str, Any], files: Mapping[str, FileRecord]) -> list[Document]:
    """The request's documents in ``document_index`` order (call after :func:`validate`)."""
    out: list[Document] = []
    for where, _, block in _document_blocks(body):
        source = block["source"]
        kind = source["type"]
        file_id = None
        if kind == "file":
            file_id = str(source["file_id"])
            record = files[file_id]
            data = record.data
            pdf = record.mime_type == "application/pdf"
        elif kind == "base64":
            data = base64.b64decode(str(source["data"]))
            pdf = True
        else:
            data = str(source["data"]).encode()
            pdf = False
        title = block.get("title")
        citations = block.get("citations")
        out.append(
            Document(
                where=where,
                kind="pdf" if pdf else "text",
                title=str(title) if title is not None else None,
                data=data,
                file_id=file_id,
                citations=isinstance(citations, Mapping) and citations.get("enabled") is True,
            )
        )
    return out


def check_documents(
    body: Mapping[str, Any],
    rules: ModelRules,
    betas: frozenset[str],
    files: Mapping[str, FileRecord],
) -> ApiError | None:
    """The refusal of a request's ``document`` blocks, if any (see the module docstring)."""
    model = rules.id
    blocks = _document_blocks(body)
    enabled: set[bool] = set()
    for where, role, block in blocks:
        if role != "user":
            return _bad(f"{where}: `document` blocks are only accepted in user messages.")
        source = block.get("source")
        if not isinstance(source, Mapping):
            return _bad(f"{where}.source: Field required")
        kind = source.get("type")
        if kind not in ("base64", "text", "file"):
            return _bad(
                f"{where}.source.type: Input should be 'base64', 'text', 'content', 'url' or "
                f"'file', got {kind!r}"
            )
        error = _check_source(where, source, str(kind), betas, files)
        if error is not None:
            return error
        pdf = kind == "base64" or (
            kind == "file" and files[str(source["file_id"])].mime_type == "application/pdf"
        )
        if pdf and not rules.pdf_input:
            return _bad(f"{where}: PDF input is not supported on {model}.")
        citations = block.get("citations")
        if citations is not None:
            if not isinstance(citations, Mapping) or not isinstance(citations.get("enabled"), bool):
                return _bad(f'{where}.citations: expected {{"enabled": <boolean>}}')
            if citations["enabled"] and not rules.citations:
                return _bad(f"{where}.citations: citations are not supported on {model}.")
        enabled.add(isinstance(citations, Mapping) and citations.get("enabled") is True)
        title = block.get("title")
        if title is not None and (not isinstance(title, str) or not 1 <= len(title) <= 500):
            return _bad(f"{where}.title: String should have between 1 and 500 characters")
    if len(enabled) > 1:
        return _bad("Citations must be enabled on all or none of the documents within a request.")
    for where, _role, block in _blocks_of_type(body, "container_upload"):
        file_id = block.get("file_id")
        if isinstance(file_id, str) and file_id:
            error = _check_source(
                where, {"type": "file", "file_id": file_id}, "upload", betas, files
            )
            if error is not None:
                return error
    return None


def _check_source(
    where: str,
    source: Mapping[str, Any],
    kind: str,
    betas: frozenset[str],
    files: Mapping[str, FileRecord],
) -> ApiError | None:
    if kind in ("file", "upload"):
        file_id = source.get("file_id")
        if not isinstance(file_id, str) or not file_id:
            return _bad(f"{where}.source.file_id: Field required")
        if BETA_FILES not in betas:
            return _bad(_msg_beta(f"{where}.source: a `file` source", BETA_FILES))
        record = files.get(file_id)
        if record is None:
            return _bad(f"{where}.source.file_id: File not found: {file_id}")
        if record.expired:
            return _bad(
                f"{where}.source.file_id: the file {file_id} has expired and its content is no "
                "longer available.",
                "file_expired",
            )
        if kind == "file" and record.mime_type not in ("application/pdf", "text/plain"):
            return _bad(
                f"{where}.source.file_id: a document's file must be application/pdf or "
                f"text/plain, not {record.mime_type}."
            )
        return None
    media = source.get("media_type")
    expected = DOCUMENT_MEDIA[kind]
    if media != expected:
        return _bad(f"{where}.source.media_type: Input should be '{expected}'")
    data = source.get("data")
    if not isinstance(data, str):
        return _bad(f"{where}.source.data: Input should be a valid string")
    if kind == "base64":
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return _bad(f"{where}.source.data: The PDF specified was not valid.")
        if not raw.startswith(b"%PDF-"):
            return _bad(f"{where}.source.data: The PDF specified was not valid.")
    return None


# --------------------------------------------------------------------------- canonical form

_OPAQUE_KEYS = frozenset({"input", "input_schema"})


def normalize(value: Any) -> Any:
    """``value`` without ``cache_control`` keys, ``None`` values and empty ``citations``.

    The docs don't say whether ``cache_control`` takes part in the prefix check: it is left
    out here, as prompt caching leaves it out. ``None`` values are what the SDK adds when it
    sends a response block back (``citations``, ``caller``).
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "cache_control" or item is None or (key == "citations" and item == []):
                continue
            out[key] = item if key in _OPAQUE_KEYS else normalize(item)
        return out
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    return value


def canonical(value: Any) -> str:
    """Canonical JSON of ``value`` (normalized, sorted keys, no spaces)."""
    return json.dumps(normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def blocks_of(content: Any) -> list[Any]:
    """A ``content`` / ``system`` value as a list of blocks (a string is one text block)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list | tuple) else [content]


def tokens(text: str) -> int:
    """The fake's token count of a canonical segment."""
    return math.ceil(len(text) / 4)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()


# --------------------------------------------------------------------------- segments


@dataclass(frozen=True)
class _RawSegment:
    where: str
    text: str
    mark: Any


def _raw_segments(body: Mapping[str, Any]) -> list[_RawSegment]:
    out: list[_RawSegment] = []
    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        mark = tool.get("cache_control") if isinstance(tool, Mapping) else None
        out.append(_RawSegment(f"tools.{i}", canonical(tool), mark))
    for i, block in enumerate(blocks_of(body.get("system"))):
        mark = block.get("cache_control") if isinstance(block, Mapping) else None
        out.append(_RawSegment(f"system.{i}", canonical(block), mark))
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, Mapping):
            continue
        role = str(message.get("role"))
        for j, block in enumerate(blocks_of(message.get("content"))):
            mark = block.get("cache_control") if isinstance(block, Mapping) else None
            out.append(_RawSegment(f"messages.{i}.content.{j}", role + canonical(block), mark))
    return out


@dataclass(frozen=True)
class Segment:
    """One block of the prompt (a tool, a system block or a message content block).

    Attributes:
        where: its path in the request (``tools.0``, ``system.1``, ``messages.2.content.0``).
        digest: digest of the prompt from its start through this block (a cache key).
        tokens: the fake's token count of this block.
        ttl: the TTL of its ``cache_control`` breakpoint, ``None`` when it has none.
    """

    where: str
    digest: str
    tokens: int
    ttl: str | None


def segments(body: Mapping[str, Any]) -> list[Segment]:
    """The prompt's blocks in tools → system → messages order, with running digests.

    A top-level ``cache_control`` (automatic caching) puts a breakpoint on the last block.
    """
    raw = _raw_segments(body)
    out: list[Segment] = []
    running = _digest("prompt")
    for n, seg in enumerate(raw):
        running = _digest(running, seg.where.split(".")[0], seg.text)
        mark = seg.mark
        if n == len(raw) - 1 and mark is None:
            mark = body.get("cache_control")
        ttl = None
        if isinstance(mark, Mapping):
            ttl = str(mark.get("ttl") or "5m")
        out.append(Segment(seg.where, running, tokens(seg.text), ttl))
    return out


def count_tokens(body: Mapping[str, Any]) -> int:
    """The fake's input token count of a request."""
    return sum(s.tokens for s in segments(body))


# --------------------------------------------------------------------------- binding


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _unb64(text: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


class Signer:
    """Signs thinking and compaction blocks with an HMAC under a per-server secret.

    A thinking signature is ``<model>.<model tag>.<mac>``: the tag authenticates the model
    (so a block from another model can be told from a forged one), the mac covers the model,
    the digest of the block's prefix and the block's text as returned. A compaction signature
    ``cmp.<chain>.<tag>.<mac>`` carries the digest of the messages it summarized (tag) and
    binds its summary text (mac).
    """

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, *parts: str) -> str:
        return hmac.new(self._secret, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()

    def sign_thinking(self, model: str, prefix: str, text: str) -> str:
        """The signature of a thinking block of ``model`` after ``prefix``."""
        tag = self._mac("model", model)[:24]
        return f"{_b64(model)}.{tag}.{self._mac('thinking', model, prefix, text)}"

    def thinking_model(self, signature: str) -> str | None:
        """The model that issued ``signature``; ``None`` if this server never issued it."""
        parts = signature.split(".") if isinstance(signature, str) else []
        if len(parts) != 3:
            return None
        model = _unb64(parts[0])
        if model is None or not hmac.compare_digest(parts[1], self._mac("model", model)[:24]):
            return None
        return model

    def verify_thinking(self, model: str, prefix: str, text: str, signature: str) -> bool:
        """Whether ``signature`` was issued for this model, prefix and text."""
        return hmac.compare_digest(signature, self.sign_thinking(model, prefix, text))

    def sign_compaction(self, chain: str, content: str) -> str:
        """The signature of a compaction block summarizing the messages digested in ``chain``."""
        tag = self._mac("compaction-chain", chain)[:24]
        return f"cmp.{chain}.{tag}.{self._mac('compaction', chain, content)}"

    def open_compaction(self, signature: Any, content: str) -> tuple[str | None, ApiError | None]:
        """The chain digest a compaction block stands for, or the error it gets."""
        parts = signature.split(".") if isinstance(signature, str) else []
        if (
            len(parts) != 4
            or parts[0] != "cmp"
            or not hmac.compare_digest(parts[2], self._mac("compaction-chain", parts[1])[:24])
        ):
            return None, _bad(
                "messages.0.content.0: Invalid `signature` in `compaction` block. Send the block "
                "back exactly as the API returned it.",
                "compaction_signature_invalid",
            )
        if not hmac.compare_digest(parts[3], self._mac("compaction", parts[1], content)):
            return None, _bad(
                "messages.0.content.0: the `content` of the `compaction` block differs from the "
                "summary its signature recorded. Send the block back unchanged.",
                "compaction_content_mismatch",
            )
        return parts[1], None


def head_digest(body: Mapping[str, Any]) -> str:
    """Digest of ``system`` and ``tools`` (the start of every block's prefix)."""
    system = canonical(blocks_of(body.get("system")))
    tools = canonical(body.get("tools") or [])
    return _digest("head", system, tools)


CHAIN_START: Final = _digest("messages")


def chain_step(chain: str, message: Mapping[str, Any]) -> str:
    """The message chain digest after one more message."""
    role = str(message.get("role"))
    return _digest(chain, role, canonical(blocks_of(message.get("content"))))


def block_prefix(head: str, chain: str, role: str, earlier: Iterable[Any]) -> str:
    """Digest of a block's prefix: system, tools, earlier messages, earlier blocks."""
    return _digest(head, chain, role, canonical(list(earlier)))


@dataclass
class Binding:
    """The outcome of the preserved-thinking checks on one request.

    Attributes:
        error: the 400 the request gets, if any.
        transformations: ``input_transformations`` entries (``thinking_dropped``).
        body: the request as the model sees it (dropped blocks removed).
        head: digest of ``system`` and ``tools``.
        chain: digest of every message (a compaction block standing for its summary).
    """

    error: ApiError | None = None
    transformations: list[dict[str, Any]] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)
    head: str = ""
    chain: str = CHAIN_START

    def response_prefix(self, earlier: Iterable[Any]) -> str:
        """The prefix digest of a block of the answer after ``earlier`` answer blocks."""
        return block_prefix(self.head, self.chain, "assistant", earlier)


def _binding_error(i: int, j: int, kind: str) -> ApiError:
    return _bad(
        f"messages.{i}.content.{j}: Invalid `signature` in `{kind}` block. The block is bound "
        "to a different conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )


def _thinking_parts(block: Mapping[str, Any]) -> tuple[str, str]:
    """(text, signature) of a thinking or redacted_thinking block."""
    if block.get("type") == "redacted_thinking":
        return "", str(block.get("data", ""))
    return str(block.get("thinking", "")), str(block.get("signature", ""))


def check_binding(body: Mapping[str, Any], signer: Signer) -> Binding:
    """Check the compaction block and the thinking blocks a request sends back.

    The compaction block (first in ``messages``) stands for exactly the messages it
    summarized, so thinking produced after them stays valid. On a model with bound thinking,
    a thinking block from a model that can't read it is dropped (``model_binding_mismatch``);
    a block whose prefix or text changed, or whose signature this server never issued, fails
    the request, or with ``drop_block`` is dropped with the rest of its turn's consecutive
    thinking blocks (``prefix_binding_mismatch``). Other models accept any signature.
    """
    rules = resolve(str(body.get("model")))
    assert rules is not None
    out = Binding(body=dict(body), head=head_digest(body))
    units = _units(list(body.get("messages") or []))
    if units and units[0][0] == -1:  # the compaction block
        block = units.pop(0)[2][0][1]
        if block.get("content") is not None:
            chain, error = signer.open_compaction(block.get("signature"), str(block["content"]))
            if error is not None:
                out.error = error
                return out
            assert chain is not None
            out.chain = chain
    drop = prefix_mismatch_behavior(body) == "drop_block"
    dropped: set[tuple[int, int]] = set()
    for i, role, blocks in units:
        content = [b for _, b in blocks]
        if rules.bound_thinking and role == "assistant":
            failed = _check_turn(i, blocks, rules, signer, out, drop)
            if out.error is not None:
                return out
            dropped |= failed
        out.chain = chain_step(out.chain, {"role": role, "content": content})
    if dropped:
        out.body["messages"] = _without(list(body.get("messages") or []), dropped)
    return out


Unit = tuple[int, str, list[tuple[int, Any]]]


def _units(messages: list[Any]) -> list[Unit]:
    """(message index, role, [(content index, block)]) per message.

    A compaction block first in ``messages`` becomes a unit of its own with index -1.
    """
    units: list[Unit] = []
    for i, message in enumerate(messages):
        blocks = list(enumerate(blocks_of(message.get("content"))))
        role = str(message.get("role"))
        if i == 0 and blocks and _is_type(blocks[0][1], "compaction"):
            units.append((-1, role, blocks[:1]))
            blocks = blocks[1:]
            if not blocks:
                continue
        units.append((i, role, blocks))
    return units


def _is_type(block: Any, kind: str) -> bool:
    return isinstance(block, Mapping) and block.get("type") == kind


def _check_turn(
    i: int,
    blocks: list[tuple[int, Any]],
    rules: ModelRules,
    signer: Signer,
    out: Binding,
    drop: bool,
) -> set[tuple[int, int]]:
    """Check the thinking blocks of one assistant message; sets ``out.error`` on a refusal."""
    dropped: set[tuple[int, int]] = set()
    m = 0
    while m < len(blocks):
        j, block = blocks[m]
        reason = None
        if _is_thinking(block):
            reason = _block_fails(block, [b for _, b in blocks[:m]], rules, signer, out)
        if reason == "model_binding_mismatch" or (reason is not None and drop):
            # a prefix failure takes the rest of the turn's consecutive thinking blocks
            last = m + 1
            if reason == "prefix_binding_mismatch":
                while last < len(blocks) and _is_thinking(blocks[last][1]):
                    last += 1
            for jj, _ in blocks[m:last]:
                dropped.add((i, jj))
                out.transformations.append(_dropped(i, jj, reason))
            m = last
            continue
        if reason is not None:
            out.error = _binding_error(i, j, str(block["type"]))
            return dropped
        m += 1
    return dropped


def _is_thinking(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in THINKING_BLOCKS


def _block_fails(
    block: Mapping[str, Any], earlier: list[Any], rules: ModelRules, signer: Signer, at: Binding
) -> str | None:
    text, signature = _thinking_parts(block)
    issuer = signer.thinking_model(signature)
    if issuer is None:
        return "prefix_binding_mismatch"  # never issued: refused like a changed prefix
    if issuer != rules.id and issuer not in rules.reads_blocks_of:
        return "model_binding_mismatch"
    prefix = block_prefix(at.head, at.chain, "assistant", earlier)
    if not signer.verify_thinking(issuer, prefix, text, signature):
        return "prefix_binding_mismatch"
    return None


def _dropped(i: int, j: int, reason: str) -> dict[str, Any]:
    return {"type": "thinking_dropped", "path": f"messages.{i}.content.{j}", "reason": reason}


def _without(messages: list[Any], dropped: set[tuple[int, int]]) -> list[Any]:
    out = []
    for i, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list) and any(i == d[0] for d in dropped):
            content = [b for j, b in enumerate(content) if (i, j) not in dropped]
            message = dict(message, content=content)
        out.append(message)
    return out
