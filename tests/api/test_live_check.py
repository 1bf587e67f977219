"""The live check: a create, reschedule or hold asks every connected calendar about its time
before the calendar's lock, so an event added at the provider seconds ago (no sync, no
notification since) refuses the write with ``external_busy``, and is stored as busy time at
once. Against the Google and Microsoft fakes and real Radicale and Xandikos servers, through
the API on the real clock (the slots are next week's)."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import BlockedTime, Booking
from app.models.types import utcnow
from app.scheduling.intervals import Interval
from app.services.integrations.calendars import live_check, sync_connection
from app.services.integrations.calendars.write_back import write_back_booking
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import (
    TenantFactory,
    availability_through_api,
    book_through_api,
    external_busy_rows,
    hold_through_api,
    next_monday,
    ny,
    z,
)
from tests.oauth_fakes import ACCOUNT_EMAIL
from tests.radicale_servers import (
    PASSWORD,
    connection_doc,
    fresh_user,
    radicale_server,
    vevent,
)
from tests.xandikos_servers import xandikos_server

pytestmark = [pytest.mark.date_sensitive, pytest.mark.one_shifted_clock]

MONDAY = next_monday()
TEN = ny(MONDAY, 10)


# Each kind of calendar: a tenant connected to it (synced once, while the calendar was empty),
# and a way for "a person" to add an event there afterwards.


class ProviderCalendar:
    """The account's primary calendar at the Google or Microsoft fake, connected by a tenant."""

    def __init__(self, fake, tenants, kind):
        self.fake = fake
        self.tenant = tenants.create(
            calendarConnections=[
                {
                    "name": "Calendar",
                    "kind": kind,
                    "refreshToken": fake.issue_refresh_token(ACCOUNT_EMAIL),
                }
            ]
        )
        self.connection_id = self.tenant.connections["Calendar"]
        self.calendar_id = ACCOUNT_EMAIL if kind == "google" else fake.default_calendar_id()

    def add_event(self, start, end, **fields):
        return self.fake.add_event(self.calendar_id, start, end, **fields)

    def delete_event(self, key):
        self.fake.delete_event(self.calendar_id, key)


class CalDAVCalendar:
    def __init__(self, server, tenants):
        user, name = fresh_user(), f"Personal {uuid.uuid4().hex[:8]}"
        self.calendar = server.make_calendar(user, name)
        self.tenant = tenants.create(
            calendarConnections=[connection_doc("Personal", server, user, calendar=name)]
        )
        self.connection_id = self.tenant.connections["Personal"]
        self.count = 0

    def add_event(self, start, end, **fields):
        self.count += 1
        uid = f"added-{self.count}-{time.monotonic_ns()}"
        self.calendar.add_event(
            vevent(uid, f"DTSTART:{start:%Y%m%dT%H%M%SZ}", f"DTEND:{end:%Y%m%dT%H%M%SZ}")
        )
        return uid

    def delete_event(self, uid):
        self.calendar.event_by_uid(uid).delete()


@pytest.fixture(scope="module")
def radicale(tmp_path_factory):
    with radicale_server(tmp_path_factory.mktemp("radicale")) as server:
        yield server


@pytest.fixture(scope="module")
def xandikos(tmp_path_factory):
    with xandikos_server(tmp_path_factory.mktemp("xandikos")) as server:
        yield server


@pytest.fixture(
    params=[
        "google",
        "microsoft",
        pytest.param("radicale", marks=pytest.mark.slow),
        pytest.param("xandikos", marks=pytest.mark.slow),
    ]
)
def connected(request, make_app):
    """A tenant whose calendar of each kind is connected and synced while empty."""
    kind = request.param
    settings = {}
    if kind in ("google", "microsoft"):
        fake = request.getfixturevalue(kind)
        settings = fake.app_settings()
    app = make_app(CALDAV_ALLOW_PRIVATE=True, **settings)
    with app.app_context():
        tenants = TenantFactory()
        if kind in ("google", "microsoft"):
            calendar = ProviderCalendar(fake, tenants, kind)
        else:
            calendar = CalDAVCalendar(request.getfixturevalue(kind), tenants)
        result = sync_connection(calendar.connection_id, now=utcnow())
        db.session.commit()
        assert result.ok, result
        calendar.app = app
        calendar.client = app.test_client()
        yield calendar
        db.session.remove()


