"""A real worker process driven by a scripted model that places one order by POST.

Run as ``python -m tests.restore.child_worker DB``. Everything but the model is the
production wiring (``build_executor``: the store, its effect ledger, the tools). The model
POSTs to the URL named in the goal; it finishes once the POST's result came back, or once
it is told that the run was restored from a backup (it then does not order again: a model
that reads the note, as a careful agent would).
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

RESTORED_NOTE = "This run's record was restored"
NOT_AGAIN = "Not placing the order again: the restore note says it may have happened."


def decide(request: ModelRequest) -> Reply:
    """POST to the URL in the goal; finish after its result, or after a restore note."""
    blocks = [
        block
        for msg in request.messages
        for block in (msg["content"] if isinstance(msg["content"], list) else [])
        if isinstance(block, dict)
    ]
    if any(b.get("type") == "tool_result" for b in blocks):
        return Reply("Order placed.")
    if any(RESTORED_NOTE in str(b.get("text", "")) for b in blocks):
        return Reply(NOT_AGAIN)
    goal = str(request.messages[0]["content"][0]["text"])
    match = re.search(r"https?://\S+", goal)
    assert match, goal
    return Reply("Placing the order.", [("http_post", {"url": match[0], "body": {"sku": "A1"}})])


def main(db: Path) -> None:
    settings = Settings.load(db)
    store = open_store(db, settings)
    model = ScriptedModel(decide)
    executor = build_executor(store, settings, model_for=lambda _name: model)
    # Backups are the test's to make (with the real CLI), at the moments it chooses.
    config = WorkerConfig(max_runs=4, until_idle=True, poll_s=0.02, backup_every_s=0)
    Worker(store, executor, config).run()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
