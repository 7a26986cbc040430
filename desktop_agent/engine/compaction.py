"""Compaction: older turns of the conversation replaced by a summary the model writes.

The summary is a model call of its own, recorded as a ``compaction`` step (streamed and
saved as any model call, see :mod:`desktop_agent.engine.model_calls`).
"""

from __future__ import annotations

from desktop_agent.domain import StepKind, StepStatus
from desktop_agent.engine.model_calls import stream_model
from desktop_agent.engine.ports import ModelRequest, StepIntent, StepOutcome
from desktop_agent.engine.recording import commit, finish_step
from desktop_agent.engine.request import tool_schemas
from desktop_agent.engine.run_state import RunState

SUMMARY_PROMPT = (
    "Summarize the work so far for your own later use: what was found (with sources and "
    "file names), what was decided, what is still to do. Be complete but concise; this "
    "summary replaces the older turns of the conversation."
)


def needs_compaction(rs: RunState) -> bool:
    """Whether the last prompt came close enough to the context window to compact."""
    sc = rs.state.scalars
    conv = rs.state.conversation
    if sc.last_prompt_tokens <= 0 or len(conv.messages) <= rs.cfg.keep_recent_messages + 2:
        return False
    window = rs.model_for(rs.run.spec.model).context_window(rs.run.spec.model)
    return sc.last_prompt_tokens >= rs.cfg.compaction_threshold * window


def _cut_index(rs: RunState) -> int:
    """Index of the first kept message: an assistant turn after the last compaction."""
    conv = rs.state.conversation
    start = max(1, len(conv.messages) - rs.cfg.keep_recent_messages)
    for i in range(start, len(conv.messages)):
        if conv.messages[i]["role"] == "assistant":
            return i
    return len(conv.messages)


def compaction(rs: RunState, open_seq: int | None, attempt: int) -> None:
    """Summarize older turns by a model call recorded as a ``compaction`` step."""
    conv = rs.state.conversation
    cut = _cut_index(rs)
    older = conv.messages[:cut]
    if older and older[-1]["role"] == "assistant":
        older = older[:-1]
    messages = [*older, {"role": "user", "content": [{"type": "text", "text": SUMMARY_PROMPT}]}]
    spec = rs.run.spec
    request = ModelRequest(
        model=spec.model,
        system=spec.system_prompt,
        messages=messages,
        tools=tool_schemas(rs),
        max_tokens=min(spec.max_tokens, 4096),
    )
    seq = open_seq if open_seq is not None else rs.next_seq
    input_ = {"summarized_messages": len(older), "kept_messages": len(conv.messages) - cut}
    if open_seq is None:
        commit(
            rs,
            intents=[StepIntent(seq=seq, kind=StepKind.COMPACTION, name=spec.model, input=input_)],
        )
    model = rs.model_for(spec.model)
    response = stream_model(rs, seq, StepKind.COMPACTION, input_, request, model)
    summary = "\n".join(
        str(b.get("text", "")) for b in response.content if b.get("type") == "text"
    ).strip()
    if rs.state.scalars.plan:  # the plan is working memory: it outlives the turns it was in
        summary += "\n\nYour plan (update it with update_plan):\n" + "\n".join(
            f"- [{'x' if i.get('done') else ' '}] {i.get('text')}" for i in rs.state.scalars.plan
        )
    window_start = conv.message_seqs[cut] if cut < len(conv.message_seqs) else seq
    output = {
        "summary": summary,
        "keep_messages": len(conv.messages) - cut,
        "window_start_seq": window_start,
        "model": response.model,
    }
    finish_step(
        rs,
        seq,
        StepKind.COMPACTION,
        spec.model,
        input_,
        StepOutcome(
            seq, StepStatus.COMPLETED, output, usage=response.usage, cost_usd=response.cost_usd
        ),
    )
    rs.state.scalars.last_prompt_tokens = 0
