"""Availability pages: profiles (created, renamed, weekly hours of several ranges a day, date
overrides, the one default, deleted only when unused), blocked time (added in the sub account's
timezone, removed; synced busy time read only), and the 7-day preview of open slots as
check_availability finds them. Refusals are shown next to their fields, never a 500; other sub
accounts' ids are 404; forms without their CSRF token change nothing."""

from __future__ import annotations

import html
import re
from datetime import UTC, date, datetime, time, timedelta

import pytest

from app.extensions import db
from app.models import (
    AvailabilityProfile,
    BlockedTime,
    BlockedTimeSource,
    DateOverride,
    EventType,
    SubAccount,
    WeeklyHours,
)
from app.models.types import utcnow
from app.scheduling.timezones import InstantInput
from app.services.availability.open_time import AvailabilityQuery, check_availability
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import NEW_YORK, make_blocked_time, make_booking, next_monday, ny

MONDAY = next_monday()
CHECKUP_ONLY = [{"name": "Checkup", "duration": 60}]  # no profile of its own: the default's
OFFICE_AND_EVENING = [  # Office the default, Evening not
    {"name": "Office", "default": True, "weeklyHours": {"mon": [["09:00", "17:00"]]}},
    {"name": "Evening", "weeklyHours": {"mon": [["17:00", "21:00"]]}},
]


def page_of(tenant) -> str:
    return f"/dashboard/s/{tenant.sub_account_id}/availability"


def profile_ids(tenant) -> dict[str, int]:
    return tenant.raw["agencies"][0]["subAccounts"][0]["availabilityProfiles"]


def profile_page(tenant, profile_id: int) -> str:
    return f"{page_of(tenant)}/profiles/{profile_id}"


def post(client, path: str, form_page: str, **data):
    return client.post(path, data={**data, "csrf_token": csrf_token(client, form_page)})


def error_next_to(page: str, field_id: str) -> str:
    found = re.search(rf'<p class="error" id="{field_id}-errors">([^<]*)</p>', page)
    assert found, f"no error shown for {field_id}"
    return html.unescape(found.group(1))


def profiles(tenant) -> list[AvailabilityProfile]:
    db.session.expire_all()
    return (
        db.session.query(AvailabilityProfile)
        .filter_by(sub_account_id=tenant.sub_account_id)
        .order_by(AvailabilityProfile.id)
        .all()
    )


def weekly_ranges(profile_id: int) -> list[tuple[int, int, int]]:
    db.session.expire_all()
    rows = db.session.query(WeeklyHours).filter_by(profile_id=profile_id)
    return sorted((h.weekday, h.start_minute, h.end_minute) for h in rows)


def overrides(profile_id: int) -> list[tuple[date, int | None, int | None]]:
    db.session.expire_all()
    rows = db.session.query(DateOverride).filter_by(profile_id=profile_id)
    return sorted(((o.date, o.start_minute, o.end_minute) for o in rows), key=str)


def blocked_times(tenant) -> list[BlockedTime]:
    db.session.expire_all()
    return db.session.query(BlockedTime).filter_by(sub_account_id=tenant.sub_account_id).all()


def new_profile(client, tenant, name: str = "Evening") -> AvailabilityProfile:
    post(client, f"{page_of(tenant)}/profiles", page_of(tenant), name=name, timezone="")
    return next(p for p in profiles(tenant) if p.name == name)


def first_weekday_after_today() -> date:
    """A weekday (the factories' profile is open Monday to Friday) in the preview's window,
    after today so no slot of it is lost to the clock while the test runs."""
    today = datetime.now(NEW_YORK).date()
    return next(d for d in (today + timedelta(days=n) for n in range(1, 7)) if d.weekday() < 5)


def preview_of(page: str, day: date) -> str:
    found = re.search(
        rf'<li class="preview-day" data-date="{day.isoformat()}">(.*?)</li>', page, re.S
    )
    assert found, f"{day} not in the preview"
    return found.group(1)


# The page


def test_the_page_names_the_timezone_and_lists_profiles(signed_in, tenant):
    page = signed_in.get(page_of(tenant)).get_data(as_text=True)
    assert "Times in America/New_York." in page
    assert "Office" in page and "Default</span>" in page
    assert page.count("<h1>") == 1


