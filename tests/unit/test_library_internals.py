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
"""

from __future__ import annotations

import hashlib
import inspect
import re
import socket
import sqlite3
import time
from importlib.metadata import version
from pathlib import Path

import psycopg
import psycopg.waiting
import pytest
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import QueuePool

from app.database import DeadlinePool
from app.deadlines import wait_budget

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
