"""Live matrix: tiny real calls through the product's Claude adapter on every current model.

For people with an Anthropic API key. Every current model × thinking on/off × effort
low/high/max runs a 2-turn exchange with one tiny tool (``note``) through
``desktop_agent.llm.claude.ClaudeModel`` (the requests are the adapter's ``build_params``),
along four paths:

* **plain**: the first answer (thinking blocks included) sent back unchanged with the tool
  result: the API's prefix check on every thinking block runs here;
* **compaction**: after the second turn the older turns are summarized (a signed
  ``compaction`` block where the model takes one, else our own summary prompt), the summary
  is swapped in before the kept turn, and one more turn is sent;
* **fallback**: the second turn goes to another current model (the first answer labelled
  with its model, so the adapter leaves its thinking out), the third back to the first;
* **fork**: the same first turn continued twice, independently.

It prints the plan and an upper bound of the cost first and asks before spending anything.

Usage::

    .venv/bin/python bench/live_matrix.py [--models a,b] [--snapshot] [--max-tokens 512]
                                          [--base-url URL] [--yes] [--json]

Exit status: 0 when no cell failed, 1 when one did, 2 when nothing ran (no key, the
catalogue could not be read, the key was refused, not confirmed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from desktop_agent.domain import JSON, Usage  # noqa: E402
from desktop_agent.domain.catalogue import ModelEntry  # noqa: E402
from desktop_agent.domain.errors import (  # noqa: E402
    AuthenticationError,
    DesktopAgentError,
    InvalidInputError,
    PermanentError,
)
from desktop_agent.engine.compaction import SUMMARY_PROMPT  # noqa: E402
from desktop_agent.engine.ports import CancelToken, ModelRequest, ModelResponse  # noqa: E402
from desktop_agent.engine.state import Conversation  # noqa: E402
from desktop_agent.llm.catalogue import Catalogue, fetch_with_key, snapshot_models  # noqa: E402
from desktop_agent.llm.claude import (  # noqa: E402
    ClaudeModel,
    RetryPolicy,
    build_params,
    estimate_tokens,
)
from desktop_agent.llm.pacing import RateLimitPacer  # noqa: E402
from desktop_agent.llm.pricing import price_label  # noqa: E402
from desktop_agent.secrets import KeyStore  # noqa: E402

CURRENT_MODELS = (
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
    "claude-fable-5-1",
    "claude-fable-5-2",
    "claude-mythos-5-1",
    "claude-mythos-5-2",
)
"""The 2026 5.x models; those the catalogue lists as active are checked."""
THINKING = (True, False)
EFFORTS = ("low", "high", "max")
PATHS = ("plain", "compaction", "fallback", "fork")
THINKING_BUDGET = 1024
"""Thinking on (the smallest budget, for models that take one; adaptive ones ignore it)."""

CALLS: dict[str, tuple[tuple[bool, int], ...]] = {
    "first": ((False, 0),),
    "plain": ((False, 1),),
    "compaction": ((False, 1), (False, 2), (False, 3)),
    "fallback": ((True, 1), (False, 2)),
    "fork": ((False, 1), (False, 1)),
}
"""The calls of each path: (on the fallback model, answers already in the prompt)."""
TURN_TOKENS = 300
"""Generous size of one turn's own words (user text, tool result), for the estimate."""

SYSTEM = "You are checking an API integration. Keep every answer to a single word."
NOTE_TOOL: dict[str, JSON] = {
    "name": "note",
    "description": "Write down a one-word note.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "the note: one word"}},
        "required": ["text"],
    },
}
FIRST = "Call the note tool once with the word 'ready', then answer in one word."
ONE_WORD = "Noted. Now answer in one word."
ANOTHER_WORD = "Noted. Now answer with a different single word."
ONE_MORE = "One more word, please."

NO_KEY = (
    "No API key: this check makes real calls. Set one with `desktop-agent key set`, or "
    "export ANTHROPIC_API_KEY=sk-ant-... (add --base-url URL to talk to a fake)."
)


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class Combo:
    """One model × thinking × effort; its four paths are the table's cells.

    Attributes:
        partners: the other current models the fallback path may switch to, in order.
        offered: False when the model's catalogue entry lacks the effort (or thinking).
    """

    model: str
    thinking: bool
    effort: str
    partners: tuple[str, ...] = ()
    offered: bool = True


