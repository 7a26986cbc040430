"""What the search index costs: in the journal's transaction (triggers) or after it.

Usage::

    .venv/bin/python bench/search_bench.py [--steps 2000] [--repeat 3] [--dir bench/out]
    .venv/bin/python bench/search_bench.py --scale [--runs 5000] [--steps-per-run 200]
                                           [--postgresql]

Two journals written in lockstep at FULL through the real ``SqlStore.commit`` (the steps of
``journal_bench.py``): one as shipped, one with triggers on ``steps`` that index each
step's input, output and error into an FTS5 table inside the same transaction (the
cheapest form of "kept in step": raw JSON, no text extraction). Then the shipped way:
``search.catch_up`` indexing the first journal after the fact, in steps per second, and
one search over it. Printed: µs per journal step of each, their ratio, catch-up rate,
search time. A report, not a test: the exit status is always 0.

``--scale``: the speed target of search at scale. A database of ``--runs`` runs of
``--steps-per-run`` steps each (1,000,000 by default) of synthetic but realistic text: a
vocabulary of made-up words drawn with a Zipf-like law (a few very common, a long tail),
sentences of them, tool results of a hundred to a few hundred words, model turns of a few
sentences, and rare terms (ticket-like codes) sprinkled in. Rows go in with ``executemany``
in big transactions (not through the engine), then ``search.catch_up`` indexes them all
(timed), then ~200 phrase queries with filters (statuses, a date range, a cost bound), as
the analyst's search does them: p50, p95 and max in ms, and the index's size against the
text it indexes.

``--scale --postgresql``: the same on a throwaway PostgreSQL server of the bench's own
(Debian's ``postgresql``, as in the tests): rows written, the same ``catch_up``, the same
queries through the same ``search.search``, and the GIN index's size against the text.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_bench import DEFAULT_DIR, JournalWriter, filesystem_type

from desktop_agent.persistence import search
from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.search import SearchFilters
from desktop_agent.persistence.tables import runs, steps

TRIGGERS = (
    "CREATE VIRTUAL TABLE bench_fts USING fts5(run_id UNINDEXED, seq UNINDEXED, body, "
    "tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER bench_ai AFTER INSERT ON steps BEGIN INSERT INTO bench_fts "
    "VALUES (new.run_id, new.seq, coalesce(new.input, '') || ' ' || coalesce(new.output, '')); "
    "END",
    "CREATE TRIGGER bench_au AFTER UPDATE OF output, error ON steps BEGIN INSERT INTO bench_fts "
    "VALUES (new.run_id, new.seq, coalesce(new.output, '') || ' ' || coalesce(new.error, '')); "
    "END",
)


def lockstep(folder: Path, n: int) -> tuple[float, float, float, float, float]:
    """(plain µs/step, triggers µs/step, median ratio, catch-up steps/s, search ms)."""
    plain = JournalWriter(folder / "plain.db", n, 200, "FULL")
    indexed = JournalWriter(folder / "triggers.db", n, 200, "FULL")
    with indexed.db.write() as conn:
        for ddl in TRIGGERS:
            conn.exec_driver_sql(ddl)
    a: list[float] = []
    b: list[float] = []
    clock = time.perf_counter
    for i in range(n):
        first, second, ta, tb = (plain, indexed, a, b) if i % 2 else (indexed, plain, b, a)
        t0 = clock()
        first.step(i)
        t1 = clock()
        second.step(i)
        t2 = clock()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    t0 = clock()
    done = search.catch_up(plain.db)
    rate = done / (clock() - t0)
    t0 = clock()
    search.search(plain.db, '"result of step 1234"', SearchFilters(), 50)
    search_ms = (clock() - t0) * 1000
    plain.close()
    indexed.close()
    return (
        sum(a) / n * 1e6,
        sum(b) / n * 1e6,
        statistics.median(b) / statistics.median(a),
        rate,
        search_ms,
    )


# --------------------------------------------------------------------------- at scale

DAY = 86400.0
STATUSES = ("completed",) * 7 + ("failed", "stopped", "cancelled")
TOOLS = ("fetch_url", "read_file", "write_file", "list_files", "web_search")


def vocabulary(rng: random.Random, n: int = 30_000) -> tuple[list[str], list[float]]:
    """Made-up words and Zipf-like cumulative weights (rank ** -1.07)."""
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "st", "qu"]
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))))
    ordered = sorted(words, key=lambda w: (len(w), w))
    cum: list[float] = []
    total = 0.0
    for rank in range(1, n + 1):
        total += rank**-1.07
        cum.append(total)
    return ordered, cum


class TextMaker:
    """Sentences drawn from the vocabulary, recombined into documents of a chosen length."""

    def __init__(self, rng: random.Random, n_sentences: int = 200_000) -> None:
        self.rng = rng
        words, cum = vocabulary(rng)
        lengths = [rng.randint(6, 18) for _ in range(n_sentences)]
        drawn = rng.choices(words, cum_weights=cum, k=sum(lengths))
        self.sentences: list[str] = []
        at = 0
        for n in lengths:
            self.sentences.append(" ".join(drawn[at : at + n]).capitalize() + ".")
            at += n
        self.rare = [f"KX-{i:05d}" for i in range(20_000)]

    def text(self, words: int) -> str:
        """About ``words`` words; one time in ten with a rare term."""
        picked = self.rng.choices(self.sentences, k=max(1, words // 12))
        if self.rng.random() < 0.1:
            picked.append(f"See {self.rng.choice(self.rare)}.")
        return " ".join(picked)


def build(db: Database, n_runs: int, per_run: int, seed: int) -> tuple[float, float, list[str]]:
    """Fill runs and steps directly; returns (seconds, newest time, sample texts)."""
    rng = random.Random(seed)
    maker = TextMaker(rng)
    now = time.time()
    t0 = time.perf_counter()
    run_cols = [c.name for c in runs.columns]
    step_cols = [c.name for c in steps.columns]
    mark = "?" if db.is_sqlite else "%s"
    run_sql = (
        f"INSERT INTO runs ({', '.join(run_cols)}) VALUES ({', '.join([mark] * len(run_cols))})"
    )
    step_sql = (
        f"INSERT INTO steps ({', '.join(step_cols)}) VALUES ({', '.join([mark] * len(step_cols))})"
    )
    samples: list[str] = []
    per_tx = max(1, 50_000 // per_run)
    for first in range(0, n_runs, per_tx):
        run_rows: list[tuple[object, ...]] = []
        step_rows: list[tuple[object, ...]] = []
        for i in range(first, min(n_runs, first + per_tx)):
            start = now - rng.uniform(0, 180) * DAY
            cost = round(rng.lognormvariate(-1.5, 1.2), 4)
            run: dict[str, object] = dict.fromkeys(run_cols)
            run.update(
                id=f"run-{i:06d}",
                goal=maker.text(20),
                title="",
                status=rng.choice(STATUSES),
                status_message="",
                spec=json.dumps({"model": "claude-sonnet-4-5", "goal": ""}),
                definition_hash="bench",
                workspace="/tmp",
                budget="{}",
                created_at=start,
                updated_at=start + per_run * 5,
                started_at=start,
                finished_at=start + per_run * 5,
                last_seq=per_run,
                cost_usd=cost,
                input_tokens=0,
                output_tokens=0,
                cache_write_tokens=0,
                cache_read_tokens=0,
                active_seconds=0.0,
                lease_epoch=0,
                placement="any",
            )
            run_rows.append(tuple(run[c] for c in run_cols))
            for seq in range(1, per_run + 1):
                at = start + seq * 5
                tool = seq % 2 == 0
                if tool:
                    name = rng.choice(TOOLS)
                    body = maker.text(rng.randint(100, 400))
                    inp = json.dumps({"url": f"https://example.org/{i}/{seq}"})
                    out = json.dumps({"content": body})
                else:
                    name = "claude-sonnet-4-5"
                    body = maker.text(rng.randint(20, 60))
                    inp = json.dumps({"messages": seq})
                    out = json.dumps({"text": body})
                if len(samples) < 2000 and rng.random() < 0.01:
                    samples.append(body)
                step: dict[str, object] = dict.fromkeys(step_cols)
                step.update(
                    run_id=run["id"],
                    seq=seq,
                    kind="tool_call" if tool else "model_call",
                    name=name,
                    status="completed",
                    attempt=1,
                    input=inp,
                    output=out,
                    partial_text="",
                    input_tokens=0 if tool else 2000,
                    output_tokens=0 if tool else 300,
                    cache_write_tokens=0,
                    cache_read_tokens=0,
                    cost_usd=0.0 if tool else cost / per_run,
                    started_at=at,
                    finished_at=at + 1,
                )
                step_rows.append(tuple(step[c] for c in step_cols))
        with db.write() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            cursor = raw.cursor()
            cursor.executemany(run_sql, run_rows)
            cursor.executemany(step_sql, step_rows)
    return time.perf_counter() - t0, now, samples


def queries(
    rng: random.Random,
    samples: list[str],
    now: float,
    n: int,
    avoid: frozenset[str] = frozenset(),
) -> list[tuple[str, SearchFilters]]:
    """Phrase queries (2-3 words from real documents, some with a rare term) with filters.

    ``avoid``: words no phrase may contain (the most common ones, for a mix of phrases
    made of content words only; step kinds and tool names are then left out too).
    """
    out: list[tuple[str, SearchFilters]] = []
    while len(out) < n:
        words = rng.choice(samples).replace(".", "").lower().split()
        k = rng.choice((2, 2, 3))
        at = rng.randrange(0, max(1, len(words) - k))
        picked = words[at : at + k]
        labels = any("_" in w or "-" in w for w in picked)  # a step's kind or tool name
        if avoid and (len(picked) < k or labels or avoid.intersection(picked)):
            continue
        phrase = '"' + " ".join(picked) + '"'
        if rng.random() < 0.2:
            phrase += f" KX-{rng.randrange(20_000):05d}*"
        since = now - rng.uniform(30, 180) * DAY
        filters = SearchFilters(
            statuses=tuple(rng.sample(("completed", "failed", "stopped"), rng.choice((1, 2)))),
            since=since,
            until=since + rng.uniform(7, 60) * DAY,
            cost_above=rng.choice((None, 0.05, 0.2)),
            cost_below=rng.choice((None, 1.0, 5.0)),
        )
        out.append((phrase, filters))
    return out


def run_queries(db: Database, mix: list[tuple[str, SearchFilters]], label: str) -> None:
    """Time each query as the analyst's search runs it; print p50, p95, max."""
    timings: list[float] = []
    hits = 0
    for phrase, filters in mix:
        t0 = time.perf_counter()
        found = search.search(db, phrase, filters, 50)
        timings.append((time.perf_counter() - t0) * 1000)
        hits += bool(found)
    timings.sort()
    p50 = statistics.median(timings)
    p95 = timings[min(len(timings) - 1, int(len(timings) * 0.95))]
    print(
        f"{len(timings)} {label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
        f"max {timings[-1]:.1f} ms ({hits} with hits)"
    )


