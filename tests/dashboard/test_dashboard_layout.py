"""The dashboard as people read it, in a real browser at a laptop's and a phone's width
(issue 29): a calendar whose entries say what they are, busy and blocked time in every view,
a phone's day grid; tables whose stacked rows keep their labels; a phone header that is one
bar with a menu."""

from __future__ import annotations

import os
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from app import create_app
from app.extensions import db
from app.models import CalendarConnection
from tests.browser_pages import HEADER_MAX_PX, WIDTHS, book_slot, open_slots, week_showing
from tests.dashboard_users import sign_in_browser
from tests.factories import run_queued_sync
from tests.feed_servers import feed_server
from tests.servers import gunicorn, migrate_and_run_demo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # the booking goes in the first open slot from tomorrow
    pytest.mark.one_shifted_clock,
]

NEW_YORK = ZoneInfo("America/New_York")  # the demo sub account's zone


@pytest.fixture
def furnished(postgres_database, browser):
    """The demo calendar on a live server with, on the day of its first open slot: a booking
    of Robin's at that slot, blocked time 12:00–13:00 ("Lunch") and, from a subscribed feed,
    busy time 14:00–15:00 (New York). Yields the demo sub account's dashboard URL, the demo,
    the booking and a laptop page signed in as the demo owner."""
    url = postgres_database()
    settings = {"CALDAV_ALLOW_PRIVATE": "true"}  # the feed is on loopback
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-secret-key", **settings}
    demo = migrate_and_run_demo(env)
    with feed_server() as feed, gunicorn(url, workers=1, env=settings) as base:
        event_type_id = demo.event_types["Consultation"]
        slot = open_slots(base, demo, event_type_id)[0]
        booking = book_slot(
            base, demo.api_key, event_type_id, slot, "Knee assessment", "robin@example.com", "Robin"
        )
        day = datetime.fromisoformat(slot["start"]).astimezone(NEW_YORK).date()
        feed.serve(_busy_feed(day, time(14), time(15)))

        page = browser.new_page(viewport=WIDTHS["laptop"])
        sign_in_browser(page, base, demo.email, demo.password)
        demo_dental = page.url.rstrip("/")  # …/dashboard/s/<id>
        page.get_by_role("link", name="Connections").click()
        page.get_by_label("Name", exact=True).last.fill("Family")
        page.get_by_label("The calendar's secret address").fill(feed.url)
        page.get_by_role("button", name="Subscribe").click()
        expect(page.get_by_text("Subscribed to “Family”: reading it now.")).to_be_visible()
        read_what_the_worker_would(url)
        page.get_by_role("link", name="Availability").click()
        page.get_by_label("Starts").fill(f"{day}T12:00")
        page.get_by_label("Ends").fill(f"{day}T13:00")
        page.get_by_label("Reason (optional)").fill("Lunch")
        page.get_by_role("button", name="Block this time").click()
        expect(page.get_by_role("status")).to_be_visible()
        yield demo_dental, demo, booking, page
        page.close()


def read_what_the_worker_would(url: str) -> None:
    """The feed's first read, as the worker's ``calendars.sync`` does it (no worker runs
    here: what is looked at is the calendar it furnishes)."""
    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": url,
            "SECRET_KEY": "test-secret-key",
            "CALDAV_ALLOW_PRIVATE": True,
        }
    )
    with app.app_context():
        (connection_id,) = db.session.scalars(select(CalendarConnection.id)).all()
        assert run_queued_sync(connection_id).ok
        db.engine.dispose()


def _busy_feed(day, start: time, end: time) -> str:
    def utc(at: time) -> str:
        return datetime.combine(day, at, NEW_YORK).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")

    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:family-1\r\nDTSTAMP:{utc(start)}\r\nDTSTART:{utc(start)}\r\nDTEND:{utc(end)}\r\n"
        "SUMMARY:Dentist for the kids\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
    )


def booking_start(booking) -> datetime:
    return datetime.fromisoformat(booking["startTime"].replace("Z", "+00:00"))


