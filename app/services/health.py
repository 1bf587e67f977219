"""Is this process able to serve, and is the deployment around it well? The checks behind
``/readyz`` and ``/statusz``, and the workers' heartbeats they read.

Readiness is about *this* web process only: what every request needs, the database answering
with a schema this code can serve. Redis, the workers and the outbox backlog are the whole
deployment's health: a load balancer acting on them would take every web process out at once
when the workers die or are redeployed, and the API would go dark though it could serve. They
are reported beside readiness as information, and decide ``/statusz``, which a monitor alerts
on.

A worker is well when it beats *and*, while work waits, takes tasks: its heartbeat records
when it last took or ran one, and a worker seen but taking nothing while outbox events wait is
reported (its consumer can stop after a broker outage while its timer beats on).

Each check answers quickly even when its backend is down: the database waits are bounded
(``app.database``) and Redis is asked with ``REDIS_TIMEOUT_S`` (0.25 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

import redis
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from sqlalchemy import func, select, text
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import db
from app.models import WorkerHeartbeat
from app.services.integrations.outbox import backlog, waiting_for_workers

# A worker records a heartbeat every HEARTBEAT_INTERVAL; one not seen for WORKER_SILENCE is
# taken for gone (three missed beats).
HEARTBEAT_INTERVAL = timedelta(seconds=20)
WORKER_SILENCE = timedelta(seconds=60)
# The sweep enqueues missed events every minute and failing handlers retry with backoff; an
# event still undelivered after this long means deliveries are stuck.
OUTBOX_LAG_LIMIT = timedelta(minutes=10)
# A worker that beats may still take nothing (its consumer stuck after a broker outage, issue
# 48). Work waiting longer than this while a worker took no task for as long says so: an event
# missed by its enqueueing is enqueued again within the sweep's grace (30 s) and period (a
# minute), and a worker taking tasks takes it at once.
CONSUMING_LIMIT = timedelta(minutes=2)


@dataclass(frozen=True)
class Check:
    """One verdict. ``required``: whether it decides this process's readiness; the others are
    the deployment's health, shown beside it."""

    ok: bool
    detail: str
    required: bool = False

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "detail": self.detail, "required": self.required}


def record_worker_heartbeat(worker: str, now: datetime, worked_at: datetime | None = None) -> None:
    """Note that ``worker`` is alive at ``now``, and last took or ran a task at ``worked_at``
    (None: not since it started), in the caller's transaction."""
    heartbeat = db.session.get(WorkerHeartbeat, worker)
    if heartbeat is None:
        db.session.add(WorkerHeartbeat(worker=worker, seen_at=now, worked_at=worked_at))
    else:
        heartbeat.seen_at, heartbeat.worked_at = now, worked_at


@dataclass(frozen=True)
class ShippedMigrations:
    """The revisions this code ships, and the newest of them."""

    head: str | None
    revisions: frozenset[str]


@cache
def shipped_migrations(migrations_dir: Path) -> ShippedMigrations:
    """Read from the migration scripts, once."""
    config = AlembicConfig()
    config.set_main_option("script_location", str(migrations_dir))
    scripts = ScriptDirectory.from_config(config)
    revisions = frozenset(script.revision for script in scripts.walk_revisions())
    return ShippedMigrations(scripts.get_current_head(), revisions)


def check_database(shipped: ShippedMigrations) -> tuple[Check, Check]:
    """The database answers, and its schema is one this code can serve: its head, or a newer
    one. During a deploy, ``release`` migrates before the old processes stop; migrations are
    written to keep the previous release working (docs/deployment.md), so the old processes
    stay ready rather than all leaving the load balancer at once."""
    try:
        db.session.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        db.session.rollback()
        failed = Check(False, f"unreachable: {type(error).__name__}", required=True)
        return failed, Check(False, "unknown: the database did not answer", required=True)
    try:
        revision = db.session.scalar(text("SELECT version_num FROM alembic_version"))
    except SQLAlchemyError:
        db.session.rollback()
        revision = None
    head = shipped.head
    if revision == head:
        migrations = Check(True, f"at head {head}", required=True)
    elif revision is not None and revision not in shipped.revisions:
        detail = f"database at {revision}, newer than this code's head {head}"
        migrations = Check(True, detail, required=True)
    else:
        detail = f"database at {revision}, code at {head}: run flask db upgrade"
        migrations = Check(False, detail, required=True)
    return Check(True, "answering", required=True), migrations


