"""``/metrics``: private unless configured, and counting what happened — requests by route and
status, booking changes, conflicts by cause, idempotent replays, rate-limit rejections,
deliveries and the outbox backlog; across every gunicorn worker process."""

from __future__ import annotations

import json
import os
import re
import urllib.request
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from app.extensions import db
from app.models.types import utcnow
from app.services.health import record_worker_heartbeat
from tests.factories import book_through_api, next_monday, ny, z
from tests.servers import MACHINE_REDIS, free_port, gunicorn, migrate_and_run_demo

MONDAY = next_monday()
TOKEN = "scrape-token-1234"


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(client, token=TOKEN):
    return client.get("/metrics", headers={"Authorization": f"Bearer {token}"})


def test_metrics_answer_404_unless_a_token_is_configured(client):
    assert client.get("/metrics").status_code == 404


def test_metrics_need_the_configured_bearer_token(make_app):
    client = make_app(METRICS_TOKEN=TOKEN).test_client()
    assert client.get("/metrics").status_code == 401
    assert scrape(client, token="wrong").status_code == 401
    response = scrape(client)
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    assert b"calendar_http_requests_total" in response.data


@pytest.mark.date_sensitive
def test_created_bookings_are_counted_by_event_and_by_status(client, tenant):
    created = value("calendar_booking_events_total", event="booking.created")
    route = "/v1/api/calendar/event-types/<id:event_type_id>/bookings"
    answered = value("calendar_http_requests_total", method="POST", route=route, status="201")
    for hour in (9, 10, 11):
        assert book_through_api(client, tenant, ny(MONDAY, hour)).status_code == 201
    assert value("calendar_booking_events_total", event="booking.created") == created + 3
    assert (
        value("calendar_http_requests_total", method="POST", route=route, status="201")
        == answered + 3
    )


def test_request_latency_is_observed_per_route(client, tenant):
    route = "/v1/api/calendar/bookings"
    before = value("calendar_http_request_duration_seconds_count", method="GET", route=route)
    client.get(route, headers=tenant.headers())
    after = value("calendar_http_request_duration_seconds_count", method="GET", route=route)
    assert after == before + 1


@pytest.mark.date_sensitive
def test_conflicts_are_counted_by_cause(client, tenant):
    before = value("calendar_booking_conflicts_total", cause="booking")
    assert book_through_api(client, tenant, ny(MONDAY, 13)).status_code == 201
    assert book_through_api(client, tenant, ny(MONDAY, 13)).status_code == 400
    assert value("calendar_booking_conflicts_total", cause="booking") == before + 1


@pytest.mark.date_sensitive
def test_idempotent_replays_are_counted(client, tenant):
    before = value("calendar_idempotent_replays_total")
    for _ in range(3):
        book_through_api(client, tenant, ny(MONDAY, 14), idempotencyKey="metrics-replay")
    assert value("calendar_idempotent_replays_total") == before + 2


def test_rate_limit_rejections_are_counted_by_bucket(make_app, tenants):
    app = make_app(RATE_LIMIT="2/minute")
    with app.app_context():
        tenant = tenants.create()
        client = app.test_client()
        before = value("calendar_rate_limit_rejections_total", bucket="key")
        statuses = [
            client.get("/v1/api/calendar/bookings", headers=tenant.headers()).status_code
            for _ in range(4)
        ]
    assert statuses == [200, 200, 429, 429]
    assert value("calendar_rate_limit_rejections_total", bucket="key") == before + 2


@pytest.mark.date_sensitive
def test_outbox_backlog_counts_undelivered_events(make_app, tenants):
    app = make_app(METRICS_TOKEN=TOKEN)
    with app.app_context():
        tenant = tenants.create()
        client = app.test_client()
        for hour in (9, 10):
            assert book_through_api(client, tenant, ny(MONDAY, hour)).status_code == 201
        text = scrape(client).get_data(as_text=True)
    assert "calendar_outbox_backlog_events 2.0" in text
    oldest = re.search(r"^calendar_outbox_oldest_undelivered_seconds (\S+)$", text, re.M).group(1)
    assert float(oldest) >= 0


def test_workers_seen_and_redis_up_are_gauges_read_at_scrape_time(make_app):
    app = make_app(METRICS_TOKEN=TOKEN, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    with app.app_context():
        before = scrape(app.test_client()).get_data(as_text=True)
        record_worker_heartbeat("celery@metrics-host", utcnow())
        db.session.commit()
        after = scrape(app.test_client()).get_data(as_text=True)
    assert re.search(r"^calendar_workers_seen 0\.0$", before, re.M)
    assert re.search(r"^calendar_workers_seen 1\.0$", after, re.M)
    assert re.search(r"^calendar_redis_up 0\.0$", after, re.M)


def test_redis_up_is_one_when_redis_answers(make_app):
    app = make_app(METRICS_TOKEN=TOKEN, REDIS_URL=MACHINE_REDIS)
    with app.app_context():
        text = scrape(app.test_client()).get_data(as_text=True)
    assert re.search(r"^calendar_redis_up 1\.0$", text, re.M)


@pytest.mark.date_sensitive
@pytest.mark.slow
def test_metrics_of_every_gunicorn_worker_are_counted_together(postgres_database):
    """Two worker processes share the load; one scrape counts exactly the 201s the client saw."""
    database_url = postgres_database()
    demo = migrate_and_run_demo({**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "m"})
    env = {"METRICS_TOKEN": TOKEN, "RATE_LIMIT": "1000/minute"}
    with gunicorn(database_url, workers=2, env=env) as base:
        event_type = demo.event_types["Consultation"]
        created = 0
        for day in range(7):
            start = ny(MONDAY + timedelta(days=day % 5 + 7 * (day // 5)), 9)
            request = urllib.request.Request(
                f"{base}/v1/api/calendar/event-types/{event_type}/bookings",
                data=json.dumps(
                    {
                        "startTime": z(start),
                        "endTime": z(start + timedelta(minutes=30)),
                        "attendees": [{"email": "m@example.test"}],
                    }
                ).encode(),
                method="POST",
                headers={"x-calendar-api-key": demo.api_key, "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                created += response.status == 201
        scrape_request = urllib.request.Request(
            base + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(scrape_request, timeout=10) as response:
            text = response.read().decode()
    assert created == 7
    route = "/v1/api/calendar/event-types/<id:event_type_id>/bookings"
    line = f'calendar_http_requests_total{{method="POST",route="{route}",status="201"}} 7.0'
    assert line in text
    assert 'calendar_booking_events_total{event="booking.created"} 7.0' in text