def fts_bytes(db: Database) -> tuple[int, int, int]:
    """(bytes of the FTS5 index's shadow tables, of the text indexed, of the database file).

    On PostgreSQL: of the GIN index, of the text, of the whole database.
    """
    if not db.is_sqlite:
        with db.read() as conn:
            row = conn.exec_driver_sql(
                "SELECT pg_relation_size('ix_search_docs_body_tsv'), "
                "(SELECT coalesce(sum(octet_length(body)), 0) FROM search_docs), "
                "pg_database_size(current_database())"
            ).one()
        return int(row[0]), int(row[1]), int(row[2])
    with db.read() as conn:
        index = conn.exec_driver_sql(
            "SELECT (SELECT coalesce(sum(length(block)), 0) FROM search_fts_data)"
            " + (SELECT coalesce(sum(length(term)) + 16 * count(*), 0) FROM search_fts_idx)"
        ).scalar_one()
        text = conn.exec_driver_sql(
            "SELECT coalesce(sum(length(CAST(body AS BLOB))), 0) FROM search_docs"
        ).scalar_one()
    path = db.settings.sqlite_path
    assert path is not None
    return int(index), int(text), path.stat().st_size


def at_scale(
    folder: Path, n_runs: int, per_run: int, n_queries: int, reuse: bool, url: str | None = None
) -> None:
    """Build, index and query the big database (SQLite, or ``url``'s); print the figures."""
    path = folder / "search-scale.db"
    if url is None and not (reuse and path.exists()):
        for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            p.unlink(missing_ok=True)
    db = Database(DbSettings(url) if url else DbSettings.for_path(path, "NORMAL"))
    if url is None and reuse and path.stat().st_size > 1_000_000:
        with db.read() as conn:
            samples = [str(b) for (b,) in conn.exec_driver_sql(
                "SELECT body FROM search_docs WHERE id % 499 = 0 LIMIT 2000"
            )]  # fmt: skip
            now = float(conn.exec_driver_sql("SELECT max(at) FROM search_docs").scalar_one())
        print(f"reusing {path.name}")
    else:
        total = n_runs * per_run
        print(f"{n_runs} runs x {per_run} steps = {total:,} steps on {filesystem_type(folder)}")
        took, now, samples = build(db, n_runs, per_run, seed=7)
        print(f"rows written (executemany):      {took:8.1f} s  ({total / took:,.0f} steps/s)")
        t0 = time.perf_counter()
        done = search.catch_up(db, batch_steps=10_000)
        took = time.perf_counter() - t0
        print(f"indexed (catch_up):              {took:8.1f} s  ({done / took:,.0f} steps/s)")
    index, text, size = fts_bytes(db)
    print(
        f"index {index / 1e6:,.0f} MB for {text / 1e6:,.0f} MB of text: {index / text:.2f}x "
        f"(database file {size / 1e6:,.0f} MB)"
    )
    words, _cum = vocabulary(random.Random(7))  # the build's vocabulary, commonest first
    common = frozenset(words[:300])
    run_queries(db, queries(random.Random(11), samples, now, n_queries), "phrase queries")
    run_queries(
        db,
        queries(random.Random(13), samples, now, n_queries, avoid=common),
        "phrases without the 300 commonest words",
    )
    db.dispose()


