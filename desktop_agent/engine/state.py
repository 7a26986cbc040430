"""The agent's working state as a fold over its journal.

Two parts, so that snapshots stay small and storage linear in the number of steps:

* ``Scalars``: totals, plan and flags, snapshotted every few steps;
* ``Conversation``: the messages sent to the model, projected from the step records of the
  current context window (after the last compaction); never snapshotted, because the step
  records already hold every message body once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from desktop_agent.domain import JSON, Step, StepKind, StepStatus, Usage
from desktop_agent.domain.errors import NondeterminismError

CONTROL_WAIT_KINDS = frozenset(
    {StepKind.APPROVAL, StepKind.SLEEP, StepKind.BUDGET, StepKind.QUESTION}
)
"""Step kinds that are a wait, not an effect: a started one is a hibernating run."""

TOOL_USE_KINDS = frozenset(
    {StepKind.TOOL_CALL, StepKind.APPROVAL, StepKind.SLEEP, StepKind.QUESTION}
)
"""Step kinds that answer a tool use of the model."""


@dataclass
class Scalars:
    """Totals and working memory, cheap to snapshot."""

    last_seq: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    plan: list[dict[str, JSON]] = field(default_factory=list)
    window_start_seq: int = 1
    summary: str = ""
    stopped: bool = False
    last_prompt_tokens: int = 0
    consecutive_failures: int = 0
    cost_by_model: dict[str, float] = field(default_factory=dict)
    last_message_id: str = ""
    tools: list[dict[str, JSON]] | None = None
    """The tool definitions the run's first model call sent, sent unchanged ever after."""
    uploads: dict[str, str] = field(default_factory=dict)
    """Files the model port uploaded for the run (and the runs it was forked from): the
    file id of each SHA-256, from the model steps' ``documents`` and the uploads into the
    code execution container (``api.uploads``); the latest wins."""
    container: dict[str, JSON] = field(default_factory=dict)
    """The run's code execution container, from its latest model step that had one
    (``api.container``: ``id`` and ``expires_at`` in epoch seconds, and the ``run_id`` of
    the step, a fork's parent for a container its prefix had); empty before."""

    def to_json(self) -> dict[str, JSON]:
        """Plain dict for a snapshot."""
        return {
            "last_seq": self.last_seq,
            "usage": self.usage.to_json(),
            "cost_usd": self.cost_usd,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "plan": self.plan,
            "window_start_seq": self.window_start_seq,
            "summary": self.summary,
            "stopped": self.stopped,
            "last_prompt_tokens": self.last_prompt_tokens,
            "consecutive_failures": self.consecutive_failures,
            "cost_by_model": self.cost_by_model,
            "last_message_id": self.last_message_id,
            "tools": self.tools,
            "uploads": dict(self.uploads),
            "container": dict(self.container),
        }

    @classmethod
    def from_json(cls, data: JSON) -> Scalars:
        """Inverse of :meth:`to_json`."""
        return cls(
            last_seq=int(data["last_seq"]),
            usage=Usage.from_json(data.get("usage")),
            cost_usd=float(data.get("cost_usd", 0.0)),
            model_calls=int(data.get("model_calls", 0)),
            tool_calls=int(data.get("tool_calls", 0)),
            plan=list(data.get("plan", [])),
            window_start_seq=int(data.get("window_start_seq", 1)),
            summary=str(data.get("summary", "")),
            stopped=bool(data.get("stopped", False)),
            last_prompt_tokens=int(data.get("last_prompt_tokens", 0)),
            consecutive_failures=int(data.get("consecutive_failures", 0)),
            cost_by_model=dict(data.get("cost_by_model", {})),
            last_message_id=str(data.get("last_message_id", "") or ""),
            tools=list(data["tools"]) if isinstance(data.get("tools"), list) else None,
            uploads=dict(data["uploads"]) if isinstance(data.get("uploads"), dict) else {},
            container=dict(data["container"]) if isinstance(data.get("container"), dict) else {},
        )