def check_redis(redis_url: str | None, timeout_s: float) -> Check:
    """Redis answers a ping within ``timeout_s`` (``REDIS_TIMEOUT_S``, as every Redis client
    of the web has)."""
    if not redis_url:
        return Check(True, "not used (embedded default)")
    client = redis.Redis.from_url(
        redis_url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )
    try:
        client.ping()
        return Check(True, "answering")
    except redis.RedisError as error:
        return Check(False, f"unreachable: {type(error).__name__}")
    finally:
        client.close()


def workers_seen(now: datetime) -> int:
    """How many workers recorded a heartbeat within ``WORKER_SILENCE``."""
    seen = db.session.scalar(
        select(func.count())
        .select_from(WorkerHeartbeat)
        .where(WorkerHeartbeat.seen_at >= now - WORKER_SILENCE)
    )
    assert seen is not None  # a count is one row
    return seen


def idle_workers(now: datetime) -> list[str]:
    """The workers seen within ``WORKER_SILENCE`` that took or ran no task within
    ``CONSUMING_LIMIT``."""
    return list(
        db.session.scalars(
            select(WorkerHeartbeat.worker)
            .where(
                WorkerHeartbeat.seen_at >= now - WORKER_SILENCE,
                (WorkerHeartbeat.worked_at.is_(None))
                | (WorkerHeartbeat.worked_at < now - CONSUMING_LIMIT),
            )
            .order_by(WorkerHeartbeat.worker)
        )
    )


def check_workers(now: datetime) -> Check:
    """Workers beat, and take tasks while work waits: a worker seen but taking nothing for
    ``CONSUMING_LIMIT`` while outbox events have waited as long is not well, whatever its
    heartbeat says."""
    try:
        seen = workers_seen(now)
        waiting = waiting_for_workers(now, CONSUMING_LIMIT) if seen else 0
        idle = idle_workers(now) if waiting else []
    except SQLAlchemyError:
        db.session.rollback()
        return Check(False, "unknown: the database did not answer")
    window = int(WORKER_SILENCE.total_seconds())
    if not seen:
        return Check(False, f"no worker seen in the last {window} s")
    if idle:
        limit = int(CONSUMING_LIMIT.total_seconds())
        return Check(
            False,
            f"{seen} seen in the last {window} s, but {len(idle)} took no task in the last"
            f" {limit} s while {waiting} outbox events waited longer: {', '.join(idle[:5])}",
        )
    return Check(True, f"{seen} seen in the last {window} s")


def check_outbox(now: datetime) -> Check:
    try:
        count, oldest_age = backlog(now)
    except SQLAlchemyError:
        db.session.rollback()
        return Check(False, "unknown: the database did not answer")
    limit = int(OUTBOX_LAG_LIMIT.total_seconds())
    detail = f"{count} undelivered, the oldest {int(oldest_age)} s old (limit {limit} s)"
    return Check(oldest_age <= limit, detail)


def readiness(
    now: datetime, redis_url: str | None, redis_timeout_s: float, shipped: ShippedMigrations
) -> dict[str, Check]:
    """Every check: the required ones (``database``, ``migrations``) decide readiness, the
    rest (``redis``, ``workers``, ``outbox``) are the deployment's health."""
    database, migrations = check_database(shipped)
    unknown = Check(False, "unknown: the database did not answer")
    return {
        "database": database,
        "migrations": migrations,
        "redis": check_redis(redis_url, redis_timeout_s),
        "workers": check_workers(now) if database.ok else unknown,
        "outbox": check_outbox(now) if database.ok else unknown,
    }


def is_ready(checks: dict[str, Check]) -> bool:
    """Whether this process should get traffic: its required checks pass."""
    return all(check.ok for check in checks.values() if check.required)


def is_healthy(checks: dict[str, Check]) -> bool:
    """Whether the whole deployment is well: every check passes."""
    return all(check.ok for check in checks.values())