def at_scale_postgresql(args: argparse.Namespace) -> int:
    """:func:`at_scale` on a server of the bench's own, removed afterwards."""
    repo = Path(__file__).resolve().parents[1]
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    from tests.helpers import postgres

    reason = postgres.unavailable()
    if reason is not None:
        print(f"no PostgreSQL server can run here: {reason}")
        return 1
    server = postgres.start_server()
    try:
        name = server.create_database()
        print("PostgreSQL: a throwaway server (fsync off, as in the tests)")
        at_scale(args.dir, args.runs, args.steps_per_run, args.queries, False, server.url(name))
    finally:
        server.close()
    return 0


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--scale", action="store_true", help="the 1,000,000-step search bench")
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--steps-per-run", type=int, default=200)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--reuse", action="store_true", help="query the last --scale database")
    parser.add_argument("--postgresql", action="store_true", help="--scale on a PostgreSQL server")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.scale and args.postgresql:
        return at_scale_postgresql(args)
    if args.scale:
        at_scale(args.dir, args.runs, args.steps_per_run, args.queries, args.reuse)
        return 0
    print(f"scratch folder on {filesystem_type(args.dir)}; {args.steps} steps at FULL")
    rows = [lockstep(args.dir, args.steps) for _ in range(args.repeat)]
    plain, trig, ratio, rate, ms = (statistics.median(col) for col in zip(*rows, strict=True))
    print(f"journal step, as shipped:            {plain:8.1f} µs")
    print(
        f"journal step, FTS5 triggers:         {trig:8.1f} µs  ({trig / plain:.2f}x mean, "
        f"{ratio:.2f}x median)"
    )
    print(f"catch-up after the fact:             {rate:8.0f} steps/s")
    print(f"one search over {args.steps} steps:        {ms:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
