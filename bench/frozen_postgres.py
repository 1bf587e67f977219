"""What bounds a wait on a frozen PostgreSQL: libpq's public settings against the app's
deadline (``app.database.DeadlineConnection``), measured.

Issue 50 asked to replace the overrides in ``app/database.py`` with libpq's and SQLAlchemy's
public settings wherever they give the same guarantee. This measures the guarantee that needs
the override: a server frozen with SIGSTOP (a hung host or VM looks the same) keeps its TCP
connections open, and its kernel acknowledges what is sent, so no TCP-level setting can tell
it from a slow query. For each row: a connection made with the settings, the server frozen, a
``SELECT 1`` sent from a thread; how long until it returns or raises (at most ``--cap`` s, then
the server is thawed and the answer comes). Then a new connection is tried while frozen
(``connect_timeout``, which psycopg enforces itself).

Run from the project root (about a minute; starts a PostgreSQL of its own in a temporary
folder from the same binaries the tests use, and stops it)::

    .venv/bin/python -m bench.frozen_postgres [--cap 6]
"""

from __future__ import annotations

import argparse
import os
import platform
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from app.database import DeadlineConnection
from app.deadlines import wait_budget
from tests.postgres_servers import own_postgres_server

# A web request's time to wait on PostgreSQL, as ``DB_REQUEST_WAIT_S`` defaults it.
REQUEST_WAIT_S = 1.5
KEEPALIVES = {
    "keepalives": "1",
    "keepalives_idle": "1",
    "keepalives_interval": "1",
    "keepalives_count": "1",
}
ROWS: dict[str, dict[str, Any]] = {
    "no setting": {},
    "tcp_user_timeout=1000 ms": {"tcp_user_timeout": "1000"},
    "keepalives after 1 s, 1 probe": KEEPALIVES,
    "both": {"tcp_user_timeout": "1000", **KEEPALIVES},
    "statement_timeout=1000 ms (the server's own)": {"options": "-c statement_timeout=1000"},
}


def timed(work: Callable[[], None], cap: float) -> tuple[str, float, threading.Thread]:
    """How ``work`` ended and after how long (``still waiting`` at ``cap``), and its thread,
    to be joined once the server is thawed."""
    ended: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            work()
            ended["how"] = "answered"
        except Exception as error:
            ended["how"] = type(error).__name__
        ended["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(cap)
    return ended.get("how", "still waiting"), ended.get("seconds", cap), thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cap", type=float, default=6.0)
    options = parser.parse_args()
    if options.cap <= 2.5:
        parser.error("--cap must be longer than the 2 s connect timeout it is compared with")
    print("What bounds a wait on a frozen PostgreSQL (SIGSTOP)")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.platform()}; psycopg {psycopg.__version__},"
        f" libpq {psycopg.pq.version()}; date {time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    print(f"{'connection':48} {'SELECT 1 while frozen':28} {'connect while frozen'}")
    with own_postgres_server() as server:
        for name, settings in ROWS.items():
            connection = psycopg.connect(server.url, connect_timeout=2, **settings)
            connection.execute("SELECT 1")
            server.freeze()
            how, seconds, query = timed(lambda c=connection: c.execute("SELECT 1"), options.cap)
            connect_how, connect_seconds, connect = timed(
                lambda s=settings: psycopg.connect(server.url, connect_timeout=2, **s).close(),
                options.cap,
            )
            server.thaw()
            query.join()  # answered once thawed: the next row starts on a quiet server
            connect.join()
            connection.close()
            print(
                f"{name:48} {how + f' after {seconds:.2f} s':28}"
                f" {connect_how} after {connect_seconds:.2f} s"
            )
        # The app's own: psycopg's wait given the request's time left (``app.database``).
        connection = DeadlineConnection.connect(server.url, connect_timeout=2)
        connection.execute("SELECT 1")
        server.freeze()

        def in_a_request() -> None:
            with wait_budget(REQUEST_WAIT_S):
                connection.execute("SELECT 1")

        how, seconds, thread = timed(in_a_request, options.cap)
        server.thaw()
        thread.join()
        connection.close()
        print(f"{'app.database, a request with 1.5 s to wait':48} {how} after {seconds:.2f} s")


if __name__ == "__main__":
    main()
