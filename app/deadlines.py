"""How long a web request may wait on its backends: whatever is frozen, it is answered within
2 s (docs/deployment.md, "When Redis or PostgreSQL freezes").

A frozen server (SIGSTOP, a hung host or VM, a stalled network path) is the hard case: its
kernel still accepts TCP connections into the listen backlog and acknowledges what is sent, so
no error ever comes and only the client's own clock ends a wait. Hence two kinds of bound:

* PostgreSQL: a web request may wait on it ``DB_REQUEST_WAIT_S`` in all (``WaitBudget``):
  for a free pooled connection, for a new connection, for every answer (``app.database``).
  Each wait is given what is left, and charged what it took. Past it the connection waited
  on is discarded, never rolled back (a rollback over a frozen socket would wait too), and
  the request is answered 503 with ``Retry-After`` (``app.errors``). A create whose commit
  went unanswered is such a 503, never a 201; retried with its idempotency key it tells the
  truth either way. Only waiting is charged, not the request's own work: a first request
  that builds caches, or one slowed by a busy CPU, is not turned into a 503 (a deadline on
  the request's whole time did that under a loaded test run, measured: test-client requests
  took up to 1 s). Workers, beat and the command line run no request and keep
  ``app.database``'s longer limits (a migration or a sync may run long statements).
* Redis: every client the web uses (the rate limiter, the Celery publish after a commit) has
  ``REDIS_TIMEOUT_S`` socket and connect timeouts and makes one attempt, then falls back:
  the limiter counts in memory, an event not handed to the broker waits in the outbox for
  the sweep.

A request that meets both frozen waits at most one Redis timeout and its PostgreSQL budget
before its 503: the publish after a commit never comes, since the commit does not.

Why a budget every wait consults rather than a ``gevent.Timeout`` around the request (both cost
about a microsecond a request, measured): each wait ends inside the code that owns the
connection, which then closes it, and the request goes on to Flask's own 503 handler; it holds
however the app is served (gevent workers, threads, the test client). A
``gevent.Timeout`` is raised at whatever switch point the request has reached (inside psycopg
between a query and its answer, inside SQLAlchemy's pool, in a Redis read, in the publish after
a commit, turning a stored booking's 201 into a 503). Raised as itself, a ``BaseException``, it
passes Flask's error handlers by and the client gets a dropped connection, not a 503; raised as
a database error, SQLAlchemy keeps the connection, and closing the session then failed with
"another command is already in progress" (measured on a frozen server, psycopg 3.3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any


class WaitBudget:
    """The time one request may still spend waiting on PostgreSQL. Waits nest (a pool
    checkout connects, a new connection runs its first queries): the outermost is charged,
    and what a nested wait may take is what is left minus the outer wait so far."""

    def __init__(self, seconds: float) -> None:
        self._left = seconds
        self._depth = 0
        self._since = 0.0

    def left(self) -> float:
        if self._depth:
            return self._left - (time.monotonic() - self._since)
        return self._left

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Charge the time spent in the block."""
        self._depth += 1
        if self._depth == 1:
            self._since = time.monotonic()
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth:
                self._left -= time.monotonic() - self._since


# The current web request's budget; None outside web requests (workers, CLI, scripts).
_budget: ContextVar[WaitBudget | None] = ContextVar("postgres_wait_budget", default=None)


def seconds_left() -> float | None:
    """Seconds the current request may still wait on PostgreSQL (0 or less: none); ``None``
    when no budget applies."""
    budget = _budget.get()
    return None if budget is None else budget.left()


@contextmanager
def waiting_on_postgres() -> Iterator[None]:
    """A wait on PostgreSQL: charged to the current request's budget, if any."""
    budget = _budget.get()
    if budget is None:
        yield
        return
    with budget.waiting():
        yield


@contextmanager
def wait_budget(seconds: float) -> Iterator[None]:
    """Waits on PostgreSQL inside the block may take ``seconds`` in all (a web request's
    work, or a test standing in for one); 0 or less sets no budget."""
    if seconds <= 0:
        yield
        return
    token = _budget.set(WaitBudget(seconds))
    try:
        yield
    finally:
        _budget.reset(token)


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class RequestWaitBudget:
    """WSGI middleware: the app's work on each request may wait on PostgreSQL ``seconds`` in
    all, teardown included (Flask returns the session's connection to the pool there)."""

    def __init__(self, app: WSGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        with wait_budget(self.seconds):
            return self.app(environ, start_response)
