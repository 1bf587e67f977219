"""The library internals the code still leans on, each kept in one module for a reason that is
written down (docs/performance.md, "Library internals: kept and removed"): these tests fail as
soon as the pinned library (``requirements.txt``) is not what was verified, or the internal
changed shape or behaviour. After an upgrade: read what changed in the named functions, check
the module still holds (its own tests say whether its answers are the same), then update the
versions and digests here.

* ``app/database.py`` (SQLAlchemy, psycopg): ``DeadlinePool`` overrides ``QueuePool._timeout``,
  which ``_do_get`` waits; ``DeadlineConnection`` overrides ``Connection.wait`` and catches
  psycopg's ``errors._WaitTimeout``. Kept for behaviour (bounded waits on a frozen PostgreSQL;
  neither library has a public way).
* ``app/services/integrations/outbound/transport.py`` (urllib3): its connections override
  ``HTTPConnection._new_conn``, which ``connect`` calls for the TCP socket before the TLS
  handshake, to show each socket to the exchange's deadline (``ExchangeDeadline``). Kept for
  behaviour (a webhook's or a feed's whole exchange bounded, its handshake included; urllib3
  has no public hook between the socket and the handshake). The deadline reaches each
  connection through the pool's public ``**conn_kw``.
* ``app/api/rate_limit.py`` (Flask-Limiter): ``OncePerOutage`` reads Flask-Limiter's log lines
  by their words (``OUTAGE_STARTS``, ``OUTAGE_ENDS``, ``ERROR_SWALLOWED``), which
  ``Limiter._check_request_limit`` and its private ``__inject_headers``, ``__filter_limits`` and
  ``__check_conditional_deductions`` log. Kept for behaviour (a storage outage logged once when
  it starts and once when it ends, not a traceback a request; Flask-Limiter has no callback or
  public state for its storage failing or recovering).
* ``run_procfile.py`` (honcho): ``CleanStopManager`` replaces ``Manager._procmgr``, reads
  ``Manager._processes`` and sets ``honcho.manager.KILL_WAIT``, read by ``Manager.loop``. Kept
  for behaviour (``make run``'s clean stop: one SIGTERM to each program alone, a longer grace,
  and its exit status; honcho 2.0.0's ``Manager`` takes none of these).

Replaced by public APIs (``tests/conventions/test_public_apis_only.py`` keeps it so): webargs'
``_raw_load_json`` (``ApiParser.load_json``), marshmallow's ``_declared_fields``
(``Schema().declared_fields``), Flask-Login's ``_user_id`` session key (the dashboard's own
session token), caldav's ``caldav.lib.http_sync`` and urllib3-future's ``_new_conn`` and
``pool_classes_by_scheme`` (niquests' ``Session(resolver=)`` with a resolver whose public
``create_connection`` shows each socket to the operation's deadline; the one assumption left,
that caldav's HTTP client is niquests, is checked below).
"""

from __future__ import annotations

import hashlib
import inspect
import io
import logging
import re
import signal
import socket
import sqlite3
import time
from importlib.metadata import version
from pathlib import Path

import honcho.manager
import psycopg
import psycopg.waiting
import pytest
import urllib3
from flask import Flask
from flask_limiter import Limiter
from honcho.compat import ProcessManager
from honcho.manager import Manager
from honcho.printer import Printer
from limits.storage import MemoryStorage
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import QueuePool
from urllib3.connection import HTTPConnection, HTTPSConnection

import run_procfile
from app.api import rate_limit
from app.database import DeadlinePool
from app.deadlines import wait_budget
from app.services.integrations.outbound.addresses import Target
from app.services.integrations.outbound.transport import ExchangeDeadline, pinned_pool

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements.txt"