def test_the_default_profile_counts_the_event_types_that_use_it_by_default(signed_in, tenant):
    # Cleaning names Office; Checkup names no profile, so it takes the default's hours too.
    page = signed_in.get(page_of(tenant)).get_data(as_text=True)
    office_row = re.search(r"<tr>\s*<td[^>]*><a [^>]*>Office</a>.*?</tr>", page, re.DOTALL).group(0)
    assert "2 event types" in office_row


# Profiles


def test_a_new_profile_is_not_the_default_while_another_is(signed_in, tenant):
    response = post(
        signed_in,
        f"{page_of(tenant)}/profiles",
        page_of(tenant),
        name="Evening",
        timezone="Europe/Berlin",
    )
    assert response.status_code == 302
    evening = next(p for p in profiles(tenant) if p.name == "Evening")
    assert response.headers["Location"].endswith(f"/profiles/{evening.id}")
    assert (evening.timezone, evening.is_default) == ("Europe/Berlin", False)
    assert [p.name for p in profiles(tenant) if p.is_default] == ["Office"]


def test_the_first_profile_becomes_the_default(client, tenants):
    tenant = tenants.create(availabilityProfiles=[], eventTypes=CHECKUP_ONLY)
    sign_in(client, owner_email(tenant))
    created = new_profile(client, tenant, "Main")
    assert created.is_default and created.timezone == "America/New_York"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "", "Enter a name."),
        ("name", "x" * 10_000, "Length must be between 1 and 255."),
        ("name", "Office", "Duplicate name 'Office'."),
        ("timezone", "Mars/Olympus", "Unknown timezone 'Mars/Olympus'"),
    ],
)
def test_an_invalid_new_profile_is_explained_next_to_its_field(
    signed_in, tenant, field, value, message
):
    data = {"name": "Evening", "timezone": "", field: value}
    response = post(signed_in, f"{page_of(tenant)}/profiles", page_of(tenant), **data)
    assert response.status_code == 200
    assert message in error_next_to(response.get_data(as_text=True), field)
    assert [p.name for p in profiles(tenant)] == ["Office"]


