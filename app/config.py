"""Configuration: defaults first, then the environment.

With nothing set the service runs embedded: SQLite under ``instance/``, a secret key generated
into ``instance/``, in-memory rate limits (one serving process). Production sets
``APP_ENV=production`` and must provide ``SECRET_KEY``, ``DATABASE_URL`` and ``REDIS_URL``.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import swagger_ui_bundle
from sqlalchemy.engine import URL, make_url

API_PREFIX = "/v1/api"
# Where gunicorn (gunicorn.conf.py) and ``make run`` listen when ``PORT`` is not set.
DEFAULT_PORT = 5000


class Config:
    APP_ENV = "development"
    MAX_CONTENT_LENGTH = 1024 * 1024

    API_TITLE = "Calendar Booking API"
    API_VERSION = "v1"
    OPENAPI_VERSION = "3.0.3"
    OPENAPI_URL_PREFIX = API_PREFIX
    OPENAPI_JSON_PATH = "openapi.json"
    OPENAPI_SWAGGER_UI_PATH = "docs"
    OPENAPI_SWAGGER_UI_URL = f"{API_PREFIX}/docs/assets/"
    SWAGGER_UI_ASSETS = swagger_ui_bundle.swagger_ui_path

    # Requests per sliding window: per API key, and per client address for requests without a
    # usable key. Any "N/second|minute|hour" or "N per M seconds" form of the limits library.
    RATE_LIMIT = "60/minute"
    RATE_LIMIT_UNAUTHENTICATED = "30/minute"

    # How often an API key's lastUsedAt is written at most, in seconds: a write per request
    # would turn every read into a write.
    API_KEY_LAST_USED_RESOLUTION = 60

    # How long a process may answer for an API key from memory before reading it again, in
    # seconds (app.api.key_cache): a deactivation made in another process takes effect
    # within this time; in the same process at once. 0 reads the key on every request.
    API_KEY_CACHE_SECONDS = 1.0

    # Seconds to wait for a CalDAV server, per connection attempt and per read.
    CALDAV_TIMEOUT_SECONDS = 10.0

    # Fresh calendars (app/services/integrations/calendars: live_check, push, polling).
    # How often a calendar without a live push channel is read, in seconds.
    SYNC_INTERVAL_SECONDS = 60
    # How often a calendar with a live push channel is still read (a notification may be lost).
    PUSH_RESYNC_SECONDS = 1800
    # auto: push when PUBLIC_URL is https://; on; off.
    CALENDAR_PUSH = "auto"
    # Asking the connected calendars at a write: best_effort, strict or off; and the one
    # deadline for all of them, in seconds.
    CALENDAR_LIVE_CHECK = "best_effort"
    CALENDAR_LIVE_CHECK_TIMEOUT_S = 1.5

    # Dashboard sessions: a signed cookie, unreadable to scripts, not sent on cross-site
    # requests, and refused by the server once older than this (Secure in production).
    SESSION_COOKIE_HTTPONLY = True
    SESSION_COOKIE_SAMESITE = "Lax"
    PERMANENT_SESSION_LIFETIME = timedelta(hours=12)


def database_url_from_env(url: str) -> str:
    """Normalise the URL forms hosting providers hand out to the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


Default = TypeVar("Default")


def configured_number(config: Mapping[str, Any], name: str, default: Default) -> float | Default:
    """The setting ``name`` as a number (the environment gives text), else ``default``: unset
    and empty alike mean "not configured"."""
    value = config.get(name)
    return float(value) if value not in (None, "") else default


def configured_duration(
    config: Mapping[str, Any], name: str, default: timedelta, unit: str = "seconds"
) -> timedelta:
    """The setting ``name`` (a number of ``unit``, as the environment gives it), else
    ``default``."""
    amount = configured_number(config, name, None)
    return default if amount is None else timedelta(**{unit: amount})


