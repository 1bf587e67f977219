"""Google Calendar connections against the loopback fake of Google's OAuth server and Calendar API
(``tests.google_servers``): busy time read in full and then incrementally, a token Google forgot,
free time, write-back of bookings, and a revoked grant. Syncs run at a fixed instant far in the
future (``NOW``), so nothing depends on today's date."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

import pytest

from app.extensions import db
from app.models import CalendarConnection
from app.services.integrations.calendars import sync_connection
from app.services.integrations.calendars.connections import remove_connection
from app.services.integrations.calendars.oauth import Grant
from app.services.integrations.calendars.providers.google import google_event_id as event_id
from app.services.integrations.calendars.write_back import write_back_booking
from tests.factories import TenantFactory, external_busy_rows, make_booking
from tests.oauth_fakes import ACCOUNT_EMAIL as EMAIL

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday; New York; the window runs to NOW + 67 d


@pytest.fixture
def google_app(make_app, google):
    app = make_app(
        **google.app_settings(),
    )
    with app.app_context():
        yield app
        db.session.remove()


def connect(google, **fields):
    tenant = TenantFactory().create(
        calendarConnections=[
            {
                "name": "Google",
                "kind": "google",
                "refreshToken": google.issue_refresh_token(EMAIL),
                **fields,
            }
        ]
    )
    return tenant, tenant.connections["Google"]


def sync(connection_id, now=NOW):
    result = sync_connection(connection_id, now=now)
    db.session.commit()
    return result


def busy(connection_id):
    return [(uid, start, end) for _, uid, start, end in external_busy_rows(connection_id)]


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2031, 1, day, hour, minute, tzinfo=UTC)


def test_a_google_calendars_events_become_busy_time(google_app, google):
    google.add_event(EMAIL, at(7, 15), at(7, 16), iCalUID="dentist-visit")
    google.add_event(EMAIL, date(2031, 1, 9), date(2031, 1, 10))  # all day, in New York
    google.add_event(EMAIL, at(8, 9), at(8, 10), transparency="transparent")
    google.add_event(EMAIL, at(8, 11), at(8, 12), status="cancelled")
    _, connection_id = connect(google)
    result = sync(connection_id)
    assert (result.status, result.busy_count) == ("synced", 2)
    rows = busy(connection_id)
    assert [(r[1], r[2]) for r in rows] == [
        (at(7, 15), at(7, 16)),
        (at(9, 5), at(10, 5)),
    ]
    assert rows[0][0] == "dentist-visit"


def test_a_weekly_series_blocks_each_instance(google_app, google):
    google.add_event(
        EMAIL,
        datetime(2031, 1, 7, 9, tzinfo=UTC),
        datetime(2031, 1, 7, 10, tzinfo=UTC),
        time_zone="America/New_York",
        recurrence=["RRULE:FREQ=WEEKLY;COUNT=3"],
    )
    _, connection_id = connect(google)
    assert sync(connection_id).busy_count == 3


def test_a_resync_asks_only_for_changes_with_the_sync_token(google_app, google):
    keep = google.add_event(EMAIL, at(7, 15), at(7, 16))
    move = google.add_event(EMAIL, at(8, 15), at(8, 16))
    _, connection_id = connect(google)
    sync(connection_id)
    assert keep
    google.clear_requests()
    unchanged = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (unchanged.status, unchanged.busy_count) == ("unchanged", 2)
    (listing,) = google.requests_to("/events", method="GET")
    assert "syncToken" in listing.query and "timeMin" not in listing.query

    google.update_event(EMAIL, move, start=at(8, 17), end=at(8, 18))
    moved = sync(connection_id, now=NOW + timedelta(minutes=10))
    assert (moved.added, moved.removed, moved.busy_count) == (1, 1, 2)
    assert [r[1] for r in busy(connection_id)] == [at(7, 15), at(8, 17)]

    google.delete_event(EMAIL, move)
    deleted = sync(connection_id, now=NOW + timedelta(minutes=15))
    assert (deleted.removed, deleted.busy_count) == (1, 1)


def test_a_sync_token_google_no_longer_knows_means_a_full_read(google_app, google):
    google.add_event(EMAIL, at(7, 15), at(7, 16))
    _, connection_id = connect(google)
    sync(connection_id)
    google.invalidate_sync_tokens()
    google.add_event(EMAIL, at(8, 15), at(8, 16))
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.busy_count) == ("synced", 2)


def test_several_calendars_of_one_account_block_time(google_app, google):
    team = google.add_calendar(EMAIL, "Team")
    google.add_event(EMAIL, at(7, 15), at(7, 16))
    google.add_event(team, at(8, 15), at(8, 16))
    _, connection_id = connect(google, calendars=["primary", team])
    assert sync(connection_id).busy_count == 2


def test_an_access_token_refused_before_its_time_is_renewed_and_kept(google_app, google):
    _, connection_id = connect(google)
    sync(connection_id)
    sealed = db.session.get(CalendarConnection, connection_id).encrypted_secret
    google.expire_access_tokens()
    result = sync(connection_id, now=NOW + timedelta(hours=2))
    assert result.ok
    db.session.expire_all()
    assert db.session.get(CalendarConnection, connection_id).encrypted_secret != sealed


def test_a_revoked_grant_says_reconnect_and_keeps_the_busy_time(google_app, google):
    google.add_event(EMAIL, at(7, 15), at(7, 16))
    _, connection_id = connect(google)
    sync(connection_id)
    google.revoke_grants(EMAIL)
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.retryable) == ("failed", False)
    assert "reconnect" in result.error
    assert len(busy(connection_id)) == 1


def test_a_deleted_calendar_says_to_choose_another(google_app, google):
    team = google.add_calendar(EMAIL, "Team")
    _, connection_id = connect(google, calendars=[team])
    sync(connection_id)
    google.delete_calendar(team)
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.retryable) == ("failed", False)
    assert "choose another calendar" in result.error


def test_a_booking_is_written_moved_and_removed_and_is_not_busy_time(google_app, google):
    tenant, connection_id = connect(google)
    booking = make_booking(tenant, at(7, 15))
    (outcome,) = write_back_booking(booking.id, now=NOW)
    db.session.commit()  # as the worker commits each write's outcome
    assert outcome.error is None
    written = google.event(EMAIL, event_id(booking.uid))
    assert (written["iCalUID"], written["summary"]) == (booking.uid, booking.title)
    assert written["start"]["dateTime"].startswith("2031-01-07T15:00:00")

    again = write_back_booking(booking.id, now=NOW)  # a retry: the same event, updated
    db.session.commit()
    assert again[0].error is None
    assert len(google.events(EMAIL)) == 1
    assert sync(connection_id).busy_count == 0  # the service's own event is not busy time

    booking.status = "cancelled"
    db.session.commit()
    assert write_back_booking(booking.id, now=NOW)[0].error is None
    db.session.commit()
    assert google.events(EMAIL) == []
    assert write_back_booking(booking.id, now=NOW)[0].error is None  # gone already: done


def test_removing_the_connection_revokes_the_grant(google_app, google):
    _, connection_id = connect(google)
    remove_connection(connection_id)
    db.session.commit()
    assert google.requests_to("/revoke", method="POST")


@pytest.mark.date_sensitive  # a token's expiry is wall-clock time
def test_an_access_token_near_its_expiry_is_refreshed_before_use(google_app, google):
    _, connection_id = connect(google)
    sync(connection_id)
    connection = db.session.get(CalendarConnection, connection_id)
    grant = Grant.opened(connection.encrypted_secret, ["test-secret-key"])
    soon = Grant(grant.refresh_token, grant.access_token, time.time() + 60)
    connection.encrypted_secret = soon.sealed("test-secret-key")
    db.session.commit()
    google.clear_requests()
    assert sync(connection_id, now=NOW + timedelta(minutes=5)).ok
    assert len(google.requests_to("/token", method="POST")) == 1
    db.session.expire_all()
    kept = Grant.opened(
        db.session.get(CalendarConnection, connection_id).encrypted_secret, ["test-secret-key"]
    )
    assert kept.expires_at > time.time() + 3000 and kept.access_token != grant.access_token