@dataclass
class Conversation:
    """Messages of the current context window and the tool uses still unanswered."""

    goal: str
    summary: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    finished: bool = False
    final_text: str = ""
    message_seqs: list[int] = field(default_factory=list)
    uploads: dict[str, str] = field(default_factory=dict)
    """The run's uploads (:attr:`Scalars.uploads`, the same dict, see :class:`AgentState`)."""

    def __post_init__(self) -> None:
        if not self.messages:
            text = f"Goal: {self.goal}"
            if self.summary:
                text += (
                    "\n\nSummary of the work so far (older turns were compacted):\n" + self.summary
                )
            self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
            self.message_seqs = [0]

    def request_messages(self) -> list[dict[str, Any]]:
        """The messages to send with the next model call (outbox flushed).

        A new list holding the same message objects: copying every message before every
        call would make each step cost as much as the whole conversation. Model ports
        treat requests as read-only (see ``ModelPort.complete``).
        """
        msgs = list(self.messages)
        if self.outbox:
            msgs.append({"role": "user", "content": _ordered(self.outbox)})
        return with_file_ids(msgs, self.uploads)

    def add_result(
        self,
        tool_use_id: str,
        content: str,
        *,
        is_error: bool,
        document: dict[str, Any] | None = None,
    ) -> None:
        """Answer a pending tool use.

        ``document``: the descriptor of a file the tool read (see ``tools/documents.py``),
        kept in the block under ``document`` for the model port, which sends it as a
        document to a model that reads one and never sends the key itself.
        """
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": content,
            "is_error": is_error,
        }
        if document is not None:
            block["document"] = document
        self.outbox.append(block)
        self.pending = [p for p in self.pending if p["id"] != tool_use_id]


def with_file_ids(messages: list[dict[str, Any]], uploads: dict[str, str]) -> list[dict[str, Any]]:
    """``messages`` with each document descriptor naming its upload, if the journal has one.

    The journal (the run's model steps, and those of the runs it was forked from) says
    which file id holds each file (by SHA-256), so a file is uploaded once per run and its
    forks, and every request names it the same way. Messages with a descriptor to change
    are copied; the others (and the conversation) are left as they are.
    """
    if not uploads:
        return messages
    out = messages
    for i, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        blocks = None
        for j, block in enumerate(content):
            document = block.get("document") if isinstance(block, dict) else None
            if not isinstance(document, dict):
                continue
            file_id = uploads.get(str(document.get("sha256")))
            if file_id is None or document.get("file_id") == file_id:
                continue
            blocks = blocks if blocks is not None else list(content)
            blocks[j] = {**block, "document": {**document, "file_id": file_id}}
        if blocks is not None:
            out = out if out is not messages else list(messages)
            out[i] = {**message, "content": blocks}
    return out


