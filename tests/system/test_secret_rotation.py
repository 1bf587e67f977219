"""Rotating SECRET_KEY as docs/deployment.md describes: the new key in ``SECRET_KEY``, the old one
in ``SECRET_KEY_FALLBACKS``, then ``flask secrets reencrypt``, then the fallback goes. No stored
calendar password or webhook secret is lost on the way, and signed-in people stay signed in."""

from __future__ import annotations

import json

import pytest

from app.config import settings_of
from app.extensions import db
from app.models import CalendarConnection, WebhookSubscription
from app.services.common.encryption import decrypt_secret, encrypt_secret
from app.services.integrations.calendars.access import connection_access
from tests.dashboard_users import owner_email, sign_in
from tests.factories import TenantFactory

OLD, NEW = "old-secret-key", "new-secret-key"
PASSWORD = "caldav-app-password"


@pytest.fixture
def provisioned(make_app):
    """A tenant with a calendar connection and a webhook, provisioned under the old key;
    returns (connection id, webhook id, webhook secret, owner email)."""
    app = make_app(SECRET_KEY=OLD, WEBHOOK_ALLOW_PRIVATE=True)
    with app.app_context():
        tenant = TenantFactory().create(
            calendarConnections=[
                {
                    "name": "Personal",
                    "url": "https://cloud.example.test/remote.php/dav",
                    "username": "dentist",
                    "password": PASSWORD,
                }
            ],
            webhooks=[{"name": "crm", "url": "http://127.0.0.1:9/hooks", "events": ["*"]}],
        )
        sub = tenant.raw["agencies"][0]["subAccounts"][0]
        return (
            sub["calendarConnections"]["Personal"],
            sub["webhooks"]["crm"]["id"],
            sub["webhooks"]["crm"]["secret"],
            owner_email(tenant),
        )


def stored_secrets(app, connection_id: int, webhook_id: int) -> tuple[str | None, str]:
    """What the service itself reads: the password it would log in to CalDAV with, and the
    webhook secret it would sign with."""
    with app.app_context():
        connection = db.session.get(CalendarConnection, connection_id)
        access, problem = connection_access(connection, timeout=5)
        webhook = db.session.get(WebhookSubscription, webhook_id)
        secret = decrypt_secret(webhook.encrypted_secret, settings_of(app).secret_keys)
        return (None if problem else access.password), secret


def reencrypt(app) -> tuple[int, dict]:
    result = app.test_cli_runner().invoke(args=["secrets", "reencrypt"])
    return result.exit_code, json.loads(result.output.strip().splitlines()[-1])


def test_with_the_old_key_in_the_fallbacks_stored_secrets_stay_readable(make_app, provisioned):
    connection_id, webhook_id, webhook_secret, _ = provisioned
    rotated = make_app(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD])
    assert stored_secrets(rotated, connection_id, webhook_id) == (PASSWORD, webhook_secret)


def test_without_the_old_key_a_password_it_encrypted_is_reported_unreadable(make_app, provisioned):
    connection_id, *_ = provisioned
    with make_app(SECRET_KEY=NEW).app_context():
        connection = db.session.get(CalendarConnection, connection_id)
        _, problem = connection_access(connection, timeout=5)
    assert "cannot be decrypted" in problem.message


def test_after_reencrypting_the_new_key_alone_reads_every_stored_secret(make_app, provisioned):
    connection_id, webhook_id, webhook_secret, _ = provisioned
    exit_code, printed = reencrypt(make_app(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD]))
    assert exit_code == 0
    assert printed == {
        "reencrypted": {"calendarConnections": 1, "webhooks": 1},
        "unreadable": {"calendarConnections": [], "webhooks": []},
    }
    new_only = make_app(SECRET_KEY=NEW)
    assert stored_secrets(new_only, connection_id, webhook_id) == (PASSWORD, webhook_secret)


def test_a_secret_no_key_can_read_is_listed_and_left_alone(make_app, provisioned):
    connection_id, *_ = provisioned
    app = make_app(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD])
    with app.app_context():
        connection = db.session.get(CalendarConnection, connection_id)
        connection.encrypted_secret = lost = encrypt_secret(PASSWORD, "a-key-nobody-has")
        db.session.commit()
    exit_code, printed = reencrypt(app)
    assert exit_code == 1
    assert printed["unreadable"] == {"calendarConnections": [connection_id], "webhooks": []}
    with app.app_context():
        assert db.session.get(CalendarConnection, connection_id).encrypted_secret == lost


def test_a_dashboard_session_signed_with_the_old_key_survives_the_rotation(make_app, provisioned):
    *_, email = provisioned
    before = make_app(SECRET_KEY=OLD).test_client()
    assert sign_in(before, email).status_code == 302
    after = make_app(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=[OLD]).test_client()
    after.set_cookie("session", before.get_cookie("session").value)
    assert after.get("/dashboard/", follow_redirects=True).request.path.startswith("/dashboard/s/")
    stranger = make_app(SECRET_KEY=NEW).test_client()  # the old key dropped too early
    stranger.set_cookie("session", before.get_cookie("session").value)
    assert stranger.get("/dashboard/", follow_redirects=True).request.path == "/login"
