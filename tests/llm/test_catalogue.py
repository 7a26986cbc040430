"""The model catalogue: read from the API by the worker, kept, and what requests are built from."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.domain.catalogue import ModelEntry
from desktop_agent.domain.errors import InvalidInputError
from desktop_agent.engine.ports import ModelRequest
from desktop_agent.llm.catalogue import Catalogue, snapshot_models
from desktop_agent.llm.claude import build_params
from desktop_agent.persistence.catalogue import load_models
from desktop_agent.worker.catalogue import RETRY_AFTER_S, CatalogueKeeper
from tests.conftest import MakeExecutor, drain
from tests.helpers import claude_contract
from tests.helpers.fake_anthropic import FakeAnthropic, Stream, Text
from tests.llm.conftest import KEY, MakeModel, StartFake

CURRENT = [
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
]


@pytest.fixture
def api(start_fake: StartFake, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """The contract fake, reached the way a worker reaches the API (ANTHROPIC_BASE_URL)."""
    fake = start_fake([Stream([Text("ok")])], accept_keys={KEY})
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    yield fake


def _read(keeper: CatalogueKeeper, now: float) -> None:
    before = keeper.readings
    keeper.tick(now)
    keeper.join()
    assert keeper.readings == before + 1


def test_the_shipped_snapshot_says_what_the_api_says_of_the_current_models() -> None:
    shipped = {e.id: e for e in Catalogue().entries()}
    for model in CURRENT:
        rules = claude_contract.MODELS[model]
        served = ModelEntry.from_api(claude_contract.model_info(rules, beta_compaction=True))
        mine = shipped[model]
        assert mine.thinking_types == served.thinking_types, model
        assert mine.efforts == served.efforts, model
        assert (mine.max_input_tokens, mine.max_tokens) == (
            served.max_input_tokens,
            served.max_tokens,
        ), model
        assert mine.server_compaction == served.server_compaction, model
        assert mine.lifecycle == served.lifecycle, model


def test_a_worker_reads_the_catalogue_stores_it_and_reads_it_again_daily(
    client: Client, api: FakeAnthropic
) -> None:
    catalogue = Catalogue()
    keeper = CatalogueKeeper(client.store.db, lambda: KEY, catalogue)
    now = time.time()
    _read(keeper, now)
    assert catalogue.source == "api" and catalogue.read_at == now
    stored, read_at = load_models(client.store.db)
    assert read_at == now
    assert {m["id"] for m in stored} == {m.id for m in claude_contract.catalogue()}
    # Retired models are in it too, so a run naming one is refused with its replacement.
    assert catalogue.entry("claude-sonnet-4-0") is not None
    assert catalogue.entry("claude-sonnet-4-0").retired  # type: ignore[union-attr]
    listings = len(api.side_requests)
    keeper.tick(now + 3600)  # not due: nothing is read
    keeper.join()
    assert len(api.side_requests) == listings
    _read(keeper, now + 24 * 3600)  # a day later

    # The app and the CLI see the stored reading, and what it says of each model.
    listed = client.models(include_retired=True)
    assert listed.source == "database"
    rows = {r.id: r for r in listed.rows}
    assert rows["claude-sonnet-4-5"].lifecycle == "deprecated"
    assert "retires 2026-11-30" in rows["claude-sonnet-4-5"].notice
    assert "claude-sonnet-5-5" in rows["claude-sonnet-4-5"].notice


def test_a_404_naming_a_model_makes_the_worker_read_the_catalogue_again(
    client: Client, api: FakeAnthropic, make_model: MakeModel, make_executor: MakeExecutor
) -> None:
    catalogue = Catalogue()
    keeper = CatalogueKeeper(client.store.db, lambda: KEY, catalogue)
    now = time.time()
    _read(keeper, now)
    claude = make_model(api)
    claude.on_unknown_model = keeper.unknown_model
    # A model this release does not know passes the checks; the API does not know it either.
    run = client.start_run("Look", model="claude-sonnet-9")
    drain(client.store, make_executor(claude))
    held = client.run(run.id)
    assert held.status == RunStatus.NEEDS_ATTENTION
    assert held.status_message.startswith("The API does not know the model claude-sonnet-9")
    _read(keeper, now + 60)  # asked for at once, not a day later


def test_no_key_reads_nothing_and_a_refused_key_keeps_the_catalogue(
    client: Client, api: FakeAnthropic
) -> None:
    catalogue = Catalogue()
    nothing = CatalogueKeeper(client.store.db, lambda: None, catalogue)
    nothing.tick(time.time())
    nothing.join()
    assert nothing.readings == 0 and api.side_requests == [] and catalogue.source == "snapshot"

    refused = CatalogueKeeper(client.store.db, lambda: "sk-ant-api03-revoked-000000", catalogue)
    now = time.time()
    refused.tick(now)
    refused.join()
    assert refused.readings == 0 and catalogue.source == "snapshot"
    assert load_models(client.store.db) == ([], 0.0)
    tried = len(api.side_requests)
    refused.tick(now + RETRY_AFTER_S - 1)  # a pause before the next attempt
    refused.join()
    assert len(api.side_requests) == tried


def test_requests_follow_the_catalogue_not_a_list_kept_by_hand() -> None:
    request = ModelRequest("claude-haiku-5-5", "s", [{"role": "user", "content": "hi"}], [], 1024)
    shipped = Catalogue()
    assert build_params(request, "claude-haiku-5-5", shipped)["thinking"]["type"] == "adaptive"
    # Were the API to say Haiku 5.5 takes thinking off, thinking off is sent.
    models: list[dict[str, Any]] = snapshot_models()
    for entry in models:
        if entry["id"] == "claude-haiku-5-5":
            entry["capabilities"]["thinking"]["types"]["disabled"] = {"supported": True}
            entry["max_tokens"] = 2048
    live = Catalogue(models, read_at=1.0, source="api")
    params = build_params(
        ModelRequest("claude-haiku-5-5", "s", [{"role": "user", "content": "hi"}], [], 100_000),
        "claude-haiku-5-5",
        live,
    )
    assert params["thinking"] == {"type": "disabled"}
    assert params["max_tokens"] == 2048


def test_a_retired_model_is_refused_before_the_run_starts(client: Client, workspace: Path) -> None:
    with pytest.raises(InvalidInputError) as refused:
        client.start_run("Look", model="claude-opus-4-1", workspace=workspace)
    assert "claude-opus-4-1 is retired" in str(refused.value)
    assert "use claude-opus-5-5 instead" in str(refused.value)
    assert client.runs() == []
    # A deprecated one starts, with a notice.
    client.start_run("Look", model="claude-sonnet-4-5", workspace=workspace)
    assert "retires 2026-11-30" in client.last_model_notice


def test_a_run_that_waits_writes_its_cache_for_an_hour_priced_at_twice_the_input(
    client: Client,
    make_executor: MakeExecutor,
    start_fake: StartFake,
    make_model: MakeModel,
    workspace: Path,
) -> None:
    fake = FakeAnthropic([Stream([Text("Done.")])], cache=True).__enter__()
    try:
        run = client.start_run("Look", model="claude-opus-5-5", workspace=workspace)
        drain(client.store, make_executor(make_model(fake)))
    finally:
        fake.__exit__(None, None, None)
    call = client.steps(run.id)[0]
    written = call.output["api"]
    assert written["cache_write_1h"] > 0 and written["cache_write_5m"] == 0
    assert call.usage.cache_write_tokens == written["cache_write_1h"]
    # Opus 5.5: $4 input, so $8 per million tokens written for an hour.
    expected = (
        call.usage.input_tokens * 4.0
        + call.usage.output_tokens * 20.0
        + written["cache_write_1h"] * 8.0
    ) / 1e6
    assert call.cost_usd == pytest.approx(expected, abs=1e-12)


class _GoneDatabase:
    """A database whose server went away: every read fails as psycopg's connection does."""

    def read(self) -> Any:
        from sqlalchemy.exc import OperationalError

        raise OperationalError(
            "SELECT model_catalogue.data", {}, Exception("server closed the connection")
        )

    write = read


def test_a_database_gone_at_start_leaves_the_shipped_catalogue_and_the_worker_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A PostgreSQL restart as a worker started ended it (exit 1) in a clean-clone run."""
    catalogue = Catalogue()
    before = catalogue.entries()
    keeper = CatalogueKeeper(
        _GoneDatabase(),  # type: ignore[arg-type]
        lambda: KEY,
        catalogue,
        fetch=lambda _k: snapshot_models(),
    )
    keeper.load_stored()  # no exception: a warning, and the shipped catalogue stays
    assert catalogue.entries() == before
    assert "the stored model catalogue cannot be read" in caplog.text
    keeper._read(time.time())  # a reading whose storing fails is kept in memory
    assert "could not be stored" in caplog.text
