"""Search over real runs: what is found, what narrows it, what is never found."""

from __future__ import annotations

import time

import pytest

from desktop_agent.client.api import Client
from desktop_agent.client.schedules import Scheduling
from desktop_agent.client.search import SearchFilters
from desktop_agent.domain.errors import InvalidInputError
from tests.helpers import postgres
from tests.search.conftest import HAIKU, SECRET, SONNET, Corpus

pytestmark = pytest.mark.parametrize("backend", postgres.BACKENDS)


def _where(client: Client, query: str, **filters: object) -> set[tuple[str, int, str]]:
    hits = client.search(query, SearchFilters(**filters))  # type: ignore[arg-type]
    return {(h.run_id, h.seq, h.kind) for h in hits}


def test_a_phrase_only_in_one_tool_result_finds_exactly_that_step(
    client: Client, corpus: Corpus
) -> None:
    (hit,) = client.search('"quokka population doubled"')
    assert (hit.run_id, hit.seq, hit.kind, hit.tool) == (corpus.reader, 2, "tool_call", "read_file")
    assert hit.goal == "Survey the island wildlife notes" and not hit.archived
    marked = [hit.snippet[a:b].lower() for a, b in hit.spans]
    assert marked == ["quokka population doubled"]


def test_words_of_an_approval_reason_a_goal_and_an_error_are_found(
    client: Client, corpus: Corpus
) -> None:
    reason = client.search("embargoed")
    assert {(h.run_id, h.kind) for h in reason} == {(corpus.rejected, "approval")}
    assert any(h.tool == "write_file" for h in reason)
    assert _where(client, "orchard") == {(corpus.failed, 0, "goal")}
    error = client.search("tangerine outage", SearchFilters(kinds=("tool_call",)))
    assert [(h.run_id, h.seq) for h in error] == [(corpus.failed, 2)]


def test_prefix_and_phrase_queries(client: Client, corpus: Corpus) -> None:
    assert _where(client, "quok*") == _where(client, "quokka") != set()
    assert _where(client, '"population doubled"') != set()
    assert _where(client, '"doubled population"') == set()
    assert _where(client, "quokka vendors") == set()  # every word must match


def test_each_filter_narrows(client: Client, corpus: Corpus) -> None:
    every = {r for r, _, _ in _where(client, "model_call")}
    assert every == {corpus.reader, corpus.rejected, corpus.failed, corpus.secret}
    assert {r for r, _, _ in _where(client, "model_call", models=(SONNET,))} == {corpus.rejected}
    assert corpus.rejected not in {r for r, _, _ in _where(client, "model_call", models=(HAIKU,))}
    assert _where(client, "quokka", statuses=("failed",)) == set()
    assert _where(client, "quokka", statuses=("completed",)) != set()
    assert _where(client, "quokka", tools=("write_file",)) == set()
    assert _where(client, "quokka", tools=("read_file",)) == {(corpus.reader, 2, "tool_call")}
    assert _where(client, "wildlife", kinds=("goal",)) == {(corpus.reader, 0, "goal")}
    assert _where(client, "quokka", cost_above=1.0) == set()
    assert _where(client, "quokka", cost_below=1.0) != set()
    now = time.time()
    assert _where(client, "quokka", since=now + 86400) == set()
    assert _where(client, "quokka", until=now - 86400) == set()
    assert _where(client, "quokka", since=now - 86400, until=now + 86400) != set()
    assert _where(client, "quokka", archived=True) == set()


def test_an_archived_run_is_still_found_and_marked(client: Client, corpus: Corpus) -> None:
    result = Scheduling(client, lambda: time.time() + 60).archive(0)
    assert corpus.reader in result.run_ids
    assert corpus.reader not in {r.id for r in client.runs()}
    (hit,) = client.search('"quokka population doubled"')
    assert hit.run_id == corpus.reader and hit.archived
    assert client.search("quokka", SearchFilters(archived=False)) == []
    assert client.search("quokka", SearchFilters(archived=True)) != []


def test_a_key_like_secret_is_never_indexed(client: Client, corpus: Corpus) -> None:
    assert _where(client, "scratch") != set()  # the step with the secret is indexed
    assert client.search(f'"{SECRET}"') == []
    assert client.search("Q7zv*") == []
    assert client.search("api03") == []


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ('quokka "unclosed', "unmatched double quote"),
        ("*", "must end a word"),
        ("qu*kka", "may only end a word"),
        ('   ""  ', "empty"),
    ],
)
def test_a_malformed_query_is_one_clear_line(
    client: Client, corpus: Corpus, query: str, says: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        client.search(query)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_fts_syntax_in_a_query_is_plain_text(client: Client, corpus: Corpus) -> None:
    fts5 = ("NEAR(quokka", "quokka OR", "body:quokka", "-quokka", "quokka)", "^quokka")
    tsquery = ("quokka & !island", "quokka <-> doubled", "quokka:*", "'quokka'", "quo\\kka*")
    for query in (*fts5, *tsquery):
        client.search(query)  # no FTS5 or tsquery syntax error reaches the analyst
    assert _where(client, "(quokka)") == _where(client, "quokka")
