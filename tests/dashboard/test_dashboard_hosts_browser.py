"""The Hosts area and a team event type in a real browser, at a laptop's and a phone's width:
a person adds a host, makes an event type round robin over both hosts with a weight, and the
pages read whole at 390 px (no sideways scroll, no axe violation)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser_pages import WIDTHS
from tests.dashboard_users import sign_in_browser

pytestmark = [pytest.mark.slow]


def test_a_person_adds_a_host_and_makes_an_event_type_round_robin(browser, site, audit):
    base, demo = site
    page = browser.new_page(viewport=WIDTHS["laptop"])
    sign_in_browser(page, base, demo.email, demo.password)
    menu = page.get_by_role("navigation", name="Demo Dental")
    menu.get_by_role("link", name="Hosts").click()
    expect(page.get_by_role("heading", name="Hosts", level=1)).to_be_visible()
    page.get_by_role("link", name="Add a host").click()
    page.get_by_label("Name").fill("Dr. Rivera")
    page.get_by_label("Email for their notifications (optional)").fill("rivera@example.com")
    audit(page, "host-new")
    page.get_by_role("button", name="Add host").click()
    expect(page.get_by_text("Added Dr. Rivera.")).to_be_visible()
    expect(page.get_by_role("heading", name="Dr. Rivera")).to_be_visible()
    audit(page, "hosts")

    menu.get_by_role("link", name="Event types").click()
    page.get_by_role("link", name="Edit Consultation").click()
    page.get_by_label("Who it is booked with").select_option("round_robin")
    page.get_by_role("checkbox", name="Demo Dental").check()
    page.get_by_role("checkbox", name="Dr. Rivera").check()
    page.get_by_label("Weight of Dr. Rivera").fill("200")
    audit(page, "event-type-team")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Saved Consultation.")).to_be_visible()

    page.get_by_role("link", name="Edit Consultation").click()
    expect(page.get_by_label("Who it is booked with")).to_have_value("round_robin")
    expect(page.get_by_label("Weight of Dr. Rivera")).to_have_value("200")
    expect(page.get_by_role("checkbox", name="Dr. Rivera")).to_be_checked()
    page.close()