def stored_busy(calendar):
    return [(start, end) for _, _, start, end in external_busy_rows(calendar.connection_id)]


def test_a_booking_into_an_event_added_at_the_provider_just_now_is_external_busy(connected):
    connected.add_event(TEN, TEN + timedelta(hours=1))
    refused = book_through_api(connected.client, connected.tenant, TEN + timedelta(minutes=30))
    assert refused.status_code == 400, refused.json
    assert refused.json["code"] == "external_busy"
    assert refused.json["message"] == "Time slot conflicts with an event in a connected calendar"
    suggested = [slot["start"] for slot in refused.json["suggestedSlots"]]
    assert suggested and z(TEN) not in suggested and z(TEN + timedelta(minutes=30)) not in suggested


def test_what_the_live_check_saw_is_stored_and_no_longer_offered(connected):
    connected.add_event(TEN, TEN + timedelta(hours=1))
    book_through_api(connected.client, connected.tenant, TEN)
    assert stored_busy(connected) == [(TEN, TEN + timedelta(hours=1))]
    offered = availability_through_api(connected.client, connected.tenant, MONDAY)
    starts = [slot["start"] for slot in offered.json[0]["slots"]]
    assert z(TEN) not in starts and z(TEN + timedelta(minutes=30)) not in starts
    assert z(TEN + timedelta(hours=1)) in starts


def test_a_reschedule_into_an_event_added_just_now_is_external_busy(connected):
    booked = book_through_api(connected.client, connected.tenant, ny(MONDAY, 14))
    assert booked.status_code == 201, booked.json
    connected.add_event(TEN, TEN + timedelta(hours=1))
    moved = connected.client.put(
        f"/v1/api/calendar/event-types/{connected.tenant.event_types['Cleaning']}"
        f"/bookings/{booked.json['id']}",
        json={"startTime": z(TEN)},
        headers=connected.tenant.headers(),
    )
    assert moved.status_code == 400, moved.json
    assert moved.json["code"] == "external_busy"


def test_a_hold_on_an_event_added_just_now_is_external_busy(connected):
    connected.add_event(TEN, TEN + timedelta(hours=1))
    held = hold_through_api(connected.client, connected.tenant, TEN)
    assert held.status_code == 400, held.json
    assert held.json["code"] == "external_busy"


def test_an_event_deleted_at_the_provider_since_the_sync_no_longer_blocks(connected):
    key = connected.add_event(TEN, TEN + timedelta(hours=1))
    sync_connection(connected.connection_id, now=utcnow())
    db.session.commit()
    assert stored_busy(connected) == [(TEN, TEN + timedelta(hours=1))]
    connected.delete_event(key)
    booked = book_through_api(connected.client, connected.tenant, TEN)
    assert booked.status_code == 201, booked.json
    assert stored_busy(connected) == []


def test_time_beside_the_new_event_is_still_booked(connected):
    connected.add_event(TEN, TEN + timedelta(hours=1))
    booked = book_through_api(connected.client, connected.tenant, ny(MONDAY, 13))
    assert booked.status_code == 201, booked.json


@pytest.fixture
def google_connected(make_app, google):
    app = make_app(**google.app_settings())
    with app.app_context():
        calendar = ProviderCalendar(google, TenantFactory(), "google")
        sync_connection(calendar.connection_id, now=utcnow())
        db.session.commit()
        calendar.client = app.test_client()
        yield calendar
        db.session.remove()


