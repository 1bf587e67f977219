"""Every error envelope names its cause with a stable ``code`` (README: "Error codes"), beside
the spec's unchanged ``statusCode`` and ``message``. The time-rule codes (slot_taken, slot_held,
blocked_time, external_busy, outside_hours, minimum_notice, beyond_horizon) and
idempotency_mismatch are checked with their causes in tests/api/test_suggested_slots.py,
limit_reached in tests/api/test_booking_caps.py, seats_full in tests/api/test_seats.py."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from app import create_app
from app.extensions import db
from app.services.common.errors import ErrorCode
from tests.factories import book_through_api, make_booking, next_monday, ny, z
from tests.probe_routes import add_probe_routes

MONDAY = next_monday()
TEN = ny(MONDAY, 10)
BOOKINGS = "/v1/api/calendar/bookings"


def assert_code(response, status, code, message=None):
    assert response.status_code == status, response.json
    assert response.json["statusCode"] == status
    assert response.json["code"] == code
    if message is not None:
        assert response.json["message"] == message
    assert "suggestedSlots" not in response.json


def create_url(tenant, event_type="Cleaning"):
    return f"/v1/api/calendar/event-types/{tenant.event_types[event_type]}/bookings"


@pytest.mark.date_sensitive
def test_a_missing_field_is_invalid_request(client, tenant):
    response = client.post(create_url(tenant), json={"startTime": z(TEN)}, headers=tenant.headers())
    assert_code(response, 400, "invalid_request")


def test_a_malformed_json_body_is_invalid_request(client, tenant):
    response = client.post(
        create_url(tenant), data="{nope", content_type="application/json", headers=tenant.headers()
    )
    assert_code(response, 400, "invalid_request", "Invalid JSON body")


@pytest.mark.date_sensitive
def test_an_end_before_the_start_is_invalid_time_range(client, tenant):
    response = book_through_api(client, tenant, TEN, endTime=z(TEN - timedelta(minutes=5)))
    assert_code(response, 400, "invalid_time_range", "endTime must be after startTime")


@pytest.mark.date_sensitive
def test_a_booking_over_24_hours_is_invalid_time_range(client, tenant):
    response = book_through_api(client, tenant, TEN, endTime=z(TEN + timedelta(hours=25)))
    assert_code(response, 400, "invalid_time_range", "A booking may last at most 24 hours")


@pytest.mark.date_sensitive
def test_cancelling_twice_is_booking_not_active(client, tenant):
    booking = make_booking(tenant, TEN, status="cancelled")
    response = client.delete(f"{BOOKINGS}/{booking.id}", headers=tenant.headers())
    assert_code(response, 400, "booking_not_active", "Booking is already cancelled")


@pytest.mark.date_sensitive
def test_updating_a_completed_booking_is_booking_not_active(client, tenant):
    booking = make_booking(tenant, TEN, status="completed")
    response = client.put(
        f"{create_url(tenant)}/{booking.id}", json={"title": "New"}, headers=tenant.headers()
    )
    assert_code(response, 400, "booking_not_active", "A completed booking cannot be updated")


@pytest.mark.parametrize(
    "key, code, message",
    [
        (None, "invalid_api_key", "Invalid or inactive API key"),
        ("inactive", "invalid_api_key", "Invalid or inactive API key"),
        ("expired", "api_key_expired", "API key has expired"),
        ("agency-level", "no_sub_account", "API key not associated with a subaccount"),
    ],
)
def test_each_401_names_its_cause(client, tenant, key, code, message):
    headers = tenant.headers(key) if key else {"x-calendar-api-key": "cbk_unknown"}
    assert_code(client.get(BOOKINGS, headers=headers), 401, code, message)


def test_a_missing_permission_is_permission_denied(client, tenant):
    response = client.get(BOOKINGS, headers=tenant.headers("without-canGetBookings"))
    assert_code(
        response, 403, "permission_denied", "API key does not have 'canGetBookings' permission"
    )


@pytest.mark.parametrize(
    "path, message",
    [
        (f"{BOOKINGS}/999999", "Booking not found"),
        ("/v1/api/calendar/event-types/999999/holds/1", "Hold not found"),
        ("/v1/api/calendar/nowhere", "Not found"),
    ],
)
def test_anything_missing_is_not_found(client, tenant, path, message):
    assert_code(client.delete(path, headers=tenant.headers()), 404, "not_found", message)


@pytest.mark.date_sensitive
def test_an_unknown_event_type_is_not_found(client, tenant):
    url = "/v1/api/calendar/event-types/999999/bookings"
    payload = {
        "startTime": z(TEN),
        "endTime": z(TEN + timedelta(minutes=30)),
        "attendees": [{"email": "pat@example.test"}],
    }
    response = client.post(url, json=payload, headers=tenant.headers())
    assert_code(response, 404, "not_found", "Event type not found")


def test_a_wrong_method_is_method_not_allowed(client, tenant):
    response = client.patch(BOOKINGS, headers=tenant.headers())
    assert_code(response, 405, "method_not_allowed", "Method not allowed")


def test_an_oversized_body_is_payload_too_large(client, tenant):
    body = json.dumps({"title": "x" * (1024 * 1024)})
    response = client.post(
        create_url(tenant), data=body, content_type="application/json", headers=tenant.headers()
    )
    assert_code(response, 413, "payload_too_large")


def test_the_rate_limit_is_rate_limited(make_app, tenants):
    app = make_app(RATE_LIMIT="2 per minute")
    with app.app_context():
        tenant = tenants.create()
    client = app.test_client()
    for _ in range(2):
        assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    response = client.get(BOOKINGS, headers=tenant.headers())
    assert_code(response, 429, "rate_limited", "Rate limit exceeded: 2 requests per minute")


def test_an_unreachable_database_is_service_unavailable():
    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://postgres@127.0.0.1:9/none",
            "SECRET_KEY": "test",
            "DB_CONNECT_TIMEOUT_S": 1,
        }
    )
    with app.app_context():
        response = app.test_client().get(BOOKINGS, headers={"x-calendar-api-key": "cbk_x"})
        db.engine.dispose()
    assert_code(response, 503, "service_unavailable")


def test_an_unexpected_failure_is_internal_error(make_app):
    app = make_app(fresh=True, TESTING=False)
    add_probe_routes(app)
    assert_code(app.test_client().get("/v1/api/probe/boom"), 500, "internal_error")


def test_every_code_is_documented_as_an_enum(client):
    spec = client.get("/v1/api/openapi.json").json
    error = spec["components"]["schemas"]["Error"]
    assert error["properties"]["code"]["enum"] == [str(code) for code in ErrorCode]
    assert "code" in error["required"]
    assert "suggestedSlots" in error["properties"]
