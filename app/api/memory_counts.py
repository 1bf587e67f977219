"""One serving process per database when rate limits are counted in memory.

Without ``REDIS_URL`` each process keeps its own counts, so two processes serving one database
would let a key make twice its limit. The process that first serves an agent request claims
the database's counts; any other process that tries answers 503 (and logs why) until it can
claim them, so whatever the server configuration, a key never gets more than its limit.

The claim is a session advisory lock on a connection of its own, which the database drops
when the process ends (it holds across machines). It is per process, so many apps inside one
process (tests, scripts) share one claim. (A PostgreSQL restart ends the advisory lock's session
without this process noticing; another process could then claim the counts too. Development
setups only: production has Redis.)
"""

from __future__ import annotations

import logging
import os

from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import PoolProxiedConnection

from app.extensions import db

log = logging.getLogger(__name__)

# First key of the two-key advisory lock: the namespace of "who counts in memory".
MEMORY_COUNTS_LOCK = 0x0CA2

NOT_OWNER_MESSAGE = (
    "Service misconfigured: rate limits are counted in memory and another process already "
    "serves this database; set REDIS_URL to serve from several processes"
)

# Claims held by this process, by database: the dedicated connection that holds the lock.
# Keyed with the process id, so a forked child (gunicorn --preload) does not take its parent's
# claim for its own.
_claims: dict[tuple[int, URL], PoolProxiedConnection] = {}
_refusal_logged: set[tuple[int, URL]] = set()


def _claim_advisory_lock(engine: Engine) -> PoolProxiedConnection | None:
    connection = engine.raw_connection()
    connection.detach()  # the claim lives as long as the process: never back to the pool
    cursor = connection.cursor()
    cursor.execute("SELECT pg_try_advisory_lock(%s, 0)", (MEMORY_COUNTS_LOCK,))
    row = cursor.fetchone()
    assert row is not None  # a SELECT of one value answers one row
    (claimed,) = row
    cursor.close()
    connection.commit()
    if not claimed:
        connection.close()
        return None
    return connection


def owns_memory_counts() -> bool:
    """Whether this process keeps the rate-limit counts of the current app's database
    (claiming them if nobody does)."""
    engine = db.engine
    key = (os.getpid(), engine.url)  # on every agent request: no rendering, just a lookup
    if key in _claims:
        return True
    claim = _claim_advisory_lock(engine)
    if claim is None:
        if key not in _refusal_logged:
            _refusal_logged.add(key)
            log.error(NOT_OWNER_MESSAGE)
        return False
    _claims[key] = claim
    return True