def test_a_profile_is_renamed_and_given_its_own_timezone(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    response = post(
        signed_in,
        profile_page(tenant, office),
        profile_page(tenant, office),
        name="Clinic hours",
        timezone="Europe/Berlin",
    )
    assert response.status_code == 302
    renamed = db.session.get(AvailabilityProfile, office)
    assert (renamed.name, renamed.timezone) == ("Clinic hours", "Europe/Berlin")


def test_weekly_hours_take_several_ranges_a_day(signed_in, tenant):
    evening = new_profile(signed_in, tenant)
    page = profile_page(tenant, evening.id)
    for start, end in (("09:00", "12:00"), ("13:00", "24:00")):
        response = post(signed_in, f"{page}/hours", page, weekday="mon", start=start, end=end)
        assert response.status_code == 302
    assert weekly_ranges(evening.id) == [(0, 540, 720), (0, 780, 1440)]
    shown = signed_in.get(page).get_data(as_text=True)
    assert "09:00–12:00" in shown and "13:00–24:00" in shown


def test_a_weekly_range_is_removed(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    monday = db.session.query(WeeklyHours).filter_by(profile_id=office, weekday=0).one()
    page = profile_page(tenant, office)
    post(signed_in, f"{page}/hours/{monday.id}/remove", page)
    assert [r for r in weekly_ranges(office) if r[0] == 0] == []
    assert len(weekly_ranges(office)) == 4


def test_a_weekly_range_is_changed_in_place(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    monday = db.session.query(WeeklyHours).filter_by(profile_id=office, weekday=0).one()
    page = profile_page(tenant, office)
    assert f'id="hours-{monday.id}-start" name="start" value="09:00"' in signed_in.get(
        page
    ).get_data(as_text=True)
    post(signed_in, f"{page}/hours/{monday.id}", page, start="08:30", end="16:00")
    assert [r for r in weekly_ranges(office) if r[0] == 0] == [(0, 510, 960)]
    assert "Monday: 08:30–16:00." in signed_in.get(page).get_data(as_text=True)


def test_a_range_changed_to_end_before_it_starts_is_refused_and_kept(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    monday = db.session.query(WeeklyHours).filter_by(profile_id=office, weekday=0).one()
    page = profile_page(tenant, office)
    post(signed_in, f"{page}/hours/{monday.id}", page, start="17:00", end="09:00")
    assert [r for r in weekly_ranges(office) if r[0] == 0] == [(0, 540, 1020)]
    assert "Not done:" in signed_in.get(page).get_data(as_text=True)


def test_another_profiles_range_is_not_changed_through_this_one(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    monday = db.session.query(WeeklyHours).filter_by(profile_id=office, weekday=0).one()
    evening = new_profile(signed_in, tenant)
    page = profile_page(tenant, evening.id)
    answer = post(signed_in, f"{page}/hours/{monday.id}", page, start="08:00", end="10:00")
    assert answer.status_code == 404
    assert [r for r in weekly_ranges(office) if r[0] == 0] == [(0, 540, 1020)]


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"start": "25:00"}, "weekly-start", "Use HH:MM, from 00:00 to 24:00."),
        ({"end": "9am"}, "weekly-end", "Use HH:MM, from 00:00 to 24:00."),
        ({"start": ""}, "weekly-start", "Use HH:MM, from 00:00 to 24:00."),
        ({"start": "17:00", "end": "09:00"}, "weekly-end", "Must be after the start."),
        ({"start": "09:00", "end": "09:00"}, "weekly-end", "Must be after the start."),
        ({"weekday": "someday"}, "weekday", "Must be one of: mon, tue, wed, thu, fri, sat, sun."),
    ],
)
def test_an_invalid_weekly_range_is_explained_next_to_its_field(
    signed_in, tenant, data, field, message
):
    office = profile_ids(tenant)["Office"]
    page = profile_page(tenant, office)
    before = weekly_ranges(office)
    response = post(
        signed_in,
        f"{page}/hours",
        page,
        **{"weekday": "sat", "start": "09:00", "end": "12:00", **data},
    )
    assert response.status_code == 200
    assert error_next_to(response.get_data(as_text=True), field) == message
    assert weekly_ranges(office) == before


@pytest.mark.date_sensitive
def test_a_date_override_closes_a_date(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    page = profile_page(tenant, office)
    response = post(signed_in, f"{page}/overrides", page, date=MONDAY.isoformat(), closed="y")
    assert response.status_code == 302
    assert overrides(office) == [(MONDAY, None, None)]
    assert "Closed all day" in signed_in.get(page).get_data(as_text=True)


@pytest.mark.date_sensitive
def test_a_date_override_opens_its_own_ranges_in_place_of_closed(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    page = profile_page(tenant, office)
    post(signed_in, f"{page}/overrides", page, date=MONDAY.isoformat(), closed="y")
    for start, end in (("10:00", "11:00"), ("15:00", "16:30")):
        post(signed_in, f"{page}/overrides", page, date=MONDAY.isoformat(), start=start, end=end)
    assert overrides(office) == [(MONDAY, 600, 660), (MONDAY, 900, 990)]


@pytest.mark.date_sensitive
def test_a_date_override_is_removed(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    page = profile_page(tenant, office)
    post(signed_in, f"{page}/overrides", page, date=MONDAY.isoformat(), closed="y")
    row = db.session.query(DateOverride).filter_by(profile_id=office).one()
    post(signed_in, f"{page}/overrides/{row.id}/remove", page)
    assert overrides(office) == []


@pytest.mark.date_sensitive
@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"date": "2026-02-30"}, "date", "Not a valid date value."),
        ({"date": ""}, "date", "Enter a date."),
        ({"start": "24:30"}, "override-start", "Use HH:MM, from 00:00 to 24:00."),
        ({"end": "08:00"}, "override-end", "Must be after the start."),
    ],
)
def test_an_invalid_date_override_is_explained_next_to_its_field(
    signed_in, tenant, data, field, message
):
    office = profile_ids(tenant)["Office"]
    page = profile_page(tenant, office)
    response = post(
        signed_in,
        f"{page}/overrides",
        page,
        **{"date": MONDAY.isoformat(), "start": "09:00", "end": "12:00", **data},
    )
    assert response.status_code == 200
    assert error_next_to(response.get_data(as_text=True), field) == message
    assert overrides(office) == []


def test_the_default_switches_to_the_chosen_profile(signed_in, tenant):
    evening = new_profile(signed_in, tenant)
    page = profile_page(tenant, evening.id)
    post(signed_in, f"{page}/default", page)
    assert [p.name for p in profiles(tenant) if p.is_default] == ["Evening"]