# The versions the internals below were verified against, and the sources read then
# (sha256 of ``inspect.getsource``, first 16 hex digits).
VERIFIED = {
    "SQLAlchemy": (
        "2.1.9",
        {
            QueuePool.__init__: "d3f74e98a7592e12",
            QueuePool._do_get: "765070dd194a6c65",
            QueuePool.timeout: "5cb74362dc01b9db",
            QueuePool.recreate: "3a402c6f7648f3e3",
        },
    ),
    "psycopg": (
        "3.3.9",
        {
            psycopg.Connection.wait: "602ce5e47fca2ec9",
            psycopg.waiting.wait_poll: "930e9ddf1a8cfcbb",
        },
    ),
    "urllib3": (
        "2.8.0",
        {
            HTTPConnection._new_conn: "83e6a5dd7db98a0a",
            HTTPConnection.connect: "b70c63e7308857b1",
            HTTPSConnection.connect: "2a2e1795406d7f38",
        },
    ),
    "Flask-Limiter": (
        "4.1.1",
        {
            Limiter._check_request_limit: "cc6f2b2c1b5c1ff7",
            Limiter._Limiter__inject_headers: "aa6d828bc55063a1",
            Limiter._Limiter__filter_limits: "c352bf78105d7bcf",
            Limiter._Limiter__check_conditional_deductions: "70e69e3e1369de72",
        },
    ),
    "honcho": (
        "2.0.0",
        {
            Manager.__init__: "94c029a390763489",
            Manager.loop: "1a921f8fa9ebc0ce",
            Manager._killall: "09c8829791d0b0e9",
            ProcessManager.kill: "47f8718b703b2f74",
        },
    ),
}


def pinned(name: str) -> str:
    """The version ``requirements.txt`` pins ``name`` to (``name[extras]==version``)."""
    pattern = re.compile(rf"^{re.escape(name)}(\[[^\]]*\])?==(\S+)", re.IGNORECASE | re.MULTILINE)
    match = pattern.search(REQUIREMENTS.read_text())
    assert match, f"{name} is not pinned in requirements.txt"
    return match.group(2)


def digest(obj: object) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]


@pytest.mark.parametrize("library", list(VERIFIED))
def test_the_pinned_version_is_the_verified_one(library):
    verified, _ = VERIFIED[library]
    assert pinned(library) == verified, f"{library}: re-verify its internals (module docstring)"
    assert version(library) == verified, f"{library} installed is not the pinned version"


@pytest.mark.parametrize("library", list(VERIFIED))
def test_the_internals_read_are_the_verified_ones(library):
    _, sources = VERIFIED[library]
    changed = [obj.__qualname__ for obj, expected in sources.items() if digest(obj) != expected]
    assert not changed, f"{library} changed what the code relies on: {changed}"


# SQLAlchemy, for app/database.py's DeadlinePool


def test_a_pool_wait_reads_the_pools_timeout_attribute():
    """``QueuePool._do_get`` waits ``self._timeout``: ``DeadlinePool`` makes that the request's
    time left to wait (here 0.2 s against a configured 30 s)."""
    pool = DeadlinePool(
        lambda: sqlite3.connect(":memory:", check_same_thread=False),
        pool_size=1,
        max_overflow=0,
        timeout=30,
    )
    held = pool.connect()
    try:
        started = time.monotonic()
        with wait_budget(0.2), pytest.raises(PoolTimeout) as raised:
            pool.connect()
        assert time.monotonic() - started < 5
        assert "timeout 30" not in str(raised.value)
        assert pool.timeout() == 30
    finally:
        held.close()
        pool.dispose()


# psycopg, for app/database.py's DeadlineConnection