def test_the_services_own_written_back_booking_is_not_busy_for_its_reschedule(google_connected):
    calendar = google_connected
    booked = book_through_api(calendar.client, calendar.tenant, TEN)
    assert booked.status_code == 201, booked.json
    (outcome,) = write_back_booking(booked.json["id"], now=utcnow())
    assert outcome.error is None, outcome
    db.session.commit()
    assert calendar.fake.events(ACCOUNT_EMAIL)  # the booking's event is at Google
    moved = calendar.client.put(
        f"/v1/api/calendar/event-types/{calendar.tenant.event_types['Cleaning']}"
        f"/bookings/{booked.json['id']}",
        json={"startTime": z(TEN + timedelta(minutes=20))},
        headers=calendar.tenant.headers(),
    )
    assert moved.status_code == 200, moved.json


def test_an_idempotent_replay_asks_no_calendar(google_connected):
    calendar = google_connected
    first = book_through_api(calendar.client, calendar.tenant, TEN, idempotencyKey="once")
    assert first.status_code == 201
    calendar.fake.clear_requests()
    again = book_through_api(calendar.client, calendar.tenant, TEN, idempotencyKey="once")
    assert (again.status_code, again.headers.get("Idempotent-Replayed")) == (201, "true")
    assert calendar.fake.requests_to("/events", method="GET") == []


def test_with_the_live_check_off_no_calendar_is_asked(make_app, google):
    app = make_app(CALENDAR_LIVE_CHECK="off", **google.app_settings())
    with app.app_context():
        calendar = ProviderCalendar(google, TenantFactory(), "google")
        calendar.add_event(TEN, TEN + timedelta(hours=1))
        booked = book_through_api(app.test_client(), calendar.tenant, TEN)
        assert booked.status_code == 201  # only stored busy time counts, and none is stored
        assert google.requests_to("/events", method="GET") == []


def test_a_refused_write_stores_busy_time_in_the_occupied_interval(connected):
    # Cleaning has a 10-minute buffer after it: an event starting 5 minutes after the slot's
    # end conflicts with the buffer, and the question asked covers it.
    connected.add_event(TEN + timedelta(minutes=35), TEN + timedelta(minutes=50))
    refused = book_through_api(connected.client, connected.tenant, TEN)
    assert refused.status_code == 400, refused.json
    assert refused.json["code"] == "external_busy"
    rows = db.session.scalars(
        select(BlockedTime).where(BlockedTime.calendar_connection_id == connected.connection_id)
    ).all()
    assert [(r.start_at, r.end_at) for r in rows] == [
        (TEN + timedelta(minutes=35), TEN + timedelta(minutes=50))
    ]


# A calendar that does not answer


def create_in_thread(client, tenant, start, results):
    thread = threading.Thread(
        target=lambda: results.append(book_through_api(client, tenant, start)), daemon=True
    )
    thread.start()
    return thread


def test_under_best_effort_a_calendar_that_does_not_answer_books_against_stored_busy_time(
    google_connected,
):
    calendar = google_connected
    calendar.fake.stall(30, "/events")
    try:
        booked = book_through_api(calendar.client, calendar.tenant, TEN)
    finally:
        calendar.fake.unstall()
    assert booked.status_code == 201, booked.json


def test_under_strict_a_calendar_that_does_not_answer_is_a_503_to_retry(make_app, google):
    app = make_app(CALENDAR_LIVE_CHECK="strict", **google.app_settings())
    with app.app_context():
        calendar = ProviderCalendar(google, TenantFactory(), "google")
        google.stall(30, "/events")
        try:
            refused = book_through_api(app.test_client(), calendar.tenant, TEN)
        finally:
            google.unstall()
        assert refused.status_code == 503, refused.json
        assert refused.json["code"] == "calendar_unreachable"
        assert refused.json["message"] == (
            "The connected calendar 'Calendar' did not answer in time; try again shortly"
        )
        assert refused.headers["Retry-After"] == "5"
        assert db.session.scalar(select(func.count()).select_from(Booking)) == 0


