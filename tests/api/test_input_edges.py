"""Edge cases of input an outside review found: timezone names that are not IANA zones, paths
with doubled slashes, local times a daylight-saving change skips."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.models.types import utcnow
from app.services.accounts.provisioning import ProvisioningInvalid
from tests.factories import ALWAYS_OPEN, next_monday, ny, z

NEW_YORK = "America/New_York"
NOT_ZONES = ["localtime", "Factory", "posixrules", "posix/America/New_York", "right/UTC"]


def next_spring_forward(tz_name: str) -> date:
    """The next date on which ``tz_name``'s clocks jump forward (from today, whatever it is)."""
    tz = ZoneInfo(tz_name)
    day = utcnow().date()
    for _ in range(400):
        day += timedelta(days=1)
        before = datetime.combine(day, time(0), tzinfo=tz).utcoffset()
        after = datetime.combine(day, time(23, 59), tzinfo=tz).utcoffset()
        if after > before:
            return day
    raise AssertionError(f"{tz_name} has no spring-forward change within a year")


@pytest.fixture
def open_tenant(tenants):
    """A New York calendar open around the clock, bookable up to two years ahead."""
    return tenants.create(
        settings={"defaultDuration": 60, "minimumNoticeMinutes": 0, "bookingHorizonDays": 800},
        availabilityProfiles=[{"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}],
        eventTypes=[{"name": "Visit", "duration": 60, "availabilityProfile": "Always"}],
    )


def assert_refused_naming(response, field: str, naive: str) -> None:
    """A 400 whose message and errors name ``field``: ``naive`` is skipped in New York."""
    message = f"{naive} does not exist in America/New_York (a daylight-saving change skips it)"
    assert response.status_code == 400
    assert response.json["message"] == f"{field}: {message}"
    assert response.json["errors"] == {field: [message]}


def create(client, tenant, **fields):
    start = ny(next_monday(), 10)
    payload = {
        "startTime": z(start),
        "endTime": z(start + timedelta(minutes=60)),
        "attendees": [{"email": "pat@example.test"}],
        **fields,
    }
    event_type = next(iter(tenant.event_types.values()))
    return client.post(
        f"/v1/api/calendar/event-types/{event_type}/bookings",
        json=payload,
        headers=tenant.headers(),
    )


@pytest.mark.date_sensitive
@pytest.mark.parametrize("name", NOT_ZONES)
def test_a_booking_timezone_that_is_not_an_iana_zone_is_400(client, open_tenant, name):
    response = create(client, open_tenant, timezone=name)
    assert response.status_code == 400
    assert response.json["errors"] == {
        "timezone": [f"Unknown timezone '{name}'; use an IANA name."]
    }


@pytest.mark.date_sensitive
@pytest.mark.parametrize("name", NOT_ZONES)
def test_an_attendee_timezone_that_is_not_an_iana_zone_is_400(client, open_tenant, name):
    response = create(
        client, open_tenant, attendees=[{"email": "a@example.test", "timezone": name}]
    )
    assert response.status_code == 400
    assert list(response.json["errors"]) == ["attendees[0].timezone"]


@pytest.mark.date_sensitive
@pytest.mark.parametrize("name", NOT_ZONES)
def test_an_availability_timezone_that_is_not_an_iana_zone_is_400(client, open_tenant, name):
    monday = next_monday().isoformat()
    response = client.get(
        "/v1/api/calendar/availability",
        query_string={"startDate": monday, "endDate": monday, "timezone": name},
        headers=open_tenant.headers(),
    )
    assert response.status_code == 400
    assert list(response.json["errors"]) == ["timezone"]


@pytest.mark.parametrize("name", ["localtime", "Factory"])
def test_provisioning_refuses_timezones_that_are_not_iana_zones(tenants, name):
    with pytest.raises(ProvisioningInvalid) as refused:
        tenants.create(timezone=name)
    assert "subAccounts[0].timezone" in str(refused.value.errors)


@pytest.mark.parametrize(
    "path",
    ["/v1/api//calendar//bookings", "//v1/api/calendar/bookings", "/v1/api/calendar/bookings//1"],
)
def test_doubled_slashes_are_a_json_404_without_a_redirect(client, open_tenant, path):
    response = client.get(
        path, headers={**open_tenant.headers(), "Host": "evil.example"}, follow_redirects=False
    )
    assert response.status_code == 404
    assert response.json == {"statusCode": 404, "message": "Not found", "code": "not_found"}
    assert "Location" not in response.headers


@pytest.mark.date_sensitive
def test_a_naive_start_skipped_by_spring_forward_is_400_naming_it(client, open_tenant):
    day = next_spring_forward(NEW_YORK)
    response = create(
        client,
        open_tenant,
        startTime=f"{day}T02:30:00",
        endTime=f"{day}T03:30:00",
        timezone=NEW_YORK,
    )
    assert_refused_naming(response, "startTime", f"{day}T02:30:00")


@pytest.mark.date_sensitive
def test_a_naive_end_skipped_by_spring_forward_is_400_naming_it(client, open_tenant):
    day = next_spring_forward(NEW_YORK)
    response = create(
        client,
        open_tenant,
        startTime=f"{day}T01:00:00",
        endTime=f"{day}T02:15:00",
        timezone=NEW_YORK,
    )
    assert response.status_code == 400
    assert list(response.json["errors"]) == ["endTime"]


@pytest.mark.date_sensitive
def test_a_move_to_a_naive_start_skipped_by_spring_forward_is_400_naming_it(client, open_tenant):
    booked = create(client, open_tenant)
    assert booked.status_code == 201, booked.json
    day = next_spring_forward(NEW_YORK)
    event_type = next(iter(open_tenant.event_types.values()))
    response = client.put(
        f"/v1/api/calendar/event-types/{event_type}/bookings/{booked.json['id']}",
        json={"startTime": f"{day}T02:30:00", "timezone": NEW_YORK},
        headers=open_tenant.headers(),
    )
    assert_refused_naming(response, "startTime", f"{day}T02:30:00")


@pytest.mark.date_sensitive
def test_a_hold_with_a_naive_end_skipped_by_spring_forward_is_400_naming_it(client, open_tenant):
    day = next_spring_forward(NEW_YORK)
    event_type = next(iter(open_tenant.event_types.values()))
    response = client.post(
        f"/v1/api/calendar/event-types/{event_type}/holds",
        json={"startTime": f"{day}T01:00:00", "endTime": f"{day}T02:15:00", "timezone": NEW_YORK},
        headers=open_tenant.headers(),
    )
    assert_refused_naming(response, "endTime", f"{day}T02:15:00")


@pytest.mark.date_sensitive
def test_naive_times_around_the_gap_book_their_real_length(client, open_tenant):
    day = next_spring_forward(NEW_YORK)
    response = create(
        client,
        open_tenant,
        startTime=f"{day}T01:30:00",
        endTime=f"{day}T03:30:00",
        timezone=NEW_YORK,
    )
    assert response.status_code == 201, response.json
    start = datetime.fromisoformat(response.json["startTime"])
    end = datetime.fromisoformat(response.json["endTime"])
    assert end - start == timedelta(hours=1)  # 01:30 EST to 03:30 EDT
    assert start.astimezone(UTC).hour == 6 and start.minute == 30


@pytest.mark.date_sensitive
def test_a_naive_window_start_in_the_gap_is_400_naming_it(client, open_tenant):
    day = next_spring_forward(NEW_YORK)
    response = client.get(
        "/v1/api/calendar/availability",
        query_string={"startDate": f"{day}T02:30:00", "endDate": str(day), "timezone": NEW_YORK},
        headers=open_tenant.headers(),
    )
    assert response.status_code == 400
    assert list(response.json["errors"]) == ["startDate"]


@pytest.mark.date_sensitive
def test_a_naive_list_bound_in_the_gap_is_400_naming_it(client, open_tenant):
    day = next_spring_forward(NEW_YORK)
    response = client.get(
        "/v1/api/calendar/bookings",
        query_string={"endDate": f"{day}T02:30:00"},
        headers=open_tenant.headers(),
    )
    assert response.status_code == 400
    assert list(response.json["errors"]) == ["endDate"]
