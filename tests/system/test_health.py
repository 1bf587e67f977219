"""``/healthz``, ``/readyz`` and ``/statusz``: JSON answers outside the versioned API and its rate
limits. Ready when the database answers with a schema the code can serve, whatever Redis, the
workers and the outbox do; ``/statusz`` is degraded when any of them is not well."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import event, text

from app.extensions import db
from app.models.types import utcnow
from app.services.health import (
    CONSUMING_LIMIT,
    OUTBOX_LAG_LIMIT,
    WORKER_SILENCE,
    record_worker_heartbeat,
)
from tests.factories import make_booking, make_outbox_event
from tests.servers import MACHINE_REDIS, free_port, gunicorn, migrate_and_run_demo


def worker_seen(ago: timedelta, worked_ago: timedelta | None = None) -> None:
    """A heartbeat ``ago``, of a worker that took a task ``worked_ago`` (None: none since it
    started)."""
    now = utcnow()
    worked_at = None if worked_ago is None else now - worked_ago
    record_worker_heartbeat("celery@test-host", now - ago, worked_at)
    db.session.commit()


def record_event_at(tenant, occurred_at) -> None:
    """An outbox event no handler has had yet, written at ``occurred_at``."""
    booking = make_booking(tenant, utcnow() + timedelta(days=3))
    make_outbox_event(booking, occurred_at)


def test_healthz_answers_ok_in_json(client):
    response = client.get("/healthz")
    assert (response.status_code, response.json) == (200, {"status": "ok"})


def test_healthz_reads_nothing_from_the_database_even_with_an_api_key(app, client, tenant):
    statements: list[str] = []
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(db.engine, "before_cursor_execute", listener)
    try:
        response = client.get("/healthz", headers=tenant.headers())
    finally:
        event.remove(db.engine, "before_cursor_execute", listener)
    assert response.status_code == 200
    assert statements == []


def test_health_checks_are_not_rate_limited(make_app):
    app = make_app(RATE_LIMIT_UNAUTHENTICATED="2/minute")
    client = app.test_client()
    statuses = {client.get(path).status_code for path in ["/healthz", "/readyz"] * 5}
    assert 429 not in statuses
    assert "X-RateLimit-Limit" not in client.get("/healthz").headers


def test_readyz_is_ready_with_database_schema_and_a_worker_seen_recently(app, client):
    worker_seen(timedelta(seconds=5))
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json["status"] == "ready"
    checks = response.json["checks"]
    assert set(checks) == {"database", "migrations", "redis", "workers", "outbox"}
    assert all(check["ok"] for check in checks.values())


def test_readyz_requires_only_the_database_and_its_schema(app, client):
    checks = client.get("/readyz").json["checks"]
    required = {name for name, check in checks.items() if check["required"]}
    assert required == {"database", "migrations"}


def test_readyz_stays_ready_without_a_worker_seen_in_the_last_minute(app, client):
    """Workers dead or being redeployed must not take every web process out at once."""
    worker_seen(WORKER_SILENCE + timedelta(seconds=5))
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json["status"] == "ready"
    assert response.json["checks"]["workers"] == {
        "ok": False,
        "detail": "no worker seen in the last 60 s",
        "required": False,
    }


def test_statusz_is_degraded_without_a_worker_seen_in_the_last_minute(app, client):
    worker_seen(WORKER_SILENCE + timedelta(seconds=5))
    response = client.get("/statusz")
    assert response.status_code == 503
    assert response.json["status"] == "degraded"
    assert response.json["checks"]["workers"]["ok"] is False


def test_statusz_is_ok_when_every_check_passes(app, client):
    worker_seen(timedelta(seconds=5))
    response = client.get("/statusz")
    assert (response.status_code, response.json["status"]) == (200, "ok")


def test_statusz_is_degraded_when_an_outbox_event_waits_longer_than_the_limit(app, client, tenant):
    worker_seen(timedelta(seconds=5))
    record_event_at(tenant, utcnow() - OUTBOX_LAG_LIMIT - timedelta(minutes=1))
    status = client.get("/statusz")
    ready = client.get("/readyz")
    assert status.status_code == 503
    assert status.json["checks"]["outbox"]["ok"] is False
    assert status.json["checks"]["outbox"]["detail"].startswith("1 undelivered, the oldest 660 s")
    assert ready.status_code == 200


def test_statusz_is_degraded_when_a_worker_beats_but_takes_no_task_while_work_waits(
    app, client, tenant
):
    """A worker whose consumer stopped after a broker outage still beats (issue 48)."""
    worker_seen(timedelta(seconds=5), worked_ago=CONSUMING_LIMIT + timedelta(minutes=5))
    record_event_at(tenant, utcnow() - CONSUMING_LIMIT - timedelta(minutes=1))
    status = client.get("/statusz")
    assert (status.status_code, status.json["status"]) == (503, "degraded")
    assert status.json["checks"]["workers"] == {
        "ok": False,
        "detail": "1 seen in the last 60 s, but 1 took no task in the last 120 s while 1 outbox"
        " events waited longer: celery@test-host",
        "required": False,
    }
    assert status.json["checks"]["outbox"]["ok"] is True  # not yet late enough to say so
    assert client.get("/readyz").status_code == 200


def test_statusz_is_ok_when_the_worker_took_a_task_recently_while_work_waits(app, client, tenant):
    worker_seen(timedelta(seconds=5), worked_ago=timedelta(seconds=30))
    record_event_at(tenant, utcnow() - CONSUMING_LIMIT - timedelta(minutes=1))
    response = client.get("/statusz")
    assert (response.status_code, response.json["checks"]["workers"]["ok"]) == (200, True)


def test_statusz_is_ok_when_a_worker_that_took_no_task_has_no_work_waiting(app, client, tenant):
    worker_seen(timedelta(seconds=5))  # nothing taken since it started
    record_event_at(tenant, utcnow() - CONSUMING_LIMIT + timedelta(seconds=30))  # just written
    response = client.get("/statusz")
    assert (response.status_code, response.json["checks"]["workers"]["ok"]) == (200, True)


def test_statusz_is_ok_with_a_fresh_outbox_event_waiting(app, client, tenant):
    worker_seen(timedelta(seconds=5))
    record_event_at(tenant, utcnow() - timedelta(minutes=1))
    response = client.get("/statusz")
    assert response.status_code == 200
    assert response.json["checks"]["outbox"]["ok"] is True


@contextmanager
def schema_recorded_at(revision: str, head: str):
    """The database says it is at ``revision`` for the duration."""
    db.session.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    db.session.commit()
    try:
        yield
    finally:
        db.session.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": head})
        db.session.commit()


def test_readyz_is_unready_when_the_schema_is_behind_the_code(app, client):
    worker_seen(timedelta(seconds=1))
    head = app.extensions["shipped_migrations"].head
    with schema_recorded_at("0001", head):
        checks = client.get("/readyz").json["checks"]
    assert checks["migrations"] == {
        "ok": False,
        "detail": f"database at 0001, code at {head}: run flask db upgrade",
        "required": True,
    }


def test_readyz_stays_ready_on_a_schema_newer_than_the_code(app, client):
    """Mid-deploy: the next release migrated, and this (older) process keeps serving."""
    worker_seen(timedelta(seconds=1))
    head = app.extensions["shipped_migrations"].head
    with schema_recorded_at("0099_next_release", head):
        response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json["checks"]["migrations"] == {
        "ok": True,
        "detail": f"database at 0099_next_release, newer than this code's head {head}",
        "required": True,
    }


def test_readyz_stays_ready_when_redis_does_not_answer(make_app):
    """Requests are served without Redis (the rate limit and the outbox have fallbacks)."""
    app = make_app(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    with app.app_context():
        worker_seen(timedelta(seconds=1))
        ready = app.test_client().get("/readyz")
        status = app.test_client().get("/statusz")
    assert ready.status_code == 200
    assert ready.json["checks"]["redis"]["ok"] is False
    assert status.status_code == 503
    assert status.json["checks"]["redis"]["ok"] is False


def test_readyz_checks_redis_when_it_is_configured(make_app):
    app = make_app(REDIS_URL=MACHINE_REDIS)
    with app.app_context():
        worker_seen(timedelta(seconds=1))
        response = app.test_client().get("/readyz")
    assert response.json["checks"]["redis"] == {
        "ok": True,
        "detail": "answering",
        "required": False,
    }
    assert response.status_code == 200


def test_readyz_is_unready_when_the_database_does_not_answer(tmp_path):
    from app import create_app

    app = create_app(
        {
            "TESTING": True,
            "SECRET_KEY": "x",
            "SQLALCHEMY_DATABASE_URI": f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x",
            "DB_CONNECT_TIMEOUT_S": "2",
        }
    )
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.json["checks"]["database"]["ok"] is False
    assert response.json["checks"]["database"]["detail"].startswith("unreachable")


@pytest.mark.slow
def test_a_served_process_stays_ready_with_no_worker_running(postgres_database):
    """gunicorn on a migrated database with no Celery worker anywhere: the load balancer keeps
    sending it traffic, and a monitor sees the deployment degraded."""
    database_url = postgres_database()
    migrate_and_run_demo({**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "r"})
    with gunicorn(database_url, workers=1) as base:
        ready = http_get(f"{base}/readyz")
        status = http_get(f"{base}/statusz")
    assert ready[0] == 200
    assert ready[1]["checks"]["workers"]["ok"] is False
    assert status[0] == 503
    assert status[1]["status"] == "degraded"


def http_get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
