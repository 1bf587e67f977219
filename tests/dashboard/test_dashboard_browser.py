"""The dashboard in a real browser: Playwright for Python driving Debian's chromium against a
live gunicorn, as a person would use it. Each main page is looked at (``audit``) at laptop
and phone widths: screenshots, no sideways scroll, no axe-core violation, a compact header on
the phone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from tests.browser_pages import WIDTHS, api, api_call, book_slot, open_slots, week_showing
from tests.celery_workers import celery_worker, wait_for
from tests.dashboard_users import sign_in_browser
from tests.google_servers import FakeGoogle
from tests.microsoft_servers import FakeMicrosoft
from tests.servers import BIN, MACHINE_REDIS, ROOT, gunicorn, migrate_and_run_demo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # the week shown and the slots open from today
    pytest.mark.one_shifted_clock,  # long browser walks; the dates only pick the week and slots
]


def test_the_owner_signs_in_sees_an_agents_booking_confirms_and_cancels_it(browser, site, audit):
    base, demo = site
    page = browser.new_page(viewport=WIDTHS["laptop"])
    page.goto(base + "/")
    assert page.url == base + "/login"
    audit(page, "sign-in")

    page.get_by_label("Email").fill(demo.email)
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text() == "The email or the password is wrong."

    page.get_by_label("Password").fill(demo.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/dashboard/s/*/")
    expect(page.get_by_text("No upcoming bookings.")).to_be_visible()

    # An agent books through the API with the demo's key …
    event_type_id = next(iter(demo.event_types.values()))
    slot = open_slots(base, demo, event_type_id)[0]
    booked = book_slot(
        base, demo.api_key, event_type_id, slot, "Booked by an agent", "pat@example.com", "Pat"
    )
    # … and the booking is on the owner's overview.
    page.reload()
    row = page.get_by_role("row").filter(has_text="Booked by an agent")
    expect(row).to_be_visible()
    assert "pat@example.com" in row.inner_text()
    assert booked["status"] in row.inner_text()
    audit(page, "overview")

    # The owner confirms it, then cancels it with a reason.
    page.get_by_role("link", name="Bookings").click()
    expect(page.get_by_text("1 booking.")).to_be_visible()
    audit(page, "bookings")
    page.get_by_role("row").filter(has_text="Booked by an agent").get_by_role("link").click()
    page.get_by_role("button", name="Confirm").click()
    assert page.get_by_role("status").inner_text() == "Booking confirmed."
    audit(page, "booking")
    page.get_by_label("Reason (optional)").fill("Patient called")
    # A destructive button asks first: dismissed, the form is not sent (else the page would be
    # the cancelled booking's, without the button clicked next); accepted, it is.
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="Cancel booking").click()
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.get_by_role("button", name="Cancel booking").click()
    assert page.get_by_role("status").inner_text() == "Booking cancelled."
    assert asked == ["Cancel this booking? The attendees are told."] * 2
    expect(page.get_by_text("Cancelled because: Patient called")).to_be_visible()
    history = page.locator("ol").inner_text()
    assert "created" in history and "confirmed" in history and "cancelled" in history

    page.get_by_role("link", name="Password").click()
    expect(page.get_by_role("heading", name="Change your password")).to_be_visible()
    audit(page, "password")

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(base + "/login")
    assert page.get_by_role("status").inner_text() == "You are signed out."
    page.goto(base + "/dashboard/")
    assert page.url.startswith(base + "/login")


def handed_to_a_worker() -> dict[str, str]:
    """Settings under which the server hands work to a worker on a queue of this test's own."""
    return {
        "OUTBOX_DISPATCH": "1",
        "REDIS_URL": MACHINE_REDIS,
        "CELERY_QUEUE": f"browser-{uuid.uuid4().hex}",
    }


@pytest.fixture
def site_with_worker(postgres_database, tmp_path):
    """A live server on a fresh database with the demo workspace, and a worker: the
    password-reset mail is made and sent (here: kept) by the worker, as all mail is, with the
    server's address as its ``PUBLIC_URL`` (the links it writes lead there). Yields the
    database's URL too."""
    settings = handed_to_a_worker()
    url = postgres_database()
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-secret-key", **settings}
    demo = migrate_and_run_demo(env)
    with (
        gunicorn(url, workers=1, env=settings) as base,
        celery_worker(url, tmp_path / "worker.log", PUBLIC_URL=base, **settings),
    ):
        yield base, demo, url


