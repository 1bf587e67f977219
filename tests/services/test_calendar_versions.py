"""Every write that can move availability gives the calendar a new version, in its own
transaction, whichever way it comes: the API, the dashboard, the worker, the command line and
provisioning (issue 30, part 1). The database's triggers do it (migration 0016); these tests
hold every table and column availability reads to it, and walk the ways in.

Dates are fixed far in the future (``MONDAY``) or irrelevant, so nothing here reads today's
date; the API writes run at a fixed "now" before them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta

import pytest
import time_machine
from sqlalchemy import event, select, text

from app.extensions import db
from app.models import (
    Attendee,
    AvailabilityProfile,
    BlockedTime,
    Booking,
    BookingHost,
    CalendarSettings,
    DateOverride,
    EventType,
    EventTypeHost,
    Host,
    SlotHold,
    SubAccount,
    WeeklyHours,
)
from app.scheduling.timezones import InstantInput
from app.services.availability.cache import calendar_version
from app.services.availability.open_time import AvailabilityQuery, compute_slot_set
from app.services.common.locking import lock_calendar
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import (
    TenantFactory,
    book_through_api,
    external_busy_rows,
    hold_through_api,
    make_blocked_time,
    make_booking,
    ny,
    tenant_document,
    z,
)
from tests.feed_servers import feed_server

MONDAY = date(2031, 3, 3)
NOW = ny(MONDAY, 7)  # the API's "now" for its writes: before Monday's hours

# Every table whose rows availability reads, and so the triggers that must be there.
INPUT_TABLES = {
    "bookings",
    "slot_holds",
    "blocked_times",
    "availability_profiles",
    "weekly_hours",
    "date_overrides",
    "event_types",
    "calendar_settings",
    "hosts",
    "event_type_hosts",
    "booking_hosts",
}


def version_of(tenant) -> int:
    db.session.expire_all()
    found = calendar_version(tenant.sub_account_id)
    db.session.rollback()  # the test's session holds no transaction open between changes
    return found


@contextmanager
def a_new_version(tenant) -> Iterator[None]:
    before = version_of(tenant)
    yield
    assert version_of(tenant) != before, "the calendar kept its version"


@contextmanager
def the_same_version(tenant) -> Iterator[None]:
    before = version_of(tenant)
    yield
    assert version_of(tenant) == before, "the calendar got a new version"


def committed(change: Callable[[], object]) -> None:
    change()
    db.session.commit()


# --- Every table and column availability reads ----------------------------------------------


def test_availability_reads_only_tables_whose_changes_give_a_new_version(app, tenant):
    """The tables a computation of slots reads are the tables with the triggers: a new input
    of availability without them fails here."""
    read: set[str] = set()

    def note(conn, cursor, statement, *args):
        read.update(re.findall(r"\b(?:FROM|JOIN)\s+\"?(\w+)", statement, re.IGNORECASE))

    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    sub_account.settings  # noqa: B018 - loaded as the API's key cache has it
    event.listen(db.engine, "before_cursor_execute", note)
    try:
        query = AvailabilityQuery(
            InstantInput(MONDAY), InstantInput(MONDAY), event_type_id=tenant.event_types["Cleaning"]
        )
        compute_slot_set(sub_account, query)
    finally:
        event.remove(db.engine, "before_cursor_execute", note)
    assert read - {"calendar_versions"} <= INPUT_TABLES, read
    assert triggered_tables() == INPUT_TABLES


def triggered_tables() -> set[str]:
    """The tables that have the calendar-version triggers for insert, update and delete."""
    rows = db.session.execute(
        text(
            "SELECT event_object_table, event_manipulation FROM information_schema.triggers"
            " WHERE trigger_name LIKE 'calendar_version_%'"
        )
    ).all()
    events: dict[str, set[str]] = {}
    for table, manipulation in rows:
        events.setdefault(table, set()).add(manipulation)
    return {table for table, seen in events.items() if seen == {"INSERT", "UPDATE", "DELETE"}}


def profile_of(tenant) -> AvailabilityProfile:
    return (
        db.session.query(AvailabilityProfile).filter_by(sub_account_id=tenant.sub_account_id).one()
    )


def settings_of(tenant) -> CalendarSettings:
    return db.session.get(CalendarSettings, tenant.sub_account_id)


def event_type_of(tenant) -> EventType:
    return db.session.get(EventType, tenant.event_types["Cleaning"])


def a_booking(tenant) -> Booking:
    return make_booking(tenant, ny(MONDAY, 10))


def a_hold(tenant) -> SlotHold:
    hold = SlotHold(
        sub_account_id=tenant.sub_account_id,
        event_type_id=tenant.event_types["Cleaning"],
        start_at=ny(MONDAY, 11),
        end_at=ny(MONDAY, 11, 30),
        occupied_start=ny(MONDAY, 11),
        occupied_end=ny(MONDAY, 11, 40),
        expires_at=ny(MONDAY, 6),
        token_digest="d" * 64,
        timezone="UTC",
    )
    db.session.add(hold)
    db.session.commit()
    return hold


def an_override(tenant) -> DateOverride:
    override = DateOverride(profile_id=profile_of(tenant).id, date=MONDAY, start_minute=None)
    db.session.add(override)
    db.session.commit()
    return override


MOVES: dict[str, Callable] = {
    "a booking inserted": lambda t: a_booking(t),
    "a booking's status": lambda t: committed(
        lambda: setattr(a_booking_ready(t), "status", "cancelled")
    ),
    "a booking's occupied start": lambda t: committed(
        lambda: setattr(a_booking_ready(t), "occupied_start", ny(MONDAY, 9))
    ),
    "a booking's occupied end": lambda t: committed(
        lambda: setattr(a_booking_ready(t), "occupied_end", ny(MONDAY, 12))
    ),
    "a booking deleted": lambda t: committed(lambda: db.session.delete(a_booking_ready(t))),
    "a hold inserted": lambda t: a_hold(t),
    "a hold changed": lambda t: committed(
        lambda: setattr(a_hold_ready(t), "expires_at", ny(MONDAY, 8))
    ),
    "a hold deleted": lambda t: committed(lambda: db.session.delete(a_hold_ready(t))),
    "blocked time inserted": lambda t: make_blocked_time(t, ny(MONDAY, 12), ny(MONDAY, 13)),
    "blocked time moved": lambda t: committed(
        lambda: setattr(a_blocked_ready(t), "end_at", ny(MONDAY, 14))
    ),
    "blocked time deleted": lambda t: committed(lambda: db.session.delete(a_blocked_ready(t))),
    "external busy time inserted": lambda t: make_blocked_time(
        t, ny(MONDAY, 15), ny(MONDAY, 16), source="external", external_uid="x"
    ),
    "a profile's timezone": lambda t: committed(
        lambda: setattr(profile_of(t), "timezone", "Europe/Berlin")
    ),
    "a profile inserted": lambda t: committed(
        lambda: db.session.add(
            AvailabilityProfile(sub_account_id=t.sub_account_id, name="Late", timezone="UTC")
        )
    ),
    "weekly hours inserted": lambda t: committed(
        lambda: db.session.add(
            WeeklyHours(profile_id=profile_of(t).id, weekday=5, start_minute=600, end_minute=660)
        )
    ),
    "weekly hours changed": lambda t: committed(
        lambda: setattr(profile_of(t).weekly_hours[0], "end_minute", 900)
    ),
    "weekly hours deleted": lambda t: committed(
        lambda: db.session.delete(profile_of(t).weekly_hours[0])
    ),
    "a date override inserted": lambda t: an_override(t),
    "a date override changed": lambda t: committed(
        lambda: setattr(an_override_ready(t), "end_minute", 600)
    ),
    "a date override deleted": lambda t: committed(lambda: db.session.delete(an_override_ready(t))),
    "a profile deleted": lambda t: committed(lambda: db.session.delete(a_spare_profile_ready(t))),
    "an event type's buffer": lambda t: committed(
        lambda: setattr(event_type_of(t), "buffer_before", 15)
    ),
    "an event type deactivated": lambda t: committed(
        lambda: setattr(event_type_of(t), "active", False)
    ),
    "the minimum notice": lambda t: committed(
        lambda: setattr(settings_of(t), "minimum_notice_minutes", 60)
    ),
    "the booking horizon": lambda t: committed(
        lambda: setattr(settings_of(t), "booking_horizon_days", 10)
    ),
    "the calendar's timezone": lambda t: committed(
        lambda: setattr(settings_of(t), "timezone", "Asia/Tokyo")
    ),
    "the default duration": lambda t: committed(
        lambda: setattr(settings_of(t), "default_duration", 45)
    ),
    "the calendar's caps": lambda t: committed(
        lambda: setattr(settings_of(t), "booking_limits", {"perDay": {"count": 2}})
    ),
    "an event type's caps": lambda t: committed(
        lambda: setattr(event_type_of(t), "booking_limits", {"perWeek": {"minutes": 120}})
    ),
    "a host added": lambda t: committed(
        lambda: db.session.add(Host(sub_account_id=t.sub_account_id, name="Dr. New"))
    ),
    "a host deactivated": lambda t: committed(lambda: setattr(a_host(t), "active", False)),
    "an event type's host listed": lambda t: committed(
        lambda: db.session.add(
            EventTypeHost(event_type_id=event_type_of(t).id, host_id=a_host(t).id)
        )
    ),
    "a collective booking's other host": lambda t: committed(
        lambda: db.session.add(
            BookingHost(booking_id=_prepared["booking"], host_id=_prepared["host"])
        )
    ),
}


def a_host(tenant) -> Host:
    return db.session.scalars(
        select(Host).where(Host.sub_account_id == tenant.sub_account_id).order_by(Host.id)
    ).first()


# The rows a change then changes, set up before the version is read (``prepare``).
_prepared: dict[str, object] = {}


def a_booking_ready(tenant) -> Booking:
    return db.session.get(Booking, _prepared["booking"])


def a_hold_ready(tenant) -> SlotHold:
    return db.session.get(SlotHold, _prepared["hold"])


def a_blocked_ready(tenant) -> BlockedTime:
    return db.session.get(BlockedTime, _prepared["blocked"])


def an_override_ready(tenant) -> DateOverride:
    return db.session.get(DateOverride, _prepared["override"])


def a_spare_profile_ready(tenant) -> AvailabilityProfile:
    return db.session.get(AvailabilityProfile, _prepared["profile"])


def prepare(name: str, tenant) -> None:
    if name == "a collective booking's other host":
        _prepared["booking"] = a_booking(tenant).id
        other = Host(sub_account_id=tenant.sub_account_id, name="Dr. Other")
        db.session.add(other)
        db.session.commit()
        _prepared["host"] = other.id
    elif name.startswith("a booking") and name != "a booking inserted":
        _prepared["booking"] = a_booking(tenant).id
    elif name.startswith("a hold") and name != "a hold inserted":
        _prepared["hold"] = a_hold(tenant).id
    elif name in ("blocked time moved", "blocked time deleted"):
        _prepared["blocked"] = make_blocked_time(tenant, ny(MONDAY, 12), ny(MONDAY, 13)).id
    elif name in ("a date override changed", "a date override deleted"):
        _prepared["override"] = an_override(tenant).id
    elif name == "a profile deleted":
        spare = AvailabilityProfile(
            sub_account_id=tenant.sub_account_id, name="Spare", timezone="UTC"
        )
        db.session.add(spare)
        db.session.commit()
        _prepared["profile"] = spare.id


@pytest.mark.parametrize("name", list(MOVES))
def test_every_change_availability_reads_gives_a_new_version(app, tenant, name):
    prepare(name, tenant)
    with a_new_version(tenant):
        MOVES[name](tenant)


STILL: dict[str, Callable] = {
    "a booking's title": lambda t: committed(
        lambda: setattr(a_booking_ready(t), "title", "Renamed")
    ),
    "an attendee added": lambda t: committed(
        lambda: db.session.add(
            Attendee(
                booking_id=_prepared["booking"],
                email="sam@example.test",
                name="Sam",
                timezone="UTC",
            )
        )
    ),
    "a booking's confirmation time": lambda t: committed(
        lambda: setattr(a_booking_ready(t), "confirmed_at", datetime(2031, 1, 1, tzinfo=UTC))
    ),
    "the calendar locked and let go": lambda t: committed(lambda: lock_calendar(t.sub_account_id)),
    "the notification email": lambda t: committed(
        lambda: setattr(settings_of(t), "notification_email", "desk@example.test")
    ),
    "blocked time's reason": lambda t: committed(
        lambda: setattr(a_blocked_ready(t), "reason", "Lunch")
    ),
}


@pytest.mark.parametrize("name", list(STILL))
def test_changes_that_cannot_move_availability_keep_the_version(app, tenant, name):
    _prepared["booking"] = a_booking(tenant).id
    _prepared["blocked"] = make_blocked_time(tenant, ny(MONDAY, 12), ny(MONDAY, 13)).id
    with the_same_version(tenant):
        STILL[name](tenant)


def test_a_rolled_back_change_leaves_the_version(app, tenant):
    with the_same_version(tenant):
        db.session.add(
            BlockedTime(
                sub_account_id=tenant.sub_account_id, start_at=ny(MONDAY, 9), end_at=ny(MONDAY, 10)
            )
        )
        db.session.flush()
        db.session.rollback()


def test_another_calendars_changes_leave_this_ones_version(app, tenants):
    mine, theirs = tenants.create(), tenants.create()
    with the_same_version(mine):
        make_booking(theirs, ny(MONDAY, 10))


# --- The ways in -----------------------------------------------------------------------------


@pytest.fixture
def at_seven():
    with time_machine.travel(NOW, tick=False):
        yield


def test_the_api_create_reschedule_and_cancel_each_give_a_new_version(client, tenant, at_seven):
    with a_new_version(tenant):
        created = book_through_api(client, tenant, ny(MONDAY, 10))
        assert created.status_code == 201, created.json
    booking_id = created.json["id"]
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking_id}"
    with a_new_version(tenant):
        moved = client.put(
            url,
            json={"startTime": z(ny(MONDAY, 13)), "endTime": z(ny(MONDAY, 13, 30))},
            headers=tenant.headers("all"),
        )
        assert moved.status_code == 200, moved.json
    with a_new_version(tenant):
        cancelled = client.delete(
            f"/v1/api/calendar/bookings/{booking_id}", json={}, headers=tenant.headers("all")
        )
        assert cancelled.status_code == 200, cancelled.json


def test_the_api_hold_its_release_and_its_use_each_give_a_new_version(client, tenant, at_seven):
    with a_new_version(tenant):
        held = hold_through_api(client, tenant, ny(MONDAY, 10))
        assert held.status_code == 201, held.json
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/holds/{held.json['id']}"
    with a_new_version(tenant):
        assert client.delete(url, headers=tenant.headers("all")).status_code == 200
    token = hold_through_api(client, tenant, ny(MONDAY, 11)).json["holdToken"]
    with a_new_version(tenant):
        used = book_through_api(client, tenant, ny(MONDAY, 11), holdToken=token)
        assert used.status_code == 201, used.json


def dashboard_post(client, path: str, form_page: str, **data):
    response = client.post(path, data={**data, "csrf_token": csrf_token(client, form_page)})
    assert response.status_code in (200, 302, 303), response.get_data(as_text=True)[:500]
    return response


def test_the_dashboards_writes_each_give_a_new_version(client, tenant):
    sign_in(client, owner_email(tenant))
    base = f"/dashboard/s/{tenant.sub_account_id}"
    availability = f"{base}/availability"
    profile = f"{availability}/profiles/{profile_of(tenant).id}"
    with a_new_version(tenant):
        dashboard_post(
            client,
            f"{availability}/blocked",
            availability,
            start=f"{MONDAY}T12:00",
            end=f"{MONDAY}T13:00",
        )
    blocked_id = (
        db.session.query(BlockedTime.id).filter_by(sub_account_id=tenant.sub_account_id).scalar()
    )
    with a_new_version(tenant):
        dashboard_post(client, f"{availability}/blocked/{blocked_id}/remove", availability)
    with a_new_version(tenant):
        dashboard_post(
            client, f"{profile}/hours", profile, weekday="sat", start="10:00", end="12:00"
        )
    hours_id = profile_of(tenant).weekly_hours[0].id
    with a_new_version(tenant):
        dashboard_post(client, f"{profile}/hours/{hours_id}", profile, start="08:00", end="16:00")
    with a_new_version(tenant):
        dashboard_post(client, f"{profile}/overrides", profile, date=MONDAY.isoformat(), closed="y")
    settings = f"{base}/settings"
    with a_new_version(tenant):
        dashboard_post(
            client,
            settings,
            settings,
            name="Clinic",
            timezone="America/New_York",
            default_duration="30",
            minimum_notice="60",
            booking_horizon="60",
        )
    booking = make_booking(tenant, ny(MONDAY, 10))
    booking_page = f"{base}/bookings/{booking.id}"
    with a_new_version(tenant):
        dashboard_post(client, f"{booking_page}/confirm", booking_page)
    with a_new_version(tenant):
        dashboard_post(client, f"{booking_page}/cancel", booking_page, reason="")
    event_type = f"{base}/event-types/{tenant.event_types['Checkup']}"
    with a_new_version(tenant):
        dashboard_post(client, f"{event_type}/deactivate", f"{base}/event-types")


def test_the_workers_hold_purge_and_completions_give_a_new_version(app, tenant):
    from worker.tasks.bookings import complete_finished
    from worker.tasks.holds import purge_expired

    a_hold(tenant)  # expired long ago (expires_at before MONDAY's hours, NOW is later)
    with time_machine.travel(ny(MONDAY, 20), tick=False), a_new_version(tenant):
        assert purge_expired() == 1
    settings_of(tenant).auto_complete_bookings = True
    db.session.commit()
    make_booking(tenant, ny(MONDAY, 10), status="confirmed")
    with time_machine.travel(ny(MONDAY, 20), tick=False), a_new_version(tenant):
        assert complete_finished() == 1


def test_a_feed_sync_and_the_command_lines_remove_give_a_new_version(make_app):
    app = make_app(CALDAV_ALLOW_PRIVATE=True)
    busy = (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:one\r\n"
        "DTSTAMP:20300101T000000Z\r\nDTSTART:20310303T150000Z\r\nDTEND:20310303T160000Z\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )
    with app.app_context(), feed_server() as feed:
        feed.serve(busy)
        tenant = TenantFactory().create(
            calendarConnections=[{"name": "Rota", "kind": "ics", "url": feed.url}]
        )
        connection_id = tenant.connections["Rota"]
        runner = app.test_cli_runner()
        # Synced a week before the feed's event, which the sync's window then covers.
        with time_machine.travel(NOW - timedelta(days=7)), a_new_version(tenant):
            synced = runner.invoke(args=["connections", "sync", str(connection_id)])
            assert synced.exit_code == 0, synced.output
        assert len(external_busy_rows(connection_id)) == 1
        with a_new_version(tenant):
            removed = runner.invoke(args=["connections", "remove", str(connection_id)])
            assert removed.exit_code == 0, removed.output


def test_provisioning_gives_a_new_calendar_its_first_version(app, tmp_path):
    document = tmp_path / "tenant.json"
    document.write_text(json.dumps(tenant_document()))
    provisioned = app.test_cli_runner().invoke(args=["provision", str(document)])
    assert provisioned.exit_code == 0, provisioned.output
    sub_account_id = json.loads(provisioned.output)["agencies"][0]["subAccounts"][0]["id"]
    assert calendar_version(sub_account_id) != 0
