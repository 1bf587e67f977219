"""The dashboard in a real browser: Playwright for Python driving Debian's chromium against a
live gunicorn, as a person would use it. Screenshots of each page at laptop and phone widths
are written to ``test-artifacts/screenshots/``."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import backend_unavailable
from tests.servers import ROOT, gunicorn, migrate_and_run_demo

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
WIDTHS = {"laptop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        backend_unavailable("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
            args=["--no-sandbox"],
        )
        yield browser
        browser.close()


@pytest.fixture
def site(tmp_path):
    """A live server on a fresh SQLite database with the demo workspace."""
    url = f"sqlite:///{tmp_path / 'calendar.sqlite3'}"
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-secret-key"}
    demo = migrate_and_run_demo(env)
    with gunicorn(url, workers=1, threads=4) as base:
        yield base, demo


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in WIDTHS.items():
        page.set_viewport_size(size)
        page.screenshot(path=SCREENSHOTS / f"{name}-{label}.png", full_page=True)
    page.set_viewport_size(WIDTHS["laptop"])


def api(base, key, path, body=None):
    request = urllib.request.Request(
        base + "/v1/api/calendar" + path,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"x-calendar-api-key": key, "content-type": "application/json"},
        method="POST" if body is not None else "GET",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_the_owner_signs_in_sees_an_agents_booking_confirms_and_cancels_it(browser, site):
    base, demo = site
    page = browser.new_page(viewport=WIDTHS["laptop"])
    page.goto(base + "/")
    assert page.url == base + "/login"
    shoot(page, "sign-in")

    page.get_by_label("Email").fill(demo.email)
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text() == "The email or the password is wrong."

    page.get_by_label("Password").fill(demo.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/dashboard/s/*/")
    assert page.get_by_text("No upcoming bookings.").is_visible()

    # An agent books through the API with the demo's key …
    event_type_id = next(iter(demo.event_types.values()))
    today = datetime.now(UTC).date()
    days = api(
        base,
        demo.api_key,
        f"/availability?eventTypeId={event_type_id}"
        f"&startDate={today + timedelta(days=1)}&endDate={today + timedelta(days=14)}",
    )
    slot = next(slot for day in days for slot in day["slots"])
    booked = api(
        base,
        demo.api_key,
        f"/event-types/{event_type_id}/bookings",
        {
            "startTime": slot["start"],
            "endTime": slot["end"],
            "title": "Booked by an agent",
            "attendees": [{"email": "pat@example.com", "name": "Pat"}],
        },
    )
    # … and the booking is on the owner's overview.
    page.reload()
    row = page.get_by_role("row").filter(has_text="Booked by an agent")
    assert row.is_visible() and "pat@example.com" in row.inner_text()
    assert booked["status"] in row.inner_text()
    shoot(page, "overview")

    # The owner confirms it, then cancels it with a reason.
    page.get_by_role("link", name="Bookings").click()
    assert page.get_by_text("1 booking.").is_visible()
    shoot(page, "bookings")
    page.get_by_role("row").filter(has_text="Booked by an agent").get_by_role("link").click()
    page.get_by_role("button", name="Confirm").click()
    assert page.get_by_role("status").inner_text() == "Booking confirmed."
    shoot(page, "booking")
    page.get_by_label("Reason (optional)").fill("Patient called")
    page.get_by_role("button", name="Cancel booking").click()
    assert page.get_by_role("status").inner_text() == "Booking cancelled."
    assert page.get_by_text("Cancelled because: Patient called").is_visible()
    history = page.locator("ol").inner_text()
    assert "created" in history and "confirmed" in history and "cancelled" in history

    page.get_by_role("link", name="Password").click()
    assert page.get_by_role("heading", name="Change your password").is_visible()
    shoot(page, "password")

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(base + "/login")
    assert page.get_by_role("status").inner_text() == "You are signed out."
    page.goto(base + "/dashboard/")
    assert page.url.startswith(base + "/login")