def test_a_week_views_booking_shows_its_title_first_and_its_whole_text_on_hover_and_focus(
    furnished, audit
):
    demo_dental, _, booking, page = furnished
    entry = week_showing(
        page,
        demo_dental + "/calendar",
        "Knee assessment",
        booking_start(booking),
        "America/New_York",
    )
    title = entry.locator(".entry-title")
    expect(title).to_have_text("Knee assessment · Robin")
    # The title is the first line, inside the 30-minute entry, its time the second (a title
    # longer than its line ends in an ellipsis: whole in the tooltip and on focus).
    assert entry.inner_text().splitlines()[0] == "Knee assessment · Robin"
    box, title_box = entry.bounding_box(), title.bounding_box()
    assert (
        box["y"] <= title_box["y"]
        and title_box["y"] + title_box["height"] <= box["y"] + box["height"]
    )
    full = "Knee assessment · Robin, 09:00–09:30, Pending"
    assert entry.get_attribute("title") == full  # hover
    # Focused (the keyboard's hover), the entry grows to show its title, time and status whole.
    entry.focus()
    when = entry.locator(".entry-when")
    expect(when).to_have_text("09:00–09:30 · Pending")
    assert entry.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
    assert title.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
    assert when.evaluate("e => e.scrollWidth <= e.clientWidth")
    audit(page, "calendar-week")


def test_busy_and_blocked_time_show_in_the_week_month_and_list_views(furnished, audit):
    demo_dental, _, booking, page = furnished
    week_showing(
        page,
        demo_dental + "/calendar",
        "Knee assessment",
        booking_start(booking),
        "America/New_York",
    )
    expect(page.locator(".fc-bg-event.busy-blocked")).to_have_text("Blocked: Lunch")
    expect(page.locator(".fc-bg-event.busy-external")).to_have_text("Busy in Family")

    page.get_by_role("button", name="Month", exact=True).click()
    page.locator(".fc-daygrid").wait_for()
    day = booking_start(booking).astimezone(NEW_YORK).date()
    if page.locator(f'td[data-date="{day}"]').count() == 0:  # the booking is next month
        page.get_by_role("button", name="Next month").click()
    cell = page.locator(f'td[data-date="{day}"]')
    expect(cell.locator(".fc-event.busy-blocked")).to_contain_text("Blocked: Lunch")
    expect(cell.locator(".fc-event.busy-blocked")).to_contain_text("12:00–13:00")
    expect(cell.locator(".fc-event.busy-external")).to_contain_text("Busy in Family")
    month_title = cell.locator(".entry-title", has_text="Knee assessment · Robin")
    expect(month_title).to_be_visible()
    # Whole, not cut to the cell's width: the title wraps within its day.
    assert month_title.evaluate(
        "e => e.scrollWidth <= e.clientWidth && e.scrollHeight <= e.clientHeight + 1"
    )
    audit(page, "calendar-month")

    page.get_by_role("button", name="List", exact=True).click()
    page.locator(".fc-list").wait_for()
    # The list shows the week the month view started from; go to the booking's week.
    while page.locator(".fc-list-event", has_text="Knee assessment").count() == 0:
        page.get_by_role("button", name="Next week").click()
    rows = page.locator(".fc-list-event")
    expect(rows.filter(has_text="Blocked: Lunch")).to_be_visible()
    expect(rows.filter(has_text="Busy in Family")).to_be_visible()
    expect(
        rows.filter(has_text="Knee assessment · Robin · Pending").get_by_role("link")
    ).to_be_visible()
    audit(page, "calendar-list")

    page.get_by_role("button", name="Week", exact=True).click()  # back behind the bookings
    expect(page.locator(".fc-bg-event.busy-external")).to_have_text("Busy in Family")


def test_a_phone_gets_a_day_grid_with_busy_time_today_and_days_by_button_or_swipe(
    furnished, browser, audit
):
    demo_dental, demo, booking, _ = furnished
    context = browser.new_context(viewport=WIDTHS["phone"], has_touch=True)
    page = context.new_page()
    sign_in_browser(page, demo_dental.split("/dashboard")[0], demo.email, demo.password)
    page.goto(demo_dental + "/calendar")
    page.locator(".fc-timeGridDay-view").wait_for()
    expect(page.get_by_role("button", name="Today")).to_be_visible()
    day = booking_start(booking).astimezone(NEW_YORK).date()
    today = datetime.now(NEW_YORK).date()
    for _ in range((day - today).days):
        page.get_by_role("button", name="Next day").click()
    expect(page.locator(".fc-timegrid-col[data-date]").first).to_have_attribute(
        "data-date", str(day)
    )
    expect(page.locator(".entry-title")).to_have_text("Knee assessment · Robin")
    expect(page.locator(".fc-bg-event.busy-blocked")).to_have_text("Blocked: Lunch")
    expect(page.locator(".fc-bg-event.busy-external")).to_have_text("Busy in Family")
    # Drawn as a grid a person can read: an hour is a finger's height or more, and the 30-minute
    # booking and the hours of blocked and busy time show their words.
    for shown in (".entry-title", ".fc-bg-event.busy-blocked", ".fc-bg-event.busy-external"):
        expect(page.locator(shown)).to_be_visible()
    hour = page.locator(".fc-bg-event.busy-external").bounding_box()["height"]
    assert hour >= 60, f"an hour of the day grid is {hour} px high"
    audit(page, "calendar-phone-day")

    page.get_by_role("button", name="3 days").click()
    expect(page.locator(".fc-timegrid-col[data-date]")).to_have_count(3)
    expect(page.locator(".fc-bg-event.busy-external")).to_have_text("Busy in Family")
    audit(page, "calendar-phone-3-days")

    page.get_by_role("button", name="Day", exact=True).click()
    swipe(page, from_x=330, to_x=60)  # right to left: the next day
    expect(page.locator(".fc-timegrid-col[data-date]").first).to_have_attribute(
        "data-date", str(day + timedelta(days=1))
    )
    swipe(page, from_x=60, to_x=330)
    expect(page.locator(".fc-timegrid-col[data-date]").first).to_have_attribute(
        "data-date", str(day)
    )
    page.get_by_role("button", name="Today").click()
    expect(page.locator(".fc-timegrid-col[data-date]").first).to_have_attribute(
        "data-date", str(today)
    )
    context.close()