def test_a_profile_an_event_type_uses_is_kept_and_the_page_says_why(client, tenants):
    tenant = tenants.create(
        availabilityProfiles=OFFICE_AND_EVENING,
        eventTypes=[{"name": "Cleaning", "duration": 30, "availabilityProfile": "Evening"}],
    )
    sign_in(client, owner_email(tenant))
    page = profile_page(tenant, profile_ids(tenant)["Evening"])
    shown = client.get(page).get_data(as_text=True)
    assert "cannot be deleted while event types use it: Cleaning." in shown
    post(client, f"{page}/delete", page)
    assert [p.name for p in profiles(tenant)] == ["Office", "Evening"]
    assert (
        "Not done: &#39;Evening&#39; is used by Cleaning: give them another profile first."
        in client.get(page).get_data(as_text=True)
    )


def test_the_default_profile_is_kept_while_event_types_without_a_profile_use_it(client, tenants):
    """Deleting it would move them to another profile's hours without a word."""
    tenant = tenants.create(availabilityProfiles=OFFICE_AND_EVENING, eventTypes=CHECKUP_ONLY)
    sign_in(client, owner_email(tenant))
    page = profile_page(tenant, profile_ids(tenant)["Office"])
    shown = " ".join(html.unescape(client.get(page).get_data(as_text=True)).split())
    assert (
        "cannot be deleted while event types use it: Checkup. Event types without a profile"
        " of their own use the default. Make another profile the default, or give them a"
        " profile of their own on the Event types page, first." in shown
    )
    post(client, f"{page}/delete", page)
    assert [(p.name, p.is_default) for p in profiles(tenant)] == [
        ("Office", True),
        ("Evening", False),
    ]
    assert (
        "Not done: 'Office' is used by Checkup: make another profile the default or give them a"
        " profile of their own first." in html.unescape(client.get(page).get_data(as_text=True))
    )


def test_deleting_the_default_profile_no_event_type_uses_makes_another_the_default(client, tenants):
    tenant = tenants.create(
        availabilityProfiles=OFFICE_AND_EVENING,
        eventTypes=[{"name": "Checkup", "duration": 60, "availabilityProfile": "Evening"}],
    )
    sign_in(client, owner_email(tenant))
    office = profile_ids(tenant)["Office"]
    response = post(client, f"{profile_page(tenant, office)}/delete", profile_page(tenant, office))
    assert response.headers["Location"].endswith("/availability")
    assert [(p.name, p.is_default) for p in profiles(tenant)] == [("Evening", True)]


# Blocked time


@pytest.mark.date_sensitive
def test_blocked_time_is_read_in_the_sub_accounts_timezone(signed_in, tenant):
    response = post(
        signed_in,
        f"{page_of(tenant)}/blocked",
        page_of(tenant),
        start=f"{MONDAY.isoformat()}T09:00",
        end=f"{MONDAY.isoformat()}T12:30",
        reason="Staff training",
    )
    assert response.status_code == 302
    [blocked] = blocked_times(tenant)
    assert (blocked.start_at, blocked.end_at) == (ny(MONDAY, 9), ny(MONDAY, 12, 30))
    assert (blocked.reason, blocked.source) == ("Staff training", "manual")
    assert "Staff training" in signed_in.get(page_of(tenant)).get_data(as_text=True)


def next_spring_forward() -> date:
    """New York's next spring-forward day (second Sunday of March), when 02:00–03:00 is skipped."""
    year = datetime.now(NEW_YORK).year + 1
    first = date(year, 3, 1)
    return first + timedelta(days=(6 - first.weekday()) % 7 + 7)


@pytest.mark.date_sensitive
@pytest.mark.parametrize(
    ("start", "end", "field", "message"),
    [
        (
            f"{next_spring_forward().isoformat()}T02:30",
            f"{next_spring_forward().isoformat()}T05:00",
            "start",
            "does not exist in America/New_York",
        ),
        (
            f"{MONDAY.isoformat()}T12:00",
            f"{MONDAY.isoformat()}T09:00",
            "end",
            "Must be after start.",
        ),
        ("next tuesday", f"{MONDAY.isoformat()}T09:00", "start", "Not a valid datetime value."),
        (f"{MONDAY.isoformat()}T09:00", "9999-12-31T23:59", "end", "Years from 1900 to 2199 only."),
        (f"{MONDAY.isoformat()}T09:00", "", "end", "Enter a date and time."),
    ],
)
def test_invalid_blocked_time_is_explained_next_to_its_field(
    signed_in, tenant, start, end, field, message
):
    response = post(signed_in, f"{page_of(tenant)}/blocked", page_of(tenant), start=start, end=end)
    assert response.status_code == 200
    assert message in error_next_to(response.get_data(as_text=True), field)
    assert blocked_times(tenant) == []


