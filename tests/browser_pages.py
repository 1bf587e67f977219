"""Looking at the dashboard in a real browser (Playwright for Python driving Debian's
chromium): each page at a laptop's and a phone's width, screenshot, measured and checked.

At each width a page must not scroll sideways, axe-core (vendored from npm in
``tests/vendor/``) must find no violation of any impact, and on a phone the header (the bar
with the menu) must take at most ``HEADER_MAX_PX``. Screenshots go to
``test-artifacts/screenshots/`` (the README's come from there); the measurements are kept as
the test's ``page_layout`` property and printed at the end of the run."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from tests.servers import ROOT

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
AXE = ROOT / "tests" / "vendor" / "axe-core-4.14.1" / "axe.min.js"
WIDTHS = {"laptop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
HEADER_MAX_PX = 120  # issue 29: the phone header was 350 of 844 px


def chromium_path() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


@dataclass
class Looked:
    """What looking at one page found: a figure per width, and what is wrong."""

    figures: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _measure(page) -> dict:
    return page.evaluate(
        """() => {
          const root = document.documentElement;
          const header = document.querySelector("header");
          return {
            viewport: root.clientWidth,
            content: root.scrollWidth,
            header: header ? Math.round(header.getBoundingClientRect().height) : 0,
          };
        }"""
    )


def axe_violations(page) -> list[str]:
    """Every axe-core violation on the page as it is now, whatever its impact."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    violations = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at "
        + ", ".join(f"{' '.join(n['target'])} {n['html'][:160]}" for n in v["nodes"][:3])
        for v in violations
    ]


def look_at(page, name: str) -> Looked:
    """``page`` at each width: a screenshot, its measurements and its problems; the page is
    left at the width it had."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    looked, was = Looked(), page.viewport_size
    for label, size in WIDTHS.items():
        page.set_viewport_size(size)
        # A resize's layout; FullCalendar redraws 100 ms after the last resize.
        page.wait_for_timeout(300 if page.locator(".fc").count() else 50)
        page.screenshot(path=SCREENSHOTS / f"{name}-{label}.png", full_page=True)
        measured = _measure(page)
        violations = axe_violations(page)
        looked.figures.append(
            {"page": name, "width": size["width"], **measured, "axe": len(violations)}
        )
        looked.problems += [f"{label}: {v}" for v in violations]
        if measured["content"] > measured["viewport"]:
            looked.problems.append(
                f"{label}: {measured['content']} px of content in a {measured['viewport']} px page"
            )
        if label == "phone" and measured["header"] > HEADER_MAX_PX:
            looked.problems.append(f"phone: the header takes {measured['header']} px")
    page.set_viewport_size(was)
    page.wait_for_timeout(300 if page.locator(".fc").count() else 0)
    return looked


def layout_lines(figures: list[dict]) -> list[str]:
    """One line per page: its width, content width, header height and axe count per width."""
    by_page: dict[str, list[dict]] = {}
    for figure in figures:
        by_page.setdefault(figure["page"], []).append(figure)
    return [
        f"{name:<30} "
        + " · ".join(
            f"{f['width']} px: content {f['content']} px, header {f['header']} px, axe {f['axe']}"
            for f in seen
        )
        for name, seen in by_page.items()
    ]


def week_showing(page, calendar_url: str, text: str, start: datetime, timezone: str):
    """The calendar's week view on the week (Monday first) of ``start`` in ``timezone``, and
    the entry with ``text`` there."""
    page.goto(calendar_url)
    page.locator(".fc-timegrid").wait_for()
    local, today = start.astimezone(ZoneInfo(timezone)).date(), datetime.now(ZoneInfo(timezone))
    weeks = (
        (local - timedelta(days=local.weekday())) - (today.date() - timedelta(days=today.weekday()))
    ).days // 7
    for _ in range(weeks):
        page.get_by_role("button", name="Next week").click()
    entry = page.locator(".fc-event", has_text=text)
    entry.wait_for()
    return entry


def api(base, key, path, body=None):
    request = urllib.request.Request(
        base + "/v1/api/calendar" + path,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"x-calendar-api-key": key, "content-type": "application/json"},
        method="POST" if body is not None else "GET",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def api_call(base, key, method, path, body=None):
    """``api`` for any method (the cancel is a DELETE)."""
    request = urllib.request.Request(
        base + "/v1/api/calendar" + path,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"x-calendar-api-key": key, "content-type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def book_slot(base, key, event_type_id, slot, title: str, email: str, name: str) -> dict:
    """An agent's booking through the HTTP API of ``slot`` (as availability gave it), with
    ``title`` and one attendee; the created booking."""
    return api(
        base,
        key,
        f"/event-types/{event_type_id}/bookings",
        {
            "startTime": slot["start"],
            "endTime": slot["end"],
            "title": title,
            "attendees": [{"email": email, "name": name}],
        },
    )


@contextmanager
def launched_browser() -> Iterator:
    """Debian's chromium under Playwright (a failure in CI, a skip elsewhere, without it)."""
    executable = chromium_path()
    if executable is None:
        from tests.conftest import backend_unavailable

        backend_unavailable("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def open_slots(base, demo, event_type_id):
    today = datetime.now(UTC).date()
    days = api(
        base,
        demo.api_key,
        f"/availability?eventTypeId={event_type_id}"
        f"&startDate={today + timedelta(days=1)}&endDate={today + timedelta(days=14)}",
    )
    return [slot for day in days for slot in day["slots"]]
