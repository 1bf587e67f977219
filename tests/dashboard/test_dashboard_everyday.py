"""What a person expects of the dashboard's everyday pages, in a real browser on the demo
workspace (issue 29, items 3 and 4): a day's hours changed where they are shown, a profile that
counts the event types taking its hours, an overview of active bookings with cancelled ones
behind a filter, and the site's icon."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_pages import WIDTHS, api_call, book_slot, open_slots
from tests.dashboard_users import sign_in_browser

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # the bookings go in the open slots from tomorrow
    pytest.mark.one_shifted_clock,
]


def test_a_days_hours_are_changed_in_place_and_the_default_counts_its_event_types(
    browser, site, audit
):
    base, demo = site
    page = browser.new_page(viewport=WIDTHS["laptop"])
    sign_in_browser(page, base, demo.email, demo.password)
    page.get_by_role("navigation", name="Demo Dental").get_by_role(
        "link", name="Availability"
    ).click()
    # Both demo event types name no profile, so both take the default's hours.
    office = page.get_by_role("row").filter(has_text="Office hours")
    expect(office).to_contain_text("2 event types")

    office.get_by_role("link", name="Office hours").click()
    weekly = page.get_by_role("region", name="Weekly hours")
    monday = weekly.get_by_role("row").filter(has_text="Monday")
    expect(monday).to_contain_text("09:00–17:00")
    monday.get_by_text("Change").click()
    monday.get_by_label("Opens").fill("10:00")
    monday.get_by_label("Closes").fill("16:30")
    audit(page, "weekly-hours-change")
    monday.get_by_role("button", name="Save").click()

    monday = (
        page.get_by_role("region", name="Weekly hours").get_by_role("row").filter(has_text="Monday")
    )
    expect(monday).to_contain_text("10:00–16:30")
    expect(monday).not_to_contain_text("09:00–17:00")
    tuesday = page.get_by_role("row").filter(has_text="Tuesday")
    expect(tuesday).to_contain_text("09:00–17:00")  # the other days keep theirs


def test_the_overview_shows_active_bookings_and_cancelled_ones_behind_a_filter(
    browser, site, audit
):
    base, demo = site
    event_type_id = demo.event_types["Consultation"]
    slots = open_slots(base, demo, event_type_id)
    # Two slots on different days: the event type's buffer keeps neighbours apart.
    kept = slots[0]
    dropped = next(s for s in slots if s["start"][:10] != kept["start"][:10])
    for slot, title in ((kept, "Crown fitting"), (dropped, "Whitening")):
        booked = book_slot(base, demo.api_key, event_type_id, slot, title, "sam@example.com", "Sam")
    api_call(base, demo.api_key, "DELETE", f"/bookings/{booked['id']}", {"reason": "Moved away"})

    page = browser.new_page(viewport=WIDTHS["laptop"])
    sign_in_browser(page, base, demo.email, demo.password)
    upcoming = page.get_by_role("table", name="Upcoming bookings, 1 in all")
    expect(upcoming.get_by_role("row").filter(has_text="Crown fitting")).to_be_visible()
    expect(page.get_by_text("Whitening")).to_have_count(0)
    audit(page, "overview-active")

    page.get_by_role("link", name="Show cancelled ones too").click()
    both = page.get_by_role("table", name="Upcoming bookings, 2 in all")
    expect(both.get_by_role("row").filter(has_text="Whitening")).to_contain_text("cancelled")
    expect(both.get_by_role("row").filter(has_text="Crown fitting")).to_be_visible()
    page.get_by_role("link", name="Show active ones only").click()
    expect(page.get_by_text("Whitening")).to_have_count(0)


def test_the_site_has_an_icon(browser, site):
    base, demo = site
    page = browser.new_page(viewport=WIDTHS["laptop"])
    icon = page.goto(base + "/favicon.ico")
    assert icon.status == 200
    assert icon.headers["content-type"].startswith("image/")
    sign_in_browser(page, base, demo.email, demo.password)
    linked = page.locator('link[rel="icon"]').get_attribute("href")
    assert page.request.get(base + linked).status == 200
