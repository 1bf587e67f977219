"""PUT /calendar/event-types/:eventTypeId/bookings/:id."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import Booking
from tests.factories import make_booking, next_monday, ny, z

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in New York time

MONDAY = next_monday()
REDUCED_FIELDS = {
    "id",
    "startTime",
    "endTime",
    "status",
    "title",
    "description",
    "timezone",
    "attendees",
}
BRIEF_ATTENDEE_FIELDS = {"id", "email", "name", "createdAt", "updatedAt"}


def put(client, tenant, booking_id, payload, key="all", event_type="Cleaning"):
    event_type_id = tenant.event_types[event_type] if isinstance(event_type, str) else event_type
    return client.put(
        f"/v1/api/calendar/event-types/{event_type_id}/bookings/{booking_id}",
        json=payload,
        headers=tenant.headers(key),
    )


@pytest.fixture
def booking(tenant):
    return make_booking(
        tenant,
        ny(MONDAY, 10),
        title="Cleaning",
        description="Old notes",
        meta={"a": 1},
        emails=("pat@example.test", "kim@example.test"),
    )


def reload(booking_id):
    db.session.expire_all()
    return db.session.get(Booking, booking_id)


def test_answers_with_the_reduced_form(client, tenant, booking):
    response = put(client, tenant, booking.id, {"title": "Renamed"})
    assert response.status_code == 200
    assert set(response.json) == REDUCED_FIELDS
    assert all(set(a) == BRIEF_ATTENDEE_FIELDS for a in response.json["attendees"])
    assert response.json["title"] == "Renamed"


def test_only_sent_fields_change(client, tenant, booking):
    put(client, tenant, booking.id, {"description": "New notes"})
    after = reload(booking.id)
    assert after.description == "New notes"
    assert (after.title, after.meta, after.start_at) == ("Cleaning", {"a": 1}, ny(MONDAY, 10))
    assert [a.email for a in after.attendees] == ["pat@example.test", "kim@example.test"]


def test_description_can_be_cleared_with_null(client, tenant, booking):
    assert put(client, tenant, booking.id, {"description": None}).json["description"] is None


def test_metadata_values_that_differ_only_in_type_are_changes(client, tenant, booking):
    put(client, tenant, booking.id, {"metadata": {"a": 1, "b": 0}})
    put(client, tenant, booking.id, {"metadata": {"a": True, "b": False}})
    assert reload(booking.id).meta == {"a": True, "b": False}
    shown = client.get(f"/v1/api/calendar/bookings/{booking.id}", headers=tenant.headers()).json
    assert shown["metadata"] == {"a": True, "b": False}


def test_metadata_is_replaced(client, tenant, booking):
    put(client, tenant, booking.id, {"metadata": {"b": "two"}})
    assert reload(booking.id).meta == {"b": "two"}


def test_start_time_alone_keeps_the_length(client, tenant, booking):
    response = put(client, tenant, booking.id, {"startTime": z(ny(MONDAY, 13))})
    assert (response.json["startTime"], response.json["endTime"]) == (
        z(ny(MONDAY, 13)),
        z(ny(MONDAY, 13, 30)),
    )
    after = reload(booking.id)
    assert (after.start_at, after.end_at) == (ny(MONDAY, 13), ny(MONDAY, 13, 30))


def test_end_time_alone_moves_only_the_end(client, tenant, booking):
    response = put(client, tenant, booking.id, {"endTime": z(ny(MONDAY, 10, 45))})
    assert (response.json["startTime"], response.json["endTime"]) == (
        z(ny(MONDAY, 10)),
        z(ny(MONDAY, 10, 45)),
    )
    after = reload(booking.id)
    assert after.occupied_end == ny(MONDAY, 10, 55)  # 10 minute buffer after


def test_reschedule_may_overlap_its_own_old_time(client, tenant, booking):
    response = put(client, tenant, booking.id, {"startTime": z(ny(MONDAY, 10, 15))})
    assert response.status_code == 200, response.json
    assert (response.json["startTime"], response.json["endTime"]) == (
        z(ny(MONDAY, 10, 15)),
        z(ny(MONDAY, 10, 45)),
    )
    after = reload(booking.id)
    assert (after.start_at, after.end_at) == (ny(MONDAY, 10, 15), ny(MONDAY, 10, 45))


def test_reschedule_onto_another_booking_is_400(client, tenant, booking):
    make_booking(tenant, ny(MONDAY, 14))
    response = put(client, tenant, booking.id, {"startTime": z(ny(MONDAY, 14, 10))})
    assert response.status_code == 400
    assert response.json["message"] == "Time slot conflicts with an existing booking"
    assert reload(booking.id).start_at == ny(MONDAY, 10)


def test_reschedule_outside_hours_is_400(client, tenant, booking):
    response = put(client, tenant, booking.id, {"startTime": z(ny(MONDAY, 18))})
    assert response.json["message"] == "Time slot is outside available hours"


def test_reschedule_with_end_before_start_is_400(client, tenant, booking):
    response = put(client, tenant, booking.id, {"endTime": z(ny(MONDAY, 9))})
    assert response.json["message"] == "endTime must be after startTime"


def test_unchanged_times_are_not_rechecked(client, tenant):
    # Two to three weeks ago: in the past, where no new time would be accepted.
    start = ny(MONDAY - timedelta(days=28), 10)
    past = make_booking(tenant, start)
    response = put(client, tenant, past.id, {"startTime": z(start), "title": "Still fine"})
    assert response.status_code == 200, response.json
    assert (response.json["title"], response.json["startTime"]) == ("Still fine", z(start))
    after = reload(past.id)
    assert (after.title, after.start_at) == ("Still fine", start)


def test_attendees_replace_the_list_keeping_ids_of_unchanged_emails(client, tenant, booking):
    pat_id, kim_id = (a.id for a in booking.attendees)
    response = put(
        client,
        tenant,
        booking.id,
        {
            "attendees": [
                {"email": "PAT@example.test", "name": "Pat"},
                {"email": "lee@example.test"},
            ]
        },
    )
    attendees = response.json["attendees"]
    assert [a["email"] for a in attendees] == ["pat@example.test", "lee@example.test"]
    assert attendees[0]["id"] == pat_id and attendees[0]["name"] == "Pat"
    assert attendees[1]["id"] not in (pat_id, kim_id)
    assert [a.email for a in reload(booking.id).attendees] == [
        "pat@example.test",
        "lee@example.test",
    ]
    assert all(a["createdAt"].endswith("Z") and a["updatedAt"].endswith("Z") for a in attendees)
    shown = client.get(f"/v1/api/calendar/bookings/{booking.id}", headers=tenant.headers()).json
    assert [(a["id"], a["name"]) for a in shown["attendees"]] == [
        (a["id"], a["name"]) for a in attendees
    ]


def test_empty_attendee_list_is_400(client, tenant, booking):
    response = put(client, tenant, booking.id, {"attendees": []})
    assert response.status_code == 400 and "attendees" in response.json["errors"]


def test_status_does_not_change_on_update(client, tenant):
    confirmed = make_booking(tenant, ny(MONDAY, 10), status="confirmed")
    assert put(client, tenant, confirmed.id, {"title": "x"}).json["status"] == "confirmed"


@pytest.mark.parametrize("status", ["cancelled", "completed", "no_show"])
def test_inactive_bookings_cannot_be_updated(client, tenant, status):
    inactive = make_booking(tenant, ny(MONDAY, 10), status=status)
    response = put(client, tenant, inactive.id, {"title": "x"})
    assert response.status_code == 400
    assert response.json["message"] == f"A {status} booking cannot be updated"


def test_wrong_event_type_in_path_is_404(client, tenant, booking):
    response = put(client, tenant, booking.id, {"title": "x"}, event_type="Checkup")
    assert response.json == {"statusCode": 404, "message": "Booking not found", "code": "not_found"}


def test_unknown_event_type_is_404(client, tenant, booking):
    response = put(client, tenant, booking.id, {"title": "x"}, event_type=999999)
    assert response.json == {
        "statusCode": 404,
        "message": "Event type not found",
        "code": "not_found",
    }


def test_unknown_booking_is_404(client, tenant):
    response = put(client, tenant, 999999, {"title": "x"})
    assert response.json == {"statusCode": 404, "message": "Booking not found", "code": "not_found"}


def test_another_sub_accounts_booking_is_404(client, tenants, tenant):
    other = tenants.create()
    foreign = make_booking(other, ny(MONDAY, 10), title="Theirs")
    response = put(client, tenant, foreign.id, {"title": "Mine now"})  # this tenant's Cleaning
    assert response.status_code == 404
    assert response.json == {"statusCode": 404, "message": "Booking not found", "code": "not_found"}
    assert reload(foreign.id).title == "Theirs"


def test_another_sub_accounts_event_type_is_404(client, tenants, tenant, booking):
    other = tenants.create()
    response = put(
        client, tenant, booking.id, {"title": "x"}, event_type=other.event_types["Cleaning"]
    )
    assert response.status_code == 404
    assert response.json == {
        "statusCode": 404,
        "message": "Event type not found",
        "code": "not_found",
    }
    assert reload(booking.id).title == "Cleaning"


def test_idempotency_key_is_not_an_update_field(client, tenant, booking):
    response = put(client, tenant, booking.id, {"idempotencyKey": "x"})
    assert response.status_code == 400 and "idempotencyKey" in response.json["errors"]


def test_invalid_time_is_400(client, tenant, booking):
    response = put(client, tenant, booking.id, {"startTime": "soon"})
    assert response.status_code == 400 and "startTime" in response.json["errors"]


def test_without_can_book_is_403(client, tenant, booking):
    response = put(client, tenant, booking.id, {"title": "x"}, key="without-canBook")
    assert response.json == {
        "statusCode": 403,
        "message": "API key does not have 'canBook' permission",
        "code": "permission_denied",
    }
