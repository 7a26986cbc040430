"""Code execution as a run option, end to end: the container, the files, the price.

Every run here goes through the engine, the Claude adapter and the contract fake, which
issues containers, refuses one it never issued (or one that expired), takes
``container_upload`` blocks only with the tool, and serves the files the code wrote. The
version and shapes are the SDK 2.14's (``CodeExecutionTool20260521Param``, ``Container``,
``ContainerUploadBlockParam``, ``BashCodeExecutionOutputBlock``); the price is
``llm/pricing.py``'s (container time, five minutes at least).
"""

from __future__ import annotations

import dataclasses
import hashlib
import typing
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import CodeExecutionTool20260521Param

from desktop_agent.client.api import Client
from desktop_agent.client.server_tool_lines import server_tool_lines
from desktop_agent.client.stepkinds import facts_of, sections
from desktop_agent.domain import RunStatus, Step, StepKind
from desktop_agent.engine.builtin_tools import CODE_EXECUTION_VERSION, SERVER_TOOLS
from desktop_agent.engine.loop import EngineConfig
from desktop_agent.engine.ports import CancelToken, ModelRequest
from desktop_agent.llm import outputs
from desktop_agent.llm.pricing import CONTAINER_HOUR_USD, CONTAINER_MIN_S, model_info
from tests.conftest import MakeExecutor, drain
from tests.helpers import claude_contract as contract
from tests.helpers.fake_anthropic import FakeAnthropic, Raw, Reply, Stream, Text, ToolUse
from tests.llm.conftest import MakeModel, StartFake

MODEL = "claude-sonnet-5-5"
CSV = b"region,revenue\nnorth,10\nsouth,12\n"
MIN_PRICE = CONTAINER_MIN_S / 3600 * CONTAINER_HOUR_USD


class _CrashError(Exception):
    pass


def _bash(file_id: str | None, n: int = 0) -> list[Raw]:
    """A Bash use of the code execution tool and its result (naming the file it wrote)."""
    made = [{"type": "bash_code_execution_output", "file_id": file_id}] if file_id else []
    return [
        Raw({"type": "server_tool_use", "id": f"srvtoolu_b{n}", "name": "bash_code_execution",
             "input": {"command": "python3 sum.py > totals.csv"}}),
        Raw({"type": "bash_code_execution_tool_result", "tool_use_id": f"srvtoolu_b{n}",
             "content": {"type": "bash_code_execution_result", "stdout": "22\n", "stderr": "",
                         "return_code": 0, "content": made}}),
    ]  # fmt: skip


class Analyst:
    """A scripted agent: runs code (writing ``totals.csv``), updates its plan, then answers.

    Each code run makes a new file in the fake (as each real call would), so a call sent
    again after a crash names a new file id.
    """

    def __init__(self, fake_ref: list[FakeAnthropic], *, writes: bool = True) -> None:
        self.fake_ref = fake_ref
        self.writes = writes
        self.contents: list[bytes] = []

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        last = body["messages"][-1]
        answered = any(
            isinstance(b, dict) and b.get("type") == "tool_result"
            for b in last["content"]
            if isinstance(last["content"], list)
        )
        if answered:
            return Stream([Text("The totals are in outputs/totals.csv.")])
        file_id = None
        if self.writes:
            data = CSV + f"# call {index}\n".encode()
            self.contents.append(data)
            file_id = self.fake_ref[0].produce_file("totals.csv", data, "text/csv")
        plan = {"items": [{"text": "sum the regions", "done": True}]}
        return Stream([*_bash(file_id, index), ToolUse("update_plan", plan)])


def _start_fake(start_fake: StartFake, **kw: Any) -> tuple[FakeAnthropic, Analyst]:
    ref: list[FakeAnthropic] = []
    analyst = Analyst(ref, **kw)
    fake = start_fake(analyst)
    ref.append(fake)
    return fake, analyst


