"""How the service waits for PostgreSQL: never for long, and never on a dead connection.

A request must answer quickly whether PostgreSQL is up, down, restarting or frozen, so every
wait on it is bounded:

* connecting: ``DB_CONNECT_TIMEOUT_S`` (psycopg enforces it, 2 s at least);
* a statement on a live server: ``DB_STATEMENT_TIMEOUT_MS``, PostgreSQL's own
  ``statement_timeout``, which cancels the statement and keeps the connection;
* any answer at all: the same time plus ``ANSWER_MARGIN_S``, counted by the client. A frozen
  server (SIGSTOP, a hung host) keeps its TCP connections open and cannot enforce its own
  timeout, so psycopg's wait is given a deadline (``DeadlineConnection``); past it the
  connection is closed, which SQLAlchemy reads as a disconnect and drops the pool's other
  connections too;
* a free connection from the pool: ``DB_POOL_TIMEOUT_S``.

Checked-out connections are pinged first (``pool_pre_ping``), so after a restart the first
request reconnects instead of failing on a connection the server closed. The errors these
raise are SQLAlchemy's ``OperationalError`` / ``TimeoutError``, which ``app.errors`` answers
with a 503 and ``Retry-After``; the transaction was not committed, so nothing is half-written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url

DEFAULT_CONNECT_TIMEOUT_S = 3
DEFAULT_STATEMENT_TIMEOUT_MS = 5000
DEFAULT_POOL_SIZE = 10
DEFAULT_POOL_TIMEOUT_S = 3.0
DEFAULT_MIGRATION_LOCK_TIMEOUT_MS = 3000

# How much longer than the server's statement timeout the client waits for any answer: the
# server's own cancel (a clean error on a live connection) should come first.
ANSWER_MARGIN_S = 0.5


def _setting(config: Mapping[str, Any], name: str, default: float) -> float:
    value = config.get(name)
    return float(value) if value not in (None, "") else default


def statement_timeout_ms(config: Mapping[str, Any]) -> int:
    return int(_setting(config, "DB_STATEMENT_TIMEOUT_MS", DEFAULT_STATEMENT_TIMEOUT_MS))


def migration_lock_timeout_ms(config: Mapping[str, Any]) -> int:
    """How long a migration may wait for a table's lock (``DB_MIGRATION_LOCK_TIMEOUT_MS``):
    while it waits, every request touching that table waits behind it."""
    return int(_setting(config, "DB_MIGRATION_LOCK_TIMEOUT_MS", DEFAULT_MIGRATION_LOCK_TIMEOUT_MS))


def answer_deadline_s(config: Mapping[str, Any]) -> float | None:
    """How long the client waits for any answer from PostgreSQL; ``None`` (no deadline) when
    the statement timeout is switched off (0)."""
    milliseconds = statement_timeout_ms(config)
    return milliseconds / 1000 + ANSWER_MARGIN_S if milliseconds > 0 else None


def engine_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """SQLAlchemy engine options for ``SQLALCHEMY_DATABASE_URI``: the bounded waits above on
    PostgreSQL; SQLite (one file, no server to lose) keeps pre-ping only."""
    options: dict[str, Any] = {"pool_pre_ping": True}
    if make_url(config["SQLALCHEMY_DATABASE_URI"]).get_backend_name() != "postgresql":
        return options
    timeout_ms = statement_timeout_ms(config)
    options.update(
        pool_size=int(_setting(config, "DB_POOL_SIZE", DEFAULT_POOL_SIZE)),
        max_overflow=0,
        pool_timeout=_setting(config, "DB_POOL_TIMEOUT_S", DEFAULT_POOL_TIMEOUT_S),
        connect_args={
            "connect_timeout": int(
                _setting(config, "DB_CONNECT_TIMEOUT_S", DEFAULT_CONNECT_TIMEOUT_S)
            ),
            # A transaction left open by a stuck client must not hold locks for ever either.
            "options": (
                f"-c statement_timeout={timeout_ms}"
                f" -c idle_in_transaction_session_timeout={max(timeout_ms, 0) * 6}"
            ),
        },
    )
    return options


class DeadlineConnection(psycopg.Connection):
    """A psycopg connection whose every wait for the server ends by ``answer_deadline``
    seconds: past it the server is taken for gone and the connection is closed."""

    answer_deadline: float | None = None

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        try:
            return super().wait(
                gen, interval, timeout if timeout is not None else self.answer_deadline
            )
        except pg_errors._WaitTimeout as error:  # psycopg's own "wait timed out" error
            # The server's state is unknown (a statement may be running): the connection
            # cannot be reused, and closing it marks it as a disconnect for SQLAlchemy.
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"no answer from the database within {self.answer_deadline} s"
            ) from error


def bound_postgres_waits(engine: Engine, config: Mapping[str, Any]) -> None:
    """Make ``engine`` open ``DeadlineConnection``s (a no-op for SQLite)."""
    if engine.dialect.name != "postgresql":
        return
    deadline = answer_deadline_s(config)

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> DeadlineConnection:
        connection = DeadlineConnection.connect(*cargs, **cparams)
        connection.answer_deadline = deadline
        return connection


def without_statement_timeout(dbapi_connection: Any) -> None:
    """For long, deliberate work on one connection (migrations): PostgreSQL's statement
    timeout and the client's deadline are lifted for the rest of its session."""
    if isinstance(dbapi_connection, DeadlineConnection):
        dbapi_connection.answer_deadline = None
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = 0")