@dataclass
class Row:
    """One line of the table.

    Attributes:
        status: ``passed``, ``refused`` or ``failed`` (both count as failed),
            ``skipped`` or ``not available`` (counted apart).
        detail: the first line of the error, or why the cell was skipped.
        cost_usd: dollars spent by the whole run when the cell ended.
    """

    model: str
    thinking: str
    effort: str
    path: str
    status: str
    detail: str = ""
    cost_usd: float = 0.0
    sent: dict[str, JSON] = field(default_factory=dict)

    @property
    def result(self) -> str:
        """What the table shows."""
        if self.status == "skipped":
            return f"skipped ({self.detail})"
        return f"{self.status}: {self.detail}" if self.detail else self.status


def listed(catalogue: Catalogue, model: str) -> ModelEntry | None:
    """The catalogue's own active entry for ``model`` (its alias or a dated id), else None.

    ``Catalogue.entry`` falls back to the shipped snapshot; this does not, so a model the
    live catalogue leaves out (one the key cannot use) is reported as not available.
    """
    for entry in catalogue.entries():
        if entry.id == model or re.fullmatch(re.escape(model) + r"-\d{8}", entry.id):
            return entry if entry.lifecycle == "active" else None
    return None


def offered(entry: ModelEntry, thinking: bool, effort: str) -> bool:
    """Whether the entry takes this effort (and thinking, when on)."""
    thinks = entry.accepts_thinking("adaptive") or entry.accepts_thinking("enabled")
    return entry.accepts_effort(effort) and (thinks or not thinking)


def plan(catalogue: Catalogue, models: Sequence[str]) -> tuple[list[str], list[Combo]]:
    """The models not available, and every combination of the others (skipped ones too)."""
    available = [m for m in CURRENT_MODELS if listed(catalogue, m) is not None]
    missing: list[str] = []
    combos: list[Combo] = []
    for model in models:
        entry = listed(catalogue, model)
        if entry is None:
            missing.append(model)
            continue
        start = available.index(model) + 1 if model in available else 0
        partners = tuple(m for m in available[start:] + available[:start] if m != model)
        for thinking in THINKING:
            for effort in EFFORTS:
                combos.append(
                    Combo(model, thinking, effort, partners, offered(entry, thinking, effort))
                )
    return missing, combos


def request(
    combo: Combo,
    messages: Sequence[dict[str, JSON]],
    max_tokens: int,
    *,
    model: str = "",
    compaction: bool = False,
) -> ModelRequest:
    """The request of one call of a cell (``model``: another than the combination's)."""
    return ModelRequest(
        model=model or combo.model,
        system=SYSTEM,
        messages=list(messages),
        tools=[NOTE_TOOL],
        max_tokens=max_tokens,
        thinking_budget=THINKING_BUDGET if combo.thinking else 0,
        effort=combo.effort,
        compaction=compaction,
    )


def first_messages() -> list[dict[str, JSON]]:
    """The conversation's opening: one user message asking for one tool call."""
    return [user(FIRST)]


def estimate(port: ClaudeModel, combo: Combo, max_tokens: int) -> tuple[int, float]:
    """Calls of a combination and the upper bound of their price.

    Each call is priced by ``ClaudeModel.worst_case_cost`` with a prompt as large as it can
    grow: the opening plus, for every earlier answer in it, a full ``max_tokens`` and a turn.
    """
    if not combo.offered:
        return 0, 0.0
    first = request(combo, first_messages(), max_tokens)
    base = estimate_tokens(first) + len(SUMMARY_PROMPT)
    calls, total = 0, 0.0
    for path in ("first", *PATHS):
        for on_partner, answers in CALLS[path]:
            if on_partner and not combo.partners:
                continue
            model = combo.partners[0] if on_partner else combo.model
            out = int(build_params(first, model, port.catalogue)["max_tokens"])
            prompt = base + answers * (out + TURN_TOKENS)
            sized = dataclasses.replace(first, model=model, prompt_tokens=prompt)
            total += port.worst_case_cost(sized)
            calls += 1
    return calls, total


def sent(port: ClaudeModel, combo: Combo, max_tokens: int) -> dict[str, JSON]:
    """What ``build_params`` sends for the combination: thinking, effort, max_tokens."""
    params = build_params(request(combo, first_messages(), max_tokens), combo.model, port.catalogue)
    config = params.get("output_config") or {}
    return {
        "thinking": params.get("thinking"),
        "effort": config.get("effort"),
        "max_tokens": params["max_tokens"],
    }


