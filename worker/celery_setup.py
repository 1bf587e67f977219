"""The Celery app, bound to a Flask app: every task runs in an app context and one transaction.

Broker: ``CELERY_BROKER_URL``, else ``REDIS_URL``, else the embedded default, kombu's
SQLAlchemy transport on a SQLite file beside the database (no server to run; the worker is
still a real ``celery worker`` process). Results are not kept: tasks report through the
database. Beat keeps its schedule file beside the database too.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from celery import Celery, Task
from flask import Flask, current_app
from sqlalchemy.exc import OperationalError

from app.config import beside_database
from app.extensions import db
from app.services.events import BookingEvent, subscribe
from app.services.webhooks.deliveries import set_dispatcher
from worker.heartbeat import heartbeat_step

TASK_MODULES = [
    "worker.tasks.bookings",
    "worker.tasks.calendars",
    "worker.tasks.holds",
    "worker.tasks.notifications",
    "worker.tasks.outbox",
    "worker.tasks.webhooks",
]

# Periodic work: task name → interval.
BEAT_SCHEDULE = {
    "complete-finished-bookings": {
        "task": "bookings.complete_finished",
        "schedule": timedelta(minutes=5),
    },
    "sweep-outbox": {"task": "outbox.sweep", "schedule": timedelta(minutes=1)},
    "send-reminders": {"task": "notifications.send_reminders", "schedule": timedelta(minutes=1)},
    "sweep-webhooks": {"task": "webhooks.sweep", "schedule": timedelta(minutes=1)},
    "purge-expired-holds": {"task": "holds.purge_expired", "schedule": timedelta(minutes=10)},
}


def dispatch_to_worker(booking_event: BookingEvent) -> None:
    """After a commit: hand the event's outbox row to the worker. Should the broker be away,
    the row waits for the sweep (``outbox.sweep``)."""
    if current_app.config.get("OUTBOX_DISPATCH", True):
        current_app.extensions["celery"].send_task("outbox.deliver", args=[booking_event.event_id])


def webhook_attempt_to_worker(delivery_id: int, when: datetime) -> None:
    """Hand a webhook delivery's attempt planned for ``when`` to the worker (Celery's ``eta``);
    should the broker be away, the webhook sweep hands it over later."""
    if current_app.config.get("OUTBOX_DISPATCH", True):
        current_app.extensions["celery"].send_task("webhooks.send", args=[delivery_id], eta=when)


def beat_schedule(sync_interval_seconds: int) -> dict[str, dict[str, Any]]:
    return {
        **BEAT_SCHEDULE,
        "sync-calendars": {
            "task": "calendars.sync_all",
            "schedule": timedelta(seconds=sync_interval_seconds),
        },
    }


def celery_settings(flask_app: Flask) -> dict[str, Any]:
    config = flask_app.config
    database, instance = config["SQLALCHEMY_DATABASE_URI"], flask_app.instance_path
    broker = (
        config.get("CELERY_BROKER_URL")
        or config.get("REDIS_URL")
        or f"sqla+sqlite:///{beside_database(database, instance, 'broker.sqlite3')}"
    )
    # Redis hands an unacknowledged task to another worker after its visibility timeout;
    # webhook retries wait up to an hour (+20 %) with their eta, so it must be longer.
    transport = {"visibility_timeout": 2 * 3600} if broker.startswith("redis") else {}
    return {
        "broker_url": broker,
        "broker_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        # A request that committed must not hang on a broker outage: the sweep catches up.
        "broker_connection_timeout": 2,
        "task_publish_retry_policy": {"max_retries": 2, "interval_start": 0, "interval_step": 0.2},
        "task_default_queue": config.get("CELERY_QUEUE", "celery"),
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_soft_time_limit": 120,
        "task_time_limit": 180,
        "beat_schedule": beat_schedule(int(config.get("SYNC_INTERVAL_SECONDS", 300))),
        "beat_schedule_filename": str(beside_database(database, instance, "beat-schedule")),
        "timezone": "UTC",
        "include": TASK_MODULES,
    }


def celery_init_app(flask_app: Flask) -> Celery:
    """Create the Celery app for ``flask_app`` and keep it in ``flask_app.extensions``."""

    class FlaskTask(Task):
        """Runs in an app context and one transaction: committed when the task returns,
        rolled back when it raises. Safe to retry: acknowledged late, retried on database
        outages with exponential backoff and jitter, a bounded number of times."""

        autoretry_for = (OperationalError,)
        max_retries = 5
        retry_backoff = True
        retry_backoff_max = 300
        retry_jitter = True

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            with flask_app.app_context():
                try:
                    result = self.run(*args, **kwargs)
                    db.session.commit()
                    return result
                except BaseException:
                    db.session.rollback()
                    raise
                finally:
                    db.session.remove()

    celery_app = Celery(flask_app.name, task_cls=FlaskTask)
    celery_app.config_from_object(celery_settings(flask_app))
    celery_app.steps["worker"].add(heartbeat_step(flask_app))
    celery_app.set_default()
    flask_app.extensions["celery"] = celery_app
    subscribe(dispatch_to_worker)
    set_dispatcher(webhook_attempt_to_worker)
    return celery_app
