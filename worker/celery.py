"""The command line's entry point: ``celery -A worker worker`` and ``celery -A worker beat``
find ``app`` here. Building the Flask app belongs to this entry point only, never to a task
module."""

from typing import Any

from celery.signals import beat_init, worker_process_init, worker_ready

from worker.metrics import count_in_own_folder

count_in_own_folder()  # before the app imports prometheus_client

from app import create_app  # noqa: E402
from app.celery_app import consumer_settings  # noqa: E402
from app.extensions import db  # noqa: E402
from worker.heartbeat import heartbeat_step  # noqa: E402

flask_app = create_app()
app = flask_app.extensions["celery"]
app.conf.update(consumer_settings(flask_app))  # a consumer waits for its broker; the web does not
app.steps["worker"].add(heartbeat_step(flask_app))  # only worker processes beat


@worker_process_init.connect
def connect_afresh_in_each_pool_process(**_: Any) -> None:
    """A pool process is forked from the worker, whose heartbeat keeps database connections
    in the pool. Two processes talking over one connection corrupt each other's transactions
    (seen as "can't change 'autocommit' now: connection in transaction status INTRANS"), so
    the child forgets the inherited connections, leaving them open for the parent."""
    with flask_app.app_context():
        db.engine.dispose(close=False)


@worker_ready.connect
def read_what_waits(**_: Any) -> None:
    """A worker that starts reads the connections whose sync was asked for while none ran (or
    whose message was lost), at once rather than at the next poll."""
    app.send_task("calendars.sync_requested")


@beat_init.connect
def poll_at_once(**_: Any) -> None:
    """Beat runs an interval's entry first one period after it starts: the poll looks for the
    connections due as beat starts too, so a connection overdue or due within that first
    period is not read late by beat's start (``freshness.connections_to_poll``)."""
    app.send_task("calendars.sync_all")