def print_plan(
    port: ClaudeModel, missing: list[str], combos: list[Combo], max_tokens: int, out: TextIO
) -> float:
    """Print the cells and the estimate; returns the estimate (dollars)."""
    print(f"Catalogue: {port.catalogue.source}. Cells: model × thinking × effort × path.", file=out)
    total_calls, total = 0, 0.0
    for model in dict.fromkeys(c.model for c in combos):
        print(f"{model} ({price_label(model)})", file=out)
        for combo in (c for c in combos if c.model == model):
            calls, dollars = estimate(port, combo, max_tokens)
            total_calls, total = total_calls + calls, total + dollars
            label = f"  thinking {_on(combo.thinking):<3} effort {combo.effort:<4}"
            if not combo.offered:
                print(f"{label} skipped (not offered)", file=out)
                continue
            what = sent(port, combo, max_tokens)
            thinking = what["thinking"]["type"] if isinstance(what["thinking"], dict) else "-"
            partner = combo.partners[0] if combo.partners else "none"
            print(
                f"{label} sends thinking={thinking}; {', '.join(PATHS)} (fallback: {partner}); "
                f"{calls} calls, at most {_usd(dollars)}",
                file=out,
            )
    for model in missing:
        print(f"{model}: not available (the catalogue does not list it as active)", file=out)
    print(
        f"{total_calls} calls, estimated cost at most {_usd(total)} (upper bound: every "
        f"prompt written to the cache, every answer {max_tokens} tokens long).",
        file=out,
    )
    return total


# --------------------------------------------------------------------------- calls


class KeyRefusedError(Exception):
    """The API refused the key itself: no cell can pass."""


class CellFailedError(Exception):
    """A call was answered, but not as the check requires (e.g. thinking dropped)."""


class UnavailableError(Exception):
    """The key cannot use a model (403, or 404 naming it)."""


def user(text: str, *blocks: dict[str, JSON]) -> dict[str, JSON]:
    """A user message: ``blocks`` (tool results) then ``text``."""
    return {"role": "user", "content": [*blocks, {"type": "text", "text": text}]}


def assistant(response: ModelResponse) -> dict[str, JSON]:
    """The answer as the engine keeps it: unchanged, labelled with the model that wrote it."""
    return {"role": "assistant", "content": response.content, "model": response.model}


def reply_to(response: ModelResponse, text: str) -> dict[str, JSON]:
    """The next user message: a result for each tool use of ``response``, then ``text``."""
    results = [
        {"type": "tool_result", "tool_use_id": b["id"], "content": "noted"}
        for b in response.content
        if b.get("type") == "tool_use"
    ]
    return user(text, *results)


def without_thinking(message: dict[str, JSON]) -> dict[str, JSON]:
    """A kept turn after our own summary: its thinking is bound to the turns it replaced."""
    content = [
        b for b in message["content"] if b.get("type") not in ("thinking", "redacted_thinking")
    ]
    return {**message, "content": content}


