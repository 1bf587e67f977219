"""``/healthz`` (the process answers), ``/readyz`` (this process should get traffic) and
``/statusz`` (the whole deployment is well): JSON, outside the versioned API and its rate
limits.

``/readyz`` is for load balancers and orchestrators. It answers 503 only when this process
cannot serve requests: the database does not answer, or its schema is older than the code.
Redis, the Celery workers and the outbox backlog are listed beside those checks as
information (``"required": false``) but never make a web process unready: workers being
redeployed or dead must not take every web process out of the load balancer at once, while the
API could serve (bookings are stored; their events wait in the outbox).

``/statusz`` is for monitors: the same checks, and 503 ("degraded") when any of them fails.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Flask, current_app, jsonify
from flask.typing import ResponseReturnValue

from app.config import settings
from app.models.types import utcnow
from app.services.health import Check, is_healthy, is_ready, readiness, shipped_migrations

health_blueprint = Blueprint("health", __name__)


@health_blueprint.get("/healthz")
def alive() -> ResponseReturnValue:
    return jsonify(status="ok")


def _checks() -> dict[str, Check]:
    configured = settings()
    shipped = current_app.extensions["shipped_migrations"]
    return readiness(utcnow(), configured.redis_url, configured.redis_timeout_s, shipped)


def _answer(status: str, ok: bool, checks: dict[str, Check]) -> ResponseReturnValue:
    body = {"status": status, "checks": {name: check.as_dict() for name, check in checks.items()}}
    return jsonify(body), 200 if ok else 503


@health_blueprint.get("/readyz")
def ready() -> ResponseReturnValue:
    checks = _checks()
    ok = is_ready(checks)
    return _answer("ready" if ok else "unready", ok, checks)


@health_blueprint.get("/statusz")
def deployment_status() -> ResponseReturnValue:
    checks = _checks()
    ok = is_healthy(checks)
    return _answer("ok" if ok else "degraded", ok, checks)


def register_health(app: Flask, migrations_dir: Path) -> None:
    app.extensions["shipped_migrations"] = shipped_migrations(migrations_dir)
    app.register_blueprint(health_blueprint)
