"""Compaction: older turns of the conversation replaced by a summary the model writes.

The summary is a model call of its own, recorded as a ``compaction`` step (streamed and
saved as any model call, see :mod:`desktop_agent.engine.model_calls`). Two ways, both
keeping the conversation append-only as preserved thinking requires (a thinking block is
bound to everything before it):

* **on the server**, where the model's port says the API can (``compacts_on_server``): the
  older messages are sent as they are with ``compaction``; the API answers with one signed
  ``compaction`` block that takes their place, and the kept turns stay byte-identical,
  thinking included;
* **our own summary** elsewhere: the model writes it as text after the older messages; it
  becomes the first message, and the kept turns lose their thinking blocks (their prefix
  is gone).
"""

from __future__ import annotations

from desktop_agent.domain import JSON, StepKind, StepStatus
from desktop_agent.engine import budget as budgets
from desktop_agent.engine.model_calls import stream_model
from desktop_agent.engine.ports import ModelRequest, StepIntent, StepOutcome
from desktop_agent.engine.recording import commit, finish_step
from desktop_agent.engine.request import (
    build_request,
    cache_ttl,
    container,
    has_code_execution,
    run_tools,
    with_goal_files,
)
from desktop_agent.engine.run_state import RunState

SUMMARY_PROMPT = (
    "Summarize the work so far for your own later use: what was found (with sources and "
    "file names), what was decided, what is still to do. Be complete but concise; this "
    "summary replaces the older turns of the conversation."
)


NEAR = 0.8
"""An estimate this close to a limit is checked with an exact count before it decides."""


def needs_compaction(rs: RunState) -> bool:
    """Whether the next prompt comes close enough to the context window to compact.

    The last call's measured prompt decides; when it is within a fifth of the threshold,
    the next prompt (with the results since) is counted exactly, so that one large tool
    result cannot push the next call past the window unnoticed.
    """
    sc = rs.state.scalars
    conv = rs.state.conversation
    if sc.last_prompt_tokens <= 0 or len(conv.messages) <= rs.cfg.keep_recent_messages + 2:
        return False
    model = rs.model_for(rs.run.spec.model)
    threshold = rs.cfg.compaction_threshold * model.context_window(rs.run.spec.model)
    if sc.last_prompt_tokens >= threshold:
        return True
    if sc.last_prompt_tokens < NEAR * threshold:
        return False
    exact = model.count_tokens(build_request(rs))
    return exact is not None and exact >= threshold


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
    spec = rs.run.spec
    model = rs.model_for(spec.model)
    on_server = model.compacts_on_server(spec.model)
    older = conv.messages[:cut]
    if older and older[-1]["role"] == "assistant":
        older = older[:-1]
    # The same first message as every model call's (its prefix, and the files it names).
    tools = run_tools(rs)
    older = with_goal_files(rs, list(older), tools)
    if on_server:
        messages = list(older)
    else:
        prompt = {"role": "user", "content": [{"type": "text", "text": SUMMARY_PROMPT}]}
        messages = [*older, prompt]
    request = ModelRequest(
        model=spec.model,
        system=spec.system_prompt,
        messages=messages,
        tools=tools,
        max_tokens=min(spec.max_tokens, 4096),
        thinking_budget=spec.thinking_budget,
        effort=spec.effort,
        cache_ttl=cache_ttl(rs),
        compaction=on_server,
        workspace=str(rs.run.workspace),
        container=container(rs) if has_code_execution(tools) else None,
    )
    seq = open_seq if open_seq is not None else rs.next_seq
    input_ = {"summarized_messages": len(older), "kept_messages": len(conv.messages) - cut}
    if open_seq is None:
        commit(
            rs,
            intents=[StepIntent(seq=seq, kind=StepKind.COMPACTION, name=spec.model, input=input_)],
        )
    response = stream_model(rs, seq, StepKind.COMPACTION, input_, request, model)
    window_start = conv.message_seqs[cut] if cut < len(conv.message_seqs) else seq
    output: dict[str, JSON] = {
        "keep_messages": len(conv.messages) - cut,
        "window_start_seq": window_start,
        "model": response.model,
    }
    block = _compaction_block(response.content)
    plan = _plan_text(rs)
    if block is not None:
        output |= {
            "mode": "server",
            "compaction_block": block,
            "summary": str(block.get("content") or ""),
            "plan_note": f"(Context was compacted.) Goal: {conv.goal}" + plan,
        }
    else:
        text = "\n".join(
            str(b.get("text", "")) for b in response.content if b.get("type") == "text"
        ).strip()
        # A server compaction that returned no summary changes nothing (the API treats
        # an empty block as a no-op); our own summary replaces the older turns.
        output |= {"mode": "none" if on_server else "client", "summary": text + plan}
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
    budgets.release_on_commit(rs)  # dropped once the next commit writes the cost
    rs.state.scalars.last_prompt_tokens = 0


def _compaction_block(content: list[dict[str, JSON]]) -> dict[str, JSON] | None:
    """The API's signed summary, when it wrote one with a text."""
    for block in content:
        if block.get("type") == "compaction" and block.get("content"):
            return dict(block)
    return None


def _plan_text(rs: RunState) -> str:
    """The plan, which is working memory: it outlives the turns it was written in."""
    plan = rs.state.scalars.plan
    if not plan:
        return ""
    return "\n\nYour plan (update it with update_plan):\n" + "\n".join(
        f"- [{'x' if i.get('done') else ' '}] {i.get('text')}" for i in plan
    )