def _model_steps(client: Client, run_id: str) -> list[Step]:
    return [s for s in client.steps(run_id) if s.kind == StepKind.MODEL_CALL]


def _no_refusal(fake: FakeAnthropic) -> None:
    refused = [(r.status, r.error) for r in fake.requests if r.error is not None]
    assert refused == [], refused


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "sales.csv"
    path.write_bytes(CSV)
    return path


def _start(client: Client, tmp_path: Path, data_file: Path, **options: Any) -> str:
    return client.start_run(
        "Sum the revenue by region.",
        model=MODEL,
        workspace=tmp_path / "ws",
        attachments=[str(data_file)],
        code_execution=True,
        **options,
    ).id


# --------------------------------------------------------------------------- the version


def test_the_version_and_name_are_the_sdk_s() -> None:
    hints = typing.get_type_hints(CodeExecutionTool20260521Param, include_extras=True)
    assert typing.get_args(typing.get_args(hints["type"])[0]) == (CODE_EXECUTION_VERSION,)
    assert SERVER_TOOLS["code_execution"] == {
        "type": "code_execution_20260521",
        "name": "code_execution",
    }
    assert CODE_EXECUTION_VERSION in contract.CODE_EXECUTION_VERSIONS


# --------------------------------------------------------------------------- a whole run


def test_a_run_keeps_its_container_and_saves_what_the_code_wrote(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    tmp_path: Path,
    data_file: Path,
) -> None:
    fake, analyst = _start_fake(start_fake)
    run_id = _start(client, tmp_path, data_file)
    drain(client.store, make_executor(make_model(fake)))

    run = client.run(run_id)
    assert run.status == RunStatus.COMPLETED, run.status_message
    _no_refusal(fake)
    first, second = (r.body for r in fake.requests)
    # The tool goes on every request; the attachment into the container, by file id.
    assert {"type": "code_execution_20260521", "name": "code_execution"} in [
        {k: v for k, v in t.items() if k != "cache_control"} for t in first["tools"]
    ]
    (upload,) = [b for b in first["messages"][0]["content"] if b["type"] == "container_upload"]
    (file_id,) = [f for f, r in fake.files.items() if not r.downloadable]
    assert upload["file_id"] == file_id
    assert fake.files[file_id].filename == f"sales-{hashlib.sha256(CSV).hexdigest()[:8]}.csv"
    assert fake.uploads == [fake.files[file_id].filename]  # uploaded once for the run
    assert second["messages"][0] == first["messages"][0] | {
        "content": second["messages"][0]["content"]
    }
    # The first call starts a container; the second names it.
    assert "container" not in first
    (box,) = fake.containers
    assert second["container"] == box
    steps = _model_steps(client, run_id)
    assert steps[0].output["api"]["container"]["id"] == box
    assert steps[0].input["container"] == {"new": True}
    assert steps[1].input["container"] == {"id": box}
    # What the code wrote is in the workspace, listed with its checksum.
    (saved,) = steps[0].output["files"]
    assert saved["path"] == "outputs/totals.csv"
    assert saved["sha256"] == hashlib.sha256(analyst.contents[0]).hexdigest()
    assert saved["size"] == len(analyst.contents[0])
    assert (Path(run.workspace) / "outputs" / "totals.csv").read_bytes() == analyst.contents[0]
    # The step's details say it in words: container, time billed and price, the file.
    assert server_tool_lines(steps[0].input, steps[0].output) == [
        f"code execution container {box}",
        f"container time billed: 5 min, ${MIN_PRICE:.4f}",
        f"saved outputs/totals.csv ({len(analyst.contents[0])} bytes, "
        f"sha256 {saved['sha256'][:12]})",
    ]
    shown = {x.title: x.content for x in sections(facts_of(steps[0]))}
    assert "saved outputs/totals.csv" in str(shown["Anthropic's tools"])


