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

A web request waits less: all its waits together may take ``DB_REQUEST_WAIT_S``
(``app.deadlines``), whichever of these limits is longer; each is given what is left and
charged what it took. Past it the connection waited on is closed (``RequestWaitSpent``); only
that connection is dropped, not the pool's others, since a request can run out of time on a
live server too (a long queue for a lock). A connection the request stops waiting for is
closed when it arrives.

A connection taken from the pool is checked without a round trip (``server_hung_up``): a
server that restarts or kills its backends sends a termination notice and closes the socket,
which leaves an idle connection's socket readable, so after a restart the first request
reconnects instead of failing on a connection the server closed. (SQLAlchemy's
``pool_pre_ping`` would send ``SELECT 1`` on every checkout: a round trip on every request. A
silently dead link, which a ping could only time out on, is caught by the answer deadline.)
The errors these raise are SQLAlchemy's ``OperationalError`` / ``TimeoutError``, which
``app.errors`` answers with a 503 and ``Retry-After``; the transaction was not committed, so
nothing is half-written.

Requests that only read (``reads_only``: the agent API's GETs) run each statement in
autocommit on PostgreSQL, which saves the ``BEGIN`` and ``ROLLBACK`` round trips. Under READ
COMMITTED, PostgreSQL's default and ours, every statement reads its own snapshot whether or not
a transaction surrounds it, so what such a request sees is unchanged.
"""

from __future__ import annotations

import contextlib
import select
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from flask_sqlalchemy.session import Session as FlaskSession
from gevent.monkey import get_original
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.pool import PoolProxiedConnection, QueuePool

from app.config import Settings
from app.deadlines import seconds_left, waiting_on_postgres

# How much longer than the server's statement timeout the client waits for any answer: the
# server's own cancel (a clean error on a live connection) should come first.
ANSWER_MARGIN_S = 0.5


def answer_deadline_s(settings: Settings) -> float | None:
    """How long the client waits for any answer from PostgreSQL; ``None`` (no deadline) when
    the statement timeout is switched off (0)."""
    milliseconds = settings.db_statement_timeout_ms
    return milliseconds / 1000 + ANSWER_MARGIN_S if milliseconds > 0 else None


def engine_options(settings: Settings) -> dict[str, Any]:
    """SQLAlchemy engine options for ``DATABASE_URL``: the bounded waits above (pooled
    connections are checked by ``bound_postgres_waits``)."""
    timeout_ms = settings.db_statement_timeout_ms
    options: dict[str, Any] = dict(
        poolclass=DeadlinePool,
        pool_size=settings.db_pool_size,
        max_overflow=0,
        pool_timeout=settings.db_pool_timeout_s,
        connect_args={
            "connect_timeout": int(settings.db_connect_timeout_s),
            # A transaction left open by a stuck client must not hold locks for ever either.
            # Sessions speak UTC, whatever the server's default: timestamps then arrive tagged
            # with Python's own UTC, which ``UTCDateTime`` passes through without converting.
            "options": (
                "-c timezone=UTC"
                f" -c statement_timeout={timeout_ms}"
                f" -c idle_in_transaction_session_timeout={max(timeout_ms, 0) * 6}"
            ),
        },
    )
    return options


class WaitAbandoned(psycopg.OperationalError):
    """A wait on PostgreSQL ended by a deadline of ours; the connection is closed."""


class RequestWaitSpent(WaitAbandoned):
    """The web request has spent its time to wait on PostgreSQL (``app.deadlines``)."""


class DeadlineConnection(psycopg.Connection):
    """A psycopg connection whose every wait for the server ends by ``answer_deadline``
    seconds, or sooner when the request's time to wait is spent: past it the server is taken
    for gone (or the request for out of time) and the connection is closed.

    Relies on psycopg internals: every wait goes through ``Connection.wait``, which raises
    ``errors._WaitTimeout`` past its ``timeout`` (psycopg has no public client-side deadline
    for an answer). ``tests/conventions/test_library_internals.py`` fails when the pinned psycopg
    changes them."""

    answer_deadline: float | None = None

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        left = seconds_left() if timeout is None else None
        by_request = left is not None and (
            self.answer_deadline is None or left < self.answer_deadline
        )
        if timeout is None:
            timeout = left if by_request else self.answer_deadline
        if by_request and timeout is not None and timeout <= 0:
            # Nothing sent: the generator has not run. Closed all the same, so that
            # SQLAlchemy drops it rather than rolling it back (which would wait again).
            self.pgconn.finish()
            raise RequestWaitSpent("the request's time to wait on the database is spent")
        try:
            with waiting_on_postgres():
                return super().wait(gen, interval, timeout)
        except pg_errors._WaitTimeout as error:  # psycopg's own "wait timed out" error
            # The server's state is unknown (a statement may be running): the connection
            # cannot be reused, and closing it marks it as a disconnect for SQLAlchemy.
            self.pgconn.finish()
            if by_request:
                raise RequestWaitSpent(
                    f"no answer from the database within the request's {timeout:.2f} s left"
                ) from error
            raise WaitAbandoned(
                f"no answer from the database within {self.answer_deadline} s"
            ) from error

    def rollback(self) -> None:
        """Roll back, never failing for want of time: a rollback that would wait past a
        deadline (a frozen server, a request out of time) closes the connection instead, and
        a closed connection has nothing left to roll back, since PostgreSQL rolls back the
        transaction of a session that ends. Rollbacks run in the request's teardown, where a
        failure would drop the client's connection instead of answering it."""
        if self.closed or self.info.transaction_status == TransactionStatus.IDLE:
            return  # nothing to roll back (psycopg would send nothing either)
        # Closed by ``wait`` when abandoned: the transaction ends with the session.
        with contextlib.suppress(WaitAbandoned):
            super().rollback()


class DeadlinePool(QueuePool):
    """SQLAlchemy's QueuePool, whose wait for a free connection is charged to the request's
    time to wait and ends when that is spent.

    Relies on a SQLAlchemy internal: ``QueuePool._do_get`` waits ``self._timeout`` seconds
    for a connection (SQLAlchemy 2.0 and 2.1; no public hook bounds that wait per checkout).
    ``tests/conventions/test_library_internals.py`` fails when the pinned SQLAlchemy changes it, and
    ``tests/system/test_frozen_backends.py`` when the wait is no longer bounded."""

    def connect(self) -> PoolProxiedConnection:
        with waiting_on_postgres():
            return super().connect()

    @property
    def _timeout(self) -> float:
        left = seconds_left()
        if left is None:
            return self._configured_timeout
        return max(0.0, min(self._configured_timeout, left))

    @_timeout.setter
    def _timeout(self, seconds: float) -> None:
        self._configured_timeout = seconds

    def recreate(self) -> QueuePool:
        """A fresh pool (``engine.dispose()``) with the configured timeout, not what is left
        to the current request."""
        pool = super().recreate()
        pool._timeout = self._configured_timeout
        return pool


class _ConnectAttempt:
    """A connection being made for a request that may stop waiting for it: made by a thread
    of its own (a greenlet under gevent), and closed on arrival once nobody waits for it. The
    attempt itself ends by ``DB_CONNECT_TIMEOUT_S``."""

    def __init__(self, connect: Callable[[], DeadlineConnection]) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._abandoned = False
        self._connection: DeadlineConnection | None = None
        self._error: BaseException | None = None
        threading.Thread(
            target=self._run, args=(connect,), name="postgres-connect", daemon=True
        ).start()

    def _run(self, connect: Callable[[], DeadlineConnection]) -> None:
        try:
            connection = connect()
        except BaseException as error:  # handed to the waiter, if any
            self._error = error
        else:
            with self._lock:
                if self._abandoned:
                    connection.close()
                else:
                    self._connection = connection
        finally:
            self._done.set()

    def result(self, seconds: float) -> DeadlineConnection:
        """The connection, if made within ``seconds``; else ``RequestWaitSpent``."""
        self._done.wait(max(seconds, 0.0))
        with self._lock:
            if self._connection is not None:
                return self._connection
            if self._error is not None:
                raise self._error
            self._abandoned = True
        raise RequestWaitSpent("no connection to the database in the request's time to wait")


def connect_in_time_left(connect: Callable[[], DeadlineConnection]) -> DeadlineConnection:
    """``connect()``, waited for no longer than the request's time left to wait (psycopg's own
    connect timeout cannot go under 2 s)."""
    left = seconds_left()
    if left is None:
        return connect()
    if left <= 0:
        raise RequestWaitSpent("the request's time to wait on the database is spent")
    with waiting_on_postgres():
        return _ConnectAttempt(connect).result(left)


# The operating system's poll, even under gevent (gunicorn's workers on PostgreSQL): gevent's
# stand-in would hand the greenlet to its hub even for a zero timeout, 15 times the cost and
# a trip to the back of the queue on a busy worker. Taken with gevent's documented
# ``gevent.monkey.get_original``: public API, not an internal of gevent.
_unpatched_poll = get_original("select", "poll")


def server_hung_up(connection: psycopg.Connection) -> bool:
    """Whether the server has closed (or spoken on) a connection that sits idle in the pool.

    An idle connection's socket has nothing to read unless the server terminated the session
    (a restart, a killed backend, ``pg_terminate_backend``): its farewell and the closed socket
    make it readable. Polled with no timeout, so it costs no round trip."""
    if connection.closed or connection.broken:
        return True
    try:
        poller = _unpatched_poll()
        poller.register(connection.fileno(), select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    except (OSError, ValueError, psycopg.Error):  # no socket left to poll: gone
        return True


def bound_postgres_waits(engine: Engine, settings: Settings) -> None:
    """Make ``engine`` open ``DeadlineConnection``s and refuse pooled connections the server
    has hung up on."""
    deadline = answer_deadline_s(settings)

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> DeadlineConnection:
        connection = connect_in_time_left(lambda: DeadlineConnection.connect(*cargs, **cparams))
        connection.answer_deadline = deadline
        return connection

    @event.listens_for(engine, "handle_error")
    def _drop_only_this_connection(context: Any) -> None:
        # A request out of time says nothing about the server: the pool's other connections
        # stay (each is dropped by its own request if the server is in fact frozen).
        if isinstance(context.original_exception, RequestWaitSpent):
            context.invalidate_pool_on_disconnect = False

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        # The pool drops this connection and hands out another (a fresh one if need be).
        if server_hung_up(dbapi_connection):
            raise DisconnectionError("the server closed this pooled connection")


_READS_ONLY = "reads_only"


@contextlib.contextmanager
def session_apart(engine: Engine) -> Iterator[OrmSession]:
    """A session of its own on ``engine``, committed as the block ends (rolled back if it
    raises): for a record kept whatever becomes of the caller's transaction (the mail log, a
    refreshed OAuth grant, a calendar write's claim). Services never commit the caller's
    transaction; a record apart is committed here, so the rule has one home."""
    with OrmSession(engine) as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        session.commit()


def reads_only(session: Any) -> None:
    """The session's transactions from now on only read: on PostgreSQL they run in autocommit
    (no ``BEGIN``/``ROLLBACK`` round trips). A write made anyway commits statement by
    statement, so only single-statement writes (a key's ``lastUsedAt``) belong there."""
    session.info[_READS_ONLY] = True


class Session(FlaskSession):
    """Flask-SQLAlchemy's session, binding ``reads_only`` sessions to the autocommit variant
    of the engine (same pool, same connections)."""

    def get_bind(self, mapper: Any = None, clause: Any = None, bind: Any = None, **kwargs: Any):
        engine = super().get_bind(mapper=mapper, clause=clause, bind=bind, **kwargs)
        if not self.info.get(_READS_ONLY):
            return engine
        # Kept on the engine itself, so it lives and goes with it (a mapping keyed by engine
        # would keep every engine alive: the variant refers to its engine). An attribute of
        # ours, not one SQLAlchemy reads.
        autocommit = getattr(engine, "_autocommit_variant", None)
        if autocommit is None:
            autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
            engine._autocommit_variant = autocommit  # type: ignore[union-attr]
        return autocommit


def without_statement_timeout(dbapi_connection: Any) -> None:
    """For long, deliberate work on one connection (migrations): PostgreSQL's statement
    timeout and the client's deadline are lifted for the rest of its session."""
    if isinstance(dbapi_connection, DeadlineConnection):
        dbapi_connection.answer_deadline = None
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = 0")
