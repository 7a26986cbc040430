"""A real worker process driven by a scripted model: one http_post, then a final answer.

Run as ``python -m tests.approvals.child_worker DB``. Everything but the model is the
production wiring (``build_executor``), including ``DESKTOP_AGENT_CRASH_AT``, which makes
the process SIGKILL itself at a named point.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from desktop_agent.config import Settings
from desktop_agent.engine.ports import ModelRequest
from desktop_agent.worker.compose import build_executor, open_store
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.helpers.fakes import Reply, ScriptedModel


def decide(request: ModelRequest) -> Reply:
    """POST to the URL named in the goal; once a result came back, finish."""
    if any(
        block.get("type") == "tool_result"
        for msg in request.messages
        for block in msg["content"]
        if isinstance(block, dict)
    ):
        return Reply("Order placed.")
    goal = str(request.messages[0]["content"][0]["text"])
    match = re.search(r"https?://\S+", goal)
    assert match, goal
    return Reply("Placing the order.", [("http_post", {"url": match[0], "body": {"sku": "A1"}})])


def main(db: Path) -> None:
    settings = Settings.load(db)
    store = open_store(db, settings)
    model = ScriptedModel(decide)
    executor = build_executor(store, settings, model_for=lambda _name: model)
    # One run at a time, oldest first: with a crash point, each child leaves exactly one
    # run in doubt (after recovering the one its predecessor left).
    Worker(store, executor, WorkerConfig(max_runs=1, until_idle=True, poll_s=0.02)).run()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