def test_while_a_calendar_does_not_answer_no_lock_is_held(google_connected):
    """A create waiting on Google holds neither the calendar's lock nor a transaction: a
    second create and a cancel on the same calendar go ahead meanwhile."""
    calendar = google_connected
    earlier = book_through_api(calendar.client, calendar.tenant, ny(MONDAY, 15))
    assert earlier.status_code == 201
    calendar.fake.stall(30, "/events")
    results = []
    try:
        first = create_in_thread(calendar.client, calendar.tenant, TEN, results)
        second = create_in_thread(calendar.client, calendar.tenant, ny(MONDAY, 11), results)
        calendar.fake.wait_until_stalled(2)  # both creates ask Google at once
        cancelled = calendar.client.delete(
            f"/v1/api/calendar/bookings/{earlier.json['id']}", headers=calendar.tenant.headers()
        )
        assert cancelled.status_code == 200, cancelled.json
    finally:
        calendar.fake.unstall()
    first.join(30)
    second.join(30)
    assert sorted(r.status_code for r in results) == [201, 201]


def test_a_create_waiting_on_a_stalled_calendar_holds_no_database_connection(google_connected):
    """The plan's transaction ends before the calendars are asked: while Google thinks, the
    create has given its connection back to the pool (and holds no transaction there)."""
    calendar = google_connected
    db.session.remove()  # the test's own session holds none either
    pool = db.engine.pool
    calendar.fake.stall(30, "/events")
    results = []
    try:
        waiting = create_in_thread(calendar.client, calendar.tenant, TEN, results)
        calendar.fake.wait_until_stalled(1)
        held_while_asking = pool.checkedout()
    finally:
        calendar.fake.unstall()
    waiting.join(30)
    assert held_while_asking == 0
    assert [r.status_code for r in results] == [201]


def test_the_live_check_refuses_to_ask_inside_a_transaction(google_connected):
    calendar = google_connected
    calendar.fake.clear_requests()
    question = live_check.plan_live_check(calendar.tenant.sub_account_id, Interval(TEN, TEN))
    assert question is not None
    with pytest.raises(RuntimeError, match="between a write's plan and its apply"):
        live_check.ask(question)  # the plan's read transaction is still open
    db.session.rollback()
    assert calendar.fake.requests_to("/events", method="GET") == []


def test_a_dashboard_reschedule_into_an_event_added_just_now_is_refused(google_connected):
    calendar = google_connected
    client = calendar.client
    sign_in(client, owner_email(calendar.tenant))
    booked = book_through_api(client, calendar.tenant, ny(MONDAY, 14))
    assert booked.status_code == 201, booked.json
    calendar.add_event(TEN, TEN + timedelta(hours=1))
    page = f"/dashboard/s/{calendar.tenant.sub_account_id}/bookings/{booked.json['id']}/reschedule"
    moved = client.post(
        page, data={"start": TEN.isoformat(), "csrf_token": csrf_token(client, page)}
    )
    followed = client.get(moved.headers["Location"]).get_data(as_text=True)
    assert "Not moved: Time slot conflicts with an event in a connected calendar." in followed


def test_a_live_check_sends_the_credentials_a_server_asked_for_with_its_first_request(
    make_app, tmp_path
):
    # A Radicale that asks for a password, with its default 1 s delay of every 401: the delay
    # a live check must not spend its deadline on.
    users = {"dentist": PASSWORD}
    with radicale_server(tmp_path / "radicale", users, auth_delay=1, log_requests=True) as server:
        server.make_calendar("dentist", "Personal")
        app = make_app(CALDAV_ALLOW_PRIVATE=True)
        with app.app_context():
            tenant = TenantFactory().create(
                calendarConnections=[connection_doc("Personal", server, "dentist")]
            )
            # The sync is asked for the password (401, then Basic).
            assert sync_connection(tenant.connections["Personal"], now=utcnow()).ok
            db.session.commit()
            assert " 401 Unauthorized" in server.log_path.read_text()
            before = len(server.log_path.read_text())
            booked = book_through_api(app.test_client(), tenant, TEN)
            assert booked.status_code == 201, booked.json
            check = server.log_path.read_text()[before:]
            assert "REPORT request" in check  # the live check's calendar-query
            assert "Successful login: 'dentist'" in check
            assert " 401 Unauthorized" not in check and "denied for anonymous user" not in check
            db.session.remove()
