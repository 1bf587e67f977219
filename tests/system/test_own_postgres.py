"""The test helper ``tests.postgres_servers``: a PostgreSQL of the test's own, which answers,
hangs when frozen and keeps its data across a restart."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from tests.postgres_servers import own_postgres_server

pytestmark = pytest.mark.slow


def test_own_server_answers_and_creates_databases_with_btree_gist(tmp_path: Path) -> None:
    with own_postgres_server(tmp_path) as server:
        assert server.port != 5432
        url = server.create_database("bookings")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION btree_gist")
            port = conn.execute("SHOW port").fetchone()[0]
            assert int(port) == server.port


def test_a_frozen_server_does_not_answer_until_thawed(tmp_path: Path) -> None:
    with (
        own_postgres_server(tmp_path) as server,
        psycopg.connect(server.url, autocommit=True) as conn,
    ):
        conn.execute("SELECT 1")
        answers: list[int] = []
        server.freeze()
        query = threading.Thread(
            target=lambda: answers.append(conn.execute("SELECT 2").fetchone()[0]),
            daemon=True,
        )
        query.start()
        query.join(timeout=1.0)
        assert query.is_alive() and answers == []
        server.thaw()
        query.join(timeout=10)
        assert answers == [2]


def test_data_survives_a_restart(tmp_path: Path) -> None:
    with own_postgres_server(tmp_path) as server:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        server.restart()
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT n FROM kept").fetchall() == [(42,)]
