"""The partial-results report written when a run is stopped or cancelled."""

from __future__ import annotations

from desktop_agent.engine.run_state import RunState

# --------------------------------------------------------------------------- reports


def partial_report_text(rs: RunState, why: str) -> str:
    """A Markdown report of what the run achieved before it was stopped."""
    sc = rs.state.scalars
    conv = rs.state.conversation
    lines = [
        f"# Partial report: {rs.run.goal}",
        "",
        f"*{why}.* Run `{rs.run.id}`, {sc.model_calls} model calls, {sc.tool_calls} tool calls, "
        f"${sc.cost_usd:.4f} spent.",
        "",
    ]
    if sc.plan:
        lines += ["## Plan", ""]
        lines += [f"- [{'x' if i.get('done') else ' '}] {i.get('text')}" for i in sc.plan]
        lines.append("")
    if conv.summary:
        lines += ["## Summary of earlier work", "", conv.summary, ""]
    texts = []
    for msg in conv.messages:
        if msg["role"] != "assistant":
            continue
        for block in msg["content"]:
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                texts.append(str(block["text"]).strip())
    if texts:
        lines += ["## What the agent wrote", ""]
        lines += [f"- {t}" for t in texts[-20:]]
        lines.append("")
    tools_used: dict[str, int] = {}
    for msg in conv.messages:
        for block in msg["content"] if msg["role"] == "assistant" else []:
            if block.get("type") == "tool_use":
                tools_used[str(block["name"])] = tools_used.get(str(block["name"]), 0) + 1
    if tools_used:
        lines += ["## Tools used", ""]
        lines += [f"- {n}: {c}" for n, c in sorted(tools_used.items())]
    return "\n".join(lines).rstrip() + "\n"


def write_partial_report(rs: RunState, why: str) -> str:
    """Write the partial report into the workspace; return its file name."""
    name = f"partial-report-{rs.run.id}.md"
    workspace = rs.workspace
    try:
        workspace.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(partial_report_text(rs, why), encoding="utf-8")
    except OSError as exc:
        return f"(not written: {exc})"
    return name
