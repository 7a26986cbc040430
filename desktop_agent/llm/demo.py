"""The offline demo model: deterministic, free, and clearly not Claude.

It drives a realistic research run over the workspace with the built-in tools: plan, list
the sources, read each and take a note, draft a report, then revise it (an overwrite, which
asks for the analyst's approval), and answer. Its next move is a pure function of the
conversation it is sent, so a resumed run replays exactly. ``DESKTOP_AGENT_DEMO_DELAY``
sets its time per call in seconds.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from desktop_agent.domain import JSON, Usage
from desktop_agent.domain.errors import RunCancelled
from desktop_agent.engine.ports import CancelToken, ModelRequest, ModelResponse
from desktop_agent.llm.pricing import model_info

DEMO_MODEL = "demo"
DEMO_LABEL = "Demo model (offline)"
REPORT = "report.md"
NOTES = "notes.md"
MAX_SOURCES = 8
_READABLE = (".md", ".txt", ".pdf", ".csv", ".json", ".html", ".rst")
_SKIP = re.compile(r"^(report\.md|notes\.md|partial-report-.*\.md)$")


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("DESKTOP_AGENT_DEMO_DELAY", "0.05")))
    except ValueError:
        return 0.05


class _History:
    """What the demo reads from the conversation: its past calls and their results."""

    def __init__(self, messages: Sequence[Mapping[str, JSON]]) -> None:
        self.calls: list[dict[str, Any]] = []
        self.results: dict[str, str] = {}
        self.goal = ""
        for msg in messages:
            for block in msg.get("content", []) or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    self.calls.append(block)
                elif block.get("type") == "tool_result":
                    content = block.get("content", "")
                    self.results[str(block.get("tool_use_id"))] = (
                        content if isinstance(content, str) else str(content)
                    )
                elif block.get("type") == "text" and not self.goal and msg.get("role") == "user":
                    self.goal = str(block.get("text", "")).removeprefix("Goal: ").split("\n")[0]

    def result_of(self, name: str, **match: Any) -> str | None:
        for call in reversed(self.calls):
            if call.get("name") != name:
                continue
            args = call.get("input") or {}
            if all(args.get(k) == v for k, v in match.items()):
                return self.results.get(str(call.get("id")))
        return None

    def called(self, name: str, **match: Any) -> bool:
        return any(
            c.get("name") == name
            and all((c.get("input") or {}).get(k) == v for k, v in match.items())
            for c in self.calls
        )


def _sources(listing: str) -> list[str]:
    names = []
    for line in listing.splitlines():
        path = line.strip().split("  ")[0].strip()
        if not path or path.endswith("/"):
            continue
        base = path.rsplit("/", 1)[-1]
        if path.lower().endswith(_READABLE) and not _SKIP.match(base):
            names.append(path)
    return sorted(names)[:MAX_SOURCES]


def _gist(text: str) -> str:
    body = " ".join(
        line.strip("# ").strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith("[")
    )
    body = re.sub(r"\s+", " ", body)
    sentence = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0]
    return (sentence[:220] + "…") if len(sentence) > 220 else sentence or "(empty)"


class DemoModel:
    """The offline demo model (see module docstring)."""

    def __init__(self, delay: float | None = None) -> None:
        self.delay = _delay() if delay is None else delay

    def context_window(self, model: str) -> int:
        """Tokens the model accepts in one request."""
        return model_info(DEMO_MODEL).context_window

    def compacts_on_server(self, model: str) -> bool:
        """The demo writes its summaries as text, as a model without server compaction."""
        return False

    def count_tokens(self, request: ModelRequest) -> int | None:
        """The demo's own estimate is its exact count."""
        return len(json.dumps(list(request.messages), default=str)) // 4 + len(request.system) // 4

    def worst_case_cost(self, request: ModelRequest) -> float:
        """Upper bound of the call's simulated price."""
        info = model_info(DEMO_MODEL)
        prompt = _approx_tokens(request)
        return info.cost(Usage(input_tokens=prompt, output_tokens=request.max_tokens))

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        """Decide the next move, streaming its text slowly enough to watch."""
        text, calls = self._decide(request)
        pieces = re.findall(r"\S+\s*", text) or [""]
        per_piece = self.delay / max(1, len(pieces))
        info = model_info(DEMO_MODEL)
        prompt = _approx_tokens(request)
        streamed = 0
        if on_usage is not None:
            on_usage(Usage(input_tokens=prompt), info.cost(Usage(input_tokens=prompt)))
        for piece in pieces:
            if cancel.wait(per_piece):
                raise RunCancelled("cancelled during the demo model's answer")
            on_text(piece)
            streamed += len(piece)
            if on_usage is not None:
                so_far = Usage(input_tokens=prompt, output_tokens=streamed // 4)
                on_usage(so_far, info.cost(so_far))
        cancel.raise_if_cancelled()
        content: list[dict[str, JSON]] = []
        if text:
            content.append({"type": "text", "text": text})
        for i, (name, args) in enumerate(calls):
            seq_part = idempotency_key.rsplit(":", 1)[-1]
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_demo_{seq_part}_{i}",
                    "name": name,
                    "input": args,
                }
            )
        usage = Usage(
            input_tokens=_approx_tokens(request),
            output_tokens=max(1, len(text) // 4 + 20 * len(calls)),
        )
        return ModelResponse(
            content=content,
            stop_reason="tool_use" if calls else "end_turn",
            usage=usage,
            cost_usd=model_info(DEMO_MODEL).cost(usage),
            model=DEMO_MODEL,
        )

    def _decide(self, request: ModelRequest) -> tuple[str, list[tuple[str, dict[str, JSON]]]]:
        h = _History(request.messages)
        tools = {str(t.get("name")) for t in request.tools}
        if request.messages and "compacted" in str(request.messages[0]):
            pass
        if not h.called("list_files"):
            calls: list[tuple[str, dict[str, JSON]]] = []
            if "update_plan" in tools:
                calls.append(("update_plan", {"items": _plan(0)}))
            calls.append(("list_files", {"path": "."}))
            return (
                "I'll plan the work, then survey the sources in the workspace.",
                calls,
            )
        sources = _sources(h.result_of("list_files") or "")
        unread = [s for s in sources if not h.called("read_file", path=s)]
        # Note the source read last, if not noted yet.
        calls = []
        last_read = next((c for c in reversed(h.calls) if c.get("name") == "read_file"), None)
        if last_read is not None:
            path = str((last_read.get("input") or {}).get("path"))
            noted = any(
                c.get("name") == "append_note" and path in str((c.get("input") or {}).get("text"))
                for c in h.calls
            )
            if not noted:
                gist = _gist(h.result_of("read_file", path=path) or "")
                calls.append(("append_note", {"path": NOTES, "text": f"- **{path}**: {gist}\n"}))
        if unread:
            calls.append(("read_file", {"path": unread[0]}))
            done = len(sources) - len(unread)
            return (f"Reading source {done + 1} of {len(sources)}: {unread[0]}.", calls)
        if calls:
            return ("Noting the last source.", calls)
        notes = {s: _gist(h.result_of("read_file", path=s) or "") for s in sources}
        if not h.called("write_file", path=REPORT):
            plan = [("update_plan", {"items": _plan(3)})] if "update_plan" in tools else []
            return (
                f"All {len(sources)} sources are read. Drafting the report.",
                [*plan, ("write_file", {"path": REPORT, "content": _report(h.goal, notes, False)})],
            )
        writes = [c for c in h.calls if c.get("name") == "write_file"]
        if len(writes) < 2:
            return (
                "Revising the report with conclusions; this overwrites the draft.",
                [("write_file", {"path": REPORT, "content": _report(h.goal, notes, True)})],
            )
        final = (
            f"Done. I read {len(sources)} source(s), kept notes in {NOTES} and wrote the "
            f"report to {REPORT}."
        )
        plan = [("update_plan", {"items": _plan(5)})] if "update_plan" in tools else []
        if plan and not h.called("update_plan", items=_plan(5)):
            return ("Marking the plan complete.", plan)
        return (final, [])


def _plan(done: int) -> list[dict[str, JSON]]:
    steps = [
        "Survey the workspace",
        "Read each source",
        "Take notes",
        "Draft the report",
        "Revise and finalize",
    ]
    return [{"text": s, "done": i < done} for i, s in enumerate(steps)]


def _report(goal: str, notes: Mapping[str, str], final: bool) -> str:
    lines = [f"# {goal or 'Research report'}", "", "_Written by the offline demo model._", ""]
    lines += ["## Sources", ""]
    lines += [f"- **{src}**: {gist}" for src, gist in notes.items()] or ["- (no readable sources)"]
    if final:
        lines += [
            "",
            "## Conclusions",
            "",
            f"{len(notes)} source(s) were reviewed. Each is summarised above in one sentence; "
            f"see {NOTES} for the running notes.",
        ]
    else:
        lines += ["", "_Draft: conclusions to follow._"]
    return "\n".join(lines) + "\n"


def _approx_tokens(request: ModelRequest) -> int:
    size = len(request.system) + sum(len(str(m.get("content", ""))) for m in request.messages)
    size += sum(len(str(t)) for t in request.tools)
    return max(1, size // 4)