def test_a_resumed_run_names_the_container_its_journal_holds(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    tmp_path: Path,
    data_file: Path,
) -> None:
    fake, _ = _start_fake(start_fake, writes=False)

    def crash(point: str) -> None:
        # In the second call: the first one's outcome (and its container) is committed.
        if point == "mid_stream" and len(fake.requests) == 2:
            raise _CrashError(point)

    run_id = _start(client, tmp_path, data_file)
    config = EngineConfig(crash_hook=crash, partial_flush_s=0.0, settings=client.settings)
    with pytest.raises(_CrashError):
        make_executor(make_model(fake), config=config).execute(run_id)
    # A new process: a new adapter that remembers nothing of the first.
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(run_id).status == RunStatus.COMPLETED, client.run(run_id).status_message
    _no_refusal(fake)
    (box,) = fake.containers
    assert [r.body.get("container") for r in fake.requests] == [None, box, box]


def test_an_expired_container_is_not_named_and_the_step_says_so(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    tmp_path: Path,
    data_file: Path,
) -> None:
    fake, _ = _start_fake(start_fake, writes=False)
    fake.container_ttl_s = -120.0  # each container expires as it is issued
    run_id = _start(client, tmp_path, data_file)
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(run_id).status == RunStatus.COMPLETED, client.run(run_id).status_message
    _no_refusal(fake)
    first, second = _model_steps(client, run_id)
    old = first.output["api"]["container"]["id"]
    assert "container" not in fake.requests[1].body
    assert second.input["container"] == {"new": True, "expired": old}
    assert second.output["api"]["container"]["id"] != old


def test_a_container_the_api_no_longer_has_is_replaced_once(
    start_fake: StartFake, make_model: MakeModel, tmp_path: Path
) -> None:
    fake = start_fake([Stream([Text("ok")])])
    request = ModelRequest(
        model=MODEL,
        system="s",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Goal: x"}]}],
        tools=[dict(SERVER_TOOLS["code_execution"])],
        max_tokens=1024,
        workspace=str(tmp_path),
        container="container_never_issued",
    )
    response = make_model(fake).complete(
        request, idempotency_key="r:1", on_text=lambda _t: None, cancel=CancelToken()
    )
    refused, answered = fake.requests
    assert refused.status == 400 and "container" in str(refused.error)
    assert answered.body.get("container") is None
    assert response.details["container"]["replaces"] == "container_never_issued"
    assert response.details["container"]["id"] in fake.containers


# --------------------------------------------------------------------------- files, crashes


def test_a_replayed_step_saves_its_file_under_the_same_name(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    tmp_path: Path,
    data_file: Path,
) -> None:
    fake, analyst = _start_fake(start_fake)

    def crash(point: str) -> None:
        # After the first answer (and its download), before its outcome is written.
        if point == "after_effect" and len(fake.requests) == 1:
            raise _CrashError(point)

    run_id = _start(client, tmp_path, data_file)
    config = EngineConfig(crash_hook=crash, partial_flush_s=0.0, settings=client.settings)
    with pytest.raises(_CrashError):
        make_executor(make_model(fake), config=config).execute(run_id)
    outputs_dir = tmp_path / "ws" / "outputs"
    assert sorted(p.name for p in outputs_dir.iterdir()) == ["totals.csv"]
    drain(client.store, make_executor(make_model(fake)))

    assert client.run(run_id).status == RunStatus.COMPLETED, client.run(run_id).status_message
    assert len(analyst.contents) == 2  # the call was sent again, and wrote again
    assert sorted(p.name for p in outputs_dir.iterdir()) == ["totals.csv"]
    (saved,) = _model_steps(client, run_id)[0].output["files"]
    assert saved["path"] == "outputs/totals.csv"
    assert (outputs_dir / "totals.csv").read_bytes() == analyst.contents[1]
    assert saved["sha256"] == hashlib.sha256(analyst.contents[1]).hexdigest()


