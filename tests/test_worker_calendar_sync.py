"""A connected CalDAV calendar, synced by a real Celery worker process, keeps agents from
booking over its events: the slots disappear from availability and a create there is a 400."""

from __future__ import annotations

import uuid
from datetime import UTC, timedelta

import pytest

from app.extensions import db
from app.models import CalendarConnection
from tests.factories import next_monday, ny, z
from tests.radicale_servers import radicale_server
from tests.servers import MACHINE_REDIS
from tests.test_calendar_sync import vevent
from tests.test_worker import celery_worker, wait_for

pytestmark = pytest.mark.slow

MONDAY = next_monday()


def utc_stamp(instant) -> str:
    return instant.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def synced(connection_id: int) -> bool:
    db.session.expire_all()
    return db.session.get(CalendarConnection, connection_id).last_success_at is not None


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_worker_sync_keeps_agents_off_the_owners_events(
    database_url, make_app, tenants, tmp_path
):
    queue = f"test-{uuid.uuid4().hex}"
    app = make_app(CELERY_BROKER_URL=MACHINE_REDIS, CELERY_QUEUE=queue)
    with radicale_server(tmp_path / "radicale") as radicale:
        calendar = radicale.make_calendar("dentist", "Personal")
        calendar.add_event(
            vevent(
                "school-run",
                f"DTSTART:{utc_stamp(ny(MONDAY, 15))}",
                f"DTEND:{utc_stamp(ny(MONDAY, 16))}",
                "SUMMARY:School run",
            )
        )
        with app.app_context():
            tenant = tenants.create(
                calendarConnections=[
                    {
                        "name": "Personal",
                        "url": radicale.url,
                        "username": "dentist",
                        "password": "unused",
                        "calendar": "Personal",
                    }
                ]
            )
            sub_account = tenant.raw["agencies"][0]["subAccounts"][0]
            connection_id = sub_account["calendarConnections"]["Personal"]

        with celery_worker(
            database_url,
            tmp_path / "worker.log",
            CELERY_BROKER_URL=MACHINE_REDIS,
            CELERY_QUEUE=queue,
        ):
            app.extensions["celery"].send_task("calendars.sync_all")
            with app.app_context():
                assert wait_for(lambda: synced(connection_id))

    client = app.test_client()
    days = client.get(
        "/v1/api/calendar/availability",
        query_string={
            "startDate": MONDAY.isoformat(),
            "endDate": MONDAY.isoformat(),
            "eventTypeId": tenant.event_types["Cleaning"],
        },
        headers=tenant.headers(),
    ).json
    starts = {slot["start"] for slot in days[0]["slots"]}
    assert z(ny(MONDAY, 14)) in starts and z(ny(MONDAY, 16)) in starts
    assert not starts & {z(ny(MONDAY, 15)), z(ny(MONDAY, 15, 30))}

    response = client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings",
        json={
            "startTime": z(ny(MONDAY, 15, 30)),
            "endTime": z(ny(MONDAY, 15, 30) + timedelta(minutes=30)),
            "attendees": [{"email": "pat@example.test"}],
        },
        headers=tenant.headers(),
    )
    assert response.status_code == 400
    assert response.json["message"] == "Time slot conflicts with an event in a connected calendar"
