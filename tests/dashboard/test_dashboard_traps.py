"""Traps a new user met in the dashboard (issue 48, item 5), each walked in a real browser
(Playwright driving Debian's chromium against a live gunicorn on the demo workspace) at a
laptop's and a phone's width: the Availability area's removals and deletions ask first from
buttons that look destructive, and the default profile that event types use is not deleted; a
reminder filled in is kept; a 30-minute booking's time, and two checkboxes, sit where they
belong; the API docs' table headers read apart; a started booking's page names whom to
contact; a private CalDAV server's refusal says how the operator allows one.

One server and one signed-in session serve the module; each test works on rows of its own
(a profile, an event type, a booking), so the order the tests run in does not matter."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from app import create_app
from app.extensions import db
from app.models import Booking, SubAccount
from app.services.availability.profiles import create_profile
from tests.browser_pages import WIDTHS, book_slot, open_slots
from tests.dashboard_users import sign_in_browser
from tests.servers import Demo, gunicorn, migrate_and_run_demo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # the bookings go in open slots from tomorrow
    pytest.mark.one_shifted_clock,  # browser walks; the dates only pick the slots and days
]

NEW_YORK = ZoneInfo("America/New_York")  # the demo sub account's zone
DANGER = "rgb(164, 0, 15)"  # a destructive button's colour (dashboard.css, --error)
BY_WIDTH = pytest.mark.parametrize("width", ["laptop", "phone"], ids=["1280px", "390px"])


@dataclass(frozen=True)
class Live:
    """The module's server: its base URL, its database's URL, the demo, the owner's signed-in
    browser state, and a 30-minute booking made through the API."""

    base: str
    url: str
    demo: Demo
    state: dict
    booking: dict

    @property
    def dashboard(self) -> str:
        return f"{self.base}/dashboard/s/1"  # the demo's only sub account


@pytest.fixture(scope="module")
def live(postgres_database, browser) -> Iterator[Live]:
    url = postgres_database()
    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "test-secret-key"}
    demo = migrate_and_run_demo(env)
    # No CALDAV_ALLOW_PRIVATE: a server on loopback is a private one, refused.
    with gunicorn(url, workers=1) as base:
        consultation = demo.event_types["Consultation"]  # 30 minutes
        slot = open_slots(base, demo, consultation)[0]
        booking = book_slot(
            base, demo.api_key, consultation, slot, "Knee assessment", "robin@example.com", "Robin"
        )
        context = browser.new_context(viewport=WIDTHS["laptop"])
        sign_in_browser(context.new_page(), base, demo.email, demo.password)
        state = context.storage_state()
        context.close()
        yield Live(base, url, demo, state, booking)


@pytest.fixture
def page(browser, live, width):
    """A page at ``width`` (1280 or 390 px), signed in as the demo's owner."""
    context = browser.new_context(viewport=WIDTHS[width], storage_state=live.state)
    yield context.new_page()
    context.close()


