"""Microsoft 365 connections against the loopback fake of the Microsoft identity platform and Graph
(``tests.microsoft_servers``): busy time read in full and then through the delta link, a delta link
Graph forgot, free time, Windows time zone names, several calendars, write-back of bookings (Graph
chooses the event's id), and a revoked grant. Syncs run at a fixed instant far in the future
(``NOW``), so nothing depends on today's date."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.extensions import db
from app.models import WrittenEvent
from app.services.integrations.calendars import sync_connection
from app.services.integrations.calendars.write_back import write_back_booking
from tests.factories import TenantFactory, external_busy_rows, make_booking
from tests.microsoft_servers import patterned_recurrence
from tests.oauth_fakes import ACCOUNT_EMAIL as EMAIL

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday; New York; the window runs to NOW + 67 d
BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
def microsoft_app(make_app, microsoft):
    app = make_app(
        **microsoft.app_settings(),
    )
    with app.app_context():
        yield app
        db.session.remove()


def connect(microsoft, **fields):
    tenant = TenantFactory().create(
        calendarConnections=[
            {
                "name": "Outlook",
                "kind": "microsoft",
                "refreshToken": microsoft.issue_refresh_token(EMAIL),
                **fields,
            }
        ]
    )
    return tenant, tenant.connections["Outlook"]


def sync(connection_id, now=NOW):
    result = sync_connection(connection_id, now=now)
    db.session.commit()
    return result


def busy(connection_id):
    return [(start, end) for _, _, start, end in external_busy_rows(connection_id)]


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2031, 1, day, hour, minute, tzinfo=UTC)


def test_an_outlook_calendars_events_become_busy_time(microsoft_app, microsoft):
    calendar = microsoft.default_calendar_id()
    microsoft.add_event(calendar, at(7, 15), at(7, 16))
    microsoft.add_event(calendar, date(2031, 1, 9), date(2031, 1, 10))  # all day, in New York
    microsoft.add_event(calendar, at(8, 9), at(8, 10), show_as="tentative")
    _, connection_id = connect(microsoft)
    result = sync(connection_id)
    assert (result.status, result.busy_count) == ("synced", 3)
    assert busy(connection_id) == [
        (at(7, 15), at(7, 16)),
        (at(8, 9), at(8, 10)),
        (at(9, 5), at(10, 5)),
    ]


def test_free_working_elsewhere_and_cancelled_events_are_not_busy(microsoft_app, microsoft):
    calendar = microsoft.default_calendar_id()
    microsoft.add_event(calendar, at(7, 9), at(7, 10), show_as="free")
    microsoft.add_event(calendar, at(7, 11), at(7, 12), show_as="workingElsewhere")
    microsoft.add_event(calendar, at(7, 13), at(7, 14), is_cancelled=True)
    microsoft.add_event(calendar, at(7, 15), at(7, 16), show_as="oof")
    _, connection_id = connect(microsoft)
    assert sync(connection_id).busy_count == 1
    assert busy(connection_id) == [(at(7, 15), at(7, 16))]


def test_times_in_a_windows_zone_name_are_read_in_that_zone(microsoft_app, microsoft):
    microsoft.add_event(
        microsoft.default_calendar_id(),
        datetime(2031, 1, 7, 9, tzinfo=BERLIN),
        datetime(2031, 1, 7, 10, tzinfo=BERLIN),
        time_zone="W. Europe Standard Time",
    )
    microsoft.set_answer_time_zone("W. Europe Standard Time")  # whatever the app prefers
    _, connection_id = connect(microsoft)
    sync(connection_id)
    assert busy(connection_id) == [(at(7, 8), at(7, 9))]


def test_a_weekly_series_blocks_each_occurrence(microsoft_app, microsoft):
    microsoft.add_event(
        microsoft.default_calendar_id(),
        at(7, 14),
        at(7, 15),
        recurrence=patterned_recurrence(
            "weekly", date(2031, 1, 7), days_of_week=("tuesday",), occurrences=3
        ),
    )
    _, connection_id = connect(microsoft)
    assert sync(connection_id).busy_count == 3


def test_a_resync_follows_the_delta_link_for_only_what_changed(microsoft_app, microsoft):
    calendar = microsoft.default_calendar_id()
    microsoft.add_event(calendar, at(7, 15), at(7, 16))
    move = microsoft.add_event(calendar, at(8, 15), at(8, 16))
    _, connection_id = connect(microsoft)
    sync(connection_id)
    microsoft.clear_requests()
    unchanged = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (unchanged.status, unchanged.busy_count) == ("unchanged", 2)
    (round_,) = microsoft.requests_to("/calendarView/delta", method="GET")
    assert "$deltatoken" in round_.query and "startDateTime" not in round_.query

    microsoft.update_event(calendar, move, start=at(8, 17), end=at(8, 18))
    moved = sync(connection_id, now=NOW + timedelta(minutes=10))
    assert (moved.added, moved.removed, moved.busy_count) == (1, 1, 2)
    assert [start for start, _ in busy(connection_id)] == [at(7, 15), at(8, 17)]

    microsoft.delete_event(calendar, move)
    deleted = sync(connection_id, now=NOW + timedelta(minutes=15))
    assert (deleted.removed, deleted.busy_count) == (1, 1)


def test_a_delta_link_graph_no_longer_knows_means_a_full_read(microsoft_app, microsoft):
    calendar = microsoft.default_calendar_id()
    microsoft.add_event(calendar, at(7, 15), at(7, 16))
    _, connection_id = connect(microsoft)
    sync(connection_id)
    microsoft.invalidate_sync_tokens()
    microsoft.add_event(calendar, at(8, 15), at(8, 16))
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.busy_count) == ("synced", 2)


def test_every_page_of_a_large_calendar_is_read(microsoft_app, microsoft):
    calendar = microsoft.default_calendar_id()
    for day in range(7, 31):
        microsoft.add_event(calendar, at(day, 15), at(day, 16))
    microsoft.set_page_size(5)
    _, connection_id = connect(microsoft)
    assert sync(connection_id).busy_count == 24


def test_several_calendars_of_one_mailbox_block_time(microsoft_app, microsoft):
    team = microsoft.add_calendar(EMAIL, "Team")
    microsoft.add_event(microsoft.default_calendar_id(), at(7, 15), at(7, 16))
    microsoft.add_event(team, at(8, 15), at(8, 16))
    _, connection_id = connect(microsoft, calendars=["primary", team])
    assert sync(connection_id).busy_count == 2


def test_a_revoked_grant_says_reconnect_and_keeps_the_busy_time(microsoft_app, microsoft):
    microsoft.add_event(microsoft.default_calendar_id(), at(7, 15), at(7, 16))
    _, connection_id = connect(microsoft)
    sync(connection_id)
    microsoft.revoke_grants(EMAIL)
    microsoft.expire_access_tokens()  # Graph honours its access tokens until they expire
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.retryable) == ("failed", False)
    assert "reconnect" in result.error
    assert len(busy(connection_id)) == 1


def test_a_deleted_calendar_says_to_choose_another(microsoft_app, microsoft):
    team = microsoft.add_calendar(EMAIL, "Team")
    _, connection_id = connect(microsoft, calendars=[team])
    sync(connection_id)
    microsoft.delete_calendar(team)
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.retryable) == ("failed", False)
    assert "choose another calendar" in result.error


def written_ids(booking_id):
    return db.session.scalars(
        db.select(WrittenEvent.event_id).where(WrittenEvent.booking_id == booking_id)
    ).all()


def test_a_booking_is_written_moved_and_removed_and_is_not_busy_time(microsoft_app, microsoft):
    calendar = microsoft.default_calendar_id()
    tenant, connection_id = connect(microsoft)
    booking = make_booking(tenant, at(7, 15))
    (outcome,) = write_back_booking(booking.id, now=NOW)
    db.session.commit()
    assert outcome.error is None
    [event_id] = written_ids(booking.id)
    written = microsoft.event(calendar, event_id)
    assert (written["subject"], written["showAs"]) == (booking.title, "tentative")  # pending
    assert written["start"]["dateTime"].startswith("2031-01-07T15:00:00")
    assert sync(connection_id).busy_count == 0  # the service's own event is not busy time

    moved = timedelta(hours=2)
    booking.start_at, booking.end_at = booking.start_at + moved, booking.end_at + moved
    booking.occupied_start, booking.occupied_end = (
        booking.occupied_start + moved,
        booking.occupied_end + moved,
    )
    booking.sequence += 1
    db.session.commit()
    assert write_back_booking(booking.id, now=NOW)[0].error is None
    db.session.commit()
    assert [e["id"] for e in microsoft.events(calendar)] == [event_id]  # updated, not added
    assert microsoft.event(calendar, event_id)["start"]["dateTime"].startswith("2031-01-07T17")
    assert sync(connection_id, now=NOW + timedelta(minutes=5)).busy_count == 0

    booking.status = "cancelled"
    db.session.commit()
    assert write_back_booking(booking.id, now=NOW)[0].error is None
    db.session.commit()
    assert microsoft.events(calendar) == []
    assert written_ids(booking.id) == []
    assert write_back_booking(booking.id, now=NOW)[0].error is None  # gone already: done


def test_a_retried_create_whose_id_was_not_kept_makes_no_second_event(microsoft_app, microsoft):
    calendar = microsoft.default_calendar_id()
    tenant, _ = connect(microsoft)
    booking = make_booking(tenant, at(7, 15))
    write_back_booking(booking.id, now=NOW, writer="outbox event 1")
    db.session.rollback()  # the worker stopped before the event's id was saved
    assert written_ids(booking.id) == []
    (outcome,) = write_back_booking(booking.id, now=NOW, writer="outbox event 1")  # run again
    db.session.commit()
    assert outcome.error is None
    assert [e["id"] for e in microsoft.events(calendar)] == written_ids(booking.id)


def test_an_event_the_person_deleted_is_written_again(microsoft_app, microsoft):
    calendar = microsoft.default_calendar_id()
    tenant, _ = connect(microsoft)
    booking = make_booking(tenant, at(7, 15))
    write_back_booking(booking.id, now=NOW)
    db.session.commit()
    [first] = written_ids(booking.id)
    microsoft.delete_event(calendar, first)
    booking.sequence += 1
    db.session.commit()
    assert write_back_booking(booking.id, now=NOW)[0].error is None
    db.session.commit()
    [again] = written_ids(booking.id)
    assert again != first and [e["id"] for e in microsoft.events(calendar)] == [again]


def test_bookings_go_into_the_chosen_calendar(microsoft_app, microsoft):
    team = microsoft.add_calendar(EMAIL, "Team")
    tenant, _ = connect(microsoft, writeCalendar=team)
    booking = make_booking(tenant, at(7, 15))
    assert write_back_booking(booking.id, now=NOW)[0].error is None
    assert (
        len(microsoft.events(team)) == 1 and microsoft.events(microsoft.default_calendar_id()) == []
    )
