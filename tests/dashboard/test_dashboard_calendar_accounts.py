"""Connecting the calendars people keep from the dashboard's Connections page: Google and
Microsoft 365 through the loopback fakes' consent pages (``tests.google_servers``,
``tests.microsoft_servers``), choosing the account's calendars, a refused consent, a provider
the operator has not set up, a calendar feed, and the CalDAV presets. The real browser walks
the same flow in ``test_dashboard_browser.py``."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from app.config import settings_of
from app.extensions import db
from app.models import CalendarConnection, ConnectedCalendar, OAuthConsent
from app.services.common.encryption import decrypt_secret
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import TenantFactory, external_busy_rows, run_queued_sync
from tests.feed_servers import feed_server
from tests.oauth_fakes import ACCOUNT_EMAIL as EMAIL

SOON = datetime.combine(date.today() + timedelta(days=3), datetime.min.time()).astimezone()

pytestmark = pytest.mark.date_sensitive  # the busy time read lies ahead of today


@pytest.fixture
def app(make_app, google, microsoft):
    app = make_app(
        CALDAV_ALLOW_PRIVATE=True,
        **google.app_settings(),
        **microsoft.app_settings(),
    )
    with app.app_context():
        yield app
        db.session.remove()


@pytest.fixture
def signed_in(app):
    tenant = TenantFactory().create()
    client = app.test_client()
    sign_in(client, owner_email(tenant))
    return client, tenant


def connections_page(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/connections"


def start_consent(client, tenant, kind: str):
    page = connections_page(tenant)
    return client.post(f"{page}/connect/{kind}", data={"csrf_token": csrf_token(client, page)})


def consent(client, tenant, fake, kind: str, *, allow: bool = True):
    """Connect → the fake's consent page → Allow (or Deny) → back at the callback."""
    started = start_consent(client, tenant, kind)
    assert started.status_code == 302
    returned = urlsplit(fake.consent(started.headers["Location"], allow=allow))
    assert returned.path == f"/oauth/{kind}/callback"
    return client.get(f"{returned.path}?{returned.query}")


def the_connection() -> CalendarConnection:
    return db.session.scalars(db.select(CalendarConnection)).one()