def kept_reset_link(database_url: str, email: str) -> str:
    """The link in the latest password-reset mail to ``email`` that the server kept (no SMTP
    server), read as an operator would: ``flask outbox``, then ``flask outbox --show ID``."""
    flask = [str(BIN / "flask"), "--app", "wsgi", "outbox"]
    env = {**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "test-secret-key"}

    def outbox(*args: str) -> str:
        run = subprocess.run([*flask, *args], cwd=ROOT, env=env, capture_output=True, text=True)
        return run.stdout

    found: list[dict] = []

    def kept() -> bool:
        listed = [json.loads(line) for line in outbox().splitlines()]
        found[:] = [m for m in listed if m["kind"] == "password.reset" and m["recipient"] == email]
        return bool(found)

    assert wait_for(kept, timeout=20), "no password-reset mail kept"
    return re.search(r"http://\S+/reset-password/\S+", outbox("--show", str(found[0]["id"])))[0]


def test_a_forgotten_password_is_reset_through_the_mailed_link(browser, site_with_worker, audit):
    """From the sign-in page's link to a new password, the link read from the mail the worker
    kept; the link then works no more, and the old password no longer signs in."""
    base, demo, url = site_with_worker
    page = browser.new_page(viewport=WIDTHS["laptop"])
    page.goto(base + "/login")
    page.get_by_role("link", name="Forgot your password?").click()
    expect(page.get_by_role("heading", name="Forgot your password?")).to_be_visible()
    audit(page, "forgot-password")

    page.get_by_label("Email").fill(demo.email)
    page.get_by_role("button", name="Mail me a link").click()
    expect(page.get_by_role("heading", name="Check your mail")).to_be_visible()
    assert demo.email in page.get_by_role("status").inner_text()

    link = kept_reset_link(url, demo.email)
    assert link.startswith(base + "/reset-password/")
    page.goto(link)
    expect(page.get_by_role("heading", name="Choose a new password")).to_be_visible()
    audit(page, "reset-password")
    page.get_by_label("New password").fill("a-brand-new-password")
    page.get_by_role("button", name="Set password and sign in").click()
    page.wait_for_url(base + "/dashboard/s/*/")
    assert "every other session has ended" in page.get_by_role("status").inner_text()

    page.goto(link)
    expect(page.get_by_text("This link was used already")).to_be_visible()
    expect(page.get_by_role("link", name="Ask for a new link")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(base + "/login")
    page.get_by_label("Email").fill(demo.email)
    page.get_by_label("Password").fill(demo.password)
    page.get_by_role("button", name="Sign in").click()
    assert page.get_by_role("alert").inner_text() == "The email or the password is wrong."
    page.get_by_label("Password").fill("a-brand-new-password")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/dashboard/s/*/")


def test_an_owner_sets_up_a_calendar_an_agent_books_it_and_an_invited_user_is_kept_out(
    browser, site, audit
):
    """The issue's walk: sign in, a new sub account, a profile with hours, an event type and an
    API key; the key books through the HTTP API; the booking is in the calendar and the list;
    the owner confirms and cancels it; an invited agency user sees only what was granted."""
    base, demo = site
    page = browser.new_page(viewport=WIDTHS["laptop"])
    sign_in_browser(page, base, demo.email, demo.password)
    demo_overview = page.url

    # A new sub account, from the team page.
    page.get_by_role("link", name="Team").click()
    audit(page, "team")
    page.get_by_label("Name", exact=True).fill("Harbour Physio")
    page.get_by_label("Timezone").fill("Europe/Berlin")
    page.get_by_role("button", name="Create sub account").click()
    page.wait_for_url(base + "/dashboard/s/*/")
    expect(page.get_by_role("heading", name="Harbour Physio")).to_be_visible()
    sub_account = page.url.rstrip("/").rsplit("/", 1)[1]
    assert page.url != demo_overview

    # A profile open every day 08:00–18:00 (so there are slots whatever today is).
    page.get_by_role("navigation", name="Harbour Physio").get_by_role(
        "link", name="Availability"
    ).click()
    page.get_by_label("Name", exact=True).fill("Clinic hours")
    page.get_by_role("button", name="Create profile").click()
    expect(page.get_by_role("heading", name="Clinic hours")).to_be_visible()
    weekly = page.get_by_role("region", name="Weekly hours")
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"):
        weekly.get_by_label("Day", exact=True).select_option(label=day)
        weekly.get_by_label("Opens (HH:MM)").fill("08:00")
        weekly.get_by_label("Closes (HH:MM, 24:00 for midnight)").fill("18:00")
        weekly.get_by_role("button", name="Add hours").click()
        # The form posts and the page comes back with the day's hours: waited for, not counted
        # at once (a count taken while the page was still loading found none).
        expect(weekly.get_by_role("row").filter(has_text=day)).to_contain_text("08:00–18:00")
    assert page.get_by_text("18:00").count() >= 7
    audit(page, "availability-profile")

    # An event type on that profile; its eventTypeId is on the page.
    page.get_by_role("link", name="Event types").click()
    page.get_by_role("link", name="New event type").click()
    page.get_by_label("Name", exact=True).fill("Assessment")
    page.get_by_label("Duration (minutes)").fill("45")
    page.get_by_label("Availability profile").select_option(label="Clinic hours")
    page.get_by_role("button", name="Create event type").click()
    event_type_id = int(page.locator(".event-type-id code").first.inner_text())
    audit(page, "event-types")

    # An API key that may check availability and book.
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Name", exact=True).fill("Booking agent")
    page.get_by_label("Check availability").check()
    page.get_by_label("Book appointments").check()
    page.get_by_role("button", name="Create key").click()
    key = page.get_by_label("API key “Booking agent”").input_value()
    assert key.startswith("cbk_")
    audit(page, "api-key-created")
    page.get_by_role("link", name="Back to API keys").click()
    expect(page.get_by_role("row").filter(has_text="Booking agent")).to_be_visible()
    audit(page, "api-keys")

    # The key books through the HTTP API, as an agent would.
    today = datetime.now(UTC).date()
    days = api(
        base,
        key,
        f"/availability?eventTypeId={event_type_id}"
        f"&startDate={today + timedelta(days=2)}&endDate={today + timedelta(days=9)}",
    )
    slot = next(slot for day in days for slot in day["slots"])
    booked = book_slot(
        base, key, event_type_id, slot, "Knee assessment", "robin@example.com", "Robin"
    )
    assert booked["status"] == "pending"

    # The booking is in the calendar (on its week) and in the list.
    calendar = f"{base}/dashboard/s/{sub_account}/calendar"
    start = datetime.fromisoformat(booked["startTime"].replace("Z", "+00:00"))
    event = week_showing(page, calendar, "Knee assessment", start, "Europe/Berlin")
    assert "Pending" in event.inner_text()
    audit(page, "calendar")
    page.get_by_role("button", name="Month", exact=True).click()
    page.locator(".fc-daygrid").wait_for()
    assert page.locator(".fc-event", has_text="Knee assessment").count() == 1
    audit(page, "calendar-month")
    page.get_by_role("link", name="Bookings", exact=True).click()
    expect(page.get_by_role("row").filter(has_text="robin@example.com")).to_be_visible()
    audit(page, "bookings-list")

    # Opened from the calendar, the owner confirms it, then cancels it.
    week_showing(page, calendar, "Knee assessment", start, "Europe/Berlin").click()
    page.wait_for_url(f"{base}/dashboard/s/{sub_account}/bookings/{booked['id']}")
    page.get_by_role("button", name="Confirm").click()
    assert page.get_by_role("status").first.inner_text() == "Booking confirmed."
    page.get_by_role("link", name="Reschedule").click()
    expect(page.get_by_role("heading", name="Reschedule “Knee assessment”")).to_be_visible()
    audit(page, "reschedule")
    page.get_by_role("link", name="Back to the booking").click()
    page.get_by_label("Reason (optional)").fill("Robin is ill")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel booking").click()
    assert page.get_by_role("status").first.inner_text() == "Booking cancelled."
    audit(page, "booking-cancelled")

    # The other areas, each audited.
    for area, shot in (
        ("Overview", "overview-new"),
        ("Contacts", "contacts"),
        ("Connections", "connections"),
        ("Notifications", "notifications"),
        ("Settings", "settings"),
        ("Availability", "availability"),
    ):
        page.get_by_role("navigation", name="Harbour Physio").get_by_role(
            "link", name=area, exact=True
        ).click()
        audit(page, shot)

    # An agency user, invited to the new sub account only.
    page.get_by_role("link", name="Team").click()
    page.get_by_label("Email", exact=True).fill("assistant@harbour.example")
    page.get_by_label("Harbour Physio").check()
    page.get_by_role("button", name="Invite").click()
    link = page.get_by_label("Invitation link").input_value()
    audit(page, "invitation")
    page.get_by_role("button", name="Sign out").click()
    page.goto(link)
    page.get_by_label("Choose a password").fill("assistant-password")
    page.get_by_role("button", name="Set password and sign in").click()
    page.wait_for_url(f"{base}/dashboard/s/{sub_account}/")
    menu = page.get_by_role("navigation", name="Harbour Physio")
    expect(menu.get_by_role("link", name="Bookings", exact=True)).to_be_visible()
    assert menu.get_by_role("link", name="API keys").count() == 0
    assert page.get_by_role("link", name="Team").count() == 0
    refused = page.goto(f"{base}/dashboard/s/{sub_account}/api-keys")
    assert refused.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    demo_id = demo_overview.rstrip("/").rsplit("/", 1)[1]
    hidden = page.goto(f"{base}/dashboard/s/{demo_id}/bookings")
    assert hidden.status == 404


@pytest.fixture(params=["google", "microsoft"])
def provider_site(request, postgres_database, tmp_path):
    """A live server and a worker (write-back runs there) whose Google or Microsoft endpoints
    are the loopback fake's, the fake with one account signed in on its consent page."""
    kind = request.param
    fake_class = FakeGoogle if kind == "google" else FakeMicrosoft
    with fake_class() as fake:
        calendar_id = fake.add_account("front-desk@clinic.test")
        settings = {**fake.app_settings(), **handed_to_a_worker()}
        url = postgres_database()
        env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-secret-key", **settings}
        demo = migrate_and_run_demo(env)
        with (
            celery_worker(url, tmp_path / "worker.log", **settings),
            gunicorn(url, workers=1, env=settings) as base,
        ):
            yield kind, fake, calendar_id, base, demo


def test_connect_a_providers_calendar_its_busy_time_blocks_and_bookings_reach_it(
    browser, provider_site, audit
):
    kind, fake, calendar_id, base, demo = provider_site
    label = {"google": "Google", "microsoft": "Microsoft 365"}[kind]
    event_type_id = next(iter(demo.event_types.values()))
    busy_slot, booked_slot = open_slots(base, demo, event_type_id)[:2]
    fake.add_event(
        calendar_id,
        datetime.fromisoformat(busy_slot["start"]),
        datetime.fromisoformat(busy_slot["end"]),
    )

    page = browser.new_page(viewport=WIDTHS["laptop"])
    sign_in_browser(page, base, demo.email, demo.password)
    page.get_by_role("link", name="Connections").click()
    page.get_by_role("button", name=f"Connect {label}").click()
    # The provider's consent page (the fake's), then back.
    expect(page.get_by_role("button", name="Allow")).to_be_visible()
    page.get_by_role("button", name="Allow").click()
    expect(page.get_by_role("heading", name=f"Calendars of {label}")).to_be_visible()
    audit(page, f"connection-calendars-{kind}")
    checkboxes = page.get_by_role("checkbox")
    expect(checkboxes.first).to_be_checked()  # the primary calendar, until chosen otherwise
    page.get_by_role("button", name="Save calendars").click()
    expect(page.get_by_role("status").first).to_contain_text("Calendars saved: reading them now.")
    # The worker reads them; the page looks again until the result is there.
    expect(page.locator("#health")).to_contain_text(
        re.compile(r"Busy periods stored\s*1\b"), timeout=30_000
    )

    # The calendar's busy time is no longer offered …
    starts = {slot["start"] for slot in open_slots(base, demo, event_type_id)}
    assert busy_slot["start"] not in starts and booked_slot["start"] in starts

    # … an agent's booking appears in it, and its cancellation removes it.
    booked = book_slot(
        base,
        demo.api_key,
        event_type_id,
        booked_slot,
        "Booked by an agent",
        "pat@example.com",
        "Pat",
    )

    def written():
        return [
            e
            for e in fake.events(calendar_id)
            if e.get("summary", e.get("subject")) == "Booked by an agent"
        ]

    assert wait_for(lambda: len(written()) == 1, timeout=60)
    api_call(base, demo.api_key, "DELETE", f"/bookings/{booked['id']}")
    assert wait_for(lambda: written() == [], timeout=60)
    assert len(fake.events(calendar_id)) == 1  # the person's own event stays