def first_line(exc: BaseException) -> str:
    """The first line of an error's text."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _unavailable(exc: DesktopAgentError) -> bool:
    text = str(exc)
    return "(403 " in text or "(404 " in text


class Runner:
    """Runs the cells through one adapter and keeps the run's cost.

    Args:
        port: the product's adapter.
        max_tokens: ``max_tokens`` of every request.
    """

    def __init__(self, port: ClaudeModel, max_tokens: int) -> None:
        self.port = port
        self.max_tokens = max_tokens
        self.spent = 0.0
        self.calls = 0
        self.gone: set[str] = set()
        self.cancel = CancelToken()

    def call(self, req: ModelRequest) -> ModelResponse:
        """One call; its cost is counted even when it fails.

        Raises:
            KeyRefusedError: the key itself was refused (401).
            DesktopAgentError: the adapter's error (refusal, rate limit, connection).
            CellFailedError: the API silently dropped a thinking block the adapter sent.
        """
        self.calls += 1
        seen = 0.0

        def on_usage(_usage: Usage, dollars: float) -> None:
            nonlocal seen
            seen = dollars

        try:
            response = self.port.complete(
                req,
                idempotency_key=f"live-matrix-{self.calls}",
                on_text=lambda _text: None,
                cancel=self.cancel,
                on_usage=on_usage,
            )
        except AuthenticationError as exc:
            self.spent += seen
            if not _unavailable(exc):
                raise KeyRefusedError(first_line(exc)) from None
            raise
        except DesktopAgentError:
            self.spent += seen
            raise
        self.spent += response.cost_usd
        dropped = response.details.get("input_transformations")
        if dropped:
            raise CellFailedError(f"the API dropped thinking blocks: {json.dumps(dropped)}")
        return response

    def req(self, combo: Combo, messages: Sequence[dict[str, JSON]], **kw: Any) -> ModelRequest:
        """A request of ``combo`` (see :func:`request`)."""
        return request(combo, messages, self.max_tokens, **kw)

    # ------------------------------------------------------------------ paths

    def plain(self, combo: Combo, history: list[dict[str, JSON]], first: ModelResponse) -> None:
        """The first answer sent back unchanged with the tool result."""
        self.call(self.req(combo, [*history, reply_to(first, ONE_WORD)]))

    def compaction(
        self, combo: Combo, history: list[dict[str, JSON]], first: ModelResponse
    ) -> None:
        """Second turn, a summary of the turns before it swapped in, one more turn."""
        older = [*history, reply_to(first, ONE_WORD)]
        second = self.call(self.req(combo, older))
        kept = assistant(second)
        if self.port.compacts_on_server(combo.model):
            summary = self.call(self.req(combo, older, compaction=True))
            block = next(
                (b for b in summary.content if b.get("type") == "compaction" and b.get("content")),
                None,
            )
            if block is None:
                raise CellFailedError("the API answered the compaction without a summary")
            head: dict[str, JSON] = {"role": "assistant", "content": [block]}
        else:
            summary = self.call(self.req(combo, [*older, user(SUMMARY_PROMPT)]))
            words = "\n".join(str(b.get("text", "")) for b in summary.content).strip()
            head = Conversation(goal=FIRST, summary=words).messages[0]
            kept = without_thinking(kept)
        self.call(self.req(combo, [head, kept, reply_to(second, ONE_MORE)]))

    def fallback(self, combo: Combo, history: list[dict[str, JSON]], first: ModelResponse) -> str:
        """Second turn on another model, third back on the first; returns that other model."""
        partner = next((m for m in combo.partners if m not in self.gone), "")
        if not partner:
            raise UnavailableError("no other current model to fall back to")
        asked = [*history, reply_to(first, ONE_WORD)]
        try:
            second = self.call(self.req(combo, asked, model=partner))
        except DesktopAgentError as exc:
            if not _unavailable(exc):
                raise
            self.gone.add(partner)
            raise UnavailableError(f"fallback model {partner}: {first_line(exc)}") from None
        self.call(self.req(combo, [*asked, assistant(second), reply_to(second, ONE_MORE)]))
        return partner

    def fork(self, combo: Combo, history: list[dict[str, JSON]], first: ModelResponse) -> None:
        """The same first turn continued twice, independently."""
        for text in (ONE_WORD, ANOTHER_WORD):
            self.call(self.req(combo, [*history, reply_to(first, text)]))

    # ------------------------------------------------------------------ cells

    def run(self, combo: Combo, show: Callable[[Row], None]) -> list[Row]:
        """The four cells of a combination (skipped, not available, or run)."""
        rows: list[Row] = []

        def emit(path: str, status: str, detail: str = "") -> None:
            row = Row(combo.model, _on(combo.thinking), combo.effort, path, status, detail)
            row.cost_usd = self.spent
            row.sent = sent(self.port, combo, self.max_tokens) if status != "skipped" else {}
            rows.append(row)
            show(row)

        if not combo.offered or combo.model in self.gone:
            status = "skipped" if not combo.offered else "not available"
            for path in PATHS:
                emit(path, status, "not offered" if not combo.offered else "")
            return rows
        history = first_messages()
        try:
            first = self.call(self.req(combo, history))
        except DesktopAgentError as exc:
            if _unavailable(exc):
                self.gone.add(combo.model)
            status = "not available" if _unavailable(exc) else _failure(exc)
            for path in PATHS:
                emit(path, status, first_line(exc))
            return rows
        except CellFailedError as exc:
            for path in PATHS:
                emit(path, "failed", first_line(exc))
            return rows
        history = [*history, assistant(first)]
        steps: dict[str, Callable[[Combo, list[dict[str, JSON]], ModelResponse], object]] = {
            "plain": self.plain,
            "compaction": self.compaction,
            "fallback": self.fallback,
            "fork": self.fork,
        }
        note = "" if _tool_used(first) else f"no tool call (stop: {first.stop_reason})"
        for path, step in steps.items():
            try:
                partner = step(combo, history, first)
            except UnavailableError as exc:
                emit(path, "not available", first_line(exc))
            except CellFailedError as exc:
                emit(path, "failed", first_line(exc))
            except DesktopAgentError as exc:
                emit(path, _failure(exc), first_line(exc))
            else:
                via = f"via {partner}" if isinstance(partner, str) else ""
                emit(path, "passed", "; ".join(x for x in (via, note) if x))
        return rows


def _tool_used(response: ModelResponse) -> bool:
    return any(b.get("type") == "tool_use" for b in response.content)


def _failure(exc: DesktopAgentError) -> str:
    """``refused`` for what the API refused (4xx), ``failed`` for the rest."""
    return "refused" if isinstance(exc, PermanentError) else "failed"


# --------------------------------------------------------------------------- report


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _usd(dollars: float) -> str:
    return f"${dollars:.4f}" if dollars < 1 else f"${dollars:,.2f}"


HEADER = (
    f"{'model':<18} | {'thinking':<8} | {'effort':<6} | {'path':<10} | {'result':<40} | cost so far"
)


def table_line(row: Row) -> str:
    """One row of the table."""
    return (
        f"{row.model:<18} | {row.thinking:<8} | {row.effort:<6} | {row.path:<10} | "
        f"{row.result:<40} | {_usd(row.cost_usd)}"
    )


def counts(rows: Sequence[Row]) -> dict[str, int]:
    """Passed, failed (refused or failed), skipped and not available cells."""
    return {
        "passed": sum(r.status == "passed" for r in rows),
        "failed": sum(r.status in ("refused", "failed") for r in rows),
        "skipped": sum(r.status == "skipped" for r in rows),
        "not_available": sum(r.status == "not available" for r in rows),
    }


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--models", default="", help="comma-separated model ids (default: current)")
    p.add_argument("--snapshot", action="store_true", help="use the shipped catalogue")
    p.add_argument("--max-tokens", type=int, default=512, help="max_tokens of every call")
    p.add_argument(
        "--base-url",
        default=os.environ.get("ANTHROPIC_BASE_URL") or None,
        help="API address (default: ANTHROPIC_BASE_URL, else the SDK's)",
    )
    p.add_argument("--yes", action="store_true", help="run without asking")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    return p.parse_args(argv)


def load_catalogue(key: str, args: argparse.Namespace) -> Catalogue:
    """The live catalogue read with the key, or the shipped one with ``--snapshot``.

    Raises:
        InvalidInputError: the live catalogue could not be read.
    """
    if args.snapshot:
        return Catalogue(snapshot_models())
    return Catalogue(fetch_with_key(key, args.base_url), source="api")


def confirmed(args: argparse.Namespace, out: TextIO) -> bool | None:
    """Whether to go on: True with ``--yes`` or a "y"; None without a terminal to ask on."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        return None
    out.write("Proceed? [y/N] ")
    out.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def main(argv: Sequence[str] | None = None) -> int:
    """Plan, ask, run the cells, report; see the module docstring for the exit status."""
    args = parse_args(argv)
    out = sys.stderr if args.json else sys.stdout
    key = (KeyStore().get() or "").strip()
    if not key:
        print(NO_KEY, file=sys.stderr)
        return 2
    try:
        catalogue = load_catalogue(key, args)
    except InvalidInputError as exc:
        print(
            f"Cannot read the model catalogue: {exc} (--snapshot uses the shipped one)",
            file=sys.stderr,
        )
        return 2
    port = ClaudeModel(
        lambda: key,
        base_url=args.base_url,
        policy=RetryPolicy(max_retries=3, max_inline_wait_s=60.0),
        pacer=RateLimitPacer(),
        timeout=300.0,
        catalogue=catalogue,
    )
    models = [m.strip() for m in args.models.split(",") if m.strip()] or list(CURRENT_MODELS)
    missing, combos = plan(catalogue, models)
    estimated = print_plan(port, missing, combos, args.max_tokens, out)
    answer = confirmed(args, out)
    if not answer:
        why = "not a terminal: pass --yes to run" if answer is None else "not confirmed"
        print(f"Stopped ({why}); nothing was called.", file=out)
        return 2
    runner = Runner(port, args.max_tokens)
    rows = [Row(m, "-", "-", "-", "not available", "not listed as active") for m in missing]
    if not args.json:
        print(HEADER, file=out)
        for row in rows:
            print(table_line(row), file=out)

    def show(row: Row) -> None:
        if not args.json:
            print(table_line(row), file=out, flush=True)

    try:
        for combo in combos:
            rows += runner.run(combo, show)
    except KeyRefusedError as exc:
        print(f"The API refused the key: {exc}", file=sys.stderr)
        return 2
    tally = counts(rows)
    if args.json:
        results = [dataclasses.asdict(r) | {"result": r.result} for r in rows]
        report = {"cells": results, **tally, "spent_usd": runner.spent, "estimate_usd": estimated}
        print(json.dumps(report, indent=2))
    else:
        print(
            f"{tally['skipped']} skipped (not offered), {tally['not_available']} not available; "
            f"{runner.calls} calls, spent {_usd(runner.spent)} (estimate: at most "
            f"{_usd(estimated)})",
            file=out,
        )
        print(f"{tally['passed']} passed, {tally['failed']} failed", file=out)
    return 1 if tally["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