def swipe(page, from_x: int, to_x: int, y: int = 400) -> None:
    """A one-finger sideways swipe over the calendar, as touch events."""
    page.evaluate(
        """([fromX, toX, y]) => {
          const target = document.querySelector(".fc-timegrid-body");
          const touch = (x) => new Touch({identifier: 1, target, clientX: x, clientY: y});
          target.dispatchEvent(new TouchEvent("touchstart",
            {touches: [touch(fromX)], changedTouches: [touch(fromX)], bubbles: true}));
          target.dispatchEvent(new TouchEvent("touchend",
            {touches: [], changedTouches: [touch(toX)], bubbles: true}));
        }""",
        [from_x, to_x, y],
    )


def labels_of(row) -> list[tuple[str, str]]:
    """Each cell's label as a phone shows it (its ``::before``) and its text."""
    return row.locator("td").evaluate_all(
        """cells => cells.map(cell => [
          getComputedStyle(cell, "::before").content.replace(/^"|"$/g, ""),
          cell.innerText.trim(),
        ])"""
    )


def test_a_phones_stacked_table_rows_keep_their_labels(furnished, audit):
    demo_dental, _, _, page = furnished
    page.set_viewport_size(WIDTHS["phone"])
    page.goto(demo_dental + "/connections")
    row = page.get_by_role("row").filter(has_text="Family")
    labelled = dict(labels_of(row))
    assert list(labelled) == ["Name", "Kind", "Health", "Last sync", "Busy periods", "Write-back"]
    assert labelled["Busy periods"] == "1" and labelled["Write-back"] == "Off"
    label_box = (
        row.locator("td")
        .nth(4)
        .evaluate(
            "cell => { const s = getComputedStyle(cell, '::before');"
            " return [s.visibility, s.display, cell.getBoundingClientRect().height]; }"
        )
    )
    assert label_box[0] == "visible" and label_box[1] != "none" and label_box[2] > 0
    audit(page, "connections-phone")

    page.goto(demo_dental + "/api-keys")
    row = page.get_by_role("row").filter(has_text="demo ")
    assert [label for label, _ in labels_of(row)] == [
        "Name",
        "Key starts",
        "Permissions",
        "Expires",
        "Last used",
        "Status",
        "Actions",
    ]
    assert dict(labels_of(row))["Expires"] == "Never"


def test_a_phones_header_is_one_bar_whose_menu_opens_the_areas(furnished):
    demo_dental, _, _, page = furnished
    page.set_viewport_size(WIDTHS["phone"])
    page.goto(demo_dental + "/")
    header = page.locator("header")
    assert header.bounding_box()["height"] <= HEADER_MAX_PX
    areas = page.get_by_role("navigation", name="Demo Dental")
    expect(areas).to_be_hidden()
    menu = page.get_by_role("button", name="Menu")
    expect(menu).to_have_attribute("aria-expanded", "false")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    areas.get_by_role("link", name="Calendar").click()
    page.wait_for_url("**/calendar")
    expect(page.get_by_role("navigation", name="Demo Dental")).to_be_hidden()
    page.get_by_role("button", name="Menu").click()
    page.keyboard.press("Escape")
    expect(page.get_by_role("navigation", name="Demo Dental")).to_be_hidden()
    expect(page.get_by_role("button", name="Menu")).to_be_focused()
    # At a laptop's width everything is in view without the button.
    page.set_viewport_size(WIDTHS["laptop"])
    expect(page.get_by_role("navigation", name="Demo Dental")).to_be_visible()
    expect(page.get_by_role("button", name="Menu")).to_be_hidden()
