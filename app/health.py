"""``/healthz`` (the process answers) and ``/readyz`` (it can do its work): JSON, outside the
versioned API and its rate limits, for load balancers and orchestrators.

``/readyz`` answers 200 when every check passes and 503 otherwise, with each check's verdict:
the database answers, Redis answers (when configured), the schema is at the code's migration
head, and a Celery worker was seen in the last minute.
"""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Flask, current_app, jsonify
from flask.typing import ResponseReturnValue

from app.models.types import utcnow
from app.services.health import readiness, shipped_migrations

health_blueprint = Blueprint("health", __name__)


@health_blueprint.get("/healthz")
def alive() -> ResponseReturnValue:
    return jsonify(status="ok")


@health_blueprint.get("/readyz")
def ready() -> ResponseReturnValue:
    checks = readiness(
        utcnow(), current_app.config.get("REDIS_URL"), current_app.extensions["shipped_migrations"]
    )
    ok = all(check.ok for check in checks.values())
    body = {
        "status": "ready" if ok else "unready",
        "checks": {name: check.as_dict() for name, check in checks.items()},
    }
    return jsonify(body), 200 if ok else 503


def register_health(app: Flask, migrations_dir: Path) -> None:
    app.extensions["shipped_migrations"] = shipped_migrations(migrations_dir)
    app.register_blueprint(health_blueprint)
