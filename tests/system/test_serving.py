"""The README's run path through real processes: migrate, demo, gunicorn, curl-like GET."""

from __future__ import annotations

import http.client
import json
import os
import urllib.request

import pytest

from tests.servers import gunicorn, migrate_and_demo


@pytest.mark.slow
def test_fresh_database_migrate_demo_and_serve(postgres_database):
    database_url = postgres_database()
    key, _ = migrate_and_demo(
        {**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "serving-test"}
    )

    with gunicorn(database_url) as base:
        request = urllib.request.Request(
            base + "/v1/api/calendar/bookings", headers={"x-calendar-api-key": key}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == "application/json"
            assert response.read() == b'{"bookings":[],"total":0,"limit":50,"offset":0}\n'


@pytest.fixture(scope="module")
def served(postgres_database):
    """A gunicorn on a fresh database with the demo workspace: its base URL and key."""
    database_url = postgres_database()
    key, event_types = migrate_and_demo(
        {**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "serving-test"}
    )
    event_type_id = event_types["Consultation"]
    with gunicorn(database_url, workers=1) as base:
        yield base, key, event_type_id


def send(base, method, path, headers=None, body=None, chunked=False):
    """One request over a fresh connection; returns status, content type and body."""
    connection = http.client.HTTPConnection(base.removeprefix("http://"), timeout=30)
    try:
        if chunked:
            pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
            connection.request(
                method, path, body=pieces, headers=headers or {}, encode_chunked=True
            )
        else:
            connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        connection.close()


def oversized_booking_body() -> bytes:
    return json.dumps({"title": "x" * (1024 * 1024 + 10)}).encode()


@pytest.mark.slow
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_one_mebibyte_is_413_however_it_is_sent(served, chunked):
    base, key, event_type_id = served
    status, content_type, body = send(
        base,
        "POST",
        f"/v1/api/calendar/event-types/{event_type_id}/bookings",
        {"x-calendar-api-key": key, "Content-Type": "application/json"},
        oversized_booking_body(),
        chunked=chunked,
    )
    assert (status, content_type) == (413, "application/json")
    assert json.loads(body) == {
        "statusCode": 413,
        "message": "Request body too large (limit: 1 MiB)",
        "code": "payload_too_large",
    }


@pytest.mark.slow
def test_a_chunked_body_under_the_limit_reaches_the_app(served):
    base, key, event_type_id = served
    status, _, body = send(
        base,
        "POST",
        f"/v1/api/calendar/event-types/{event_type_id}/bookings",
        {"x-calendar-api-key": key, "Content-Type": "application/json"},
        json.dumps({"title": "x" * (1024 * 1024 - 100)}).encode(),
        chunked=True,
    )
    assert status == 400
    assert "startTime" in json.loads(body)["errors"]


@pytest.mark.slow
def test_a_request_line_up_to_8_kib_reaches_the_app(served):
    base, key, _ = served
    status, content_type, _ = send(
        base, "GET", "/v1/api/calendar/bookings?email=" + "a" * 7000, {"x-calendar-api-key": key}
    )
    assert (status, content_type) == (400, "application/json")  # the app's validation


@pytest.mark.slow
def test_a_request_line_over_8_kib_is_answered_by_the_server(served):
    base, key, _ = served
    status, _, _ = send(
        base, "GET", "/v1/api/calendar/bookings?email=" + "a" * 9000, {"x-calendar-api-key": key}
    )
    assert status == 414


@pytest.mark.slow
def test_a_header_up_to_8_kib_reaches_the_app(served):
    base, key, _ = served
    status, content_type, _ = send(
        base, "GET", "/v1/api/calendar/bookings", {"x-calendar-api-key": key, "X-Big": "b" * 8000}
    )
    assert (status, content_type) == (200, "application/json")


@pytest.mark.slow
def test_a_header_over_8_kib_is_answered_by_the_server(served):
    base, key, _ = served
    status, content_type, _ = send(
        base, "GET", "/v1/api/calendar/bookings", {"x-calendar-api-key": key, "X-Big": "b" * 9000}
    )
    assert status in (400, 431) and content_type != "application/json"


@pytest.mark.slow
def test_the_access_log_masks_the_secrets_in_paths(postgres_database, tmp_path):
    database_url = postgres_database()
    migrate_and_demo({**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "serving-test"})
    access_log = tmp_path / "access.log"
    paths = ("/manage/MaNaGeToKeN", "/manage/MaNaGeToKeN/reschedule", "/invite/InViTe")
    with gunicorn(database_url, workers=1, options=("--access-logfile", str(access_log))) as base:
        for path in (*paths, "/reset-password/ReSeT"):
            send(base, "GET", path)
    logged = [json.loads(line) for line in access_log.read_text().splitlines()]
    logged_paths = [line["path"] for line in logged]
    for secret in ("MaNaGeToKeN", "InViTe", "ReSeT"):
        assert secret not in access_log.read_text()
    assert {"/manage/…", "/manage/…/reschedule", "/invite/…", "/reset-password/…"} <= set(
        logged_paths
    )