@pytest.mark.date_sensitive
def test_a_reason_too_long_is_explained_next_to_its_field(signed_in, tenant):
    response = post(
        signed_in,
        f"{page_of(tenant)}/blocked",
        page_of(tenant),
        start=f"{MONDAY.isoformat()}T09:00",
        end=f"{MONDAY.isoformat()}T10:00",
        reason="r" * 10_000,
    )
    assert response.status_code == 200
    assert (
        error_next_to(response.get_data(as_text=True), "reason")
        == "Longer than maximum length 500."
    )


@pytest.mark.date_sensitive
def test_blocked_time_is_removed(signed_in, tenant):
    blocked = make_blocked_time(tenant, ny(MONDAY, 9), ny(MONDAY, 10))
    post(signed_in, f"{page_of(tenant)}/blocked/{blocked.id}/remove", page_of(tenant))
    assert blocked_times(tenant) == []


@pytest.mark.date_sensitive
def test_synced_busy_time_is_shown_but_not_removable(signed_in, tenant):
    synced = make_blocked_time(tenant, ny(MONDAY, 9), ny(MONDAY, 10), BlockedTimeSource.EXTERNAL)
    page = signed_in.get(page_of(tenant)).get_data(as_text=True)
    assert "Connected calendar (read only)" in page
    assert f"/blocked/{synced.id}/remove" not in page
    post(signed_in, f"{page_of(tenant)}/blocked/{synced.id}/remove", page_of(tenant))
    assert len(blocked_times(tenant)) == 1
    assert "comes from a connected calendar" in signed_in.get(page_of(tenant)).get_data(
        as_text=True
    )


# The preview


@pytest.mark.date_sensitive
def test_the_preview_shows_the_slots_check_availability_finds(signed_in, tenant):
    day = first_weekday_after_today()
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    query = AvailabilityQuery(
        InstantInput(day),
        InstantInput(day),
        tenant.event_types["Cleaning"],
        timezone="America/New_York",
    )
    [expected] = check_availability(sub_account, query, utcnow())
    times = [slot.start.astimezone(NEW_YORK).strftime("%H:%M") for slot in expected.slots]
    assert times  # a weekday of the Office profile
    page = signed_in.get(
        page_of(tenant), query_string={"event_type": tenant.event_types["Cleaning"]}
    )
    shown = preview_of(page.get_data(as_text=True), day)
    assert f"{len(times)} open slots" in shown and " ".join(times) in shown


@pytest.mark.date_sensitive
def test_the_preview_says_when_a_cap_closed_a_day(signed_in, tenant):
    day = first_weekday_after_today()
    cleaning = db.session.get(EventType, tenant.event_types["Cleaning"])
    cleaning.booking_limits = {"perDay": {"count": 1}}
    db.session.commit()
    make_booking(tenant, datetime.combine(day, time(10), tzinfo=NEW_YORK).astimezone(UTC))
    page = signed_in.get(page_of(tenant), query_string={"event_type": cleaning.id})
    assert "no open slots (daily cap reached)" in preview_of(page.get_data(as_text=True), day)


@pytest.mark.date_sensitive
def test_the_preview_covers_seven_days(signed_in, tenant):
    page = signed_in.get(page_of(tenant)).get_data(as_text=True)
    today = datetime.now(NEW_YORK).date()
    for n in range(7):
        preview_of(page, today + timedelta(days=n))
    assert page.count('class="preview-day"') == 7


@pytest.mark.date_sensitive
def test_blocked_time_removes_open_slots_from_the_preview(signed_in, tenant):
    day = first_weekday_after_today()
    assert "no open slots" not in preview_of(
        signed_in.get(page_of(tenant)).get_data(as_text=True), day
    )
    post(
        signed_in,
        f"{page_of(tenant)}/blocked",
        page_of(tenant),
        start=f"{day.isoformat()}T00:00",
        end=f"{(day + timedelta(days=1)).isoformat()}T00:00",
    )
    assert "no open slots" in preview_of(signed_in.get(page_of(tenant)).get_data(as_text=True), day)


@pytest.mark.date_sensitive
def test_htmx_swaps_in_the_preview_of_the_chosen_event_type(signed_in, tenant):
    day = first_weekday_after_today()
    url = f"{page_of(tenant)}/preview"
    checkup = {"event_type": tenant.event_types["Checkup"]}
    partial = signed_in.get(url, query_string=checkup, headers={"HX-Request": "true"})
    body = partial.get_data(as_text=True)
    assert partial.status_code == 200 and "<h1>" not in body
    assert "8 open slots" in preview_of(body, day)  # 60 minutes from 09:00 to 16:00
    without_htmx = signed_in.get(url, query_string=checkup)
    assert without_htmx.headers["Location"].endswith(f"?event_type={checkup['event_type']}#preview")


