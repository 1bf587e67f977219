"""Prometheus metrics exposed at ``/metrics``: the counters of ``app.counters`` (what the
service did, counted where it happens), the HTTP requests, and gauges read at scrape time.

Counted with ``prometheus_client``. Under gunicorn (``PROMETHEUS_MULTIPROC_DIR``, which
``gunicorn.conf.py`` sets) every worker process writes its counts to files in one folder and
``/metrics`` adds them up, so any worker answers for all. The Celery worker counts the same way
in a folder of its own and serves its metrics itself (``worker.metrics``). Without the folder
(tests in one process, ``flask run``) the counts live in the process.

``/metrics`` is private: it answers 404 unless ``METRICS_TOKEN`` is set, and then only to
``Authorization: Bearer <token>``. The deployment's health (outbox backlog, workers seen, Redis
up) is read at each scrape, so it is right whichever process or machine did the work.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Iterator

from flask import Blueprint, Flask, Response, current_app, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from werkzeug.datastructures import WWWAuthenticate
from werkzeug.exceptions import NotFound, Unauthorized

from app.config import settings
from app.counters import BOOKING_EVENTS, HTTP_LATENCY, HTTP_REQUESTS
from app.services.integrations.events import BookingEvent

UNMATCHED_ROUTE = "(unmatched)"


def scrape_registry() -> CollectorRegistry:
    """What ``/metrics`` shows: every process's counts when they share a folder, else this
    process's own."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return REGISTRY


class DeploymentGauges(Collector):
    """The deployment's health as gauges, read at scrape time (so they are right whichever
    process or machine did the work): the outbox backlog and the age of its oldest event, the
    workers seen recently, whether Redis answers, and the calendar connections waiting for a
    person to act (reconnect, choose another calendar …). A monitor alerts on these (or on
    ``/statusz``); readiness never depends on them."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def collect(self) -> Iterator[GaugeMetricFamily]:
        # Imported here: the services count their work with this module's counters.
        from app.config import settings_of
        from app.models.types import utcnow
        from app.services.health import check_redis, workers_seen
        from app.services.integrations.calendars.health import connections_needing_action
        from app.services.integrations.calendars.push import channel_counts
        from app.services.integrations.outbox import backlog

        with self.app.app_context():
            now = utcnow()
            count, oldest_age = backlog(now)
            workers = workers_seen(now)
            configured = settings_of(self.app)
            redis_up = check_redis(configured.redis_url, configured.redis_timeout_s).ok
            needing_action = connections_needing_action()
            live_channels, near_expiry = channel_counts(now)
        yield GaugeMetricFamily(
            "calendar_outbox_backlog_events", "Outbox events not delivered yet", value=count
        )
        yield GaugeMetricFamily(
            "calendar_outbox_oldest_undelivered_seconds",
            "Age of the oldest outbox event not delivered yet (0 when none)",
            value=oldest_age,
        )
        yield GaugeMetricFamily(
            "calendar_workers_seen",
            "Celery workers whose heartbeat was recorded in the last 60 s",
            value=workers,
        )
        yield GaugeMetricFamily(
            "calendar_redis_up",
            "1 when Redis answers (or is not used: the embedded default), 0 otherwise",
            value=int(redis_up),
        )
        yield GaugeMetricFamily(
            "calendar_connections_needing_action",
            "Active calendar connections that fail until a person acts (reconnect, choose"
            " another calendar, subscribe again); each says what to do",
            value=needing_action,
        )
        yield GaugeMetricFamily(
            "calendar_push_channels_live",
            "Push channels (Google watch channels, Graph subscriptions) not expired",
            value=live_channels,
        )
        yield GaugeMetricFamily(
            "calendar_push_channels_near_expiry",
            "Live push channels expiring within 6 hours (their renewal keeps failing)",
            value=near_expiry,
        )


metrics_blueprint = Blueprint("metrics", __name__)


@metrics_blueprint.get("/metrics")
def exposition() -> Response:
    token = settings().metrics_token
    if not token:
        raise NotFound()
    sent = request.headers.get("Authorization", "")
    if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        raise Unauthorized(www_authenticate=WWWAuthenticate("Bearer"))
    registry = scrape_registry()
    output = generate_latest(registry) + generate_latest(_deployment_registry(current_app))
    return Response(output, content_type=CONTENT_TYPE_LATEST)


def _deployment_registry(app: Flask) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DeploymentGauges(app))
    return registry


def _start_timer() -> None:
    g.request_started = time.perf_counter()


def _count_request(response: Response) -> Response:
    started = g.pop("request_started", None)
    route = request.url_rule.rule if request.url_rule is not None else UNMATCHED_ROUTE
    HTTP_REQUESTS.labels(request.method, route, str(response.status_code)).inc()
    if started is not None:
        HTTP_LATENCY.labels(request.method, route).observe(time.perf_counter() - started)
    return response


def count_booking_event(booking_event: BookingEvent) -> None:
    """A booking-event subscriber (``create_app`` registers it on the app)."""
    BOOKING_EVENTS.labels(str(booking_event.kind)).inc()


def register_metrics(app: Flask) -> None:
    app.before_request(_start_timer)
    app.after_request(_count_request)
    app.register_blueprint(metrics_blueprint)
