"""The API served by a real gunicorn on loopback, on a PostgreSQL database of its own, with
tenants provisioned in the test process: what the client and MCP tests talk to."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from flask import Flask

from app import create_app
from app.extensions import db
from tests.factories import Tenant, TenantFactory
from tests.servers import gunicorn


@dataclass
class LiveApi:
    base_url: str  # ends with /v1/api
    port: int
    app: Flask  # on the server's database, for provisioning and checks

    def tenant(self, **sub_account_overrides: Any) -> Tenant:
        with self.app.app_context():
            return TenantFactory().create(**sub_account_overrides)


@contextmanager
def live_api(database_url: str, **env: str) -> Iterator[LiveApi]:
    """``database_url`` must be migrated. ``env`` goes to the server (``RATE_LIMIT``, …)."""
    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": database_url, "SECRET_KEY": "test-secret-key", "TESTING": True}
    )
    try:
        with gunicorn(database_url, workers=1, env=env) as base:
            yield LiveApi(f"{base}/v1/api", int(base.rsplit(":", 1)[1]), app)
    finally:
        with app.app_context():
            db.engine.dispose()
