"""``/healthz`` and ``/readyz``: JSON answers outside the versioned API and its rate limits;
ready only when the database, Redis, the schema and a worker all are."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import event, text

from app.extensions import db
from app.models.types import utcnow
from app.services.health import WORKER_SILENCE, record_worker_heartbeat
from tests.servers import MACHINE_REDIS, free_port


def worker_seen(ago: timedelta) -> None:
    record_worker_heartbeat("celery@test-host", utcnow() - ago)
    db.session.commit()


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
    assert set(response.json["checks"]) == {"database", "redis", "migrations", "workers"}
    assert all(check["ok"] for check in response.json["checks"].values())


def test_readyz_is_unready_without_a_worker_seen_in_the_last_minute(app, client):
    worker_seen(WORKER_SILENCE + timedelta(seconds=5))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json["status"] == "unready"
    assert response.json["checks"]["workers"]["ok"] is False
    assert response.json["checks"]["database"]["ok"] is True


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
    }


def test_readyz_is_unready_when_redis_does_not_answer(make_app):
    app = make_app(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    with app.app_context():
        worker_seen(timedelta(seconds=1))
        response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.json["checks"]["redis"]["ok"] is False


def test_readyz_checks_redis_when_it_is_configured(make_app):
    app = make_app(REDIS_URL=MACHINE_REDIS)
    with app.app_context():
        worker_seen(timedelta(seconds=1))
        response = app.test_client().get("/readyz")
    assert response.json["checks"]["redis"] == {"ok": True, "detail": "answering"}
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
