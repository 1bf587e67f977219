"""Configuration: every setting the service reads from the environment, in one typed place.

``Settings`` names each environment variable once (its field, upper-cased), with its type, its
default, its validation and a line saying what it does; ``docs/operations.md``'s configuration
table is held equal to it by ``tests/conventions/test_settings_documented.py``. Values come from the
environment, or from ``create_app``'s argument (tests, scripts), which wins. A bad value stops
the process at start with a ``SettingsError`` naming the variable, never at the first request
that reads it. Parsing is pydantic's: true/false is read one way everywhere (``1``, ``true``,
``yes``, ``on`` and their opposites), and an empty variable counts as unset.

With nothing set the service runs embedded: a PostgreSQL server from a pinned wheel with its data
under ``instance/`` (``app.embedded_database``), a secret key generated into ``instance/``,
in-memory rate limits (one serving process). Production sets
``APP_ENV=production`` and must provide ``SECRET_KEY``, ``REDIS_URL`` and ``PUBLIC_URL``.

Services read the app's settings with ``settings()``, typed attributes rather than strings
looked up in ``current_app.config``; Flask and its extensions get their own keys from
``flask_config``.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

import swagger_ui_bundle
from limits import parse
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import URL, make_url

if TYPE_CHECKING:
    from flask import Flask

API_PREFIX = "/v1/api"
# Where gunicorn (gunicorn.conf.py) and ``make run`` listen when ``PORT`` is not set.
DEFAULT_PORT = 5000
DEFAULT_SENDER = "Calendar Booking <bookings@localhost>"


class SettingsError(RuntimeError):
    """A setting that cannot be used: the message names the variable."""


class Config:
    """Flask's and its extensions' own keys that no operator sets (the settings are
    ``Settings``)."""

    MAX_CONTENT_LENGTH = 1024 * 1024

    API_TITLE = "Calendar Booking API"
    API_VERSION = "v1"
    OPENAPI_VERSION = "3.0.3"
    OPENAPI_URL_PREFIX = API_PREFIX
    OPENAPI_JSON_PATH = "openapi.json"
    OPENAPI_SWAGGER_UI_PATH = "docs"
    OPENAPI_SWAGGER_UI_URL = f"{API_PREFIX}/docs/assets/"
    SWAGGER_UI_ASSETS = swagger_ui_bundle.swagger_ui_path

    # Dashboard sessions: a signed cookie, unreadable to scripts, not sent on cross-site
    # requests, and refused by the server once older than DASHBOARD_SESSION_HOURS (Secure in
    # production).
    SESSION_COOKIE_HTTPONLY = True
    SESSION_COOKIE_SAMESITE = "Lax"


Seconds = Annotated[float, Field(ge=0)]
RateLimit = str  # any "N/second|minute|hour" or "N per M seconds" of the limits library


class Settings(BaseSettings):
    """Every environment variable the service reads: the field's name, upper-cased."""

    model_config = SettingsConfigDict(
        case_sensitive=False, env_ignore_empty=True, extra="ignore", frozen=True
    )

    # The deployment
    app_env: Literal["development", "production"] = Field(
        "development", description="production makes SECRET_KEY, REDIS_URL and PUBLIC_URL required"
    )
    public_url: str | None = Field(
        None, description="the external base URL every absolute link starts with"
    )
    host: str = Field("0.0.0.0", description="the address gunicorn listens on")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="the port web listens on")
    web_concurrency: int = Field(2, ge=1, description="gunicorn worker processes (with Redis)")
    web_connections: int = Field(1000, ge=1, description="connections per gevent worker")
    web_timeout: int = Field(30, ge=1, description="seconds a gunicorn worker may go silent")
    trusted_proxy_count: int = Field(0, ge=0, description="reverse proxies whose headers count")
    database_url: str | None = Field(
        None, description="PostgreSQL URL; unset: the embedded PostgreSQL in instance/"
    )
    secret_key: str | None = Field(None, repr=False, description="signs and encrypts")
    secret_key_fallbacks: Annotated[list[str], NoDecode] = Field(
        default_factory=list, repr=False, description="earlier SECRET_KEYs, comma-separated"
    )
    redis_url: str | None = Field(None, description="Redis for counts, cached sets and Celery")

    # The API
    rate_limit: RateLimit = Field("60/minute", description="requests per API key")
    rate_limit_unauthenticated: RateLimit = Field("30/minute", description="per address")
    ratelimit_key_prefix: str = Field("", description="prefix of the rate-limit keys in Redis")
    api_key_cache_seconds: Seconds = Field(
        1.0, description="how long a key is answered from memory"
    )
    availability_keep_seconds: int = Field(3600, ge=0, description="how long a set is kept")
    oauth_access_token_seconds: int = Field(
        1800, ge=1, le=86400, description="how long an agent's OAuth access token works"
    )
    oauth_refresh_token_days: int = Field(
        30, ge=1, le=365, description="how long an unused OAuth refresh token works"
    )

    # Waits on PostgreSQL and Redis
    db_connect_timeout_s: Seconds = Field(3.0, description="connecting to PostgreSQL")
    db_statement_timeout_ms: int = Field(5000, ge=0, description="PostgreSQL statement_timeout")
    db_pool_size: int = Field(10, ge=1, description="pooled connections per process")
    db_pool_timeout_s: Seconds = Field(3.0, description="waiting for a pooled connection")
    db_migration_lock_timeout_ms: int = Field(3000, ge=0, description="a migration's lock wait")
    db_request_wait_s: Seconds = Field(1.5, description="one request's waits on PostgreSQL")
    redis_timeout_s: Seconds = Field(0.25, description="every Redis client's timeouts")

    # Metrics
    metrics_token: str | None = Field(None, repr=False, description="the /metrics bearer token")
    worker_metrics_port: int | None = Field(None, ge=1, le=65535, description="worker metrics")
    worker_metrics_host: str = Field("127.0.0.1", description="where worker metrics listen")
    prometheus_multiproc_dir: str | None = Field(None, description="gunicorn workers' metrics")

    # The worker
    celery_broker_url: str | None = Field(None, description="Celery's broker")
    celery_queue: str = Field("celery", description="the queue tasks go to")
    outbox_dispatch: bool = Field(True, description="hand committed events to Celery at once")
    outbox_sweep_grace_seconds: Seconds = Field(30.0, description="before the sweep retries")
    outbox_retry_base_seconds: Seconds = Field(60.0, description="first wait after a failure")
    retention_days: int = Field(30, ge=1, description="keeping delivered events and mail logs")

    # Fresh calendars
    sync_interval_seconds: float = Field(60.0, gt=0, description="how often a calendar is read")
    push_resync_seconds: float = Field(1800.0, gt=0, description="reading a pushed calendar")
    calendar_push: Literal["auto", "on", "off"] = Field("auto", description="push channels")
    push_rate_limit: RateLimit = Field("6000/minute", description="notifications per address")
    calendar_live_check: Literal["best_effort", "strict", "off"] = Field(
        "best_effort", description="asking the connected calendars at a write"
    )
    calendar_live_check_timeout_s: Seconds = Field(1.5, description="the live check's deadline")
    caldav_timeout_seconds: float = Field(10.0, gt=0, description="a CalDAV or feed read")
    caldav_allow_private: bool = Field(False, description="CalDAV and feeds on private addresses")

    # Calendar providers: the service's OAuth clients, and endpoints only tests change
    google_client_id: str | None = Field(None, description="Google OAuth client id")
    google_client_secret: str | None = Field(None, repr=False, description="its secret")
    google_authorize_url: str = Field(
        "https://accounts.google.com/o/oauth2/v2/auth", description="Google's consent page"
    )
    google_token_url: str = Field(
        "https://oauth2.googleapis.com/token", description="Google's token endpoint"
    )
    google_revoke_url: str = Field(
        "https://oauth2.googleapis.com/revoke", description="Google's revocation endpoint"
    )
    google_calendar_api_url: str = Field(
        "https://www.googleapis.com/calendar/v3", description="Google Calendar API v3"
    )
    microsoft_client_id: str | None = Field(None, description="Microsoft app registration id")
    microsoft_client_secret: str | None = Field(None, repr=False, description="its secret")
    microsoft_tenant: str = Field("common", description="which accounts may connect")
    microsoft_login_url: str = Field(
        "https://login.microsoftonline.com", description="the identity platform"
    )
    microsoft_graph_url: str = Field(
        "https://graph.microsoft.com/v1.0", description="Microsoft Graph v1.0"
    )

    # Mail
    smtp_url: str | None = Field(None, repr=False, description="where mail goes; unset: kept")
    mail_from: str = Field(DEFAULT_SENDER, description="the sender of every mail")

    # Webhooks
    webhook_allow_private: bool = Field(False, description="webhooks on private addresses")
    webhook_timeout_seconds: Seconds = Field(5.0, description="connect and each read")
    webhook_retry_base_seconds: Seconds = Field(30.0, description="first wait before a retry")
    webhook_lease_seconds: Seconds = Field(300.0, description="before the sweep enqueues")
    webhook_disable_after_hours: float = Field(72.0, gt=0, description="failing, then disabled")

    # The dashboard
    dashboard_session_hours: float = Field(12.0, gt=0, description="how long a sign-in lasts")
    session_cookie_secure: bool | None = Field(None, description="Secure cookie; production: on")
    sign_in_limit_per_address: RateLimit = Field("20/10 minutes", description="sign-in")
    sign_in_limit_per_address_account: RateLimit = Field("5/10 minutes", description="sign-in")
    sign_in_limit_per_account: RateLimit = Field("100/hour", description="sign-in")
    forgot_password_limit_per_address: RateLimit = Field("20/10 minutes", description="resets")
    forgot_password_limit_per_address_account: RateLimit = Field(
        "5/10 minutes", description="resets"
    )
    forgot_password_limit_per_account: RateLimit = Field("10/hour", description="resets")
    attendee_page_limit_per_link: RateLimit = Field(
        "30/minute", description="attendee's page, per manage link"
    )
    attendee_page_limit_per_address: RateLimit = Field(
        "60/minute", description="attendee's page, per address"
    )

    @field_validator(
        "rate_limit",
        "rate_limit_unauthenticated",
        "push_rate_limit",
        "sign_in_limit_per_address",
        "sign_in_limit_per_address_account",
        "sign_in_limit_per_account",
        "forgot_password_limit_per_address",
        "forgot_password_limit_per_address_account",
        "forgot_password_limit_per_account",
        "attendee_page_limit_per_link",
        "attendee_page_limit_per_address",
    )
    @classmethod
    def _a_rate_limit(cls, value: str) -> str:
        try:
            parse(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a rate limit such as 60/minute") from None
        return value

    @field_validator("calendar_push", "calendar_live_check", "app_env", mode="before")
    @classmethod
    def _a_word(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("secret_key_fallbacks", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    @field_validator("database_url")
    @classmethod
    def _for_psycopg3(cls, value: str | None) -> str | None:
        return None if value is None else database_url_from_env(value)

    @model_validator(mode="after")
    def _a_complete_deployment(self) -> Settings:
        if self.app_env == "production":
            for name in ("secret_key", "redis_url", "public_url"):
                # In-memory rate limits hold for one process only, and production runs many.
                if not getattr(self, name):
                    raise ValueError(f"{name.upper()} must be set when APP_ENV=production")
        if self.public_url is not None:
            object.__setattr__(self, "public_url", _base_url(self.public_url))
        return self

    @property
    def base_url(self) -> str:
        """``PUBLIC_URL``, or the embedded default's listening address: ``http://HOST:PORT``
        (an address that listens everywhere is reached at 127.0.0.1). Every absolute link the
        service writes starts with it, never with a request's ``Host`` (a client chooses it)."""
        if self.public_url:
            return self.public_url
        host = self.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def secret_keys(self) -> list[str]:
        """The key that encrypts, then the earlier ones that still decrypt."""
        assert self.secret_key is not None  # load_settings always provides one
        return [self.secret_key, *self.secret_key_fallbacks]

    @property
    def cookie_secure(self) -> bool:
        if self.session_cookie_secure is None:
            return self.app_env == "production"
        return self.session_cookie_secure

    def duration(self, name: str) -> timedelta:
        """A setting named ``…_SECONDS``, ``…_S`` or ``…_HOURS`` as a ``timedelta``."""
        amount = getattr(self, name)
        return timedelta(hours=amount) if name.endswith("_hours") else timedelta(seconds=amount)


def _base_url(configured: str) -> str:
    parts = urlsplit(configured.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"PUBLIC_URL must be an http(s) URL with a host, not {configured!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError("PUBLIC_URL takes a scheme, host, port and path only")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


SETTING_NAMES = frozenset(name.upper() for name in Settings.model_fields)


def load_settings(
    instance_path: str | Path, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """The settings: ``overrides`` (upper-case names, as ``create_app`` takes them) over the
    environment over the defaults, with what the embedded default keeps in the instance folder
    (the embedded PostgreSQL, a generated ``SECRET_KEY``). Raises ``SettingsError`` naming every
    variable that cannot be used."""
    overrides = overrides or {}
    given = {name.lower(): value for name, value in overrides.items() if name in SETTING_NAMES}
    if "SQLALCHEMY_DATABASE_URI" in overrides:  # Flask-SQLAlchemy's name, as tests give it
        given.setdefault("database_url", str(overrides["SQLALCHEMY_DATABASE_URI"]))
    try:
        settings = Settings(**given)
    except ValidationError as err:
        raise SettingsError(_explained(err)) from None
    instance = Path(instance_path)
    completed: dict[str, Any] = {}
    if settings.database_url is None:
        from app.embedded_database import embedded_database_url

        completed["database_url"] = database_url_from_env(embedded_database_url(instance))
    if not settings.secret_key:
        completed["secret_key"] = _instance_secret_key(instance)
    return settings.model_copy(update=completed) if completed else settings


def environment_settings() -> Settings:
    """The settings from the environment alone, for the processes around the app (gunicorn's
    configuration, the worker's metrics); raises ``SettingsError`` as ``load_settings`` does."""
    try:
        return Settings()
    except ValidationError as err:
        raise SettingsError(_explained(err)) from None


def _explained(err: ValidationError) -> str:
    lines = []
    for error in err.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        if error["loc"]:
            name = str(error["loc"][0]).upper()
            lines.append(message if message.startswith(name) else f"{name}: {message}")
        else:
            lines.append(message)
    return "; ".join(lines)


def flask_config(settings: Settings) -> dict[str, Any]:
    """The keys Flask and its extensions read, from the settings."""
    return {
        "SQLALCHEMY_DATABASE_URI": settings.database_url,
        "SECRET_KEY": settings.secret_key,
        "SECRET_KEY_FALLBACKS": settings.secret_key_fallbacks,
        "PERMANENT_SESSION_LIFETIME": timedelta(hours=settings.dashboard_session_hours),
        "SESSION_COOKIE_SECURE": settings.cookie_secure,
    }


def settings_of(app: Flask) -> Settings:
    """The settings ``create_app`` built ``app`` with."""
    found: Settings = app.extensions["settings"]
    return found


def settings() -> Settings:
    """The current app's settings."""
    from flask import current_app

    return settings_of(current_app)


def database_url_from_env(url: str) -> str:
    """Normalise the URL forms hosting providers hand out to the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def beside_database(database_url: str | URL, instance_path: str, name: str) -> Path:
    """Where a process keeps a file of its own for this database (beat's schedule): in the
    instance folder, named per database so two deployments sharing the folder keep apart."""
    rendered = make_url(database_url).render_as_string(hide_password=True)
    digest = hashlib.sha256(rendered.encode()).hexdigest()[:16]
    result = Path(instance_path) / f"{digest}-{name}"
    result.parent.mkdir(parents=True, exist_ok=True)
    return result


def _instance_secret_key(instance_path: Path) -> str:
    key_file = instance_path / "secret_key"
    if not key_file.exists():
        instance_path.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(48))
        key_file.chmod(0o600)
    return key_file.read_text().strip()
