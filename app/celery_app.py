"""The Celery app, bound to a Flask app: every task runs in an app context and one transaction.

It lives in the app package because every process needs it: ``create_app`` binds it so the web
process can publish, and the worker (``worker.celery``) runs its tasks. The tasks themselves
(``worker.tasks``) are named here only as strings, loaded by the worker process alone, so
nothing here imports the ``worker`` package.

Broker: ``CELERY_BROKER_URL``, else ``REDIS_URL``, else the embedded default, kombu's
SQLAlchemy transport on the service's own PostgreSQL database (its tables ``kombu_queue`` and
``kombu_message``; no Redis server to run, and the worker is still a real ``celery worker``
process). Results are not kept: tasks report through the
database. Beat keeps its schedule file beside the database too.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta
from typing import Any

from celery import Celery, Task
from flask import Flask, current_app
from kombu import Connection
from kombu.exceptions import OperationalError as KombuOperationalError
from kombu.transport.sqlalchemy import models as broker_models
from sqlalchemy import Connection as SAConnection
from sqlalchemy.exc import OperationalError

from app.config import beside_database, settings, settings_of
from app.extensions import db
from app.services.integrations.calendars.freshness import poll_tick
from app.services.integrations.events import BookingEvent
from app.services.integrations.registry import init_registry

# The tables kombu's SQLAlchemy transport (the embedded broker) creates in the service's database
# at first use: the broker's, not the schema's, so the migrations leave them alone.
BROKER_TABLES = frozenset({"kombu_queue", "kombu_message"})


def schema_owns(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's ``include_name`` hook: everything but the embedded broker's tables."""
    return not (type_ == "table" and name in BROKER_TABLES)


def create_broker_tables(flask_app: Flask, connection: SAConnection) -> None:
    """Create the embedded broker's tables now, once, on ``connection``, if the broker is the
    database.

    kombu creates them at each process's first use of the broker, checking first and creating
    after: the web, the worker and beat, started together on a new database, all found them
    missing and the later ones failed on PostgreSQL's unique names (``queue_id_sequence already
    exists``). So the release step (``flask db upgrade``, before any of them starts: the
    migrations' environment calls this) makes them, and every process finds them there. A
    Redis broker has nothing to create."""
    broker = celery_settings(flask_app)["broker_url"]
    if not broker.startswith("sqla+"):
        return
    with Connection(broker) as broker_connection:
        # A channel declares kombu's tables (with their configured names) in its metadata;
        # making one opens nothing.
        broker_connection.default_channel  # noqa: B018
    broker_models.metadata.create_all(connection)
    connection.commit()


# Pool processes of a worker started without ``-c``: one per core, and at least four. A task
# waiting on a slow calendar or webhook receiver (up to its deadline, a minute by default) holds
# its process; with four, one hostile server never holds the only one, and the others' syncs,
# messages and webhooks go on.
WORKER_PROCESSES = max(4, os.cpu_count() or 1)

TASK_MODULES = [
    "worker.tasks.accounts",
    "worker.tasks.bookings",
    "worker.tasks.calendars",
    "worker.tasks.holds",
    "worker.tasks.notifications",
    "worker.tasks.outbox",
    "worker.tasks.retention",
    "worker.tasks.webhooks",
]

log = logging.getLogger(__name__)

# How long a worker (or beat) waits on Redis before it gives a command up, and after how long
# a silent connection is checked (``consumer_settings``).
CONSUMER_SOCKET_TIMEOUT_S = 10.0
CONSUMER_HEALTH_CHECK_S = 10

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
    # Delivered events and mail logs past RETENTION_DAYS (app.jobs.retention).
    "purge-old-records": {"task": "retention.purge", "schedule": timedelta(minutes=10)},
    # Push channels renewed a day before they expire, so every 15 minutes is plenty.
    "keep-push-channels": {"task": "calendars.keep_channels", "schedule": timedelta(minutes=15)},
}


def publish_once(name: str, args: list[Any], what: str, **options: Any) -> bool:
    """Publish task ``name`` once, without retrying: a commit is already made and what it
    enqueues waits in the database for a sweep, so a broker that is away or frozen costs the
    committing request one socket timeout (``REDIS_TIMEOUT_S``), not the seconds of a retry
    policy. Returns whether the broker took it; a failure is logged as one line."""
    try:
        current_app.extensions["celery"].send_task(name, args=args, retry=False, **options)
    except (KombuOperationalError, OSError) as error:
        log.warning("broker unavailable (%s): %s waits for the sweep", type(error).__name__, what)
        return False
    return True


def dispatch_to_worker(booking_event: BookingEvent) -> None:
    """After a commit: hand the event's outbox row to the worker. Should the broker be away,
    the row waits for the sweep (``outbox.sweep``)."""
    if settings().outbox_dispatch:
        event_id = booking_event.event_id
        publish_once("outbox.deliver", [event_id], f"outbox event {event_id}")


def webhook_attempt_to_worker(delivery_id: int, when: datetime) -> None:
    """Hand a webhook delivery's attempt planned for ``when`` to the worker (Celery's ``eta``);
    should the broker be away, the webhook sweep enqueues it later."""
    if settings().outbox_dispatch:
        publish_once("webhooks.send", [delivery_id], f"webhook delivery {delivery_id}", eta=when)


