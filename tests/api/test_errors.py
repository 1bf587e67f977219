"""Every error the app can answer is the JSON envelope with the right status."""

from __future__ import annotations

import logging

import pytest

from tests.probe_routes import add_probe_routes


@pytest.fixture
def probe_client(make_app):
    app = make_app(fresh=True, TESTING=False)
    add_probe_routes(app)
    return app.test_client()


def assert_envelope(response, status):
    assert response.status_code == status
    assert response.is_json
    assert response.json["statusCode"] == status
    assert isinstance(response.json["message"], str) and response.json["message"]
    return response.json


def test_unknown_route_is_404_envelope(client):
    assert assert_envelope(client.get("/v1/api/nowhere"), 404)["message"] == "Not found"


def test_unknown_route_outside_api_is_404_envelope(client):
    assert_envelope(client.get("/nowhere"), 404)


def test_wrong_method_is_405_envelope_with_allow(client):
    response = client.delete("/v1/api/calendar/bookings")
    assert assert_envelope(response, 405)["message"] == "Method not allowed"
    assert "GET" in response.headers["Allow"]


def test_malformed_json_is_400_envelope(probe_client):
    response = probe_client.post(
        "/v1/api/probe/echo", data="{not json", content_type="application/json"
    )
    assert "Invalid JSON" in assert_envelope(response, 400)["message"]


def test_validation_error_is_400_naming_the_field(probe_client):
    response = probe_client.post("/v1/api/probe/echo", json={})
    body = assert_envelope(response, 400)
    assert "name" in body["message"]
    assert body["errors"] == {"name": ["Missing data for required field."]}


def test_body_over_one_mebibyte_is_413_envelope(probe_client):
    response = probe_client.post(
        "/v1/api/probe/echo",
        data='{"name": "' + "x" * (1024 * 1024) + '"}',
        content_type="application/json",
    )
    assert_envelope(response, 413)


def test_unexpected_exception_is_generic_500_and_logged(probe_client, caplog):
    with caplog.at_level(logging.ERROR):
        response = probe_client.get("/v1/api/probe/boom")
    body = assert_envelope(response, 500)
    assert body == {"statusCode": 500, "message": "Internal server error", "code": "internal_error"}
    assert "secret internal detail" not in response.get_data(as_text=True)
    assert "secret internal detail" in caplog.text


def test_unknown_booking_is_404_envelope(client, tenant):
    response = client.get("/v1/api/calendar/bookings/999999", headers=tenant.headers())
    assert assert_envelope(response, 404)["message"] == "Booking not found"


def test_path_id_beyond_64_bits_is_404_envelope(client, tenant):
    response = client.get("/v1/api/calendar/bookings/" + "9" * 30, headers=tenant.headers())
    assert_envelope(response, 404)


def test_invalid_query_value_is_400_envelope(client, tenant):
    response = client.get("/v1/api/calendar/bookings?offset=abc", headers=tenant.headers())
    assert "offset" in assert_envelope(response, 400)["errors"]