def beside_database(database_url: str | URL, instance_path: str, name: str) -> Path:
    """Where a process keeps a file of its own for this database (the embedded broker, beat's
    schedule, the rate-limit counts' lock): beside a SQLite database file
    (``calendar-<name>`` for ``calendar.sqlite3``), else in the instance folder, named per
    database so two deployments sharing the folder keep apart."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        path = Path(url.database)
        result = path.with_name(f"{path.stem}-{name}")
    else:
        rendered = url.render_as_string(hide_password=True)
        digest = hashlib.sha256(rendered.encode()).hexdigest()[:16]
        result = Path(instance_path) / f"{digest}-{name}"
    result.parent.mkdir(parents=True, exist_ok=True)
    return result


def public_url(configured: str | None, app_env: str, env: Mapping[str, str]) -> str:
    """The service's external base URL, without a trailing slash: every absolute link it
    writes starts with it, never with a request's ``Host`` (which a client chooses).

    ``PUBLIC_URL`` when set (required in production); else the embedded default's listening
    address, ``http://HOST:PORT`` as gunicorn and ``make run`` read them (an address that
    listens everywhere is reached at 127.0.0.1)."""
    if configured:
        parts = urlsplit(configured.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RuntimeError(f"PUBLIC_URL must be an http(s) URL with a host, not {configured!r}")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise RuntimeError("PUBLIC_URL takes a scheme, host, port and path only")
        return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    if app_env == "production":
        raise RuntimeError("PUBLIC_URL must be set when APP_ENV=production")
    host = env.get("HOST") or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{env.get('PORT') or DEFAULT_PORT}"


def _instance_secret_key(instance_path: Path) -> str:
    key_file = instance_path / "secret_key"
    if not key_file.exists():
        instance_path.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(48))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


def load_config(app_config: dict[str, Any], instance_path: str) -> None:
    """Fill ``app_config`` from the environment, after the class defaults were applied."""
    env = os.environ
    instance = Path(instance_path)
    app_config["APP_ENV"] = env.get("APP_ENV", app_config["APP_ENV"])

    if env.get("DATABASE_URL"):
        app_config["SQLALCHEMY_DATABASE_URI"] = database_url_from_env(env["DATABASE_URL"])
    elif "SQLALCHEMY_DATABASE_URI" not in app_config:
        instance.mkdir(parents=True, exist_ok=True)
        app_config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{instance / 'calendar.sqlite3'}"

    for name in (
        "REDIS_URL",
        "RATE_LIMIT",
        "RATE_LIMIT_UNAUTHENTICATED",
        "RATELIMIT_KEY_PREFIX",
        "CELERY_BROKER_URL",
        "CELERY_QUEUE",
        "SYNC_INTERVAL_SECONDS",
        "PUSH_RESYNC_SECONDS",
        "CALENDAR_PUSH",
        "CALENDAR_LIVE_CHECK",
        "CALENDAR_LIVE_CHECK_TIMEOUT_S",
        "PUSH_RATE_LIMIT",
        "OUTBOX_SWEEP_GRACE_SECONDS",
        "OUTBOX_RETRY_BASE_SECONDS",
        "SMTP_URL",
        "MAIL_FROM",
        "WEBHOOK_TIMEOUT_SECONDS",
        "WEBHOOK_RETRY_BASE_SECONDS",
        "WEBHOOK_LEASE_SECONDS",
        "WEBHOOK_DISABLE_AFTER_HOURS",
        "DB_CONNECT_TIMEOUT_S",
        "DB_STATEMENT_TIMEOUT_MS",
        "DB_POOL_SIZE",
        "DB_POOL_TIMEOUT_S",
        "DB_MIGRATION_LOCK_TIMEOUT_MS",
        "DB_REQUEST_WAIT_S",
        "REDIS_TIMEOUT_S",
        "AVAILABILITY_KEEP_SECONDS",
        "METRICS_TOKEN",
        # Calendar providers (app/services/integrations/calendars/oauth.py): the service's
        # OAuth clients, and endpoint bases that only tests or other clouds change.
        "GOOGLE_CLIENT_ID",
        "GOOGLE_CLIENT_SECRET",
        "GOOGLE_AUTHORIZE_URL",
        "GOOGLE_TOKEN_URL",
        "GOOGLE_REVOKE_URL",
        "GOOGLE_CALENDAR_API_URL",
        "MICROSOFT_CLIENT_ID",
        "MICROSOFT_CLIENT_SECRET",
        "MICROSOFT_TENANT",
        "MICROSOFT_LOGIN_URL",
        "MICROSOFT_GRAPH_URL",
    ):
        if env.get(name):
            app_config[name] = env[name]

    if env.get("SECRET_KEY"):
        app_config["SECRET_KEY"] = env["SECRET_KEY"]
    elif not app_config.get("SECRET_KEY"):
        if app_config["APP_ENV"] == "production":
            raise RuntimeError("SECRET_KEY must be set when APP_ENV=production")
        app_config["SECRET_KEY"] = _instance_secret_key(instance)
    if env.get("SECRET_KEY_FALLBACKS"):
        # Earlier keys, comma-separated, during a rotation (docs/deployment.md): sessions they
        # signed and secrets they encrypted stay readable.
        app_config["SECRET_KEY_FALLBACKS"] = [
            key.strip() for key in env["SECRET_KEY_FALLBACKS"].split(",") if key.strip()
        ]

    if env.get("OUTBOX_DISPATCH"):
        app_config["OUTBOX_DISPATCH"] = env["OUTBOX_DISPATCH"].lower() not in ("0", "false", "no")

    if env.get("WEBHOOK_ALLOW_PRIVATE"):
        app_config["WEBHOOK_ALLOW_PRIVATE"] = env["WEBHOOK_ALLOW_PRIVATE"].lower() in (
            "1",
            "true",
            "yes",
        )

    if env.get("CALDAV_ALLOW_PRIVATE"):
        app_config["CALDAV_ALLOW_PRIVATE"] = env["CALDAV_ALLOW_PRIVATE"].lower() in (
            "1",
            "true",
            "yes",
        )

    if env.get("API_KEY_CACHE_SECONDS"):
        app_config["API_KEY_CACHE_SECONDS"] = float(env["API_KEY_CACHE_SECONDS"])

    if env.get("CALDAV_TIMEOUT_SECONDS"):
        app_config["CALDAV_TIMEOUT_SECONDS"] = float(env["CALDAV_TIMEOUT_SECONDS"])

    # Reverse proxies in front of the app whose X-Forwarded-* headers are believed (0: none).
    app_config["TRUSTED_PROXY_COUNT"] = int(
        env.get("TRUSTED_PROXY_COUNT") or app_config.get("TRUSTED_PROXY_COUNT", 0)
    )

    if env.get("DASHBOARD_SESSION_HOURS"):
        app_config["PERMANENT_SESSION_LIFETIME"] = timedelta(
            hours=float(env["DASHBOARD_SESSION_HOURS"])
        )
    if app_config["APP_ENV"] == "production" or env.get("SESSION_COOKIE_SECURE") == "1":
        app_config["SESSION_COOKIE_SECURE"] = True

    if app_config["APP_ENV"] == "production" and not app_config.get("REDIS_URL"):
        # In-memory rate limits hold for one process only, and production runs many.
        raise RuntimeError("REDIS_URL must be set when APP_ENV=production")

    app_config["PUBLIC_URL"] = public_url(
        env.get("PUBLIC_URL") or app_config.get("PUBLIC_URL"), app_config["APP_ENV"], env
    )
