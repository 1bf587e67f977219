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


@cache
def migration_head(migrations_dir: Path) -> str | None:
    """The newest revision the code ships (read from the migration scripts, once)."""
    config = AlembicConfig()
    config.set_main_option("script_location", str(migrations_dir))
    return ScriptDirectory.from_config(config).get_current_head()


def check_database(head: str | None) -> tuple[Check, Check]:
    """The database answers, and its schema is at ``head``."""
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
    migrations = (
        Check(True, f"at head {head}")
        if revision == head
        else Check(False, f"database at {revision}, code at {head}: run flask db upgrade")
    )
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


def readiness(now: datetime, redis_url: str | None, head: str | None) -> dict[str, Check]:
    database, migrations = check_database(head)
    return {
        "database": database,
        "redis": check_redis(redis_url),
        "migrations": migrations,
        "workers": check_workers(now) if database.ok else Check(False, "unknown"),
    }
