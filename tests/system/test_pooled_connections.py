"""How the service holds its PostgreSQL connections (``app.database``): a pooled connection the
server hung up on is replaced when it is taken, without a round trip on live ones, and the agent
API's reads run without a transaction around them while its writes keep theirs."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from flask import Flask
from sqlalchemy import create_engine, event, text

from app import create_app
from app.config import Settings
from app.database import bound_postgres_waits, engine_options, server_hung_up
from app.extensions import db
from tests.conftest import IsolatedClient
from tests.factories import TenantFactory, book_through_api, next_monday, ny
from tests.postgres_servers import own_postgres_server

BOOKINGS = "/v1/api/calendar/bookings"
ROOT = Path(__file__).resolve().parents[2]


def postgres_engine(url: str) -> Any:
    settings = Settings(database_url=url)
    engine = create_engine(settings.database_url, **engine_options(settings))
    bound_postgres_waits(engine, settings)
    return engine


def terminate(admin_url: str, pid: int) -> None:
    """End backend ``pid`` as a restart would, and wait until it has exited (and so hung up)."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(500):
            gone = admin.execute(
                "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)", (pid,)
            ).fetchone()[0]
            if gone:
                return
            time.sleep(0.01)
    raise AssertionError(f"backend {pid} did not exit")


def test_an_idle_live_connection_is_not_taken_for_hung_up(postgres_admin_url: str) -> None:
    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        assert not server_hung_up(conn)


GEVENT_CHECK = """
import sys
from gevent import monkey
monkey.patch_all()
import greenlet, psycopg
from app.database import server_hung_up
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    conn.execute("SELECT 1")
    switches = []
    greenlet.settrace(lambda event, args: switches.append(event))
    hung_up = server_hung_up(conn)
    greenlet.settrace(None)
print(hung_up, len(switches))
"""


def test_the_check_does_not_yield_to_gevents_hub(postgres_admin_url: str) -> None:
    """Under gunicorn's gevent workers a zero-timeout poll must stay a zero-timeout poll: gevent's
    own would switch to its hub and send the request to the back of the queue."""
    result = subprocess.run(
        [sys.executable, "-c", GEVENT_CHECK, postgres_admin_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "0"]


def test_a_connection_whose_backend_was_terminated_is_taken_for_hung_up(
    postgres_admin_url: str,
) -> None:
    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        terminate(postgres_admin_url, conn.info.backend_pid)
        assert server_hung_up(conn)


def test_a_pooled_connection_terminated_by_the_server_is_replaced_when_taken(
    postgres_admin_url: str,
) -> None:
    engine = postgres_engine(postgres_admin_url)
    try:
        with engine.connect() as conn:
            first_pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        terminate(postgres_admin_url, first_pid)
        with engine.connect() as conn:  # no error: the dead connection never reaches us
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar_one() != first_pid
    finally:
        engine.dispose()


def test_live_pooled_connections_are_taken_without_a_ping(postgres_admin_url: str) -> None:
    engine = postgres_engine(postgres_admin_url)
    sent: list[str] = []
    event.listen(
        engine, "before_cursor_execute", lambda c, cur, statement, *a: sent.append(statement)
    )
    try:
        for _ in range(3):
            with engine.connect() as conn:
                conn.execute(text("SELECT 42"))
        assert sent == ["SELECT 42"] * 3
    finally:
        engine.dispose()


@pytest.mark.slow
def test_the_first_request_after_a_database_restart_is_answered(tmp_path: Path) -> None:
    """The server restarts while the pool holds connections: the next request reconnects
    instead of failing on a connection the server closed."""
    with own_postgres_server(tmp_path) as server:
        engine = postgres_engine(server.url)
        try:
            with engine.connect() as conn:
                assert conn.execute(text("SELECT 1")).scalar_one() == 1
            server.restart()
            with engine.connect() as conn:
                assert conn.execute(text("SELECT 2")).scalar_one() == 2
        finally:
            engine.dispose()


# --- reads without a transaction ----------------------------------------------------------------


@pytest.fixture
def postgres_app(migrated_postgres_database) -> Iterator[Flask]:
    """The API on a PostgreSQL database of its own, with a provisioned tenant."""
    app = create_app(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": migrated_postgres_database(),
            "SECRET_KEY": "test-secret-key",
            "OUTBOX_DISPATCH": False,
        }
    )
    app.test_client_class = IsolatedClient
    with app.app_context():
        yield app
        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def transaction_modes(postgres_app: Flask) -> list[tuple[str, bool]]:
    """(first word, autocommit) of every statement the app sends from now on."""
    seen: list[tuple[str, bool]] = []

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append((statement.split()[0], conn.connection.dbapi_connection.autocommit))

    event.listen(db.engine, "before_cursor_execute", note)
    return seen


def test_the_apis_reads_run_without_a_transaction(postgres_app, transaction_modes):
    tenant = TenantFactory().create()
    client = postgres_app.test_client()
    transaction_modes.clear()
    assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    assert transaction_modes and all(autocommit for _, autocommit in transaction_modes)


@pytest.mark.date_sensitive
def test_the_apis_writes_keep_their_transaction_after_a_read_on_the_same_connection(
    postgres_app, transaction_modes
):
    tenant = TenantFactory().create()
    client = postgres_app.test_client()
    assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    transaction_modes.clear()
    answer = book_through_api(client, tenant, ny(next_monday(), 10))
    assert answer.status_code == 201, answer.get_json()
    assert ("INSERT", False) in transaction_modes
    assert all(not autocommit for _, autocommit in transaction_modes)
