"""Anthropic's server-side web search: offered when enabled, its blocks never executed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, Usage
from desktop_agent.engine.ports import CancelToken, ModelRequest, ModelResponse
from tests.conftest import MakeExecutor, drain

SEARCH_TURN: list[dict[str, Any]] = [
    {"type": "text", "text": "Let me search."},
    {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "cloud market 2025"},
    },
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://news.example.test/cloud",
                "title": "Cloud grew 4%",
                "encrypted_content": "opaque",
            }
        ],
    },
    {"type": "text", "text": "The market grew 4%."},
]


class ServerToolModel:
    """Answers like the API does with web search: a paused turn, then the final answer."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def context_window(self, model: str) -> int:
        return 200_000

    def compacts_on_server(self, model: str) -> bool:
        return False

    def count_tokens(self, request: ModelRequest) -> int | None:
        return None

    def worst_case_cost(self, request: ModelRequest) -> float:
        return 0.01

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        self.requests.append(request)
        if len(self.requests) == 1:
            content, stop = SEARCH_TURN, "pause_turn"
        else:
            content, stop = [{"type": "text", "text": "Done: it grew 4%."}], "end_turn"
        return ModelResponse(content, stop, Usage(100, 20), 0.001, request.model)


def test_web_search_is_offered_only_when_enabled(
    client: Client, make_executor: MakeExecutor
) -> None:
    plain = client.start_run("Search", model="claude-haiku-4-5")
    assert "web_search" not in plain.spec.tool_names  # not a default while disabled
    model = ServerToolModel()
    drain(client.store, make_executor(model))
    assert all(t["name"] != "web_search" for t in model.requests[0].tools)

    client.settings.web_search = True
    client.settings.web_search_max_uses = 3
    enabled = client.start_run("Search", model="claude-haiku-4-5")
    assert "web_search" in enabled.spec.tool_names
    model = ServerToolModel()
    drain(client.store, make_executor(model))
    sent = [t for t in model.requests[0].tools if t["name"] == "web_search"]
    assert sent == [{"type": "web_search_20260318", "name": "web_search", "max_uses": 3}]
    assert all("input_schema" in t for t in model.requests[0].tools if t["name"] != "web_search")


def test_server_tool_blocks_are_not_tool_uses(client: Client, make_executor: MakeExecutor) -> None:
    client.settings.web_search = True
    run = client.start_run("What did the cloud market do?", model="claude-haiku-4-5")
    model = ServerToolModel()
    drain(client.store, make_executor(model))
    done = client.run(run.id)
    assert done.status == RunStatus.COMPLETED, done.status_message
    steps = client.steps(run.id)
    assert [s.kind for s in steps] == [StepKind.MODEL_CALL, StepKind.MODEL_CALL]
    # The paused turn went back verbatim (the API needs the encrypted results) to continue.
    # (labelled with the model that wrote it; the Claude adapter does not send the label)
    assert model.requests[1].messages[-1] == {
        "role": "assistant",
        "content": SEARCH_TURN,
        "model": "claude-haiku-4-5",
    }
    assert done.status_message.startswith("Done: it grew 4%.")


def test_disabling_web_search_later_withdraws_it(
    client: Client, make_executor: MakeExecutor
) -> None:
    client.settings.web_search = True
    client.start_run("Search", model="claude-haiku-4-5")
    client.settings.web_search = False
    model = ServerToolModel()
    drain(client.store, make_executor(model))
    assert all(t["name"] != "web_search" for r in model.requests for t in r.tools)


def test_a_run_with_allowed_domains_sends_them_though_the_setting_is_off(
    client: Client, make_executor: MakeExecutor
) -> None:
    assert not client.settings.web_search
    run = client.start_run(
        "Search",
        model="claude-haiku-4-5",
        web_search=True,
        search_domains=["example.com", "example.org"],
    )
    assert run.spec.web_search is True
    model = ServerToolModel()
    drain(client.store, make_executor(model))
    sent = [t for t in model.requests[0].tools if t["name"] == "web_search"]
    assert sent == [
        {
            "type": "web_search_20260318",
            "name": "web_search",
            "max_uses": 5,
            "allowed_domains": ["example.com", "example.org"],
        }
    ]
    # The second call of the run sends the same definitions (frozen at the first call).
    assert model.requests[1].tools == model.requests[0].tools


def test_a_run_with_blocked_domains_sends_only_them(
    client: Client, make_executor: MakeExecutor
) -> None:
    client.settings.web_search = True
    client.start_run("Search", model="claude-haiku-4-5", search_blocked_domains=["spam.test"])
    model = ServerToolModel()
    drain(client.store, make_executor(model))
    (sent,) = [t for t in model.requests[0].tools if t["name"] == "web_search"]
    assert sent["blocked_domains"] == ["spam.test"]
    assert "allowed_domains" not in sent


def test_settings_changed_after_the_first_call_do_not_reach_the_run(
    client: Client, make_executor: MakeExecutor
) -> None:
    client.settings.web_search = True
    client.settings.web_search_max_uses = 2

    class ChangingModel(ServerToolModel):
        def complete(self, request: ModelRequest, **kw: Any) -> ModelResponse:
            client.settings.web_search_max_uses = 9  # after the first call's tools are sent
            client.settings.web_search = False
            return super().complete(request, **kw)

    client.start_run("Search", model="claude-haiku-4-5")
    model = ChangingModel()
    drain(client.store, make_executor(model))
    assert len(model.requests) == 2
    first, second = ([t for t in r.tools if t["name"] == "web_search"] for r in model.requests)
    assert first == second and first[0]["max_uses"] == 2
