"""``desktop-agent inbox``: every run that needs the analyst, with the command that decides.

Three runs wait for three different things (a call to approve, a question, their own
budget), one goes on by itself and one is done; the inbox lists the three, oldest first,
each with its command, and those commands work as printed.
"""

from __future__ import annotations

import json
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, WaitReason
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import Reply, ScriptedModel
from tests.search.test_cli_search import cli

HAIKU = "claude-haiku-4-5"


def test_the_inbox_lists_what_needs_the_analyst_with_commands_that_work(
    client: Client, make_executor: MakeExecutor, workspace: Path
) -> None:
    assert cli(client.db_path, "inbox").stdout.startswith("Nothing needs you")

    (workspace / "report.md").write_text("an old draft\n")
    overwrite = ("write_file", {"path": "report.md", "content": "new"})
    approval = client.start_run("Overwrite", model=HAIKU, workspace=workspace)
    drain(client.store, make_executor(ScriptedModel([Reply("Write.", [overwrite])])))
    question = client.start_run("Ask", model=HAIKU, workspace=workspace)
    ask = ("ask_user", {"question": "Which year?"})
    drain(client.store, make_executor(ScriptedModel([Reply("Need input.", [ask])])))
    budget = client.start_run("Steps", model=HAIKU, workspace=workspace, max_steps=1)
    listing: tuple[str, dict[str, object]] = ("list_files", {})
    drain(client.store, make_executor(ScriptedModel([Reply("List.", [listing])])))
    done = client.start_run("Done", model=HAIKU, workspace=workspace)
    drain(client.store, make_executor(ScriptedModel([Reply("Done.")])))
    queued = client.start_run("Queued, goes on by itself", model=HAIKU)
    assert client.run(done.id).status == RunStatus.COMPLETED
    waits = [client.run(r.id).wait_reason for r in (approval, question, budget)]
    assert waits == [WaitReason.APPROVAL, WaitReason.HUMAN_INPUT, WaitReason.BUDGET]

    shown = cli(client.db_path, "inbox")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert text.startswith("3 runs need you:")
    assert done.id[:10] not in text and queued.id[:10] not in text
    order = [text.index(r.id[:10]) for r in (approval, question, budget)]
    assert order == sorted(order)  # oldest first
    (pending,) = client.approvals()
    assert "1 call to approve" in text and "write_file" in text
    assert f"$ desktop-agent approve {pending.id}" in text
    assert "a question: " in text and f'$ desktop-agent answer {question.id[:10]} "TEXT"' in text
    assert f"$ desktop-agent budget {budget.id[:10]} --add-steps 1" in text  # its step limit

    data = json.loads(cli(client.db_path, "inbox", "--json").stdout)
    assert [d["run"] for d in data] == [approval.id, question.id, budget.id]
    assert data[0]["approvals"][0]["id"] == pending.id

    # The commands work as printed.
    approved = cli(client.db_path, "approve", pending.id)
    assert approved.returncode == 0, approved.stderr
    answered = cli(client.db_path, "answer", question.id[:10], "2025")
    assert answered.returncode == 0, answered.stderr
    after = cli(client.db_path, "inbox").stdout
    assert after.startswith("1 run needs you (2 more you decided, which a worker applies")
    assert budget.id[:10] in after and question.id[:10] not in after
