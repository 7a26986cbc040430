"""A test that leaves a database open fails; one that closes what it opened passes."""

from __future__ import annotations

import sqlite3

from tests.hygiene.conftest import RunInner

RAW: list[sqlite3.Connection] = []
"""The inner run's raw connection, closed afterwards by the test that ran it."""

LEAKS = """
import sqlite3

from desktop_agent.client.api import Client
from desktop_agent.persistence.db import Database, DbSettings
from tests.hygiene.test_databases import RAW

KEPT = []  # held past the test: the check, not the garbage collector, must find them


def test_leaves_a_client_open(tmp_path):
    KEPT.append(Client(tmp_path / "data" / "client.db"))


def test_uses_a_database_again_after_dispose(tmp_path):
    db = Database(DbSettings.for_path(tmp_path / "again.db"))
    db.dispose()
    with db.read() as conn:
        conn.exec_driver_sql("SELECT 1")
    KEPT.append(db)


def test_drops_a_database_without_dispose(tmp_path):
    Database(DbSettings.for_path(tmp_path / "dropped.db"))


def test_leaves_a_raw_connection_open(tmp_path):
    RAW.append(sqlite3.connect(tmp_path / "raw.db"))
"""

CLEAN = """
import contextlib
import sqlite3

from desktop_agent.client.api import Client
from desktop_agent.persistence.db import Database, DbSettings


def test_closes_its_client(tmp_path):
    client = Client(tmp_path / "data" / "client.db")
    client.close()


def test_disposes_its_database(tmp_path):
    Database(DbSettings.for_path(tmp_path / "db.db")).dispose()


def test_closes_its_raw_connection(tmp_path):
    with contextlib.closing(sqlite3.connect(tmp_path / "raw.db")) as conn:
        conn.execute("CREATE TABLE t (x)")
"""


def test_a_database_left_open_fails_the_test_and_is_named(run_inner: RunInner) -> None:
    try:
        result = run_inner(LEAKS)
    finally:
        for conn in RAW:
            conn.close()
    result.assert_outcomes(passed=4, errors=4)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaves_a_client_open*",
            "*the test left databases open:*",
            "*database */client.db: never disposed, * connection(s) open*",
            "*ERROR at teardown of test_uses_a_database_again_after_dispose*",
            "*database */again.db: 1 connection(s) opened again after dispose() and still open*",
            "*ERROR at teardown of test_drops_a_database_without_dispose*",
            "*database */dropped.db: garbage-collected without dispose()*",
            "*ERROR at teardown of test_leaves_a_raw_connection_open*",
            "*SQLite file */raw.db still open (descriptors *",
        ]
    )


def test_databases_closed_are_not_leaks(run_inner: RunInner) -> None:
    run_inner(CLEAN).assert_outcomes(passed=3)
