"""Calendar booking service: the application factory, the one place that wires the layers
together.

Importing this package loads nothing but the standard library: ``create_app`` imports what it
wires inside itself, so ``import app.scheduling`` (pure rules) or ``import app.client`` (an
HTTP client) costs only what those need (``tests/conventions/test_imports.py`` holds that true).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app. ``config`` (tests, scripts) wins over the environment.

    The app never creates or migrates tables itself: ``flask db upgrade`` (the Procfile's
    ``release``) does, once, instead of every process racing at start-up.
    """
    from flask import Flask
    from flask.json.provider import DefaultJSONProvider

    from app import models  # noqa: F401 - every model registered before Alembic looks
    from app.api import register_api
    from app.api.rate_limit import register_rate_limits
    from app.attendee import register_attendee_pages
    from app.celery_app import celery_init_app
    from app.cli import register_commands
    from app.config import SETTING_NAMES, Config, flask_config, load_settings
    from app.dashboard import register_dashboard
    from app.database import bound_postgres_waits, engine_options
    from app.deadlines import RequestWaitBudget
    from app.errors import register_error_handlers
    from app.extensions import db, migrate
    from app.health import register_health
    from app.jobs.webhooks import webhooks_delivery
    from app.llms import register_llms
    from app.logs import configure_logging, register_request_ids
    from app.metrics import count_booking_event, register_metrics
    from app.oauth import register_oauth
    from app.push import register_push
    from app.request_body import WholeBodyFirst
    from app.security_headers import register_security_headers
    from app.services.availability.cache import availability_store
    from app.services.integrations.calendars.consent import consent_page_origins
    from app.services.integrations.calendars.write_back import HANDLER_NAME as WRITE_BACK
    from app.services.integrations.calendars.write_back import KINDS as WRITE_BACK_KINDS
    from app.services.integrations.calendars.write_back import write_back_delivery
    from app.services.integrations.notifications.booking_mail import HANDLER_NAME as NOTIFICATIONS
    from app.services.integrations.notifications.booking_mail import KINDS as NOTIFIED
    from app.services.integrations.notifications.booking_mail import notify_delivery
    from app.services.integrations.registry import init_registry
    from app.services.integrations.webhooks.deliveries import HANDLER_NAME as WEBHOOKS

    app = Flask(__name__, instance_relative_config=True)
    # Every setting, typed and checked: a bad one stops the process here (SettingsError).
    settings = load_settings(app.instance_path, config)
    app.extensions["settings"] = settings
    # How names resolve and which addresses count as public: a test's own, else the default.
    app.extensions["address_policy"] = (config or {}).get("ADDRESS_POLICY")
    app.config.from_object(Config)
    app.config.update(flask_config(settings))
    app.config.update({k: v for k, v in (config or {}).items() if k not in SETTING_NAMES})
    assert isinstance(app.json, DefaultJSONProvider)  # Flask's own, as no other is set
    app.json.sort_keys = False  # keep the envelope's and resources' documented field order
    # Werkzeug would answer "//" in a path with a redirect to the merged path, built from the
    # client's Host header; paths are matched as sent instead (an unknown one is a JSON 404).
    app.url_map.merge_slashes = False

    # Who hears about booking events, this app's own (never another app's in the process):
    # the in-process subscribers, the outbox handlers, the webhook enqueueing (the last two
    # below and in celery_init_app).
    events = init_registry(app)

    configure_logging()
    register_request_ids(app)
    register_metrics(app)
    events.subscribe(count_booking_event)
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = engine_options(settings)
    db.init_app(app)
    with app.app_context():
        bound_postgres_waits(db.engine, settings)
    migrate.init_app(app, db, directory=str(MIGRATIONS_DIR), render_as_batch=True)
    register_error_handlers(app)
    register_api(app)
    app.extensions["availability_store"] = availability_store(settings)
    limiter = register_rate_limits(app)
    register_push(app, limiter)
    register_oauth(app, limiter)
    register_attendee_pages(app, limiter)
    register_commands(app)
    register_dashboard(app)
    register_health(app, MIGRATIONS_DIR)
    register_llms(app)
    # Connect Google / Microsoft 365 posts a form that is redirected to the provider's consent
    # page: the dashboard's form-action must allow those origins (and no others).
    register_security_headers(app, form_targets=consent_page_origins(settings))
    # The body is read first (WholeBodyFirst), and is no wait on PostgreSQL.
    app.wsgi_app = WholeBodyFirst(  # type: ignore[method-assign]
        RequestWaitBudget(app.wsgi_app, settings.db_request_wait_s),
        app.config["MAX_CONTENT_LENGTH"],
    )
    celery_init_app(app)  # subscribes the enqueueing to the worker, sets the webhook dispatcher
    # Each handler takes the event kinds it acts on; webhooks take every kind (subscriptions
    # choose theirs).
    events.register_handler(WRITE_BACK, write_back_delivery, WRITE_BACK_KINDS)
    events.register_handler(NOTIFICATIONS, notify_delivery, NOTIFIED)
    events.register_handler(WEBHOOKS, webhooks_delivery)
    return app
