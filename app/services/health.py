"""Is this deployment able to serve? The checks behind ``/readyz``, and the workers' heartbeats
they read.

Each check answers quickly even when its backend is down: the database waits are bounded
(``app.database``) and Redis is asked with a half-second timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

import redis
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from sqlalchemy import select, text
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import db
from app.models import WorkerHeartbeat

# A worker records a heartbeat every HEARTBEAT_INTERVAL; one not seen for WORKER_SILENCE is
# taken for gone (three missed beats).
HEARTBEAT_INTERVAL = timedelta(seconds=20)
WORKER_SILENCE = timedelta(seconds=60)


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "detail": self.detail}


def record_worker_heartbeat(worker: str, now: datetime) -> None:
    """Note that ``worker`` is alive at ``now`` (in the caller's transaction)."""
    heartbeat = db.session.get(WorkerHeartbeat, worker)
    if heartbeat is None:
        db.session.add(WorkerHeartbeat(worker=worker, seen_at=now))
    else:
        heartbeat.seen_at = now


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
        failed = Check(False, f"unreachable: {type(error).__name__}")
        return failed, Check(False, "unknown: the database did not answer")
    try:
        revision = db.session.scalar(text("SELECT version_num FROM alembic_version"))
    except SQLAlchemyError:
        db.session.rollback()
        revision = None
    head = shipped.head
    if revision == head:
        migrations = Check(True, f"at head {head}")
    elif revision is not None and revision not in shipped.revisions:
        migrations = Check(True, f"database at {revision}, newer than this code's head {head}")
    else:
        migrations = Check(False, f"database at {revision}, code at {head}: run flask db upgrade")
    return Check(True, "answering"), migrations


def check_redis(redis_url: str | None) -> Check:
    if not redis_url:
        return Check(True, "not used (embedded default)")
    client = redis.Redis.from_url(redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        client.ping()
        return Check(True, "answering")
    except redis.RedisError as error:
        return Check(False, f"unreachable: {type(error).__name__}")
    finally:
        client.close()


def check_workers(now: datetime) -> Check:
    try:
        seen = db.session.scalars(
            select(WorkerHeartbeat.worker).where(WorkerHeartbeat.seen_at >= now - WORKER_SILENCE)
        ).all()
    except SQLAlchemyError:
        db.session.rollback()
        return Check(False, "unknown: the database did not answer")
    if not seen:
        return Check(False, f"no worker seen in the last {int(WORKER_SILENCE.total_seconds())} s")
    return Check(True, f"{len(seen)} seen in the last {int(WORKER_SILENCE.total_seconds())} s")


def readiness(now: datetime, redis_url: str | None, shipped: ShippedMigrations) -> dict[str, Check]:
    database, migrations = check_database(shipped)
    return {
        "database": database,
        "redis": check_redis(redis_url),
        "migrations": migrations,
        "workers": check_workers(now) if database.ok else Check(False, "unknown"),
    }
