"""POST /calendar/event-types/:eventTypeId/bookings."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Booking, Contact, EventType
from tests.factories import ALWAYS_OPEN, make_blocked_time, make_booking, next_monday, ny, z

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in New York time

MONDAY = next_monday()
PARIS = ZoneInfo("Europe/Paris")


def url(tenant, event_type="Cleaning"):
    event_type_id = tenant.event_types[event_type] if isinstance(event_type, str) else event_type
    return f"/v1/api/calendar/event-types/{event_type_id}/bookings"


def body(start=None, minutes=30, **fields):
    start = start or ny(MONDAY, 10)
    return {
        "startTime": z(start),
        "endTime": z(start + timedelta(minutes=minutes)),
        "attendees": [{"email": "pat@example.test"}],
        **fields,
    }


def create(client, tenant, payload=None, key="all", event_type="Cleaning"):
    return client.post(url(tenant, event_type), json=payload or body(), headers=tenant.headers(key))


def active_bookings():
    return db.session.scalar(
        select(func.count())
        .select_from(Booking)
        .where(Booking.status.in_(["pending", "confirmed"]))
    )


def assert_400(response, message):
    assert response.status_code == 400, response.json
    assert response.json["message"] == message


def test_create_is_201_pending_with_uid_and_empty_lifecycle_stamps(client, tenant):
    response = create(client, tenant)
    assert response.status_code == 201
    booking = response.json
    assert booking["status"] == "pending"
    assert booking["uid"] and booking["uid"].replace("-", "").replace("_", "").isalnum()
    assert (booking["confirmedAt"], booking["cancelledAt"], booking["completedAt"]) == (
        None,
        None,
        None,
    )
    assert booking["startTime"] == z(ny(MONDAY, 10)) and booking["endTime"] == z(ny(MONDAY, 10, 30))
    attendee = booking["attendees"][0]
    assert (
        attendee["id"]
        and attendee["createdAt"].endswith("Z")
        and attendee["updatedAt"].endswith("Z")
    )
    assert (
        client.get(f"/v1/api/calendar/bookings/{booking['id']}", headers=tenant.headers()).json
        == booking
    )


def test_uids_are_unique(client, tenant):
    first = create(client, tenant).json
    second = create(client, tenant, body(ny(MONDAY, 11))).json
    assert first["uid"] != second["uid"]


def test_attendee_optional_fields_are_null_and_timezone_is_the_bookings(client, tenant):
    (attendee,) = create(client, tenant).json["attendees"]
    assert attendee["email"] == "pat@example.test"
    assert (attendee["firstName"], attendee["lastName"], attendee["phone"]) == (None, None, None)
    assert attendee["timezone"] == "America/New_York"
    assert attendee["name"] == "pat"
    assert attendee["isOrganizer"] is False


def test_attendee_name_defaults_to_first_and_last_name(client, tenant):
    payload = body(
        attendees=[
            {
                "email": "a@example.test",
                "firstName": "Ada",
                "lastName": "Byron",
                "phone": "+1 555 0100",
                "timezone": "Europe/London",
            }
        ]
    )
    (attendee,) = create(client, tenant, payload).json["attendees"]
    assert attendee["name"] == "Ada Byron"
    assert (attendee["phone"], attendee["timezone"]) == ("+1 555 0100", "Europe/London")


def test_defaults_for_title_location_and_timezone(client, tenants):
    tenant = tenants.create(
        settings={"defaultLocation": "Main office"},
        eventTypes=[
            {"name": "Cleaning", "duration": 30, "location": "Room 2"},
            {"name": "Checkup", "duration": 60},
        ],
    )
    booking = create(
        client, tenant, body(attendees=[{"email": "kim@example.test", "name": "Kim"}])
    ).json
    assert booking["title"] == "Cleaning with Kim"
    assert booking["location"] == "Room 2"
    assert booking["timezone"] == "America/New_York"
    other = create(client, tenant, body(ny(MONDAY, 12), minutes=60), event_type="Checkup").json
    assert other["location"] == "Main office"


def test_sent_fields_are_kept(client, tenant):
    payload = body(
        title="Deep clean",
        description="Bring X-rays",
        timezone="Europe/Paris",
        metadata={"source": "agent", "score": 3, "vip": True, "note": None},
    )
    booking = create(client, tenant, payload).json
    assert (booking["title"], booking["description"], booking["timezone"]) == (
        "Deep clean",
        "Bring X-rays",
        "Europe/Paris",
    )
    assert booking["metadata"] == {"source": "agent", "score": 3, "vip": True, "note": None}
    assert booking["attendees"][0]["timezone"] == "Europe/Paris"


def test_naive_times_are_read_in_the_requests_timezone(client, tenant):
    # Monday 10:00 in New York, written as Paris wall time (16:00, or 15:00 in the weeks the
    # two switch to summer time on different dates); read in New York it would be 16:00 there.
    paris = ny(MONDAY, 10).astimezone(PARIS)
    payload = body(timezone="Europe/Paris")
    payload["startTime"] = f"{paris:%Y-%m-%dT%H:%M:%S}"
    payload["endTime"] = f"{paris + timedelta(minutes=30):%Y-%m-%dT%H:%M:%S}"
    response = create(client, tenant, payload)
    assert response.status_code == 201, response.json
    assert (response.json["startTime"], response.json["endTime"]) == (
        z(ny(MONDAY, 10)),
        z(ny(MONDAY, 10, 30)),
    )


def test_naive_times_without_a_timezone_are_read_in_the_sub_accounts(client, tenant):
    payload = body()
    payload["startTime"] = f"{MONDAY.isoformat()}T10:00:00"
    payload["endTime"] = f"{MONDAY.isoformat()}T10:30:00"
    response = create(client, tenant, payload)
    assert response.status_code == 201, response.json
    assert (response.json["startTime"], response.json["endTime"]) == (
        z(ny(MONDAY, 10)),
        z(ny(MONDAY, 10, 30)),
    )
    assert response.json["timezone"] == "America/New_York"


def test_booking_can_start_off_the_slot_grid(client, tenant):
    response = create(client, tenant, body(ny(MONDAY, 10, 7), minutes=23))
    assert response.status_code == 201


# The time rule
def test_end_before_start_is_400(client, tenant):
    assert_400(create(client, tenant, body(minutes=-30)), "endTime must be after startTime")


def test_end_equal_to_start_is_400(client, tenant):
    assert_400(create(client, tenant, body(minutes=0)), "endTime must be after startTime")


def test_longer_than_24_hours_is_400(client, tenants):
    tenant = tenants.create(
        availabilityProfiles=[{"name": "Office", "default": True, "weeklyHours": ALWAYS_OPEN}]
    )
    ok = create(client, tenant, body(ny(MONDAY, 0), minutes=24 * 60), event_type="Checkup")
    assert ok.status_code == 201, ok.json
    too_long = create(
        client,
        tenant,
        body(ny(MONDAY + timedelta(days=2), 0), minutes=24 * 60 + 1),
        event_type="Checkup",
    )
    assert_400(too_long, "A booking may last at most 24 hours")


def test_outside_working_hours_is_400(client, tenant):
    assert_400(
        create(client, tenant, body(ny(MONDAY, 16, 45))), "Time slot is outside available hours"
    )
    assert_400(
        create(client, tenant, body(ny(MONDAY + timedelta(days=5), 10))),
        "Time slot is outside available hours",
    )


def test_closed_override_date_is_outside_hours(client, tenants):
    tenant = tenants.create(
        availabilityProfiles=[
            {
                "name": "Office",
                "default": True,
                "weeklyHours": {"mon": [["09:00", "17:00"]]},
                "dateOverrides": [{"date": MONDAY.isoformat(), "hours": []}],
            }
        ]
    )
    assert_400(
        create(client, tenant, body(), event_type="Checkup"), "Time slot is outside available hours"
    )


def test_within_minimum_notice_is_400(client, tenants):
    tenant = tenants.create(
        settings={"minimumNoticeMinutes": 60 * 24 * 60, "bookingHorizonDays": 365}
    )
    assert_400(create(client, tenant), "startTime is within the minimum notice period")


def test_beyond_booking_horizon_is_400(client, tenants):
    tenant = tenants.create(settings={"bookingHorizonDays": 3})
    assert_400(create(client, tenant), "startTime is beyond the booking horizon")


def test_overlapping_an_active_booking_is_400(client, tenant):
    make_booking(tenant, ny(MONDAY, 10, 15), event_type="Checkup")
    assert_400(create(client, tenant), "Time slot conflicts with an existing booking")


def test_buffers_count_as_occupied_time(client, tenant):
    make_booking(tenant, ny(MONDAY, 10))  # Cleaning: occupies 10:00-10:40
    assert_400(
        create(client, tenant, body(ny(MONDAY, 10, 30))),
        "Time slot conflicts with an existing booking",
    )
    assert_400(
        create(client, tenant, body(ny(MONDAY, 9, 35))),
        "Time slot conflicts with an existing booking",
    )
    assert create(client, tenant, body(ny(MONDAY, 10, 40))).status_code == 201


def test_cancelled_bookings_do_not_conflict(client, tenant):
    make_booking(tenant, ny(MONDAY, 10), status="cancelled")
    assert create(client, tenant).status_code == 201


def test_blocked_time_conflicts(client, tenant):
    make_blocked_time(tenant, ny(MONDAY, 10, 20), ny(MONDAY, 11), source="manual")
    assert_400(create(client, tenant), "Time slot conflicts with blocked time")


def test_external_busy_time_conflicts(client, tenant):
    make_blocked_time(tenant, ny(MONDAY, 10, 20), ny(MONDAY, 11), source="external")
    assert_400(create(client, tenant), "Time slot conflicts with an event in a connected calendar")


def test_another_sub_accounts_bookings_do_not_conflict(client, tenants, tenant):
    other = tenants.create()
    make_booking(other, ny(MONDAY, 10))
    assert create(client, tenant).status_code == 201


def test_created_booking_blocks_the_same_slot(client, tenant):
    assert create(client, tenant).status_code == 201
    assert_400(create(client, tenant), "Time slot conflicts with an existing booking")
    assert active_bookings() == 1


# Idempotency
def test_same_key_and_body_replays_the_original(client, tenant):
    payload = body(idempotencyKey="retry-1")
    first = create(client, tenant, payload)
    second = create(client, tenant, payload)
    assert first.status_code == second.status_code == 201
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.json == first.json
    assert db.session.scalar(select(func.count()).select_from(Booking)) == 1


def test_body_key_order_does_not_change_the_fingerprint(client, tenant):
    payload = body(idempotencyKey="retry-1")
    assert create(client, tenant, payload).status_code == 201
    reordered = dict(reversed(list(payload.items())))
    assert create(client, tenant, reordered).headers["Idempotent-Replayed"] == "true"


def test_same_key_with_another_body_is_400(client, tenant):
    assert create(client, tenant, body(idempotencyKey="retry-1")).status_code == 201
    response = create(client, tenant, body(ny(MONDAY, 11), idempotencyKey="retry-1"))
    assert_400(response, "idempotencyKey has already been used with a different request")


def test_same_key_on_another_event_type_is_400(client, tenant):
    payload = body(idempotencyKey="retry-1", minutes=60)
    assert create(client, tenant, payload, event_type="Checkup").status_code == 201
    response = create(
        client, tenant, {**payload, "startTime": z(ny(MONDAY, 13)), "endTime": z(ny(MONDAY, 14))}
    )
    assert_400(response, "idempotencyKey has already been used with a different request")


def test_key_is_checked_before_the_time_rule(client, tenant):
    assert create(client, tenant, body(idempotencyKey="retry-1")).status_code == 201
    # Another body whose time is outside working hours: the key problem is reported.
    response = create(client, tenant, body(ny(MONDAY, 20), idempotencyKey="retry-1"))
    assert_400(response, "idempotencyKey has already been used with a different request")


def test_replay_returns_the_booking_as_it_is_now(client, tenant):
    payload = body(idempotencyKey="retry-1")
    booking_id = create(client, tenant, payload).json["id"]
    client.delete(f"/v1/api/calendar/bookings/{booking_id}", headers=tenant.headers())
    replay = create(client, tenant, payload)
    assert replay.status_code == 201 and replay.json["id"] == booking_id
    assert replay.json["status"] == "cancelled"


def test_keys_are_scoped_to_the_sub_account(client, tenants, tenant):
    other = tenants.create()
    assert create(client, tenant, body(idempotencyKey="shared")).status_code == 201
    response = create(client, other, body(idempotencyKey="shared"))
    assert response.status_code == 201 and "Idempotent-Replayed" not in response.headers


def test_keys_are_forgotten_after_24_hours(client, tenant):
    first = create(client, tenant, body(idempotencyKey="old-key")).json
    booking = db.session.get(Booking, first["id"])
    booking.created_at -= timedelta(hours=24, seconds=1)
    db.session.commit()
    second = create(client, tenant, body(ny(MONDAY, 11), idempotencyKey="old-key"))
    assert second.status_code == 201 and second.json["id"] != first["id"]
    assert "Idempotent-Replayed" not in second.headers


# Contacts
def test_attendees_become_contacts_once(client, tenant):
    create(client, tenant, body(attendees=[{"email": "Pat@Example.test", "firstName": "Pat"}]))
    create(
        client,
        tenant,
        body(ny(MONDAY, 11), attendees=[{"email": "pat@example.test", "phone": "555"}]),
    )
    contacts = db.session.scalars(
        select(Contact).where(Contact.sub_account_id == tenant.sub_account_id)
    ).all()
    assert [(c.email, c.first_name, c.phone) for c in contacts] == [
        ("pat@example.test", "Pat", "555")
    ]


def test_a_returning_attendee_with_nothing_new_leaves_the_contact_untouched(client, tenant):
    attendee = {"email": "pat@example.test", "name": "Pat", "phone": "555"}
    create(client, tenant, body(attendees=[attendee]))
    first = db.session.scalar(select(Contact).where(Contact.email == "pat@example.test"))
    written = first.updated_at
    create(
        client,
        tenant,
        body(ny(MONDAY, 11), attendees=[{"email": "pat@example.test", "name": "Pat"}]),
    )
    db.session.expire_all()
    again = db.session.scalar(select(Contact).where(Contact.email == "pat@example.test"))
    assert (again.name, again.phone, again.updated_at) == ("Pat", "555", written)


def test_contacts_are_never_in_api_responses(client, tenant):
    response = create(client, tenant)
    assert "contact" not in response.get_data(as_text=True).lower()


# Validation and errors
@pytest.mark.parametrize(
    "change, field",
    [
        ({"startTime": None}, "startTime"),
        ({"endTime": "tomorrow"}, "endTime"),
        ({"attendees": []}, "attendees"),
        ({"attendees": [{"name": "No Email"}]}, "attendees[0].email"),
        ({"attendees": [{"email": "not-an-email"}]}, "attendees[0].email"),
        ({"attendees": [{"email": "a@example.test", "phone": "1" * 51}]}, "attendees[0].phone"),
        ({"attendees": [{"email": "a@example.test", "name": "n" * 256}]}, "attendees[0].name"),
        (
            {"attendees": [{"email": "a@example.test", "firstName": "n" * 256}]},
            "attendees[0].firstName",
        ),
        ({"attendees": [{"email": "a" * 243 + "@example.test"}]}, "attendees[0].email"),
        (
            {"attendees": [{"email": "a@example.test", "timezone": "Nowhere"}]},
            "attendees[0].timezone",
        ),
        ({"attendees": [{"email": "a@example.test"}] * 51}, "attendees"),
        ({"timezone": "Mars/Base"}, "timezone"),
        ({"title": "x" * 256}, "title"),
        ({"description": "x" * 5001}, "description"),
        ({"idempotencyKey": "k" * 256}, "idempotencyKey"),
        ({"metadata": {f"k{i}": i for i in range(51)}}, "metadata"),
        ({"metadata": {"k" * 41: 1}}, "metadata"),
        ({"metadata": {"k": "v" * 501}}, "metadata.k"),
        ({"metadata": {"k": {"nested": True}}}, "metadata.k"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"status": "confirmed"}, "status"),
    ],
)
def test_invalid_fields_are_400_naming_the_field(client, tenant, change, field):
    payload = {k: v for k, v in {**body(), **change}.items() if v is not None}
    response = create(client, tenant, payload)
    assert response.status_code == 400, response.json
    assert field in response.json["errors"], response.json
    assert field in response.json["message"]


def test_missing_attendees_is_400(client, tenant):
    payload = body()
    del payload["attendees"]
    response = create(client, tenant, payload)
    assert response.status_code == 400 and "attendees" in response.json["errors"]


def test_unknown_event_type_is_404(client, tenant):
    response = create(client, tenant, event_type=999999)
    assert response.status_code == 404
    assert response.json == {
        "statusCode": 404,
        "message": "Event type not found",
        "code": "not_found",
    }


def test_another_sub_accounts_event_type_is_404(client, tenants, tenant):
    other = tenants.create()
    response = create(client, tenant, event_type=other.event_types["Cleaning"])
    assert response.json == {
        "statusCode": 404,
        "message": "Event type not found",
        "code": "not_found",
    }


def test_without_can_book_is_403(client, tenant):
    response = create(client, tenant, key="without-canBook")
    assert response.status_code == 403
    assert response.json == {
        "statusCode": 403,
        "message": "API key does not have 'canBook' permission",
        "code": "permission_denied",
    }
    assert active_bookings() == 0


def test_records_the_creating_api_key(client, tenant):
    booking_id = create(client, tenant).json["id"]
    assert db.session.get(Booking, booking_id).api_key_id is not None


# Values the server derives must fit where they are stored
def test_long_default_title_is_cut_to_255(client, tenant):
    payload = body(attendees=[{"email": "pat@example.test", "name": "N" * 255}])
    booking = create(client, tenant, payload)
    assert booking.status_code == 201
    assert booking.json["title"] == ("Cleaning with " + "N" * 255)[:255]


def test_long_first_and_last_name_make_a_name_cut_to_255(client, tenant):
    payload = body(
        attendees=[{"email": "kim@example.test", "firstName": "F" * 200, "lastName": "L" * 200}]
    )
    response = create(client, tenant, payload)
    assert response.status_code == 201
    assert len(response.json["attendees"][0]["name"]) == 255
    contact = db.session.scalar(select(Contact).where(Contact.email == "kim@example.test"))
    assert len(contact.name) == 255


def test_email_too_long_once_lower_cased_is_400(client, tenant):
    payload = body(attendees=[{"email": "\u0130" * 130 + "@example.com", "name": "x"}])
    response = create(client, tenant, payload)
    assert response.status_code == 400 and "attendees[0].email" in response.json["errors"]


def test_the_same_email_twice_is_400(client, tenant):
    payload = body(attendees=[{"email": "pat@example.test"}, {"email": "PAT@example.test"}])
    response = create(client, tenant, payload)
    assert response.status_code == 400
    assert response.json["errors"] == {"attendees": ["Each attendee email may appear only once."]}


def test_fractions_of_a_second_are_dropped(client, tenant):
    start = ny(MONDAY, 10)
    payload = body()
    payload["startTime"] = z(start).replace("Z", ".5Z")
    payload["endTime"] = z(start + timedelta(minutes=30)).replace("Z", ".999Z")
    booking = create(client, tenant, payload, event_type="Checkup")
    assert booking.json["endTime"] == z(start + timedelta(minutes=30))
    follow_on = create(client, tenant, body(start + timedelta(minutes=30)), event_type="Checkup")
    assert follow_on.status_code == 201, follow_on.json


def test_replay_works_after_the_event_type_is_deactivated(client, tenant):
    payload = body(idempotencyKey="before-deactivation")
    first = create(client, tenant, payload).json
    event_type = db.session.get(EventType, tenant.event_types["Cleaning"])
    event_type.active = False
    db.session.commit()
    replay = create(client, tenant, payload)
    assert replay.status_code == 201 and replay.json["id"] == first["id"]
    assert replay.headers["Idempotent-Replayed"] == "true"
    fresh = create(client, tenant, body(ny(MONDAY, 14), idempotencyKey="after"))
    assert fresh.json == {"statusCode": 404, "message": "Event type not found", "code": "not_found"}