def _ordered(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results first: the Messages API requires them before any text."""
    results = [b for b in blocks if b.get("type") == "tool_result"]
    others = [b for b in blocks if b.get("type") != "tool_result"]
    # Blocks are shared, not copied: nothing mutates a block once it is in the journal.
    return results + others


@dataclass
class AgentState:
    """Both halves of the fold, plus the goal."""

    scalars: Scalars
    conversation: Conversation

    def __post_init__(self) -> None:
        # The conversation names uploads from the totals' table (snapshotted with them).
        self.conversation.uploads = self.scalars.uploads

    @classmethod
    def initial(cls, goal: str) -> AgentState:
        """The state of a run with an empty journal."""
        return cls(Scalars(), Conversation(goal=goal))


def apply_conversation(conv: Conversation, step: Step) -> None:
    """Project one finished step onto the conversation, checking it fits.

    Each kind of step has its projection (:data:`PROJECTIONS`); kinds without one (a
    budget, a report, an error) leave the conversation as it is.

    Raises:
        NondeterminismError: the step does not answer what the conversation expects.
    """
    if step.status == StepStatus.STARTED:
        return
    if step.kind in TOOL_USE_KINDS:
        _check_answers_pending(conv, step)
    project = PROJECTIONS.get(step.kind)
    if project is not None:
        project(conv, step)


def _project_model_call(conv: Conversation, step: Step) -> None:
    """The model's answer: its turn, the tool uses it asks for, or the end of the work."""
    if step.status != StepStatus.COMPLETED:
        return
    if conv.pending:
        raise NondeterminismError(
            f"step {step.seq}: a model call was recorded while tool use "
            f"{conv.pending[0]['id']} was still unanswered"
        )
    out = step.output or {}
    if conv.outbox:
        conv.messages.append({"role": "user", "content": _ordered(conv.outbox)})
        conv.message_seqs.append(step.seq)
        conv.outbox = []
    content = list(out.get("content", []))
    conv.messages.append(_assistant(content, out.get("model")))
    conv.message_seqs.append(step.seq)
    conv.pending = [b for b in content if b.get("type") == "tool_use"]
    if conv.pending:
        return
    stop = str(out.get("stop_reason", "end_turn"))
    if stop == "max_tokens":
        conv.outbox.append(
            {
                "type": "text",
                "text": "(Your last answer was cut off at the output limit. Continue.)",
            }
        )
    elif stop != "pause_turn":
        conv.finished = True
        conv.final_text = "\n".join(
            str(b.get("text", "")) for b in content if b.get("type") == "text"
        ).strip()


def _assistant(content: list[dict[str, Any]], model: Any) -> dict[str, Any]:
    """An assistant turn, labelled with the model that wrote it.

    The label is not sent (the model port removes it): it tells the port whose thinking
    blocks the turn holds, since a model is bound to its own blocks.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if isinstance(model, str) and model:
        message["model"] = model
    return message


def _project_tool_result(conv: Conversation, step: Step) -> None:
    """A tool call, a timer or a question: the answer to the tool use it was for."""
    out = step.output or {}
    tool_use_id = str((step.input or {}).get("tool_use_id"))
    if step.status == StepStatus.FAILED:
        conv.add_result(tool_use_id, step.error or "the tool failed", is_error=True)
    else:
        data = out.get("data")
        found = data.get("document") if isinstance(data, dict) else None
        is_error = bool(out.get("is_error"))
        document = {**found, "seq": step.seq} if isinstance(found, dict) and not is_error else None
        conv.add_result(
            tool_use_id, str(out.get("content", "")), is_error=is_error, document=document
        )


def _project_approval(conv: Conversation, step: Step) -> None:
    """The analyst's decisions: kept for the calls they allow, results for those refused."""
    for decision in (step.output or {}).get("decisions", []):
        tool_use_id = str(decision["tool_use_id"])
        conv.decisions[tool_use_id] = dict(decision)
        if decision["state"] in ("rejected", "expired_rejected"):
            note = decision.get("note") or "no reason given"
            conv.add_result(
                tool_use_id,
                f"The analyst rejected this call. Reason: {note}",
                is_error=True,
            )


def _project_note(conv: Conversation, step: Step) -> None:
    """A note from the analyst, sent with the next model call."""
    text = str((step.input or {}).get("text", ""))
    conv.outbox.append(
        {"type": "text", "text": f"[Note from the analyst, sent while you worked]: {text}"}
    )
    # A note after a final answer reopens the conversation.
    if conv.finished:
        conv.finished = False


def _project_compaction(conv: Conversation, step: Step) -> None:
    """A summary that replaces the older turns."""
    if step.status != StepStatus.COMPLETED:
        return
    out = step.output or {}
    block = out.get("compaction_block")
    keep = int(out.get("keep_messages", 0))
    if isinstance(block, dict):
        _swap_in(conv, block, keep, str(out.get("plan_note", "")))
    elif out.get("mode") != "none":
        _compact(conv, str(out.get("summary", "")), keep)


PROJECTIONS: dict[StepKind, Callable[[Conversation, Step], None]] = {
    StepKind.MODEL_CALL: _project_model_call,
    StepKind.TOOL_CALL: _project_tool_result,
    StepKind.SLEEP: _project_tool_result,
    StepKind.QUESTION: _project_tool_result,
    StepKind.APPROVAL: _project_approval,
    StepKind.STEER: _project_note,
    StepKind.COMPACTION: _project_compaction,
}
"""How a finished step of each kind changes the conversation."""


def _compact(conv: Conversation, summary: str, keep_messages: int) -> None:
    """Replace all but the newest ``keep_messages`` messages with a summary of our own.

    The kept turns lose their thinking blocks: each was bound to the messages before it,
    which the summary replaced, so the API would refuse them (preserved thinking's prefix
    check). Their text, tool uses and results stay as they were.
    """
    cut = len(conv.messages) - keep_messages if keep_messages else len(conv.messages)
    fresh = Conversation(goal=conv.goal, summary=summary)
    conv.summary = summary
    conv.messages = fresh.messages + [_without_thinking(m) for m in conv.messages[cut:]]
    conv.message_seqs = fresh.message_seqs + conv.message_seqs[cut:]


def _without_thinking(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return message
    kept = [b for b in content if b.get("type") not in ("thinking", "redacted_thinking")]
    return message if len(kept) == len(content) else {**message, "content": kept}


def _swap_in(conv: Conversation, block: dict[str, Any], keep_messages: int, note: str) -> None:
    """The API's signed summary takes the place of the messages it summarized.

    The kept turns stay exactly as they were, thinking included: the API reads the block
    as the prefix it stands for. What must outlive the summary (the plan) goes into the
    next message, never into the turns already sent.
    """
    cut = len(conv.messages) - keep_messages if keep_messages else len(conv.messages)
    conv.summary = str(block.get("content") or "")
    conv.messages = [{"role": "assistant", "content": [block]}, *conv.messages[cut:]]
    conv.message_seqs = [0, *conv.message_seqs[cut:]]
    if note:
        conv.outbox.append({"type": "text", "text": note})


def check_open_step(conv: Conversation, step: Step) -> None:
    """Check that an open step is the one the conversation calls for next.

    Raises:
        NondeterminismError: it is not.
    """
    if step.kind in TOOL_USE_KINDS:
        _check_answers_pending(conv, step)
    elif step.kind in (StepKind.MODEL_CALL, StepKind.COMPACTION) and conv.pending:
        raise NondeterminismError(
            f"step {step.seq} is a model call, but tool use {conv.pending[0]['id']} "
            "is still unanswered"
        )


def _check_answers_pending(conv: Conversation, step: Step) -> None:
    data = step.input or {}
    ids = [str(r["tool_use_id"]) for r in data.get("requests", [])] or [
        str(data.get("tool_use_id"))
    ]
    pending_ids = {p["id"]: p for p in conv.pending}
    for tool_use_id in ids:
        if tool_use_id not in pending_ids:
            raise NondeterminismError(
                f"step {step.seq} ({step.kind} {step.name}) answers tool use {tool_use_id}, "
                "which the conversation does not have pending"
            )
        if step.kind != StepKind.APPROVAL and pending_ids[tool_use_id]["name"] != step.name:
            raise NondeterminismError(
                f"step {step.seq}: journal has tool {step.name!r} where the model asked for "
                f"{pending_ids[tool_use_id]['name']!r}"
            )


def apply_scalars(sc: Scalars, step: Step) -> None:
    """Fold one step into the totals and working memory."""
    sc.last_seq = max(sc.last_seq, step.seq)
    if step.status == StepStatus.STARTED:
        return
    sc.usage = sc.usage + step.usage + step.salvaged_usage
    sc.cost_usd += step.cost_usd + step.salvaged_cost_usd
    out = step.output if isinstance(step.output, dict) else {}
    if step.kind in (StepKind.MODEL_CALL, StepKind.COMPACTION):
        _fold_model_step(sc, step, out)
    elif step.kind == StepKind.TOOL_CALL:
        sc.tool_calls += 1
        data = out.get("data")
        if step.name == "update_plan" and isinstance(data, dict):
            sc.plan = list(data.get("plan", []))
    if step.kind == StepKind.COMPACTION and step.status == StepStatus.COMPLETED:
        sc.window_start_seq = int(out.get("window_start_seq", sc.window_start_seq))
        sc.summary = str(out.get("summary", ""))
        # The summary call's own prompt says nothing of the compacted one: unknown until
        # the next call measures it (as the live state after a compaction has it).
        sc.last_prompt_tokens = 0
    if step.kind == StepKind.BUDGET and out.get("action") == "stop":
        sc.stopped = True
    if step.kind == StepKind.REPORT:
        # The stop asked for has happened; a resumed run goes on from here.
        sc.stopped = False


def _fold_model_step(sc: Scalars, step: Step, out: dict[str, Any]) -> None:
    """What a finished model call or compaction adds to the totals.

    Spend, counts and the prompt's size; a model call also its answer's id and, for the
    first one, the run's tool definitions.
    """
    if step.cost_usd or step.salvaged_cost_usd:
        model = str(out.get("model") or step.name)
        spent = step.cost_usd + step.salvaged_cost_usd
        sc.cost_by_model[model] = sc.cost_by_model.get(model, 0.0) + spent
    if step.status == StepStatus.COMPLETED:
        sc.model_calls += 1
        sc.consecutive_failures = 0
        u = step.usage
        sc.last_prompt_tokens = (
            u.input_tokens + u.cache_read_tokens + u.cache_write_tokens + u.output_tokens
        )
    else:
        sc.consecutive_failures += 1
    if step.kind != StepKind.MODEL_CALL:
        return
    sent = (step.input or {}).get("tools")
    if sc.tools is None and isinstance(sent, list):
        sc.tools = sent
    api = out.get("api")
    if step.status == StepStatus.COMPLETED and isinstance(api, dict) and api.get("message_id"):
        sc.last_message_id = str(api["message_id"])
    files = [*(out.get("documents") or [])]
    if isinstance(api, dict):
        files += api.get("uploads") or []
        if isinstance(api.get("container"), dict) and api["container"].get("id"):
            # Whose it is: a fork folds its parent's steps (with the parent's run id) and
            # must not write into the parent's container.
            sc.container = {**api["container"], "run_id": step.run_id}
    for document in files:
        if isinstance(document, dict) and document.get("file_id") and document.get("sha256"):
            sc.uploads[str(document["sha256"])] = str(document["file_id"])


def apply_step(state: AgentState, step: Step) -> None:
    """Fold one step into both halves of the state."""
    apply_conversation(state.conversation, step)
    apply_scalars(state.scalars, step)
    state.conversation.uploads = state.scalars.uploads