@contextmanager
def database(url: str):
    """The live server's database, through the app's models, committed at the end."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test-secret-key"})
    with app.app_context():
        yield db.session
        db.session.commit()
        db.engine.dispose()


def a_day_ahead(days: int) -> date:
    return datetime.now(NEW_YORK).date() + timedelta(days=days)


def profile_of_its_own(live: Live, name: str, **document) -> str:
    """A profile named ``name`` (from a ``ProfileDoc``'s other fields), not the default and
    used by no event type; its page's URL."""
    with database(live.url) as session:
        profile = create_profile(session.get(SubAccount, 1), {"name": name, **document})
        session.flush()
        profile_id = profile.id
    return f"{live.dashboard}/availability/profiles/{profile_id}"


def asks_before_sending(page, button, question: str) -> None:
    """``button`` looks destructive and asks ``question`` before its form is sent: dismissed,
    the form is not sent (else the page would be the one after it, without the button clicked
    next); accepted, it is."""
    expect(button).to_have_css("background-color", DANGER)
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    button.click()
    assert asked == [question]
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    button.click()
    assert asked == [question, question]


# The Availability area: nothing is removed or deleted without asking


@BY_WIDTH
def test_removing_weekly_hours_asks_first(page, live, width):
    page.goto(
        profile_of_its_own(
            live, f"Hours to remove {width}", weeklyHours={"mon": [["09:00", "12:00"]]}
        )
    )
    monday = page.get_by_role("region", name="Weekly hours").get_by_role("row", name="Monday")
    expect(monday).to_contain_text("09:00–12:00")
    asks_before_sending(
        page,
        monday.get_by_role("button", name="Remove Monday 09:00 to 12:00"),
        "Remove the opening hours Monday 09:00 to 12:00?",
    )
    expect(page.get_by_role("status")).to_have_text("Opening hours removed.")
    expect(monday).to_contain_text("Closed")


@BY_WIDTH
def test_removing_a_date_override_asks_first(page, live, width):
    day = a_day_ahead(20)
    page.goto(
        profile_of_its_own(
            live,
            f"Override to remove {width}",
            dateOverrides=[{"date": day.isoformat(), "hours": [["10:00", "14:00"]]}],
        )
    )
    overrides = page.get_by_role("region", name="Date overrides")
    expect(overrides).to_contain_text("Open 10:00–14:00")
    asks_before_sending(
        page,
        overrides.get_by_role("button", name=f"Remove {day.isoformat()} 10:00 to 14:00"),
        f"Remove the date override {day.isoformat()} 10:00 to 14:00?"
        " The date gets its weekday's hours again.",
    )
    expect(page.get_by_role("status")).to_have_text("Date override removed.")
    expect(overrides).to_contain_text("No upcoming date overrides")


@BY_WIDTH
def test_removing_blocked_time_asks_first(page, live, width):
    day = a_day_ahead(21 if width == "laptop" else 22)
    reason = f"Inventory {width}"
    page.goto(f"{live.dashboard}/availability")
    page.get_by_label("Starts").fill(f"{day}T12:00")
    page.get_by_label("Ends").fill(f"{day}T13:00")
    page.get_by_label("Reason (optional)").fill(reason)
    page.get_by_role("button", name="Block this time").click()
    expect(page.get_by_role("status")).to_have_text("Blocked time added.")
    row = page.get_by_role("region", name="Blocked time").get_by_role("row", name=reason)
    when = row.get_by_role("cell").first.inner_text()
    asks_before_sending(
        page,
        row.get_by_role("button"),
        f"Remove the blocked time from {when}? It can be booked again.",
    )
    expect(page.get_by_role("status")).to_have_text("Blocked time removed.")
    expect(row).to_have_count(0)


@BY_WIDTH
def test_deleting_a_profile_asks_first(page, live, width):
    name = f"Profile to delete {width}"
    page.goto(profile_of_its_own(live, name))
    asks_before_sending(
        page,
        page.get_by_role("button", name=f"Delete {name}"),
        f"Delete the profile {name} with its weekly hours and date overrides?",
    )
    expect(page.get_by_role("status")).to_have_text(f"Deleted the profile {name}.")
    expect(page.get_by_role("heading", name="Availability", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=name)).to_have_count(0)


@BY_WIDTH
def test_the_default_profile_event_types_use_is_kept_and_the_page_says_why(page, live, width):
    """The demo's event types name no profile: they use the default, "Office hours"."""
    page.goto(f"{live.dashboard}/availability")
    page.get_by_role("link", name="Office hours").click()
    deleting = page.get_by_role("region", name="Delete")
    expect(deleting).to_contain_text(
        "Office hours cannot be deleted while event types use it: Cleaning, Consultation."
        " Event types without a profile of their own use the default."
    )
    expect(deleting.get_by_role("button")).to_have_count(0)


# An event type's reminders


@BY_WIDTH
def test_a_reminder_filled_in_is_the_event_types_own_without_ticking_the_box(page, live, width):
    name = f"Reminded {width}"
    page.goto(f"{live.dashboard}/event-types/new")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Duration (minutes)").fill("30")
    first = page.get_by_role("group", name="Reminder 1")
    first.get_by_label("Minutes before the start (empty: no reminder)").fill("90")
    first.get_by_label("Email the attendees").check()
    own = page.get_by_label("Reminders of its own (else the calendar settings' apply)")
    expect(own).not_to_be_checked()
    page.get_by_role("button", name="Create event type").click()
    expect(page.get_by_role("status")).to_contain_text(f"Created {name}.")

    page.get_by_role("link", name=name).click()
    expect(own).to_be_checked()
    expect(first.get_by_label("Minutes before the start (empty: no reminder)")).to_have_value("90")
    expect(first.get_by_label("Email the attendees")).to_be_checked()


# Where things sit


def calendar_entry(page, live: Live, width: str):
    """The 30-minute booking in the calendar: in the week view on a laptop, in the three-day
    view on a phone (its columns are as narrow as a week's on a laptop)."""
    page.goto(f"{live.dashboard}/calendar")
    page.locator(".fc-timegrid").wait_for()
    if width == "phone":
        page.get_by_role("button", name="3 days").click()
    start = datetime.fromisoformat(live.booking["startTime"].replace("Z", "+00:00"))
    day = start.astimezone(NEW_YORK).date().isoformat()
    columns = page.locator(".fc-timegrid-col[data-date]")
    for _ in range(25):  # the horizon is 60 days: at most 9 weeks, or 20 times 3 days
        shown = columns.evaluate_all("cols => cols.map(c => c.dataset.date)")
        if day in shown:
            break
        page.locator(".fc-next-button").click()
        # The next days drawn (their events are fetched after: waited for below).
        expect(columns.first).not_to_have_attribute("data-date", shown[0])
    entry = page.locator(f'.fc-timegrid-event[href$="/bookings/{live.booking["id"]}"]')
    entry.wait_for()
    return entry


@BY_WIDTH
def test_a_30_minute_bookings_time_sits_inside_its_box(page, live, width):
    entry = calendar_entry(page, live, width)
    box = entry.bounding_box()
    for part in (entry.locator(".entry-title"), entry.locator(".entry-when")):
        inside = part.bounding_box()
        assert (
            box["y"] <= inside["y"] and inside["y"] + inside["height"] <= box["y"] + box["height"]
        ), f"{part.inner_text()!r} at {inside} outside its entry at {box}"
    start = datetime.fromisoformat(live.booking["startTime"].replace("Z", "+00:00"))
    local = start.astimezone(NEW_YORK)
    expect(entry.locator(".entry-when")).to_have_text(
        f"{local:%H:%M}–{local + timedelta(minutes=30):%H:%M} · Pending"
    )
    page.screenshot(path=f"test-artifacts/screenshots/traps-calendar-entry-{width}.png")


def an_event_types_form(page, live: Live) -> None:
    page.goto(f"{live.dashboard}/event-types/{live.demo.event_types['Cleaning']}")


def the_default_profiles_override_form(page, live: Live) -> None:
    page.goto(f"{live.dashboard}/availability")
    page.get_by_role("link", name="Office hours").click()


CHECKBOXES = {
    "reminders-of-its-own": (
        "Reminders of its own (else the calendar settings' apply)",
        an_event_types_form,
    ),
    "closed-all-day": (
        "Closed all day (the hours below are not needed)",
        the_default_profiles_override_form,
    ),
}


@BY_WIDTH
@pytest.mark.parametrize("which", list(CHECKBOXES))
def test_a_checkbox_sits_at_the_forms_left_edge_beside_its_label(page, live, width, which):
    label_text, open_the_form = CHECKBOXES[which]
    open_the_form(page, live)
    checkbox = page.get_by_label(label_text)
    label = page.locator(f'label[for="{checkbox.get_attribute("id")}"]')
    field = page.locator(".field", has=checkbox)
    above = field.locator("xpath=preceding-sibling::div[contains(@class, 'field')][1]//input")
    box, label_box = checkbox.bounding_box(), label.bounding_box()
    # Drawn where it is measured (a checkbox stretched across its field draws its box in the
    # middle) …
    assert box["width"] <= 20, f"the checkbox is {box['width']} px wide"
    # … its label beside it, on its right, on the same line …
    assert label_box["x"] >= box["x"] + box["width"], f"label at {label_box}, checkbox at {box}"
    middle = box["y"] + box["height"] / 2
    assert label_box["y"] <= middle <= label_box["y"] + label_box["height"]
    # … and at the form's left edge, where the input of the field above begins.
    assert abs(box["x"] - field.bounding_box()["x"]) <= 1
    assert abs(box["x"] - above.bounding_box()["x"]) <= 1
    field.locator("xpath=..").screenshot(
        path=f"test-artifacts/screenshots/traps-{which}-{width}.png"
    )


@BY_WIDTH
def test_the_api_docs_table_headers_read_apart(page, live, width):
    page.goto(f"{live.base}/v1/api/docs")
    headers = page.locator(".renderedMarkdown table th")
    expect(headers).to_have_text(["code", "Status", "Cause"])
    # Where each header's text begins and ends (its cell may be wider than its text).
    texts = headers.evaluate_all(
        """cells => cells.map(cell => {
          const range = document.createRange();
          range.selectNodeContents(cell);
          const box = range.getBoundingClientRect();
          return [cell.innerText, box.left, box.right];
        })"""
    )
    for (before, _, right), (after, left, _) in pairwise(texts):
        assert left - right >= 8, f"{before!r} ends {right} px, {after!r} begins {left} px"


# What a page says


@BY_WIDTH
def test_the_page_of_a_booking_that_has_started_names_whom_to_contact(page, live, width):
    email = "robin@example.com" if width == "laptop" else "sam@example.com"
    consultation = live.demo.event_types["Consultation"]
    slot = open_slots(live.base, live.demo, consultation)[-1 if width == "laptop" else -2]
    booking = book_slot(live.base, live.demo.api_key, consultation, slot, "Filling", email, "Pat")
    started = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=10)
    with database(live.url) as session:
        row = session.get(Booking, booking["id"])
        booked = (row.start_at, row.end_at, row.occupied_start, row.occupied_end)
        row.start_at = row.occupied_start = started
        row.end_at = row.occupied_end = started + timedelta(minutes=30)
        session.get(SubAccount, 1).settings.notification_email = "front-desk@demo-dental.example"
    try:
        page.goto(booking["attendees"][0]["manageUrl"])
        expect(page.get_by_role("status")).to_have_text(
            "This booking has already started. To change it, contact Demo Dental"
            " (front-desk@demo-dental.example)."
        )
        expect(page.get_by_role("button", name="Cancel booking")).to_have_count(0)
    finally:
        # Back to its slot: the other width's booking starts now too, and two active bookings
        # of one calendar cannot hold the same moment (ex_bookings_no_overlap).
        with database(live.url) as session:
            row = session.get(Booking, booking["id"])
            row.start_at, row.end_at, row.occupied_start, row.occupied_end = booked


@BY_WIDTH
def test_a_private_caldav_server_is_refused_saying_how_the_operator_allows_it(page, live, width):
    page.goto(f"{live.dashboard}/connections")
    form = page.locator("form", has=page.get_by_role("button", name="Add connection"))
    form.get_by_label("Name", exact=True).fill(f"Office NAS {width}")
    form.get_by_role("textbox", name="CalDAV URL").fill("http://127.0.0.1:5232/")
    form.get_by_label("Username").fill("front-desk")
    form.get_by_label("Password").fill("a-password")
    form.get_by_role("button", name="Add connection").click()
    expect(page.locator("#url-errors")).to_have_text(
        "127.0.0.1 resolves to 127.0.0.1, which is not a public address (the operator can allow"
        " calendar servers on a private network with the setting CALDAV_ALLOW_PRIVATE=1 and a"
        " restart of the service)."
    )