def test_a_psycopg_wait_past_its_timeout_raises_the_private_wait_timeout():
    """``DeadlineConnection.wait`` passes a timeout to ``Connection.wait`` and catches
    ``errors._WaitTimeout``, an ``OperationalError``, when the server stays silent."""
    assert issubclass(psycopg.errors._WaitTimeout, psycopg.OperationalError)
    assert list(inspect.signature(psycopg.Connection.wait).parameters) == [
        "self",
        "gen",
        "interval",
        "timeout",
    ]
    silent, other = socket.socketpair()

    def never_ready():
        while not (yield psycopg.waiting.Wait.R):
            pass

    try:
        started = time.monotonic()
        with pytest.raises(psycopg.errors._WaitTimeout):
            psycopg.waiting.wait(never_ready(), silent.fileno(), interval=0.01, timeout=0.05)
        assert time.monotonic() - started < 2
    finally:
        silent.close()
        other.close()


# urllib3, for app/services/integrations/outbound/transport.py's watched connections


def test_a_connections_socket_meets_the_exchange_deadline_before_its_tls_handshake():
    """``HTTPConnection._new_conn`` hands over the TCP socket before ``connect`` starts TLS:
    a server that accepts and never answers the handshake is cut off at the exchange's
    deadline (0.3 s), not at the read timeout (10 s)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        target = Target(f"https://localhost:{port}/", "https", "localhost", port, "/", "127.0.0.1")
        started = time.monotonic()
        with (
            ExchangeDeadline(0.3) as deadline,
            pinned_pool(target, 10, deadline) as pool,
            pytest.raises(urllib3.exceptions.HTTPError),
        ):
            pool.urlopen("GET", "/", redirect=False, assert_same_host=False)
        assert deadline.expired
        assert time.monotonic() - started < 5


# Flask-Limiter, for app/api/rate_limit.py's OncePerOutage


class FlakyStorage(MemoryStorage):
    """limits' memory storage, failing while ``down`` (registered for ``flaky://``)."""

    STORAGE_SCHEME = ["flaky"]
    down = False

    def fail_while_down(self) -> None:
        if FlakyStorage.down:
            raise ConnectionError("the test's storage is down")

    def incr(self, *args, **kwargs):
        self.fail_while_down()
        return super().incr(*args, **kwargs)

    def get(self, *args, **kwargs):
        self.fail_while_down()
        return super().get(*args, **kwargs)

    def get_expiry(self, *args, **kwargs):
        self.fail_while_down()
        return super().get_expiry(*args, **kwargs)

    def check(self) -> bool:
        return not FlakyStorage.down


def flaky_app(**options) -> Flask:
    app = Flask("limiter-internals")
    Limiter(
        key_func=lambda: "client",
        default_limits=["100/minute"],
        storage_uri="flaky://",
        swallow_errors=True,
        headers_enabled=True,
        **options,
    ).init_app(app)
    app.add_url_rule("/", "index", lambda: "ok")
    return app


def test_the_sources_log_the_words_the_outage_filter_reads():
    logging_code = "".join(inspect.getsource(function) for function in VERIFIED["Flask-Limiter"][1])
    for words in (rate_limit.OUTAGE_STARTS, rate_limit.OUTAGE_ENDS, rate_limit.ERROR_SWALLOWED):
        assert words in logging_code