def task_to_worker(task: str, args: list[Any], delay: float) -> None:
    """After a commit: hand a connection's task (its queued sync, a person's test) to the
    worker, to run ``delay`` seconds later; should the broker be away, a sync's mark waits for
    a worker's start or the next poll. A request for a password-reset link is enqueued the
    same way, with nothing written to wait for a sweep: lost with the broker away, it is asked
    for again."""
    if settings().outbox_dispatch:
        options = {"countdown": delay} if delay else {}
        publish_once(task, args, f"{task} {args}", **options)


def beat_schedule(sync_interval_seconds: int) -> dict[str, dict[str, Any]]:
    """The periodic tasks. The poll looks for the connections due every ``poll_tick`` (a few
    seconds, or the interval if shorter) and hands each over to run at its own due instant,
    so a connection is read at most one interval after its last read."""
    every = poll_tick(timedelta(seconds=sync_interval_seconds))
    return {**BEAT_SCHEDULE, "sync-calendars": {"task": "calendars.sync_all", "schedule": every}}


def celery_settings(flask_app: Flask) -> dict[str, Any]:
    configured = settings_of(flask_app)
    database, instance = configured.database_url, flask_app.instance_path
    assert database is not None  # load_settings gives the embedded default
    broker = configured.celery_broker_url or configured.redis_url or f"sqla+{database}"
    transport: dict[str, Any] = {}
    if broker.startswith("redis"):
        timeout = configured.redis_timeout_s
        transport = {
            # Redis hands an unacknowledged task to another worker after its visibility
            # timeout; webhook retries wait up to an hour (+20 %) with their eta, so it must be
            # longer.
            "visibility_timeout": 2 * 3600,
            # A frozen Redis never answers: without socket timeouts a publish waits for it as
            # long as it stays frozen (app.deadlines).
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            # A lost connection is made again once per use, not retried for seconds (kombu's
            # default: every publish after the first failure took 2.5 s while Redis was
            # frozen): publishers fall back on a sweep, and the worker's consumer reconnects
            # with its own retry policy (``broker_connection_max_retries``).
            "max_retries": 0,
        }
    return {
        "broker_url": broker,
        "broker_transport_options": transport,
        "broker_connection_retry_on_startup": True,
        # Publishes from the worker and beat retry briefly (a request's publish does not:
        # ``publish_once``); the sweeps catch up on what a broker outage kept back.
        "broker_connection_timeout": 2,
        "task_publish_retry_policy": {"max_retries": 2, "interval_start": 0, "interval_step": 0.2},
        "task_default_queue": configured.celery_queue,
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_concurrency": WORKER_PROCESSES,
        "task_soft_time_limit": 120,
        "task_time_limit": 180,
        "beat_schedule": beat_schedule(int(configured.sync_interval_seconds)),
        "beat_schedule_filename": str(beside_database(database, instance, "beat-schedule")),
        "timezone": "UTC",
        "include": TASK_MODULES,
    }


def consumer_settings(flask_app: Flask) -> dict[str, Any]:
    """The broker options of the processes ``celery -A worker`` starts (the worker, and beat),
    over ``celery_settings``: a consumer waits for its broker and comes back by itself, where a
    request fails fast.

    The web's 0.25 s socket timeout and single attempt are right for a publish inside a
    request (its event waits for a sweep), wrong for a consumer: an acknowledgement that timed
    out during a 5 s freeze of Redis held its task's place in the worker's prefetch window for
    good, and a worker whose acks all did stopped taking tasks (issue 48). So the worker waits
    out a brief freeze (``socket_timeout``); an acknowledgement Redis still does not answer is
    owed, not held (``worker.broker``, named here as a string: this module imports nothing of
    the worker); a connection that stays silent is dropped and made again
    (``health_check_interval``); and the worker reconnects for as long as the broker is away,
    never giving up (``broker_connection_max_retries``)."""
    configured = celery_settings(flask_app)
    consumer: dict[str, Any] = {
        "broker_connection_retry": True,
        "broker_connection_max_retries": None,  # retry for as long as the broker is away
        # A task running when the connection is lost finishes and records what it did; its
        # message, handed out again, finds that done. (Cancelling it could stop a mail after
        # it left and before it was recorded.)
        "worker_cancel_long_running_tasks_on_connection_loss": False,
    }
    if configured["broker_url"].startswith("redis"):
        consumer["broker_transport"] = "worker.broker:Transport"
        consumer["broker_transport_options"] = {
            "visibility_timeout": configured["broker_transport_options"]["visibility_timeout"],
            # Long enough to wait out a brief freeze of Redis (a failover, a slow fork), short
            # enough that a hung connection is given up; kombu's own default is to wait forever.
            "socket_timeout": CONSUMER_SOCKET_TIMEOUT_S,
            "socket_connect_timeout": CONSUMER_SOCKET_TIMEOUT_S,
            "socket_keepalive": True,
            # The connection waiting for tasks (BRPOP) is dropped and made again once its answer
            # is this much overdue; other connections PING first after this long idle.
            "health_check_interval": CONSUMER_HEALTH_CHECK_S,
        }
    return consumer


def celery_init_app(flask_app: Flask) -> Celery:
    """Create the Celery app for ``flask_app`` and keep it in ``flask_app.extensions``; wire
    enqueueing for the worker into ``flask_app``'s event registry (committed events, planned
    webhook attempts)."""

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

    celery_app: Celery = Celery(flask_app.name, task_cls=FlaskTask)
    celery_app.config_from_object(celery_settings(flask_app))
    celery_app.set_default()
    flask_app.extensions["celery"] = celery_app
    events = init_registry(flask_app)
    events.subscribe(dispatch_to_worker)
    events.set_dispatcher(webhook_attempt_to_worker)
    events.set_task_dispatcher(task_to_worker)
    return celery_app
