"""The event contract, pinned: what a webhook receiver gets for a booking, key for key, type for
type, format for format, and how stored events of every version are read.

The payload's ``data.booking`` is the events' own schema (``event_schema``, version 2), not the
API's Booking: if one of these tests fails because the API's shape changed, the event schema
must not follow it; a change to the payload is a new event schema version
(docs/operations.md, "The event schema")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.extensions import db
from app.jobs import outbox as outbox_job
from app.jobs.reminders import send_due_reminders
from app.jobs.webhooks import send_delivery
from app.models import OutboxEvent, WebhookDelivery
from app.models.types import utcnow
from app.services.integrations.event_schema import (
    EVENT_SCHEMA_VERSION,
    UnknownEventSchema,
    booking_from_snapshot,
    snapshot_booking,
)
from app.services.integrations.webhooks.deliveries import HANDLER_NAME
from tests.factories import make_booking, next_monday, ny, z
from tests.webhook_receivers import webhook_receiver

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday

MONDAY = next_monday()
ROOT = Path(__file__).resolve().parents[2]
# Version 1's fields, in the order receivers see them: pinned here, not read from the code
# under test, so a change to the schema must change this test too.
BOOKING_FIELDS_V1 = (
    "id",
    "uid",
    "startTime",
    "endTime",
    "status",
    "title",
    "description",
    "location",
    "timezone",
    "metadata",
    "attendees",
    "confirmedAt",
    "cancelledAt",
    "completedAt",
)
ATTENDEE_FIELDS_V1 = (
    "id",
    "email",
    "name",
    "firstName",
    "lastName",
    "phone",
    "timezone",
    "isOrganizer",
    "createdAt",
    "updatedAt",
)
# Version 2: the booking's fields as in version 1; each attendee adds their manage link.
ATTENDEE_FIELDS_V2 = (*ATTENDEE_FIELDS_V1, "manageUrl")
BOOKING_FIELDS_V3 = (*BOOKING_FIELDS_V1, "hosts", "assignmentReason")
# Version 4: the answers to the event type's questions.
BOOKING_FIELDS_V4 = (*BOOKING_FIELDS_V3, "responses")


class _PositiveInt:
    """Matches an id: an ``int`` (not a ``bool``) above zero."""

    def __repr__(self) -> str:
        return "<positive int>"


ID = _PositiveInt()
INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")  # UTC, seconds, trailing Z
UID = re.compile(r"[A-Za-z0-9_-]{22}")  # 16 random bytes, URL-safe base64
EVENT_ID = re.compile(r"evt_[1-9][0-9]*")
HOST_NAME = re.compile(r"Clinic \d+")  # the sub account's one host, named after it
MANAGE_URL = re.compile(r"http://127\.0\.0\.1:\d+/manage/[A-Za-z0-9_.-]+")


def matches(value: Any, expected: Any, path: str = "$") -> None:
    """Assert ``value`` is ``expected``: dicts with exactly its keys in its order, lists item by
    item, ``ID`` and patterns as said, anything else equal and of the very same type (so
    ``1`` is not ``1.0`` or ``True``, and ``null`` is ``null``)."""
    if expected is ID:
        assert type(value) is int and value > 0, f"{path}: {value!r} is not an id"
    elif isinstance(expected, re.Pattern):
        assert isinstance(value, str) and expected.fullmatch(value), f"{path}: {value!r}"
    elif isinstance(expected, dict):
        assert isinstance(value, dict), f"{path}: {value!r} is not an object"
        assert list(value) == list(expected), f"{path}: keys {list(value)}"
        for key, item in expected.items():
            matches(value[key], item, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(value, list) and len(value) == len(expected), f"{path}: {value!r}"
        for index, item in enumerate(expected):
            matches(value[index], item, f"{path}[{index}]")
    else:
        assert type(value) is type(expected) and value == expected, f"{path}: {value!r}"


@pytest.fixture
def app(make_app):
    app = make_app(WEBHOOK_ALLOW_PRIVATE=True, WEBHOOK_TIMEOUT_SECONDS=1)
    with app.app_context():
        yield app
        db.session.remove()


def subscribed(tenants, url):
    tenant = tenants.create(webhooks=[{"name": "crm", "url": url, "events": ["*"]}])
    return tenant


def deliver_all(receiver, now=None) -> list[dict[str, Any]]:
    """Run the webhooks handler on every event, send each delivery to ``receiver``; returns
    the bodies received, parsed (after checking they are compact UTF-8 JSON)."""
    now = now or utcnow()
    for event_id in db.session.scalars(select(OutboxEvent.id).order_by(OutboxEvent.id)).all():
        outbox_job.handle_event(event_id, HANDLER_NAME, now)
        db.session.commit()
    for delivery_id in db.session.scalars(select(WebhookDelivery.id).order_by(WebhookDelivery.id)):
        assert send_delivery(delivery_id, now).status == "succeeded"
        db.session.commit()
    bodies = []
    for request in receiver.requests:
        assert request.headers["content-type"] == "application/json"
        payload = json.loads(request.body)
        # Compact separators, non-ASCII as UTF-8 (not \\u escapes), keys in the written order.
        assert (
            request.body == json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        )
        bodies.append(payload)
    return bodies


CREATE = {
    "startTime": z(ny(MONDAY, 10)),
    "endTime": z(ny(MONDAY, 10) + timedelta(minutes=30)),
    "timezone": "America/New_York",
    "title": "Reinigung für Pat",
    "description": "Bring the x-rays.",
    "metadata": {"crmId": "A-77", "visits": 3, "score": 4.5, "vip": True, "note": None},
    "attendees": [
        {
            "email": "Pat@Example.test",
            "name": "Pat Lee",
            "firstName": "Pat",
            "lastName": "Lee",
            "phone": "+1 555 0100",
            "timezone": "Europe/Berlin",
        },
        {"email": "sam@example.test"},
    ],
}


def booking_v4(**changes: Any) -> dict[str, Any]:
    """Version 4 of the booking ``CREATE`` makes, as a receiver gets it."""
    return {
        "id": ID,
        "uid": UID,
        "startTime": z(ny(MONDAY, 10)),
        "endTime": z(ny(MONDAY, 10) + timedelta(minutes=30)),
        "status": "pending",
        "title": "Reinigung für Pat",
        "description": "Bring the x-rays.",
        "location": None,
        "timezone": "America/New_York",
        "metadata": {"crmId": "A-77", "visits": 3, "score": 4.5, "vip": True, "note": None},
        "attendees": [
            {
                "id": ID,
                "email": "pat@example.test",
                "name": "Pat Lee",
                "firstName": "Pat",
                "lastName": "Lee",
                "phone": "+1 555 0100",
                "timezone": "Europe/Berlin",
                "isOrganizer": False,
                "createdAt": INSTANT,
                "updatedAt": INSTANT,
                "manageUrl": MANAGE_URL,
            },
            {
                "id": ID,
                "email": "sam@example.test",
                "name": "sam",
                "firstName": None,
                "lastName": None,
                "phone": None,
                "timezone": "America/New_York",
                "isOrganizer": False,
                "createdAt": INSTANT,
                "updatedAt": INSTANT,
                "manageUrl": MANAGE_URL,
            },
        ],
        "confirmedAt": None,
        "cancelledAt": None,
        "completedAt": None,
        "hosts": [{"id": ID, "name": HOST_NAME, "email": None}],
        "assignmentReason": "single",
        "responses": {},
        **changes,
    }


def test_a_created_booking_reaches_the_receiver_exactly_so(app, tenants):
    client = app.test_client()
    with webhook_receiver() as receiver:
        tenant = subscribed(tenants, receiver.url)
        url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
        created = client.post(url, json=CREATE, headers=tenant.headers())
        assert created.status_code == 201
        (payload,) = deliver_all(receiver)

    matches(
        payload,
        {
            "type": "booking.created",
            "timestamp": INSTANT,
            "eventId": EVENT_ID,
            "sequence": 0,
            "actor": "business",
            "data": {"booking": booking_v4()},
        },
    )
    booking = payload["data"]["booking"]
    assert (booking["id"], booking["uid"]) == (created.json["id"], created.json["uid"])
    assert list(booking) == list(BOOKING_FIELDS_V4)
    assert all(list(a) == list(ATTENDEE_FIELDS_V2) for a in booking["attendees"])


def test_a_cancellation_reaches_the_receiver_exactly_so(app, tenants):
    client = app.test_client()
    with webhook_receiver() as receiver:
        tenant = subscribed(tenants, receiver.url)
        url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
        booking_id = client.post(url, json=CREATE, headers=tenant.headers()).json["id"]
        cancelled = client.delete(
            f"/v1/api/calendar/bookings/{booking_id}",
            json={"reason": "Moved away"},
            headers=tenant.headers(),
        )
        assert cancelled.status_code == 200
        created, cancellation = deliver_all(receiver)

    assert created["type"] == "booking.created"
    matches(
        cancellation,
        {
            "type": "booking.cancelled",
            "timestamp": INSTANT,
            "eventId": EVENT_ID,
            "sequence": 1,
            "actor": "business",
            "data": {"booking": booking_v4(status="cancelled", cancelledAt=INSTANT)},
        },
    )


def test_a_reminder_reaches_the_receiver_exactly_so_when_its_channels_name_the_webhook(
    app, tenants
):
    client = app.test_client()
    with webhook_receiver() as receiver:
        tenant = tenants.create(
            webhooks=[{"name": "crm", "url": receiver.url, "events": ["booking.reminder"]}],
            settings={
                "reminders": [
                    {"minutesBefore": 1440, "channels": ["attendeeEmail"]},  # no webhook
                    {"minutesBefore": 60, "channels": ["webhook"]},
                ]
            },
        )
        url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
        assert client.post(url, json=CREATE, headers=tenant.headers()).status_code == 201
        assert send_due_reminders(ny(MONDAY, 10) - timedelta(days=1)) == 1
        assert send_due_reminders(ny(MONDAY, 10) - timedelta(minutes=60)) == 1
        (payload,) = deliver_all(receiver)

    matches(
        payload,
        {
            "type": "booking.reminder",
            "timestamp": INSTANT,
            "eventId": EVENT_ID,
            "sequence": 0,
            "actor": "business",
            "data": {"booking": booking_v4()},
            "reminder": {"minutesBefore": 60},
        },
    )


def test_a_new_event_stores_its_schema_version(app, tenants):
    tenant = tenants.create()
    booking = make_booking(tenant, ny(MONDAY, 10))
    client = app.test_client()
    client.delete(f"/v1/api/calendar/bookings/{booking.id}", headers=tenant.headers())
    (row,) = db.session.scalars(select(OutboxEvent)).all()
    assert EVENT_SCHEMA_VERSION == 4
    assert list(row.snapshot) == [
        "schemaVersion",
        "booking",
        "sequence",
        "cancellationReason",
        "createdAt",
        "updatedAt",
    ]
    assert row.snapshot["schemaVersion"] == 4
    assert list(row.snapshot["booking"]) == list(BOOKING_FIELDS_V4)


def test_the_answers_to_the_questions_travel_with_the_event(app, tenants):
    tenant = tenants.create()
    booking = make_booking(tenant, ny(MONDAY, 10), responses={"dob": "1980-02-01"})
    app.test_client().delete(f"/v1/api/calendar/bookings/{booking.id}", headers=tenant.headers())
    (row,) = db.session.scalars(select(OutboxEvent)).all()
    assert row.snapshot["booking"]["responses"] == {"dob": "1980-02-01"}
    assert booking_from_snapshot(row.snapshot, tenant.sub_account_id).responses == {
        "dob": "1980-02-01"
    }


# An event as the code before the event schema stored it (the API's BookingSchema, no version).
OLD_SNAPSHOT = {
    "booking": {
        "id": 311,
        "uid": "kY3v0c8mQ1uQx8bq4w2H7A",
        "startTime": "2026-12-07T16:00:00Z",
        "endTime": "2026-12-07T16:30:00Z",
        "status": "pending",
        "title": "Cleaning",
        "description": None,
        "location": None,
        "timezone": "America/New_York",
        "metadata": {"crmId": "A-77"},
        "attendees": [
            {
                "id": 402,
                "email": "pat@example.com",
                "name": "Pat Doe",
                "firstName": None,
                "lastName": None,
                "phone": None,
                "timezone": "Europe/Berlin",
                "isOrganizer": False,
                "createdAt": "2026-12-01T15:00:00Z",
                "updatedAt": "2026-12-01T15:00:00Z",
            }
        ],
        "confirmedAt": None,
        "cancelledAt": None,
        "completedAt": None,
    },
    "sequence": 2,
    "cancellationReason": None,
    "createdAt": "2026-12-01T15:00:00Z",
    "updatedAt": "2026-12-01T15:04:05Z",
}


def test_an_event_stored_by_the_old_code_is_sent_as_it_was_stored(app, tenants):
    with webhook_receiver() as receiver:
        tenant = subscribed(tenants, receiver.url)
        booking = make_booking(tenant, ny(MONDAY, 10))
        row = OutboxEvent(
            kind="booking.rescheduled",
            sub_account_id=tenant.sub_account_id,
            booking_id=booking.id,
            changed=["startTime", "endTime"],
            snapshot=json.loads(json.dumps(OLD_SNAPSHOT)),
            occurred_at=utcnow() - timedelta(minutes=1),
        )
        db.session.add(row)
        db.session.commit()
        (payload,) = deliver_all(receiver)
    assert payload["eventId"] == f"evt_{row.id}"
    assert payload["data"] == {"booking": OLD_SNAPSHOT["booking"]}


def test_an_event_stored_by_the_old_code_is_read_as_version_1():
    assert snapshot_booking(OLD_SNAPSHOT) == OLD_SNAPSHOT["booking"]
    booking = booking_from_snapshot(OLD_SNAPSHOT, sub_account_id=7)
    assert (booking.id, booking.uid, booking.sequence, booking.meta) == (
        311,
        "kY3v0c8mQ1uQx8bq4w2H7A",
        2,
        {"crmId": "A-77"},
    )
    assert z(booking.start_at) == "2026-12-07T16:00:00Z"
    assert [(a.email, a.timezone) for a in booking.attendees] == [
        ("pat@example.com", "Europe/Berlin")
    ]


def test_a_snapshot_of_an_unknown_version_is_refused_not_guessed_at():
    newer = {**OLD_SNAPSHOT, "schemaVersion": 5}
    with pytest.raises(UnknownEventSchema):
        snapshot_booking(newer)
    with pytest.raises(UnknownEventSchema):
        booking_from_snapshot(newer, sub_account_id=7)


def test_the_integrations_load_nothing_of_the_apis_shapes():
    """Importing what stores, reads and sends events loads no ``app.representations`` (the
    import contract in pyproject.toml says the same of the source)."""
    program = (
        "import json, sys\n"
        "import app.services.integrations.events, app.services.integrations.outbox\n"
        "import app.services.integrations.webhooks.deliveries\n"
        "import app.services.integrations.notifications.booking_mail\n"
        "import app.services.integrations.calendars.write_back\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = json.loads(result.stdout)
    assert "app.services.integrations.event_schema" in loaded
    assert "app.representations" not in loaded
