"""Streaming model output to the journal, and compaction of older turns."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from desktop_agent.domain import (
    StepKind,
    StepStatus,
    Usage,
)
from desktop_agent.engine import sanitize
from desktop_agent.engine.control import tool_schemas
from desktop_agent.engine.ports import (
    ModelRequest,
    StepIntent,
    StepOutcome,
)

if TYPE_CHECKING:
    from desktop_agent.engine.loop import Activation

# --------------------------------------------------------------------------- streaming


class PartialStreamer:
    """Collects streamed text and persists it a few times a second."""

    def __init__(self, act: Activation, seq: int) -> None:
        self.act = act
        self.seq = seq
        self.parts: list[str] = []
        self.usage = Usage()
        self.cost_usd = 0.0
        self._last = time.monotonic()
        self._dirty = False
        self._usage_saved = False
        act.saved_spend[seq] = (Usage(), 0.0)  # a new attempt: its row holds nothing yet

    @property
    def text(self) -> str:
        """Everything streamed so far."""
        return "".join(self.parts)

    def on_text(self, delta: str) -> None:
        """Called by the model adapter for each text delta."""
        self.parts.append(sanitize.clean_text(delta))
        self._dirty = True
        if time.monotonic() - self._last >= self.act.cfg.partial_flush_s:
            self.flush()
            self.act.crash_point("mid_stream")

    def on_usage(self, usage: Usage, cost_usd: float) -> None:
        """Called by the model adapter with the usage and dollars spent so far."""
        self.usage = usage
        self.cost_usd = cost_usd
        self._dirty = True
        if not self._usage_saved:
            # The prompt is paid for as soon as the call starts: record it at once.
            self._usage_saved = True
            self.flush()

    def flush(self) -> None:
        """Persist the text streamed and the usage reported so far, if they changed."""
        if self._dirty:
            usage, cost_usd = self.usage, self.cost_usd
            self.act.store.save_partial(self.act.run.id, self.seq, self.text, usage, cost_usd)
            self.act.saved_spend[self.seq] = (usage, cost_usd)
            self._dirty = False
            self._last = time.monotonic()


# --------------------------------------------------------------------------- compaction

SUMMARY_PROMPT = (
    "Summarize the work so far for your own later use: what was found (with sources and "
    "file names), what was decided, what is still to do. Be complete but concise; this "
    "summary replaces the older turns of the conversation."
)


def needs_compaction(act: Activation) -> bool:
    """Whether the last prompt came close enough to the context window to compact."""
    sc = act.state.scalars
    conv = act.state.conversation
    if sc.last_prompt_tokens <= 0 or len(conv.messages) <= act.cfg.keep_recent_messages + 2:
        return False
    window = act.x.model_for(act.run.spec.model).context_window(act.run.spec.model)
    return sc.last_prompt_tokens >= act.cfg.compaction_threshold * window


def _cut_index(act: Activation) -> int:
    """Index of the first kept message: an assistant turn after the last compaction."""
    conv = act.state.conversation
    start = max(1, len(conv.messages) - act.cfg.keep_recent_messages)
    for i in range(start, len(conv.messages)):
        if conv.messages[i]["role"] == "assistant":
            return i
    return len(conv.messages)


def compaction(act: Activation, open_seq: int | None, attempt: int) -> None:
    """Summarize older turns by a model call recorded as a ``compaction`` step."""
    conv = act.state.conversation
    cut = _cut_index(act)
    older = conv.messages[:cut]
    if older and older[-1]["role"] == "assistant":
        older = older[:-1]
    messages = [*older, {"role": "user", "content": [{"type": "text", "text": SUMMARY_PROMPT}]}]
    spec = act.run.spec
    request = ModelRequest(
        model=spec.model,
        system=spec.system_prompt,
        messages=messages,
        tools=tool_schemas(act),
        max_tokens=min(spec.max_tokens, 4096),
    )
    seq = open_seq if open_seq is not None else act.next_seq
    input_ = {"summarized_messages": len(older), "kept_messages": len(conv.messages) - cut}
    if open_seq is None:
        act.commit(
            intents=[StepIntent(seq=seq, kind=StepKind.COMPACTION, name=spec.model, input=input_)]
        )
    model = act.x.model_for(spec.model)
    response = act.stream_model(seq, StepKind.COMPACTION, input_, request, model)
    summary = "\n".join(
        str(b.get("text", "")) for b in response.content if b.get("type") == "text"
    ).strip()
    if act.state.scalars.plan:  # the plan is working memory: it outlives the turns it was in
        summary += "\n\nYour plan (update it with update_plan):\n" + "\n".join(
            f"- [{'x' if i.get('done') else ' '}] {i.get('text')}" for i in act.state.scalars.plan
        )
    window_start = conv.message_seqs[cut] if cut < len(conv.message_seqs) else seq
    output = {
        "summary": summary,
        "keep_messages": len(conv.messages) - cut,
        "window_start_seq": window_start,
        "model": response.model,
    }
    act.finish_step(
        seq,
        StepKind.COMPACTION,
        spec.model,
        input_,
        StepOutcome(
            seq, StepStatus.COMPLETED, output, usage=response.usage, cost_usd=response.cost_usd
        ),
    )
    act.state.scalars.last_prompt_tokens = 0