def test_an_unknown_event_type_in_the_preview_is_explained(signed_in, tenants, tenant):
    theirs = tenants.create()
    for value in (theirs.event_types["Cleaning"], "99999999999999999999", "abc"):
        response = signed_in.get(page_of(tenant), query_string={"event_type": value})
        assert response.status_code == 200
        assert '<p class="error" id="event_type-errors">' in response.get_data(as_text=True)


# Other sub accounts, huge ids, CSRF


@pytest.mark.date_sensitive
def test_another_sub_accounts_profile_and_blocked_time_are_not_found(signed_in, tenants, tenant):
    theirs = tenants.create()
    their_profile = profile_ids(theirs)["Office"]
    their_blocked = make_blocked_time(theirs, ny(MONDAY, 9), ny(MONDAY, 10))
    token = csrf_token(signed_in, page_of(tenant))
    mine = page_of(tenant)
    assert signed_in.get(f"{mine}/profiles/{their_profile}").status_code == 404
    for path in (
        f"/profiles/{their_profile}/default",
        f"/profiles/{their_profile}/delete",
        f"/blocked/{their_blocked.id}/remove",
    ):
        assert signed_in.post(f"{mine}{path}", data={"csrf_token": token}).status_code == 404, path
    weekly = signed_in.post(
        f"{mine}/profiles/{their_profile}/hours",
        data={"weekday": "sat", "start": "09:00", "end": "10:00", "csrf_token": token},
    )
    assert weekly.status_code == 404
    assert [p.is_default for p in profiles(theirs)] == [True]
    assert len(blocked_times(theirs)) == 1 and len(weekly_ranges(their_profile)) == 5


def test_another_profiles_hours_are_not_found_through_mine(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    evening = new_profile(signed_in, tenant)
    office_monday = db.session.query(WeeklyHours).filter_by(profile_id=office, weekday=0).one()
    page = profile_page(tenant, evening.id)
    assert post(signed_in, f"{page}/hours/{office_monday.id}/remove", page).status_code == 404
    assert len(weekly_ranges(office)) == 5


def test_ids_too_large_to_exist_are_not_found(signed_in, tenant):
    huge = "99999999999999999999"
    assert signed_in.get(f"{page_of(tenant)}/profiles/{huge}").status_code == 404
    assert signed_in.get(f"/dashboard/s/{huge}/availability").status_code == 404
    token = csrf_token(signed_in, page_of(tenant))
    remove = signed_in.post(f"{page_of(tenant)}/blocked/{huge}/remove", data={"csrf_token": token})
    assert remove.status_code == 404 and "Blocked time not found" in remove.get_data(as_text=True)


@pytest.mark.date_sensitive
def test_forms_without_their_csrf_token_change_nothing(signed_in, tenant):
    office = profile_ids(tenant)["Office"]
    page = profile_page(tenant, office)
    blocked = make_blocked_time(tenant, ny(MONDAY, 9), ny(MONDAY, 10))
    created = signed_in.post(f"{page_of(tenant)}/profiles", data={"name": "Evening"})
    assert created.status_code == 400 and "did not come from this site" in created.get_data(
        as_text=True
    )
    signed_in.post(
        f"{page_of(tenant)}/blocked",
        data={"start": f"{MONDAY.isoformat()}T13:00", "end": f"{MONDAY.isoformat()}T14:00"},
    )
    signed_in.post(f"{page_of(tenant)}/blocked/{blocked.id}/remove")
    signed_in.post(page, data={"name": "Renamed", "timezone": ""})
    signed_in.post(f"{page}/hours", data={"weekday": "sat", "start": "09:00", "end": "10:00"})
    signed_in.post(f"{page}/overrides", data={"date": MONDAY.isoformat(), "closed": "y"})
    signed_in.post(f"{page}/delete")
    assert [p.name for p in profiles(tenant)] == ["Office"]
    assert len(weekly_ranges(office)) == 5 and overrides(office) == []
    assert [(b.start_at, b.end_at) for b in blocked_times(tenant)] == [
        (ny(MONDAY, 9), ny(MONDAY, 10))
    ]
