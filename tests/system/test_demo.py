"""flask demo: an idempotent demo workspace, a login and a fresh working API key."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.extensions import db
from app.models import Agency, ApiKey
from app.services.accounts.demo import DEMO_EMAIL
from tests.dashboard_users import sign_in


def run_demo(app):
    result = app.test_cli_runner().invoke(args=["demo"])
    assert result.exit_code == 0, result.output
    key = re.search(r"API key \(shown once\): (\S+)", result.output).group(1)
    return result.output, key


def test_demo_prints_a_working_full_permission_key_and_curl_line(app, client):
    output, key = run_demo(app)
    assert f"curl -H 'x-calendar-api-key: {key}'" in output
    response = client.get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": key})
    assert response.status_code == 200
    stored = db.session.scalar(select(ApiKey).where(ApiKey.prefix == key[:12]))
    assert set(stored.permissions) == {
        "canCheckAvailability",
        "canGetBookings",
        "canBook",
        "canCancel",
    }


def test_demo_prints_a_working_dashboard_sign_in(app, client):
    output, _ = run_demo(app)
    assert f"email: {DEMO_EMAIL}" in output and "/login" in output
    password = output.split("password (shown once): ")[1].split()[0]
    assert sign_in(client, DEMO_EMAIL, password).headers["Location"] == "/dashboard/"


def test_demo_says_plainly_that_each_start_replaces_the_password_and_key(app, client):
    output, _ = run_demo(app)
    assert "Every start sets a new demo password and key" in output
    assert "a password changed in the dashboard is replaced" in output


def test_demo_twice_reuses_the_workspace_with_a_new_key_and_revokes_the_old(app, client):
    _, first_key = run_demo(app)
    _, second_key = run_demo(app)
    assert first_key != second_key
    assert db.session.scalar(select(func.count()).select_from(Agency)) == 1
    statuses = [
        client.get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": key}).status_code
        for key in (first_key, second_key)
    ]
    assert statuses == [401, 200]  # one full-permission demo key is active at a time
