"""The model is told of the attachments in its first turn, the same way at every turn."""

from __future__ import annotations

from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.domain.models import Attachment
from desktop_agent.engine.attachments import with_attachments
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel


def test_the_first_user_message_names_each_file_with_its_path_and_size(
    client: Client, sources: tuple[Path, Path], tmp_path: Path, make_executor: MakeExecutor
) -> None:
    run = client.start_run(
        "Summarise what I attached",
        model="demo",
        workspace=tmp_path / "ws",
        tools=["read_file"],
        attachments=list(sources),
    )
    model = ScriptedModel(
        [Reply("Reading.", [("read_file", {"path": "attachments/data.csv"})]), Reply("Done.")]
    )
    drain(client.store, make_executor(model))
    assert client.run(run.id).status == RunStatus.COMPLETED
    first, second = model.requests
    goal, note = first.messages[0]["content"]
    assert goal["text"] == "Goal: Summarise what I attached"
    assert note["text"].splitlines() == [
        "The analyst attached these files; copies are in the workspace (read them with "
        "read_file, paths relative to the workspace):",
        "- attachments/report.pdf (1.0 KB)",
        "- attachments/data.csv (32 bytes)",
    ]
    assert second.messages[0] == first.messages[0]  # the prefix never changes
    result = second.messages[-1]["content"][0]
    assert result["type"] == "tool_result" and "north,12" in str(result["content"])


def test_a_run_without_attachments_sends_the_goal_alone(
    client: Client, make_executor: MakeExecutor
) -> None:
    client.start_run("Just think", model="demo", tools=[])
    model = ScriptedModel([Reply("Thought.")])
    drain(client.store, make_executor(model))
    assert model.requests[0].messages[0]["content"] == [
        {"type": "text", "text": "Goal: Just think"}
    ]


def test_a_conversation_opening_with_a_compaction_block_is_left_alone() -> None:
    messages = [{"role": "assistant", "content": [{"type": "compaction", "content": "sum"}]}]
    kept = (Attachment("a.csv", "attachments/a.csv", 3, "0" * 64),)
    assert with_attachments(messages, kept, first_is_goal=False) is messages
    goal = [{"role": "user", "content": [{"type": "text", "text": "Goal: x"}]}]
    added = with_attachments(goal, kept, first_is_goal=True)
    assert goal[0]["content"] == [{"type": "text", "text": "Goal: x"}]  # not changed in place
    assert "attachments/a.csv (3 bytes)" in added[0]["content"][1]["text"]