def test_a_storage_outage_is_logged_in_the_words_the_outage_filter_reads(monkeypatch, caplog):
    """Flask-Limiter logs ``OUTAGE_STARTS`` when its storage fails and it falls back to memory,
    ``OUTAGE_ENDS`` when the storage answers its check again, and ``ERROR_SWALLOWED`` for a
    failure it has no fallback for."""
    monkeypatch.setattr(FlakyStorage, "down", False)
    monkeypatch.setattr(rate_limit.LIMITER_LOG, "filters", [])  # every line, as logged
    with caplog.at_level(logging.INFO, logger="flask-limiter"):
        falls_back = flaky_app(in_memory_fallback_enabled=True).test_client()
        assert falls_back.get("/").status_code == 200
        FlakyStorage.down = True
        assert falls_back.get("/").status_code == 200
        started = [r.getMessage() for r in caplog.records]
        FlakyStorage.down = False
        # Flask-Limiter checks a dead storage again after a backoff (1 s, then longer): its
        # clock is moved a minute on (whatever the date: only the difference counts).
        now = time.time
        with monkeypatch.context() as clock:
            clock.setattr(time, "time", lambda: now() + 60)
            assert falls_back.get("/").status_code == 200
        ended = [r.getMessage() for r in caplog.records][len(started) :]
        FlakyStorage.down = True
        no_fallback = flaky_app(in_memory_fallback_enabled=False).test_client()
        assert no_fallback.get("/").status_code == 200
        FlakyStorage.down = False
        swallowed = [r.getMessage() for r in caplog.records][len(started) + len(ended) :]
    outage_starts = next(m for m in started if rate_limit.OUTAGE_STARTS in m)
    outage_ends = next(m for m in ended if rate_limit.OUTAGE_ENDS in m)
    error_swallowed = next(m for m in swallowed if rate_limit.ERROR_SWALLOWED in m)
    once = rate_limit.OncePerOutage()
    lines = (outage_starts, error_swallowed, outage_ends, error_swallowed, error_swallowed)
    kept = [once.filter(logging.makeLogRecord({"msg": line})) for line in lines]
    assert kept == [True, False, True, True, False]


# honcho, for run_procfile.py's CleanStopManager


def test_a_clean_stop_manager_stops_by_pid_waits_its_grace_and_tells_the_statuses(monkeypatch):
    """``Manager`` stops the others through ``_procmgr`` once one process ends, kills what is
    left ``KILL_WAIT`` seconds later (here 0.5, not honcho's 5) and keeps each status in
    ``_processes``."""
    monkeypatch.setattr(honcho.manager, "KILL_WAIT", honcho.manager.KILL_WAIT)  # restored after
    stopped: list[int] = []
    terminate = run_procfile.SignalTheProgram.terminate
    monkeypatch.setattr(
        run_procfile.SignalTheProgram,
        "terminate",
        lambda self, pid: (stopped.append(pid), terminate(self, pid)),
    )
    assert isinstance(Manager(Printer(io.StringIO()))._procmgr, ProcessManager)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    manager = run_procfile.CleanStopManager(Printer(io.StringIO()), grace_seconds=0.5)
    assert honcho.manager.KILL_WAIT == 0.5
    manager.add_process("quick", "exec true")
    manager.add_process("stubborn", "trap '' TERM; exec sleep 60")
    started = time.monotonic()
    try:
        manager.loop()
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert time.monotonic() - started < 5
    assert manager.returncode == 0  # the first to end: quick
    assert stopped == [manager._processes["stubborn"]["pid"]]
    assert manager._processes["stubborn"]["returncode"] == -signal.SIGKILL
    assert not manager.all_stopped_cleanly()


def test_a_program_ended_by_the_stop_it_was_sent_stopped_cleanly():
    """Ctrl-C a moment after the start: a program that does not handle SIGTERM yet ends of
    it, which is the stop asked for; a program that ends of a signal nobody sent is not."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    manager = run_procfile.CleanStopManager(Printer(io.StringIO()), grace_seconds=5)
    manager.add_process("quick", "exec true")
    manager.add_process("not_yet_listening", "exec sleep 60")
    try:
        manager.loop()
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert manager._processes["not_yet_listening"]["returncode"] == -signal.SIGTERM
    assert manager.all_stopped_cleanly()
    manager._procmgr.asked_to_stop.clear()
    assert not manager.all_stopped_cleanly()


# caldav: public APIs only, and one assumption checked


def test_caldavs_http_client_is_niquests():
    """The CalDAV provider replaces a ``DAVClient``'s session with a ``niquests.Session`` (with
    its own resolver): niquests must be the HTTP client caldav itself uses (it takes niquests
    when it is installed, else requests, whose sessions take no resolver)."""
    import niquests
    from caldav.davclient import DAVClient

    client = DAVClient(url="http://localhost/", enable_rfc6764=False)
    try:
        assert isinstance(client.session, niquests.Session)
    finally:
        client.close()
