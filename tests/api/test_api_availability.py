"""GET /calendar/availability through HTTP.

Dates are relative to today (the rules depend on "now"), so expected instants are computed
with zoneinfo from the dates used, never with a fixed UTC offset; the tests whose dates or
expectations follow today's date are marked ``date_sensitive`` and also run on shifted clocks.
Exact edges of notice and horizon are covered by the engine's unit tests.
"""

from __future__ import annotations

import json
import re
import urllib.request
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import event

from app.extensions import db
from tests.factories import (
    ALWAYS_OPEN,
    NEW_YORK,
    make_blocked_time,
    make_booking,
    next_monday,
    ny,
    z,
)
from tests.servers import gunicorn

AVAILABILITY = "/v1/api/calendar/availability"
TOKYO = ZoneInfo("Asia/Tokyo")


def availability(client, tenant, key="all", **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return client.get(f"{AVAILABILITY}?{query}", headers=tenant.headers(key))


def open_days(client, tenant, **params):
    response = availability(client, tenant, **params)
    assert response.status_code == 200, response.json
    return response.json


def starts_on(days, day: date):
    (entry,) = [d for d in days if d["date"] == day.isoformat()]
    return [s["start"] for s in entry["slots"]]


@pytest.mark.date_sensitive
def test_one_entry_per_date_with_utc_slots(client, tenant):
    monday = next_monday()
    sunday = monday + timedelta(days=6)
    days = open_days(client, tenant, startDate=monday, endDate=sunday)
    assert [d["date"] for d in days] == [(monday + timedelta(days=i)).isoformat() for i in range(7)]
    first = days[0]["slots"][0]
    assert first == {"start": z(ny(monday, 9)), "end": z(ny(monday, 9, 30))}
    assert len(days[0]["slots"]) == 16  # 09:00-17:00, default 30 minutes, no buffers
    assert days[5]["slots"] == [] and days[6]["slots"] == []  # weekend closed


@pytest.mark.date_sensitive
def test_event_type_duration_and_buffers_apply(client, tenant):
    monday = next_monday()
    make_booking(tenant, ny(monday, 10), event_type="Cleaning")  # occupies 10:00-10:40
    days = open_days(
        client, tenant, startDate=monday, endDate=monday, eventTypeId=tenant.event_types["Cleaning"]
    )
    starts = starts_on(days, monday)
    assert z(ny(monday, 9)) in starts
    assert z(ny(monday, 9, 30)) not in starts  # its 10 min after-buffer reaches 10:00
    assert z(ny(monday, 10, 30)) not in starts  # the booking's after-buffer runs to 10:40
    assert z(ny(monday, 11)) in starts


@pytest.mark.date_sensitive
def test_duration_parameter_overrides_the_event_type(client, tenant):
    monday = next_monday()
    days = open_days(
        client,
        tenant,
        startDate=monday,
        endDate=monday,
        eventTypeId=tenant.event_types["Checkup"],
        duration=120,
    )
    slots = next(d for d in days if d["date"] == monday.isoformat())["slots"]
    assert slots[0] == {"start": z(ny(monday, 9)), "end": z(ny(monday, 11))}
    assert slots[1]["start"] == z(ny(monday, 10))  # step stays the event type's 60 minutes
    assert slots[-1]["end"] == z(ny(monday, 17))


@pytest.mark.date_sensitive
def test_cancelled_bookings_do_not_block(client, tenant):
    monday = next_monday()
    make_booking(tenant, ny(monday, 9), status="cancelled")
    make_booking(tenant, ny(monday, 10), status="confirmed")
    starts = starts_on(open_days(client, tenant, startDate=monday, endDate=monday), monday)
    assert z(ny(monday, 9)) in starts and z(ny(monday, 10)) not in starts


@pytest.mark.date_sensitive
@pytest.mark.parametrize("source", ["manual", "external"])
def test_blocked_time_blocks(client, tenant, source):
    monday = next_monday()
    make_blocked_time(tenant, ny(monday, 12), ny(monday, 13), source)
    starts = starts_on(open_days(client, tenant, startDate=monday, endDate=monday), monday)
    assert z(ny(monday, 11, 30)) in starts
    assert z(ny(monday, 12)) not in starts and z(ny(monday, 12, 30)) not in starts
    assert z(ny(monday, 13)) in starts


@pytest.mark.date_sensitive
def test_another_sub_accounts_bookings_do_not_block(client, tenants, tenant):
    monday = next_monday()
    other = tenants.create()
    make_booking(other, ny(monday, 9))
    assert z(ny(monday, 9)) in starts_on(
        open_days(client, tenant, startDate=monday, endDate=monday), monday
    )


@pytest.mark.date_sensitive
def test_date_override_closes_a_day(client, tenants):
    monday = next_monday()
    tenant = tenants.create(
        availabilityProfiles=[
            {
                "name": "Office",
                "default": True,
                "weeklyHours": {"mon": [["09:00", "17:00"]], "tue": [["09:00", "17:00"]]},
                "dateOverrides": [
                    {"date": monday.isoformat(), "hours": []},
                    {
                        "date": (monday + timedelta(days=1)).isoformat(),
                        "hours": [["10:00", "11:00"]],
                    },
                ],
            }
        ]
    )
    days = open_days(client, tenant, startDate=monday, endDate=monday + timedelta(days=1))
    assert days[0]["slots"] == []
    assert [s["start"] for s in days[1]["slots"]] == [
        z(ny(monday + timedelta(days=1), 10)),
        z(ny(monday + timedelta(days=1), 10, 30)),
    ]


@pytest.mark.date_sensitive
def test_minimum_notice_of_the_event_type_hides_near_slots(client, tenants):
    tenant = tenants.create(
        eventTypes=[{"name": "Cleaning", "duration": 30, "minimumNoticeMinutes": 60 * 24 * 30}]
    )
    monday = next_monday()
    days = open_days(
        client, tenant, startDate=monday, endDate=monday, eventTypeId=tenant.event_types["Cleaning"]
    )
    assert days[0]["slots"] == []
    days = open_days(
        client, tenant, startDate=monday, endDate=monday
    )  # calendar default: no notice
    assert days[0]["slots"] != []


@pytest.mark.date_sensitive
def test_booking_horizon_hides_far_slots(client, tenants):
    tenant = tenants.create(settings={"bookingHorizonDays": 20})
    near, far = next_monday(1), next_monday(4)
    assert open_days(client, tenant, startDate=near, endDate=near)[0]["slots"] != []
    assert open_days(client, tenant, startDate=far, endDate=far)[0]["slots"] == []


@pytest.mark.date_sensitive
def test_requested_timezone_regroups_days(client, tenant):
    monday = next_monday()
    days = open_days(client, tenant, startDate=monday, endDate=monday, timezone="Asia/Tokyo")
    # Monday in Tokyo runs from Sunday morning to Monday morning in New York (10:00 while New
    # York is on standard time, 11:00 on daylight time): only the start of Monday's hours is in.
    tokyo_monday_ends = datetime.combine(monday + timedelta(days=1), time(0), TOKYO)
    expected, start = [], ny(monday, 9)
    while start + timedelta(minutes=30) <= tokyo_monday_ends:
        expected.append(z(start))
        start += timedelta(minutes=30)
    assert [d["date"] for d in days] == [monday.isoformat()]
    assert [s["start"] for s in days[0]["slots"]] == expected
    assert len(expected) in (2, 4)  # 09:00-10:00 or 09:00-11:00 New York time


@pytest.mark.date_sensitive
def test_instants_cut_the_window(client, tenant):
    monday = next_monday()
    days = open_days(client, tenant, startDate=z(ny(monday, 10, 15)), endDate=z(ny(monday, 11, 15)))
    assert starts_on(days, monday) == [z(ny(monday, 10, 30))]


def next_dst_change() -> date:
    """The date of New York's next DST change, at least two days away (so the day before it is
    still entirely ahead)."""
    day = datetime.now(NEW_YORK).date() + timedelta(days=2)
    while (
        ny(day, 12).astimezone(NEW_YORK).utcoffset()
        == ny(day - timedelta(days=1), 12).astimezone(NEW_YORK).utcoffset()
    ):
        day += timedelta(days=1)
    return day


@pytest.mark.date_sensitive
def test_hours_stay_local_across_the_dst_change(client, tenants):
    change = next_dst_change()  # a Sunday in New York, either direction
    tenant = tenants.create(
        settings={"bookingHorizonDays": 3650},
        availabilityProfiles=[
            {
                "name": "Office",
                "default": True,
                "weeklyHours": {"sat": [["09:00", "10:00"]], "sun": [["09:00", "10:00"]]},
            }
        ],
    )
    days = open_days(
        client, tenant, startDate=change - timedelta(days=1), endDate=change, duration=60
    )
    assert [d["slots"][0]["start"] for d in days] == [
        z(ny(change - timedelta(days=1), 9)),
        z(ny(change, 9)),
    ]
    assert (
        days[0]["slots"][0]["start"][11:13] != days[1]["slots"][0]["start"][11:13]
    )  # UTC hour moved


# Errors
def test_without_can_check_availability_is_403(client, tenant):
    response = availability(
        client,
        tenant,
        key="without-canCheckAvailability",
        startDate="2026-12-01",
        endDate="2026-12-02",
    )
    assert response.status_code == 403
    assert response.json == {
        "statusCode": 403,
        "message": "API key does not have 'canCheckAvailability' permission",
        "code": "permission_denied",
    }


def test_without_key_is_401(client, tenant):
    response = client.get(f"{AVAILABILITY}?startDate=2026-12-01&endDate=2026-12-02")
    assert response.json == {
        "statusCode": 401,
        "message": "Invalid or inactive API key",
        "code": "invalid_api_key",
    }


def test_unknown_event_type_is_404(client, tenant):
    response = availability(
        client, tenant, startDate="2026-12-01", endDate="2026-12-02", eventTypeId=999999
    )
    assert response.status_code == 404
    assert response.json == {
        "statusCode": 404,
        "message": "Event type not found",
        "code": "not_found",
    }


def test_another_sub_accounts_event_type_is_404(client, tenants, tenant):
    other = tenants.create()
    response = availability(
        client,
        tenant,
        startDate="2026-12-01",
        endDate="2026-12-02",
        eventTypeId=other.event_types["Cleaning"],
    )
    assert response.status_code == 404


@pytest.mark.parametrize(
    "params, field",
    [
        ({"endDate": "2026-12-02"}, "startDate"),
        ({"startDate": "2026-12-01"}, "endDate"),
        ({"startDate": "someday", "endDate": "2026-12-02"}, "startDate"),
        ({"startDate": "2026-12-01", "endDate": "2026-12-32"}, "endDate"),
        ({"startDate": "2026-12-01", "endDate": "2026-12-02", "timezone": "Mars/Base"}, "timezone"),
        ({"startDate": "2026-12-01", "endDate": "2026-12-02", "duration": 4}, "duration"),
        ({"startDate": "2026-12-01", "endDate": "2026-12-02", "duration": 1441}, "duration"),
        ({"startDate": "2026-12-01", "endDate": "2026-12-02", "eventTypeId": "x"}, "eventTypeId"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(client, tenant, params, field):
    response = availability(client, tenant, **params)
    assert response.status_code == 400
    assert field in response.json["errors"]
    assert field in response.json["message"]


def test_end_before_start_is_400(client, tenant):
    response = availability(client, tenant, startDate="2026-12-02", endDate="2026-12-01")
    assert response.status_code == 400
    assert response.json["message"] == "endDate must not be before startDate"


@pytest.mark.date_sensitive
def test_window_of_93_days_is_allowed_and_94_is_400(client, tenant):
    start = next_monday()
    ok = availability(client, tenant, startDate=start, endDate=start + timedelta(days=92))
    assert ok.status_code == 200 and len(ok.json) == 93
    too_long = availability(client, tenant, startDate=start, endDate=start + timedelta(days=93))
    assert too_long.status_code == 400
    assert too_long.json["message"] == "The availability window may span at most 93 days"


@pytest.mark.date_sensitive
def test_93_calendar_days_across_a_dst_change_are_allowed(client, tenants):
    tenant = tenants.create(settings={"bookingHorizonDays": 3650})
    change = next_dst_change()
    start = change - timedelta(days=40)
    response = availability(client, tenant, startDate=start, endDate=start + timedelta(days=92))
    assert response.status_code == 200 and len(response.json) == 93


@pytest.mark.date_sensitive
def test_one_query_per_kind_of_busy_time_for_the_whole_window(app, client, tenant):
    monday = next_monday()
    for week in range(4):
        make_booking(tenant, ny(monday + timedelta(days=7 * week), 9))
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        open_days(
            client,
            tenant,
            startDate=monday,
            endDate=monday + timedelta(days=30),
            eventTypeId=tenant.event_types["Cleaning"],
        )
    finally:
        event.remove(db.engine, "before_cursor_execute", record)

    def count(table):
        return sum(bool(re.search(rf"\bFROM {table}\b", s)) for s in statements)

    assert (count("bookings"), count("blocked_times"), count("date_overrides")) == (1, 1, 1)
    assert len(statements) <= 14


# A server process keeps the tests' clock (the shifted runs rely on it)


@pytest.mark.slow
@pytest.mark.date_sensitive
def test_a_server_process_answers_on_the_tests_clock(database_url, tenants):
    tenant = tenants.create(
        settings={"defaultDuration": 30, "minimumNoticeMinutes": 0, "bookingHorizonDays": 60},
        availabilityProfiles=[{"name": "Office", "default": True, "weeklyHours": ALWAYS_OPEN}],
    )
    today = datetime.now(UTC).date()
    query = f"startDate={today - timedelta(days=1)}&endDate={today + timedelta(days=61)}"
    with gunicorn(database_url, workers=1) as base:
        url = f"{base}{AVAILABILITY}?{query}&timezone=UTC"
        before = datetime.now(UTC)
        request = urllib.request.Request(url, headers=tenant.headers())
        with urllib.request.urlopen(request, timeout=30) as response:
            days = json.loads(response.read())
        after = datetime.now(UTC)
    starts = [datetime.fromisoformat(s["start"]) for day in days for s in day["slots"]]
    assert starts, "nothing open within the horizon: the server has another clock"
    # Open every 30 minutes from the server's "now" (no notice) until 60 days later (the
    # horizon): so the server's "now" lies between the test's before and after.
    grid, horizon, slack = timedelta(minutes=30), timedelta(days=60), timedelta(seconds=1)
    assert before - slack <= starts[0] < after + grid
    assert before + horizon - grid - slack <= starts[-1] < after + horizon
