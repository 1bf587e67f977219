"""flask demo: an idempotent demo workspace, a login and a fresh working API key."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.extensions import db
from app.models import Agency, ApiKey, User
from app.services.demo import DEMO_EMAIL
from app.services.passwords import verify_password


def run_demo(app):
    result = app.test_cli_runner().invoke(args=["demo"])
    assert result.exit_code == 0, result.output
    key = re.search(r"API key \(shown once\): (\S+)", result.output).group(1)
    password = re.search(rf"{re.escape(DEMO_EMAIL)} / (\S+)", result.output).group(1)
    return result.output, key, password


def test_demo_prints_a_working_full_permission_key_and_curl_line(app, client):
    output, key, _ = run_demo(app)
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


def test_demo_prints_a_login_that_verifies(app):
    _, _, password = run_demo(app)
    owner = db.session.scalar(select(User).where(User.email == DEMO_EMAIL))
    assert verify_password(owner.password_hash, password)


def test_demo_twice_reuses_the_workspace_with_a_new_key(app, client):
    _, first_key, _ = run_demo(app)
    _, second_key, _ = run_demo(app)
    assert first_key != second_key
    assert db.session.scalar(select(func.count()).select_from(Agency)) == 1
    for key in (first_key, second_key):
        response = client.get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": key})
        assert response.status_code == 200
