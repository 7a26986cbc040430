"""A real worker process with a short lease, for the fencing tests.

Run as ``python -m tests.fencing.child_worker DB SCENARIO LEASE_S``. Everything but the
model is the production wiring (``build_executor``, ``Worker``); the lease is short so
that a frozen worker loses its run within seconds. Scenarios:

- ``mail``: a scripted model sends one e-mail (send_email, unsafe), then finishes.
- ``post``: a scripted model POSTs to the URL named in the goal (http_post), then
  finishes.
- ``claude``: the real Claude adapter (anthropic SDK) against the fake Messages API
  whose address is in ``ANTHROPIC_BASE_URL``.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

from desktop_agent.config import Settings
from desktop_agent.engine.ports import ModelPort, ModelRequest
from desktop_agent.worker.compose import build_executor, open_store
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.helpers.fakes import Reply, ScriptedModel

MAIL = {"to": ["boss@example.com"], "subject": "Q3 figures", "body": "Revenue grew 4%."}


def _answered(request: ModelRequest) -> bool:
    return any(
        block.get("type") == "tool_result"
        for msg in request.messages
        for block in msg["content"]
        if isinstance(block, dict)
    )


def mail(request: ModelRequest) -> Reply:
    """Send the e-mail; once its result came back, finish."""
    if _answered(request):
        return Reply("Mail sent.")
    return Reply("Sending the figures.", [("send_email", dict(MAIL))])


def post(request: ModelRequest) -> Reply:
    """POST to the URL in the goal; once its result came back, finish."""
    if _answered(request):
        return Reply("Order placed.")
    goal = str(request.messages[0]["content"][0]["text"])
    match = re.search(r"https?://\S+", goal)
    assert match, goal
    return Reply("Placing the order.", [("http_post", {"url": match[0], "body": {"sku": "A1"}})])


def model_port(scenario: str) -> ModelPort:
    """The model the scenario drives the run with."""
    if scenario == "claude":
        from desktop_agent.llm.claude import ClaudeModel, RetryPolicy

        return ClaudeModel(
            lambda: "sk-ant-api03-fencing-test",
            base_url=os.environ["ANTHROPIC_BASE_URL"],
            policy=RetryPolicy(backoff_s=0.01),
        )
    return ScriptedModel({"mail": mail, "post": post}[scenario])


def main(db: Path, scenario: str, lease_s: float) -> None:
    """Run a worker until no run is runnable."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = Settings.load(db)
    store = open_store(db, settings)
    model = model_port(scenario)
    executor = build_executor(store, settings, model_for=lambda _name: model)
    config = WorkerConfig(max_runs=1, until_idle=True, poll_s=0.02, lease_s=lease_s)
    Worker(store, executor, config).run()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
