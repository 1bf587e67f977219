"""The attendee's page in a real browser (Playwright driving Debian's chromium against a live
gunicorn on the demo workspace), as Pat would use it from the link an agent texted: on a phone
first, each page looked at (``audit``) at 390 and 1280 px, no axe-core violation."""

from __future__ import annotations

import os
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from app import create_app
from app.extensions import db
from app.models import Booking, CalendarSettings
from tests.browser_pages import WIDTHS, api, book_slot, open_slots
from tests.dashboard_users import sign_in_browser
from tests.servers import gunicorn, migrate_and_run_demo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # the slots open from today
    pytest.mark.one_shifted_clock,  # browser walks; the dates only pick the slots
]


def _booked(base, demo, slot_index: int = 0) -> tuple[dict, list[dict], int]:
    event_type_id = next(iter(demo.event_types.values()))
    slots = open_slots(base, demo, event_type_id)
    booking = book_slot(
        base, demo.api_key, event_type_id, slots[slot_index], "Cleaning", "pat@example.com", "Pat"
    )
    return booking, slots, event_type_id


def _link(booking: dict) -> str:
    return booking["attendees"][0]["manageUrl"]


@pytest.fixture
def site(postgres_database):
    """A live server on a fresh database with the demo workspace, and that database's URL (a
    test changes a setting or a booking's time behind the server's back)."""
    url = postgres_database()
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-secret-key"}
    demo = migrate_and_run_demo(env)
    with gunicorn(url, workers=1) as base:
        yield base, demo, url


@contextmanager
def database(url: str):
    """The live server's database, through the app's models, committed at the end."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test-secret-key"})
    with app.app_context():
        yield db.session
        db.session.commit()
        db.engine.dispose()


def _phone(browser):
    return browser.new_page(viewport=WIDTHS["phone"], timezone_id="America/New_York")


def test_pat_moves_the_booking_to_an_open_slot_then_cancels_it(browser, site, audit):
    base, demo, _ = site
    booking, slots, _ = _booked(base, demo)
    page = _phone(browser)
    page.goto(_link(booking))
    expect(page.get_by_role("heading", name="Cleaning")).to_be_visible()
    audit(page, "attendee-booking")

    link = page.get_by_role("link", name="Pick another time")
    link.focus()
    page.keyboard.press("Enter")  # keyboard alone
    expect(page.get_by_role("heading", name="Pick another time")).to_be_visible()
    audit(page, "attendee-reschedule")
    target = slots[3]
    page.locator(
        f'form:has(input[name="start"][value="{target["start"].replace("Z", "+00:00")}"])'
    ).get_by_role("button").click()
    expect(page.get_by_role("heading", name="Move to this time?")).to_be_visible()
    assert "kept for you until" in page.locator("main").inner_text()
    audit(page, "attendee-confirm")
    page.get_by_role("button", name="Move my booking").click()
    expect(page.get_by_role("status").first).to_have_text(
        "Your booking has moved. A new invitation is on its way to you."
    )
    moved = api(base, demo.api_key, f"/bookings/{booking['id']}")
    assert moved["startTime"] == target["start"]

    page.get_by_label("Reason (optional)").fill("Feeling better")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel booking").click()
    expect(page.get_by_text("This booking is cancelled: Feeling better.")).to_be_visible()
    audit(page, "attendee-cancelled")
    assert api(base, demo.api_key, f"/bookings/{booking['id']}")["status"] == "cancelled"


def test_a_slot_taken_between_viewing_and_choosing_offers_the_nearest(browser, site, audit):
    base, demo, _ = site
    booking, slots, event_type_id = _booked(base, demo)
    page = _phone(browser)
    page.goto(_link(booking) + "/reschedule")
    wanted = slots[2]
    # Someone else holds that slot while Pat is looking at the page.
    api(
        base,
        demo.api_key,
        f"/event-types/{event_type_id}/holds",
        {"startTime": wanted["start"], "endTime": wanted["end"]},
    )
    page.locator(
        f'form:has(input[name="start"][value="{wanted["start"].replace("Z", "+00:00")}"])'
    ).get_by_role("button").click()
    expect(page.get_by_role("alert")).to_have_text(
        "That time was just taken. These are the nearest open times."
    )
    expect(page.get_by_role("heading", name="Nearest open times")).to_be_visible()
    audit(page, "attendee-slot-taken")


def test_inside_the_notice_window_the_page_says_whom_to_contact(browser, site, audit):
    base, demo, url = site
    with database(url) as session:
        for settings in session.query(CalendarSettings):
            settings.attendee_change_notice_hours = 2000
    booking, _, _ = _booked(base, demo)
    page = _phone(browser)
    page.goto(_link(booking))
    expect(
        page.get_by_text("Changes are possible until 2000 hours before the start")
    ).to_be_visible()
    expect(page.get_by_role("button", name="Cancel booking")).to_have_count(0)
    audit(page, "attendee-notice")


def test_revoked_expired_and_forged_links_say_so(browser, site, audit):
    base, demo, url = site
    booking, _, _ = _booked(base, demo)
    old_link = _link(booking)

    # The owner makes Pat a new link from the booking's page: the old one stops working.
    owner = browser.new_page(viewport=WIDTHS["laptop"])
    sign_in_browser(owner, base, demo.email, demo.password)
    owner.goto(f"{base}/dashboard/s/1/bookings/{booking['id']}")
    owner.once("dialog", lambda dialog: dialog.accept())
    owner.get_by_role("button", name="New link").click()
    expect(owner.get_by_role("status")).to_contain_text("A new link was made")
    new_link = owner.get_by_role("link", name="Pat's own link to cancel or move").get_attribute(
        "href"
    )
    assert new_link != old_link

    page = _phone(browser)
    page.goto(old_link)
    expect(page.get_by_text("This link has been replaced by a newer one")).to_be_visible()
    audit(page, "attendee-revoked")
    page.goto(new_link)
    expect(page.get_by_role("heading", name="Cleaning")).to_be_visible()

    path = urlsplit(new_link).path
    page.goto(base + path[:-3] + ("xyz" if not path.endswith("xyz") else "abc"))
    expect(page.get_by_text("This link is not valid")).to_be_visible()

    long_ago = datetime.now(UTC).replace(microsecond=0) - timedelta(days=45)
    with database(url) as session:
        past = session.get(Booking, booking["id"])
        past.start_at = past.occupied_start = long_ago
        past.end_at = past.occupied_end = long_ago + timedelta(minutes=30)
    page.goto(new_link)
    expect(page.get_by_text("This link has expired")).to_be_visible()
    audit(page, "attendee-expired")
