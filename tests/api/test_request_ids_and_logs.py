"""Request ids and structured logs: every answer carries ``X-Request-Id`` (the client's when
usable, else a new one), every log line of the request carries it as JSON, and no secret
reaches a log line."""

from __future__ import annotations

import io
import json

import pytest
from flask import current_app

from app.logs import json_log_handler, masked


@pytest.fixture
def log_lines(app):
    """The JSON lines the app logs while the test runs."""
    stream = io.StringIO()
    handler = json_log_handler()
    handler.setStream(stream)
    current_app.logger.addHandler(handler)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    current_app.logger.removeHandler(handler)


def test_a_usable_request_id_from_the_client_is_echoed(client):
    response = client.get("/healthz", headers={"X-Request-Id": "agent-run-42.step:7"})
    assert response.headers["X-Request-Id"] == "agent-run-42.step:7"


def test_a_request_without_an_id_gets_a_new_one(client):
    first, second = client.get("/healthz"), client.get("/healthz")
    assert len(first.headers["X-Request-Id"]) == 32
    assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]


def test_an_unusable_request_id_is_replaced(client):
    response = client.get("/healthz", headers={"X-Request-Id": "x" * 300})
    assert len(response.headers["X-Request-Id"]) == 32


def test_error_answers_carry_the_request_id_too(client, tenant):
    response = client.get("/v1/api/calendar/bookings/999999", headers=tenant.headers())
    assert response.status_code == 404
    assert len(response.headers["X-Request-Id"]) == 32


def test_log_lines_of_a_request_are_json_with_its_request_id(make_app, log_lines):
    app = make_app(fresh=True)  # a route of its own, added before the app's first request

    @app.get("/test-log-line")
    def log_something():
        current_app.logger.warning("something worth a line")
        return "ok"

    app.test_client().get("/test-log-line", headers={"X-Request-Id": "trace-me"})
    (line,) = [entry for entry in log_lines() if entry["message"] == "something worth a line"]
    assert line["request_id"] == "trace-me"
    assert line["level"] == "WARNING"
    assert {"time", "logger"} <= set(line)


def test_secrets_are_masked_in_log_lines(app, log_lines):
    key = "cbk_" + "A" * 43
    current_app.logger.warning("key %s, Authorization: Bearer tok123, password=hunter2", key)
    current_app.logger.warning("accepted /invite/SeCrEtToKeN and whsec_c2VjcmV0c2VjcmV0")
    text = json.dumps(log_lines())
    for secret in (key, "tok123", "hunter2", "SeCrEtToKeN", "whsec_c2VjcmV0c2VjcmV0"):
        assert secret not in text


def test_masking_keeps_the_rest_of_the_line():
    assert masked("user pat logged in with password=hunter2 from 10.0.0.1") == (
        "user pat logged in with password=… from 10.0.0.1"
    )


def test_a_traceback_is_masked_too(app, log_lines):
    try:
        raise RuntimeError("failed with cbk_" + "B" * 43)
    except RuntimeError:
        current_app.logger.exception("unexpected")
    (line,) = [entry for entry in log_lines() if entry["message"] == "unexpected"]
    assert "B" * 43 not in line["exc_info"]
    assert "RuntimeError" in line["exc_info"]