def test_connect_google_asks_for_consent_with_pkce_and_the_narrowest_scopes(signed_in, google):
    client, tenant = signed_in
    started = start_consent(client, tenant, "google")
    asked = parse_qs(urlsplit(started.headers["Location"]).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["access_type"] == ["offline"]
    assert set(asked["scope"][0].split()) == {
        "https://www.googleapis.com/auth/calendar.events",
        "https://www.googleapis.com/auth/calendar.calendarlist.readonly",
    }
    assert asked["redirect_uri"][0].endswith("/oauth/google/callback")


def test_after_consent_the_person_chooses_calendars_and_their_busy_time_is_read(signed_in, google):
    client, tenant = signed_in
    team = google.add_calendar(EMAIL, "Team")
    google.add_event(team, SOON + timedelta(hours=9), SOON + timedelta(hours=10))
    back = consent(client, tenant, google, "google")
    connection = the_connection()
    assert connection.kind == "google"
    assert back.headers["Location"].endswith(f"/connections/{connection.id}/calendars")
    page = back.headers["Location"]
    listing = client.get(page).get_data(as_text=True)
    assert "Team" in listing and EMAIL in listing
    chosen = client.post(
        page,
        data={
            "csrf_token": csrf_token(client, page),
            "calendars": [EMAIL, team],
            "write_calendar": team,
            "write_back": "y",
        },
    )
    assert chosen.status_code == 302
    db.session.expire_all()
    assert {c.remote_id for c in db.session.scalars(db.select(ConnectedCalendar))} == {
        EMAIL,
        team,
    }
    assert the_connection().write_calendar == team
    assert the_connection().sync_requested_at is not None  # read at once, by the worker
    assert run_queued_sync(connection.id).ok
    assert len(external_busy_rows(connection.id)) == 1


def test_choosing_other_calendars_drops_the_busy_time_and_the_count_of_those_left(
    signed_in, google
):
    client, tenant = signed_in
    team = google.add_calendar(EMAIL, "Team")
    google.add_event(EMAIL, SOON + timedelta(hours=9), SOON + timedelta(hours=10))
    back = consent(client, tenant, google, "google")
    connection = the_connection()
    assert run_queued_sync(connection.id).ok  # the primary calendar, read until chosen
    assert len(external_busy_rows(connection.id)) == 1
    page = back.headers["Location"]
    chosen = client.post(
        page,
        data={"csrf_token": csrf_token(client, page), "calendars": [team], "write_calendar": team},
    )
    assert chosen.status_code == 302
    db.session.expire_all()
    assert external_busy_rows(connection.id) == []
    assert the_connection().busy_count == 0  # not the 1 of the calendar no longer read


def test_connect_microsoft_365_ends_on_its_calendars(signed_in, microsoft):
    client, tenant = signed_in
    back = consent(client, tenant, microsoft, "microsoft")
    connection = the_connection()
    assert (connection.kind, connection.name) == ("microsoft", "Microsoft 365")
    listing = client.get(back.headers["Location"]).get_data(as_text=True)
    assert "Calendar" in listing and "Check these calendars for conflicts" in listing


def test_a_refused_consent_connects_nothing_and_says_so(signed_in, google):
    client, tenant = signed_in
    back = consent(client, tenant, google, "google", allow=False)
    assert back.headers["Location"].endswith(connections_page(tenant))
    assert "access was not allowed" in client.get(back.headers["Location"]).get_data(as_text=True)
    assert db.session.scalars(db.select(CalendarConnection)).all() == []


def test_a_callback_without_the_consent_begun_in_this_session_is_refused(signed_in, google):
    client, tenant = signed_in
    started = start_consent(client, tenant, "google")
    returned = urlsplit(google.consent(started.headers["Location"]))
    other = client.application.test_client()
    sign_in(other, owner_email(tenant))
    refused = other.get(f"{returned.path}?{returned.query}")
    assert "/oauth/" not in refused.headers["Location"]
    assert db.session.scalars(db.select(CalendarConnection)).all() == []


def session_cookie(client) -> str:
    return client.get_cookie(client.application.config["SESSION_COOKIE_NAME"]).value


def test_a_callback_replayed_with_the_cookie_from_before_exchanges_no_code_again(signed_in, google):
    client, tenant = signed_in
    started = start_consent(client, tenant, "google")
    before = session_cookie(client)  # the cookie as it was before the provider sent it back
    returned = urlsplit(google.consent(started.headers["Location"]))
    callback = f"{returned.path}?{returned.query}"
    assert client.get(callback).headers["Location"].endswith("/calendars")
    exchanged = len(google.requests_to("token", "POST"))
    client.set_cookie(client.application.config["SESSION_COOKIE_NAME"], before)
    replayed = client.get(callback)
    assert "/oauth/" not in replayed.headers["Location"]
    assert "/calendars" not in replayed.headers["Location"]
    assert len(google.requests_to("token", "POST")) == exchanged  # the code went once
    assert len(db.session.scalars(db.select(CalendarConnection)).all()) == 1


def test_the_pkce_verifier_never_reaches_the_persons_cookie(signed_in, google, app):
    client, tenant = signed_in
    start_consent(client, tenant, "google")
    stored = db.session.scalars(db.select(OAuthConsent)).one()
    verifier = decrypt_secret(stored.encrypted_verifier, settings_of(app).secret_keys)
    cookie = session_cookie(client)
    readable = app.session_interface.get_signing_serializer(app).loads(cookie)
    assert verifier not in cookie and verifier not in repr(readable)
    assert stored.used_at is None and stored.user_id is not None


def test_a_provider_the_operator_has_not_set_up_says_what_to_set(make_app):
    app = make_app(CALDAV_ALLOW_PRIVATE=True)
    with app.app_context():
        tenant = TenantFactory().create()
        client = app.test_client()
        sign_in(client, owner_email(tenant))
        page = client.get(connections_page(tenant)).get_data(as_text=True)
        assert "GOOGLE_CLIENT_ID and GOOGLE_CLIENT_SECRET" in page
        assert "MICROSOFT_CLIENT_ID and MICROSOFT_CLIENT_SECRET" in page
        # The button looks disabled (dashboard.css) and says why right beside it.
        disabled = 'disabled aria-describedby="connect-google-unavailable">Connect Google</button>'
        assert (
            f'{disabled}\n    <p class="muted" id="connect-google-unavailable">Not available:'
            in page
        )
        pressed = start_consent(client, tenant, "google")
        told = client.get(pressed.headers["Location"]).get_data(as_text=True)
        assert "cannot be connected on this server yet" in told
        db.session.remove()


def test_subscribing_to_a_feed_reads_its_busy_time(signed_in):
    client, tenant = signed_in
    start = (SOON + timedelta(hours=9)).strftime("%Y%m%dT%H%M%SZ")
    end = (SOON + timedelta(hours=10)).strftime("%Y%m%dT%H%M%SZ")
    with feed_server() as feed:
        feed.serve(
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
            f"UID:feed-1\r\nDTSTAMP:{start}\r\nDTSTART:{start}\r\nDTEND:{end}\r\n"
            "END:VEVENT\r\nEND:VCALENDAR\r\n"
        )
        page = connections_page(tenant)
        done = client.post(
            f"{page}/feed",
            data={
                "csrf_token": csrf_token(client, page),
                "feed_name": "Family",
                "feed_url": feed.url,
            },
        )
        assert done.status_code == 302
        connection = the_connection()
        assert (connection.kind, connection.write_back) == ("ics", False)
        assert connection.sync_requested_at is not None  # read at once, by the worker
        assert run_queued_sync(connection.id).ok
    assert len(external_busy_rows(connection.id)) == 1


def test_a_caldav_preset_fills_the_server_and_explains_the_password(signed_in):
    client, tenant = signed_in
    page = client.get(connections_page(tenant) + "?preset=icloud").get_data(as_text=True)
    assert 'value="https://caldav.icloud.com/"' in page
    assert "app-specific password" in page


def test_a_google_connection_is_renamed_without_caldav_fields(signed_in, google):
    client, tenant = signed_in
    consent(client, tenant, google, "google")
    connection = the_connection()
    page = f"{connections_page(tenant)}/{connection.id}"
    saved = client.post(
        page,
        data={"csrf_token": csrf_token(client, page), "name": "Front desk", "active": "y"},
    )
    assert saved.status_code == 302
    db.session.expire_all()
    assert (the_connection().name, the_connection().url) == ("Front desk", "google")