def test_another_run_s_file_of_the_same_name_is_never_overwritten(tmp_path: Path) -> None:
    class Files:
        def __init__(self) -> None:
            self.with_streaming_response = self

        def retrieve_metadata(self, file_id: str) -> Any:
            return type("Meta", (), {"filename": "../totals.csv", "mime_type": "text/csv"})

        def download(self, file_id: str) -> Any:
            class Body:
                def __enter__(self) -> Any:
                    return self

                def __exit__(self, *exc: object) -> None:
                    return None

                def iter_bytes(self) -> list[bytes]:
                    return [file_id.encode()]

            return Body()

    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "totals.csv").write_text("the analyst's own")
    saved = outputs.save_outputs(Files(), str(tmp_path), "run:3", ["file_a", "file_b"])
    assert [s["path"] for s in saved] == ["outputs/totals-2.csv", "outputs/totals-3.csv"]
    assert (tmp_path / "outputs" / "totals.csv").read_text() == "the analyst's own"
    assert (tmp_path / "outputs" / "totals-3.csv").read_bytes() == b"file_b"
    # The same step again (a replay) writes to the same two paths, no new ones.
    again = outputs.save_outputs(Files(), str(tmp_path), "run:3", ["file_c", "file_d"])
    assert [s["path"] for s in again] == ["outputs/totals-2.csv", "outputs/totals-3.csv"]
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == [
        "totals-2.csv",
        "totals-3.csv",
        "totals.csv",
    ]


# --------------------------------------------------------------------------- price


def test_container_time_is_priced_per_step(
    start_fake: StartFake, make_model: MakeModel, tmp_path: Path
) -> None:
    fake = start_fake([Stream([*_bash(None), Text("22")])])
    request = ModelRequest(
        model=MODEL,
        system="s",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Goal: sum"}]}],
        tools=[dict(SERVER_TOOLS["code_execution"])],
        max_tokens=1024,
        workspace=str(tmp_path),
    )
    response = make_model(fake).complete(
        request, idempotency_key="r:1", on_text=lambda _t: None, cancel=CancelToken()
    )
    tokens = model_info(MODEL).cost(response.usage)
    assert response.details["code_execution"] == {"billed_s": CONTAINER_MIN_S, "usd": MIN_PRICE}
    assert response.cost_usd == pytest.approx(tokens + MIN_PRICE)
    assert "server_tool_use" not in response.details  # code execution is not counted in uses
    # With web search of a dynamic-filtering version in the request, the container is free.
    search = {"type": "web_search_20260318", "name": "web_search"}
    fake.script = [Stream([*_bash(None), Text("22")])]
    free = make_model(fake).complete(
        dataclasses.replace(request, tools=[*request.tools, search]),
        idempotency_key="r:2",
        on_text=lambda _t: None,
        cancel=CancelToken(),
    )
    assert free.details["code_execution"]["usd"] == 0.0


def test_a_fork_never_names_its_parent_s_container(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    tmp_path: Path,
    data_file: Path,
) -> None:
    from desktop_agent.client.forks import fork

    fake, _ = _start_fake(start_fake, writes=False)
    run_id = _start(client, tmp_path, data_file)
    drain(client.store, make_executor(make_model(fake)))
    assert client.run(run_id).status == RunStatus.COMPLETED
    (parent_box,) = fake.containers
    plan_step = next(s.seq for s in client.steps(run_id) if s.name == "update_plan")

    child = fork(client, run_id, plan_step, note="Also say which region grew most.")
    drain(client.store, make_executor(make_model(fake)))
    assert client.run(child.id).status == RunStatus.COMPLETED, client.run(child.id).status_message
    _no_refusal(fake)
    forked = fake.requests[2:]  # the parent made two calls
    assert forked and "container" not in forked[0].body  # the parent's files stay its own
    own = _model_steps(client, child.id)[-1]
    assert own.run_id == child.id and own.input["container"] == {"new": True}
    assert own.output["api"]["container"]["id"] != parent_box
