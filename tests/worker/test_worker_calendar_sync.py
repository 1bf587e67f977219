"""A connected CalDAV calendar, synced both ways by a real Celery worker process (Redis broker,
PostgreSQL): the owner's events keep agents off their time, and the bookings agents make appear
in the owner's calendar, move with them and leave when cancelled."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import icalendar
import pytest

from app.extensions import db
from app.models import CalendarConnection
from tests.celery_workers import celery_worker, wait_for
from tests.factories import availability_through_api, next_monday, ny, z
from tests.radicale_servers import connection_doc, radicale_server, stamp, vevent, vevents
from tests.servers import MACHINE_REDIS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # events on next Monday, in Berlin and New York time
]

MONDAY = next_monday()
TUESDAY, WEDNESDAY, THURSDAY, FRIDAY = (MONDAY + timedelta(days=n) for n in (1, 2, 3, 4))
BERLIN = ZoneInfo("Europe/Berlin")


def local_stamp(instant: datetime) -> str:
    return instant.astimezone(ZoneInfo("America/New_York")).strftime("%Y%m%dT%H%M%S")


def owners_calendar(calendar) -> datetime:
    """The owner's events; returns the instant the Berlin event starts."""
    calendar.add_event(  # a single event
        vevent(
            "school-run",
            f"DTSTART:{stamp(ny(MONDAY, 15))}",
            f"DTEND:{stamp(ny(MONDAY, 16))}",
            "SUMMARY:School run",
        )
    )
    # Tuesdays 09:00 New York time, three times: the second moved to Thursday 11:00, the
    # third excluded.
    tz = "TZID=America/New_York"
    calendar.add_event(
        vevents(
            "standup",
            [
                f"DTSTART;{tz}:{local_stamp(ny(TUESDAY, 9))}",
                f"DTEND;{tz}:{local_stamp(ny(TUESDAY, 10))}",
                "RRULE:FREQ=WEEKLY;COUNT=3",
                f"EXDATE;{tz}:{local_stamp(ny(TUESDAY + timedelta(weeks=2), 9))}",
            ],
            [
                f"RECURRENCE-ID;{tz}:{local_stamp(ny(TUESDAY + timedelta(weeks=1), 9))}",
                f"DTSTART;{tz}:{local_stamp(ny(TUESDAY + timedelta(days=9), 11))}",
                f"DTEND;{tz}:{local_stamp(ny(TUESDAY + timedelta(days=9), 11, 30))}",
            ],
        )
    )
    calendar.add_event(  # all day Wednesday
        vevent(
            "holiday",
            f"DTSTART;VALUE=DATE:{WEDNESDAY:%Y%m%d}",
            f"DTEND;VALUE=DATE:{WEDNESDAY + timedelta(days=1):%Y%m%d}",
        )
    )
    calendar.add_event(  # shown as free
        vevent(
            "lunch-maybe",
            f"DTSTART:{stamp(ny(FRIDAY, 10))}",
            f"DTEND:{stamp(ny(FRIDAY, 11))}",
            "TRANSP:TRANSPARENT",
        )
    )
    # Thursday 19:00 in Berlin: 13:00 in New York, or 14:00 in the weeks their DST rules differ.
    berlin_start = datetime.combine(THURSDAY, time(19), tzinfo=BERLIN)
    berlin_end = berlin_start + timedelta(minutes=30)
    calendar.add_event(
        vevent(
            "call-with-berlin",
            *(f"@{line}" for line in BERLIN_VTIMEZONE),
            f"DTSTART;TZID=Europe/Berlin:{berlin_start:%Y%m%dT%H%M%S}",
            f"DTEND;TZID=Europe/Berlin:{berlin_end:%Y%m%dT%H%M%S}",
        )
    )
    return berlin_start.astimezone(UTC)


BERLIN_VTIMEZONE = [
    "BEGIN:VTIMEZONE",
    "TZID:Europe/Berlin",
    "BEGIN:DAYLIGHT",
    "TZOFFSETFROM:+0100",
    "TZOFFSETTO:+0200",
    "TZNAME:CEST",
    "DTSTART:19700329T020000",
    "RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU",
    "END:DAYLIGHT",
    "BEGIN:STANDARD",
    "TZOFFSETFROM:+0200",
    "TZOFFSETTO:+0100",
    "TZNAME:CET",
    "DTSTART:19701025T030000",
    "RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU",
    "END:STANDARD",
    "END:VTIMEZONE",
]


def synced(connection_id: int) -> bool:
    db.session.expire_all()
    return db.session.get(CalendarConnection, connection_id).last_success_at is not None


def open_starts(client, tenant, first, last) -> set[str]:
    days = availability_through_api(client, tenant, first, last).json
    return {slot["start"] for day in days for slot in day["slots"]}


def booking_events(calendar, uid: str) -> list[icalendar.Event]:
    found = []
    for obj in calendar.events():
        found += [e for e in icalendar.Calendar.from_ical(obj.data).walk("VEVENT")]
    return [e for e in found if str(e["UID"]) == uid]


def test_a_worker_syncs_the_owners_calendar_both_ways(database_url, make_app, tenants, tmp_path):
    queue = f"test-{uuid.uuid4().hex}"
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": queue}
    app = make_app(OUTBOX_DISPATCH=True, **broker)
    with radicale_server(tmp_path / "radicale") as radicale:
        calendar = radicale.make_calendar("dentist", "Personal")
        berlin_start = owners_calendar(calendar)
        with app.app_context():
            tenant = tenants.create(
                calendarConnections=[connection_doc("Personal", radicale, "dentist", "unused")]
            )
            connection_id = tenant.connections["Personal"]

        with celery_worker(
            database_url, tmp_path / "worker.log", SYNC_INTERVAL_SECONDS="3", **broker
        ):
            app.extensions["celery"].send_task("calendars.sync_all")
            with app.app_context():
                assert wait_for(lambda: synced(connection_id))

            client = app.test_client()
            starts = open_starts(client, tenant, MONDAY, MONDAY + timedelta(days=18))
            busy = {
                ny(MONDAY, 15),  # the single event
                ny(MONDAY, 15, 30),
                berlin_start,  # the event in Berlin's time
                ny(TUESDAY, 9),  # the first standup
                ny(TUESDAY, 9, 30),
                ny(TUESDAY + timedelta(days=9), 11),  # the moved one, on Thursday
                ny(WEDNESDAY, 9),  # the all-day event
                ny(WEDNESDAY, 16, 30),
            }
            free = {
                ny(MONDAY, 14),
                ny(MONDAY, 16),
                ny(TUESDAY + timedelta(weeks=1), 9),  # moved away
                ny(TUESDAY + timedelta(weeks=2), 9),  # excluded
                ny(FRIDAY, 10),  # transparent
                ny(WEDNESDAY + timedelta(weeks=1), 9),
            }
            assert not {z(t) for t in busy} & starts
            assert {z(t) for t in free} <= starts

            path = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
            refused = client.post(
                path,
                json={
                    "startTime": z(ny(MONDAY, 15, 30)),
                    "endTime": z(ny(MONDAY, 16)),
                    "attendees": [{"email": "pat@example.test"}],
                },
                headers=tenant.headers(),
            )
            assert refused.status_code == 400
            assert (
                refused.json["message"]
                == "Time slot conflicts with an event in a connected calendar"
            )

            # Bookings made through the API appear in the owner's calendar.
            booking = client.post(
                path,
                json={
                    "startTime": z(ny(MONDAY, 11)),
                    "endTime": z(ny(MONDAY, 11, 30)),
                    "title": "Cleaning for Pat",
                    "attendees": [{"email": "pat@example.test", "name": "Pat"}],
                },
                headers=tenant.headers(),
            ).json
            uid = booking["uid"]
            assert wait_for(lambda: booking_events(calendar, uid), timeout=30)
            (event,) = booking_events(calendar, uid)
            assert str(event["SUMMARY"]) == "Cleaning for Pat"
            assert event["DTSTART"].dt == ny(MONDAY, 11)
            assert str(event["ATTENDEE"]) == "mailto:pat@example.test"

            moved = client.put(
                f"{path}/{booking['id']}",
                json={"startTime": z(ny(MONDAY, 12))},
                headers=tenant.headers(),
            )
            assert moved.status_code == 200
            assert wait_for(
                lambda: [e["SEQUENCE"] for e in booking_events(calendar, uid)] == [1], timeout=30
            )
            (event,) = booking_events(calendar, uid)
            assert event["DTSTART"].dt == ny(MONDAY, 12)

            cancelled = client.delete(
                f"/v1/api/calendar/bookings/{booking['id']}", headers=tenant.headers()
            )
            assert cancelled.status_code == 200
            assert wait_for(lambda: booking_events(calendar, uid) == [], timeout=30)
