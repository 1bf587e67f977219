"""Benchmark of the inbound CalDAV sync: one calendar of 2,000 events (a fifth of them
recurring) synced in full, then again with nothing changed, then with one event changed.

Run from the project root (about three minutes; needs the dev venv, for Radicale, plus
PostgreSQL at ``TEST_POSTGRES_URL`` for the PostgreSQL figures)::

    .venv/bin/python -m bench.calendar_sync

The server: a real Radicale (``tests.radicale_servers``, no authentication, filesystem
storage in a temporary folder) holding one calendar, "Personal" of user ``bench``. The
calendar is created through the caldav client; its 2,000 items are then written straight into
the collection's folder as ``<UID>.ics`` (2,000 PUTs would take about a minute on this
machine; Radicale reads the folder on every request). Before anything is timed, the window's
REPORT must return exactly those 2,000 UIDs; that first REPORT also fills Radicale's item
cache (about 15 s), which a server that received its items by PUT already has.

The events, deterministic (seed ``SEED``), all overlap the sync's window. The sync runs at a
fixed instant, ``NOW`` (Monday 2031-01-06 12:00Z), so nothing depends on today's date; the sub
account (America/New_York, a 60-day horizon) reads [NOW - 1 day, NOW + 67 days], across New
York's spring-forward on 2031-03-09.

* 1,600 single events on the 67 days from NOW's date, 08:00–18:45 New York time, 30–90
  minutes: half with ``TZID=America/New_York`` (and its VTIMEZONE), half in UTC. Realistic
  extras: summaries, some locations, descriptions, organizers and attendees; 1 in 50 is
  ``TRANSP:TRANSPARENT`` and 1 in 100 ``STATUS:CANCELLED`` (neither is busy).
* 400 recurring series, eight kinds in turn: weekly with COUNT (New York, Berlin, UTC),
  weekly with UNTIL (UTC), every weekday (New York), Mon/Wed/Fri with UNTIL (New York), daily
  with COUNT (Europe/Berlin, with its VTIMEZONE), fortnightly (New York); 10 of them all-day
  (``VALUE=DATE``). Some start up to four weeks before the window, some run past its end. 85
  have an EXDATE (their second occurrence; 5 of them all-day), 40 a ``RECURRENCE-ID``
  override of their third occurrence (moved an hour later; 4 of those cancelled instead).

First, the baseline: the server alone, no database, each request on a new client as every
sync makes (a new connection):

* the calendar lookup by display name (principal, its calendars, their names), as a first
  sync does it, and the PROPFIND of the change markers (sync-token, ctag, display name)
  through the caldav client: medians of ``PROPFIND_RUNS``;
* the window's calendar-query REPORT as raw HTTP (``http.client``: the server's time and the
  transfer) and through caldav's ``search`` as the sync calls it (+ the client's parsing of
  the multistatus): medians of ``BASELINE_RUNS``;
* ``busy_periods`` on that answer (icalendar's parsing and recurring-ical-events' expansion,
  no I/O), once: its count is what every full sync must store.

Then, on PostgreSQL (a throw-away database, migrated, dropped at the end) and on SQLite (a
temporary file), each provisioned with one sub account whose connection names the calendar
by its display name, ``sync_connection(…, now=NOW)`` + ``db.session.commit()``:

1. Full sync, ``FULL_RUNS`` times: before each, the connection's sync state is forgotten
   (``forget_sync_state``) and its busy time deleted, so the sync finds the calendar by name,
   reads the window, expands it and inserts every busy period (``synced``, all added).
   Target: under 10 s.
2. Incremental, nothing changed, ``UNCHANGED_RUNS`` times after 2 untimed: ``unchanged`` (one
   PROPFIND; the sync-token is the stored one). Target: under 1 s.
3. Incremental, one event changed, ``CHANGED_RUNS`` times: a single event is moved by an hour
   through the caldav client (a PUT, not timed), then synced: ``synced``, 1 busy period
   added and 1 removed. (The sync reads and expands the whole window again on any change.)

Each sync is split into phases by wrapping, for the bench's run only, the two functions the
sync module calls: ``read_calendar`` (the CalDAV side: lookup, PROPFIND, REPORT, caldav's
parsing) and ``busy_periods`` (the expansion); the remainder is the database and the rest
(reading the connection, the busy-time difference and its writes, the commit). Printed:
median, min and max of the whole, and the median of each phase.

Checked, not timed: every sync's status and counts, that every full sync stores as many busy
periods as the baseline's ``busy_periods`` found (so both backends agree), and the rows in
the database after each full sync and at the end.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import platform
import random
import re
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as clock
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import caldav
from caldav.elements import dav
from sqlalchemy import delete, func, select

import app.services.integrations.calendars.sync as sync_module
from app import create_app
from app.extensions import db
from app.models import BlockedTime, CalendarConnection, Permission
from app.scheduling.intervals import Interval
from app.scheduling.timezones import zone
from app.services.integrations.calendars.busy_time import CalendarObject, busy_periods
from app.services.integrations.calendars.providers.caldav import CTAG, SYNC_TOKEN
from app.services.integrations.calendars.sync import (
    LOOK_BACK,
    READ_AHEAD,
    SyncResult,
    sync_connection,
)
from bench.availability import postgres_database, postgres_version
from bench.booking_writes import migrate_and_provision
from tests.radicale_servers import OwnRadicale, radicale_server

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday
TIMEZONE = "America/New_York"
HORIZON_DAYS = 60
WINDOW = Interval(NOW - LOOK_BACK, NOW + timedelta(days=HORIZON_DAYS) + READ_AHEAD)
FIRST_DAY = NOW.date()
DAYS = 67  # single events on FIRST_DAY … FIRST_DAY + 66: all inside WINDOW in New York
SINGLE, RECURRING = 1_600, 400
SEED = 20310106
USER, PASSWORD = "bench", "any"  # Radicale: no authentication
CALENDAR_NAME, CALENDAR_ID = "Personal", "personal"
SECRET_KEY = "bench"  # migrate_and_provision's: the connection's password is encrypted with it
CHANGED_UID = "single-0001"  # a UTC event; the "changed" runs move it by an hour, back and forth

FULL_RUNS = 3
UNCHANGED_WARMUP, UNCHANGED_RUNS = 2, 20
CHANGED_RUNS = 3
BASELINE_RUNS = 3  # the REPORTs of the baseline
PROPFIND_RUNS = 10  # the lookups and PROPFINDs of the baseline
FULL_TARGET_S = 10.0
UNCHANGED_TARGET_S = 1.0

NEW_YORK = ZoneInfo("America/New_York")
VTIMEZONES = {
    "America/New_York": (
        "BEGIN:VTIMEZONE",
        "TZID:America/New_York",
        "BEGIN:DAYLIGHT",
        "TZOFFSETFROM:-0500",
        "TZOFFSETTO:-0400",
        "TZNAME:EDT",
        "DTSTART:20070311T020000",
        "RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=2SU",
        "END:DAYLIGHT",
        "BEGIN:STANDARD",
        "TZOFFSETFROM:-0400",
        "TZOFFSETTO:-0500",
        "TZNAME:EST",
        "DTSTART:20071104T020000",
        "RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=1SU",
        "END:STANDARD",
        "END:VTIMEZONE",
    ),
    "Europe/Berlin": (
        "BEGIN:VTIMEZONE",
        "TZID:Europe/Berlin",
        "BEGIN:DAYLIGHT",
        "TZOFFSETFROM:+0100",
        "TZOFFSETTO:+0200",
        "TZNAME:CEST",
        "DTSTART:19810329T020000",
        "RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=-1SU",
        "END:DAYLIGHT",
        "BEGIN:STANDARD",
        "TZOFFSETFROM:+0200",
        "TZOFFSETTO:+0100",
        "TZNAME:CET",
        "DTSTART:19961027T030000",
        "RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU",
        "END:STANDARD",
        "END:VTIMEZONE",
    ),
}
SUMMARIES = (
    "Team sync",
    "1:1",
    "Lunch",
    "Dentist",
    "Project review",
    "Call with supplier",
    "School pickup",
    "Gym",
    "Planning",
    "Interview",
)
LOCATIONS = ("Room 4B", "Zoom", "Main office", "Café Central", "Client site")


# --- the calendar's events -------------------------------------------------------------------


def _stamp(instant: datetime) -> str:
    return f"{instant.astimezone(UTC):%Y%m%dT%H%M%SZ}"


def _when(name: str, local: datetime, tzid: str | None) -> str:
    """``DTSTART``-like line: ``local`` (naive wall time in ``tzid``) with a TZID, or in UTC
    when ``tzid`` is None (``local`` is then New York wall time, converted)."""
    if tzid is None:
        return f"{name}:{_stamp(local.replace(tzinfo=NEW_YORK))}"
    return f"{name};TZID={tzid}:{local:%Y%m%dT%H%M%S}"


def _extras(rng: random.Random, n: int) -> list[str]:
    """What real calendars carry besides the times (parsed, never used by the sync)."""
    lines = [
        f"SUMMARY:{rng.choice(SUMMARIES)}",
        "CREATED:20301201T100000Z",
        "LAST-MODIFIED:20301215T090000Z",
        "SEQUENCE:0",
    ]
    if n % 3 == 0:
        lines.append(f"LOCATION:{rng.choice(LOCATIONS)}")
    if n % 4 == 0:
        lines.append("DESCRIPTION:Agenda: status\\, blockers\\, next steps. Dial-in in the invite.")
    if n % 3 == 1:
        lines.append("ORGANIZER;CN=Alex Organizer:mailto:alex@example.test")
        for a in range(1 + n % 3):
            lines.append(
                f"ATTENDEE;CN=Guest {a};ROLE=REQ-PARTICIPANT;PARTSTAT=ACCEPTED:"
                f"mailto:guest{a}-{n}@example.test"
            )
    return lines


def _vcalendar(uid: str, components: list[list[str]], tzids: set[str]) -> str:
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//calendar-booking bench//calendar sync//EN",
        "CALSCALE:GREGORIAN",
    ]
    for tzid in sorted(tzids):
        lines.extend(VTIMEZONES[tzid])
    for component in components:
        lines += ["BEGIN:VEVENT", f"UID:{uid}", "DTSTAMP:20301215T090000Z", *component]
        lines.append("END:VEVENT")
    lines.append("END:VCALENDAR")
    return "\r\n".join(lines) + "\r\n"


def single_event(n: int, rng: random.Random, shift: timedelta = timedelta()) -> str:
    day = FIRST_DAY + timedelta(days=rng.randrange(DAYS))
    minutes = rng.randrange(8 * 60, 19 * 60, 15)
    start = datetime.combine(day, clock(minutes // 60, minutes % 60)) + shift
    end = start + timedelta(minutes=rng.choice((30, 45, 60, 60, 90)))
    tzid = TIMEZONE if n % 2 == 0 else None
    lines = [_when("DTSTART", start, tzid), _when("DTEND", end, tzid), *_extras(rng, n)]
    if n % 50 == 7:
        lines.append("TRANSP:TRANSPARENT")
    if n % 100 == 42:
        lines.append("STATUS:CANCELLED")
    return _vcalendar(f"single-{n:04d}", [lines], {tzid} if tzid else set())


# The recurring kinds, in turn: (zone or None for UTC, RRULE without COUNT/UNTIL, days from
# the first occurrence to the second and to the third, the end: "count" or "until")
_KINDS = (
    ("America/New_York", "FREQ=WEEKLY", (7, 14), "count"),
    (None, "FREQ=WEEKLY", (7, 14), "until"),
    ("America/New_York", "FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR", (1, 2), "count"),
    ("Europe/Berlin", "FREQ=WEEKLY", (7, 14), "count"),
    ("America/New_York", "FREQ=WEEKLY;BYDAY=MO,WE,FR", (2, 4), "until"),
    ("Europe/Berlin", "FREQ=DAILY", (1, 2), "count"),
    ("America/New_York", "FREQ=WEEKLY;INTERVAL=2", (14, 28), "count"),
    (None, "FREQ=WEEKLY", (7, 14), "count"),
)


def recurring_event(n: int, rng: random.Random) -> str:
    tzid, rule, (second, third), ends = _KINDS[n % len(_KINDS)]
    uid = f"series-{n:04d}"
    if n % 40 == 7:  # all-day, weekly
        day = FIRST_DAY + timedelta(days=rng.randrange(-14, 50))
        lines = [
            f"DTSTART;VALUE=DATE:{day:%Y%m%d}",
            f"DTEND;VALUE=DATE:{day + timedelta(days=1):%Y%m%d}",
            "RRULE:FREQ=WEEKLY;COUNT=8",
            *_extras(rng, n),
        ]
        if n % 80 == 47:
            lines.append(f"EXDATE;VALUE=DATE:{day + timedelta(days=7):%Y%m%d}")
        return _vcalendar(uid, [lines], set())
    if "BYDAY" in rule:  # the series starts on a Monday, the rule's first day
        day = FIRST_DAY + timedelta(weeks=rng.randrange(-1, 8))
    elif rule == "FREQ=DAILY":
        day = FIRST_DAY + timedelta(days=rng.randrange(-3, 60))
    else:
        day = FIRST_DAY + timedelta(weeks=rng.randrange(-4, 8), days=rng.randrange(5))
    hours = (9 * 60, 17 * 60) if tzid == "Europe/Berlin" else (8 * 60, 18 * 60)
    minutes = rng.randrange(*hours, 30)
    start = datetime.combine(day, clock(minutes // 60, minutes % 60))
    length = timedelta(minutes=rng.choice((30, 30, 60, 90)))
    if ends == "count":
        count = rng.randrange(5, 16) if rule.startswith("FREQ=DAILY") else rng.randrange(8, 17)
        rule += f";COUNT={count}"
    else:
        until = datetime.combine(day + timedelta(weeks=rng.randrange(6, 13)), clock(23, 59, 59))
        rule += f";UNTIL={until:%Y%m%dT%H%M%S}Z"
    lines = [
        _when("DTSTART", start, tzid),
        _when("DTEND", start + length, tzid),
        f"RRULE:{rule}",
        *_extras(rng, n),
    ]
    if n % 5 == 1:
        lines.append(_when("EXDATE", start + timedelta(days=second), tzid))
    components = [lines]
    if n % 10 == 3:
        original = start + timedelta(days=third)
        moved = original + timedelta(hours=1)
        override = [
            _when("RECURRENCE-ID", original, tzid),
            _when("DTSTART", moved, tzid),
            _when("DTEND", moved + length, tzid),
            "SUMMARY:Moved this once",
            "SEQUENCE:1",
        ]
        if n % 100 == 13:
            override.append("STATUS:CANCELLED")
        components.append(override)
    return _vcalendar(uid, components, {tzid} if tzid else set())


def calendar_items() -> dict[str, str]:
    """UID → iCalendar text of the 2,000 calendar object resources."""
    rng = random.Random(SEED)
    items = {}
    for n in range(SINGLE):
        items[f"single-{n:04d}"] = single_event(n, rng)
    for n in range(RECURRING):
        items[f"series-{n:04d}"] = recurring_event(n, rng)
    return items


def changed_item(step: int) -> str:
    """``CHANGED_UID`` moved by an hour on odd steps, back where it was on even ones."""
    rng = random.Random(SEED)
    n = int(CHANGED_UID.split("-")[1])
    for k in range(n):  # draw as calendar_items() did before this event
        single_event(k, rng)
    return single_event(n, rng, timedelta(hours=step % 2))


# --- the server ------------------------------------------------------------------------------


def dav_client(server: OwnRadicale) -> caldav.DAVClient:
    """A new caldav client, as every sync makes one."""
    return caldav.DAVClient(
        url=server.url, username=USER, password=PASSWORD, timeout=60, enable_rfc6764=False
    )


def window_query() -> bytes:
    """The calendar-query REPORT body of the sync's read: VEVENTs in the window, a day wider
    on both sides (as ``read_calendar`` asks)."""
    start, end = WINDOW.start - timedelta(days=1), WINDOW.end + timedelta(days=1)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">'
        "<D:prop><D:getetag/><C:calendar-data/></D:prop>"
        '<C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT">'
        f'<C:time-range start="{_stamp(start)}" end="{_stamp(end)}"/>'
        "</C:comp-filter></C:comp-filter></C:filter>"
        "</C:calendar-query>"
    ).encode()


def raw_report(server: OwnRadicale, path: str, timeout: float = 60) -> bytes:
    """The window's calendar-query REPORT as plain HTTP on a new connection: the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    credentials = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    headers = {
        "Depth": "1",
        "Content-Type": "application/xml; charset=utf-8",
        "Authorization": f"Basic {credentials}",
    }
    try:
        conn.request("REPORT", path, body=window_query(), headers=headers)
        response = conn.getresponse()
        answer = response.read()
    finally:
        conn.close()
    if response.status != 207:
        raise SystemExit(f"FAILED: REPORT answered {response.status}: {answer[:300]!r}")
    return answer


def fill_calendar(server: OwnRadicale, items: dict[str, str]) -> str:
    """A new calendar of ``USER`` holding ``items``, written straight into its folder; fails
    unless the server's answer to the window's REPORT holds exactly those UIDs (that first
    REPORT also fills Radicale's item cache). Returns the calendar's URL."""
    with dav_client(server) as client:
        calendar = client.principal().make_calendar(name=CALENDAR_NAME, cal_id=CALENDAR_ID)
        url = str(calendar.url)
    folder = server.storage / USER / CALENDAR_ID
    if not (folder / ".Radicale.props").is_file():
        raise SystemExit(f"FAILED: no Radicale collection at {folder}")
    for uid, text in items.items():
        (folder / f"{uid}.ics").write_text(text, encoding="utf-8", newline="")
    answer = raw_report(server, urlsplit(url).path, timeout=300)
    served = set(re.findall(rb"^UID:(\S+)\r?$", answer, re.MULTILINE))
    if {uid.decode() for uid in served} != set(items):
        raise SystemExit(f"FAILED: the server serves {len(served)} UIDs, not {len(items)}")
    return url


def put_item(server: OwnRadicale, calendar_url: str, uid: str, text: str) -> None:
    """One event PUT through the caldav client, as any calendar app would write it."""
    with dav_client(server) as client:
        calendar = client.calendar(url=calendar_url)
        url = calendar.url.join(f"{uid}.ics")
        caldav.Event(client=client, url=url, data=text, parent=calendar, id=uid).save(
            increase_seqno=False
        )


# --- timing ----------------------------------------------------------------------------------


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = run()
    return time.perf_counter() - started, value


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:.1f} ms"


@dataclass
class Baseline:
    lookup: list[float] = field(default_factory=list)
    propfind: list[float] = field(default_factory=list)
    raw_report: list[float] = field(default_factory=list)
    search: list[float] = field(default_factory=list)
    expand: float = 0.0
    objects: int = 0
    report_bytes: int = 0
    busy_count: int = 0
    recurring_periods: int = 0

    def median(self, attr: str) -> float:
        return statistics.median(getattr(self, attr))


def measure_baseline(server: OwnRadicale, calendar_url: str) -> Baseline:
    baseline = Baseline()
    start, end = WINDOW.start - timedelta(days=1), WINDOW.end + timedelta(days=1)  # as the sync
    path = urlsplit(calendar_url).path

    def lookup() -> None:
        with dav_client(server) as client:
            calendars = client.principal().get_calendars()
            names = [c.get_display_name() for c in calendars]
        if names != [CALENDAR_NAME]:
            raise SystemExit(f"FAILED: the user's calendars are {names}")

    def propfind() -> dict:
        with dav_client(server) as client:
            calendar = client.calendar(url=calendar_url)
            return calendar.get_properties([SYNC_TOKEN(), CTAG(), dav.DisplayName()])

    def search() -> list[CalendarObject]:
        with dav_client(server) as client:
            calendar = client.calendar(url=calendar_url)
            found = calendar.search(
                event=True, start=start, end=end, expand=False, post_filter=False
            )
            return [CalendarObject(str(o.url), o.data) for o in found]

    for _ in range(PROPFIND_RUNS):
        baseline.lookup.append(timed(lookup)[0])
        elapsed, props = timed(propfind)
        if not props.get(SYNC_TOKEN.tag):
            raise SystemExit(f"FAILED: no sync-token in {props}")
        baseline.propfind.append(elapsed)
    for _ in range(BASELINE_RUNS):
        elapsed, answer = timed(lambda: raw_report(server, path))
        baseline.raw_report.append(elapsed)
        baseline.objects, baseline.report_bytes = answer.count(b"BEGIN:VCALENDAR"), len(answer)
        elapsed, objects = timed(search)
        baseline.search.append(elapsed)
        if baseline.objects != SINGLE + RECURRING or len(objects) != SINGLE + RECURRING:
            raise SystemExit(f"FAILED: the REPORT found {baseline.objects}/{len(objects)} events")
    baseline.expand, periods = timed(partial(busy_periods, objects, WINDOW, zone(TIMEZONE)))
    baseline.busy_count = len(periods)
    baseline.recurring_periods = sum(1 for p in periods if p.uid.startswith("series-"))
    return baseline


# --- the database side -----------------------------------------------------------------------


def tenant_document(server_url: str) -> dict[str, Any]:
    return {
        "agencies": [
            {
                "name": "Bench agency",
                "owner": {"email": "owner@calendar-sync.test", "password": "s3cret-pass"},
                "subAccounts": [
                    {
                        "name": "Sync clinic",
                        "timezone": TIMEZONE,
                        "settings": {"minimumNoticeMinutes": 0, "bookingHorizonDays": HORIZON_DAYS},
                        "availabilityProfiles": [
                            {
                                "name": "Office",
                                "default": True,
                                "weeklyHours": {
                                    d: [["09:00", "17:00"]]
                                    for d in ("mon", "tue", "wed", "thu", "fri")
                                },
                            }
                        ],
                        "eventTypes": [
                            {"name": "Visit", "duration": 30, "availabilityProfile": "Office"}
                        ],
                        "apiKeys": [
                            {"name": "bench", "permissions": [p.value for p in Permission]}
                        ],
                        "calendarConnections": [
                            {
                                "name": "Personal",
                                "url": server_url,
                                "username": USER,
                                "password": PASSWORD,
                                "calendar": CALENDAR_NAME,
                            }
                        ],
                    }
                ],
            }
        ]
    }


@dataclass
class Phases:
    """Seconds one sync spent in its CalDAV read and in the expansion."""

    read: float = 0.0
    expand: float = 0.0


@contextmanager
def phases() -> Iterator[Phases]:
    """Times the two calls the sync module makes, ``read_calendar`` and ``busy_periods``, by
    wrapping them where that module looks them up (the app's code is not changed)."""
    spent = Phases()
    read_calendar, expand = sync_module.read_calendar, sync_module.busy_periods

    def timed_read(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return read_calendar(*args, **kwargs)
        finally:
            spent.read += time.perf_counter() - started

    def timed_expand(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return expand(*args, **kwargs)
        finally:
            spent.expand += time.perf_counter() - started

    sync_module.read_calendar, sync_module.busy_periods = timed_read, timed_expand
    try:
        yield spent
    finally:
        sync_module.read_calendar, sync_module.busy_periods = read_calendar, expand


@dataclass
class Samples:
    total: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)
    expand: list[float] = field(default_factory=list)

    def add(self, total: float, spent: Phases) -> None:
        self.total.append(total)
        self.read.append(spent.read)
        self.expand.append(spent.expand)

    @property
    def rest(self) -> list[float]:
        """The database and everything else: reading the connection, the busy-time diff and
        its writes, the commit."""
        return [t - r - e for t, r, e in zip(self.total, self.read, self.expand, strict=True)]


@dataclass
class Runs:
    full: Samples = field(default_factory=Samples)
    unchanged: Samples = field(default_factory=Samples)
    changed: Samples = field(default_factory=Samples)


def check(result: SyncResult, status: str, what: str, **expected: int) -> None:
    actual = {name: getattr(result, name) for name in expected}
    if result.status != status or actual != expected:
        raise SystemExit(
            f"FAILED: {what}: {result.status} {actual} (expected {status} {expected});"
            f" {result.error or ''}"
        )


def stored(connection_id: int) -> int:
    return db.session.scalar(
        select(func.count())
        .select_from(BlockedTime)
        .where(BlockedTime.calendar_connection_id == connection_id)
    )


def forget(connection_id: int) -> None:
    """The next sync is a first one: sync state forgotten, busy time gone."""
    db.session.get(CalendarConnection, connection_id).forget_sync_state()
    db.session.execute(
        delete(BlockedTime).where(BlockedTime.calendar_connection_id == connection_id)
    )
    db.session.commit()


def sync_once(connection_id: int, samples: Samples | None) -> SyncResult:
    """One sync and its commit, timed into ``samples`` (None: a warm-up)."""
    with phases() as spent:
        started = time.perf_counter()
        result = sync_connection(connection_id, now=NOW)
        db.session.commit()
        elapsed = time.perf_counter() - started
    if samples is not None:
        samples.add(elapsed, spent)
    return result


def run_backend(
    url: str, server: OwnRadicale, calendar_url: str, expected_busy: int, step: Iterator[int]
) -> Runs:
    created = migrate_and_provision(url, tenant_document(server.url))
    connection_id = created[0]["calendarConnections"]["Personal"]
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": SECRET_KEY})
    runs = Runs()
    with app.app_context():
        for n in range(FULL_RUNS):
            forget(connection_id)
            result = sync_once(connection_id, runs.full)
            full = {"added": expected_busy, "removed": 0, "busy_count": expected_busy}
            check(result, "synced", f"full sync {n}", **full)
            if stored(connection_id) != expected_busy:
                raise SystemExit(f"FAILED: {stored(connection_id)} rows after the full sync")
        for n in range(UNCHANGED_WARMUP + UNCHANGED_RUNS):
            result = sync_once(connection_id, runs.unchanged if n >= UNCHANGED_WARMUP else None)
            check(result, "unchanged", f"unchanged sync {n}", busy_count=expected_busy)
        for n in range(CHANGED_RUNS):
            put_item(server, calendar_url, CHANGED_UID, changed_item(next(step)))
            result = sync_once(connection_id, runs.changed)
            one = {"added": 1, "removed": 1, "busy_count": expected_busy}
            check(result, "synced", f"sync after one change {n}", **one)
        if stored(connection_id) != expected_busy:
            raise SystemExit(f"FAILED: {stored(connection_id)} rows at the end")
        db.session.remove()
        db.engine.dispose()
    return runs


# --- report ----------------------------------------------------------------------------------


def report_baseline(baseline: Baseline) -> None:
    print(
        f"  The CalDAV server alone, no database (medians of {PROPFIND_RUNS}, then of"
        f" {BASELINE_RUNS}, then 1 run;\n  a new client each time, as every sync makes):"
    )
    rows = (
        ("calendar lookup by name (principal, its calendars, display name)", "lookup"),
        ("PROPFIND of the change markers (sync-token, ctag), caldav client", "propfind"),
        (
            f"REPORT of the window, raw HTTP ({baseline.objects:,} objects,"
            f" {baseline.report_bytes / 1e6:.1f} MB)",
            "raw_report",
        ),
        ("REPORT of the window through caldav's search (+ its parsing)", "search"),
    )
    for title, attr in rows:
        print(f"    {title:<70} {ms(baseline.median(attr)):>9}")
    title = "busy_periods of that answer: parse + expand (no I/O)"
    print(f"    {title:<70} {ms(baseline.expand):>9}")


def report_backend(label: str, runs: Runs) -> None:
    print(f"  {label}: sync_connection + commit")
    print(
        f"    {'':<31} {'runs':>4} {'median':>9} {'min':>9} {'max':>9}"
        f" {'read':>9} {'expand':>9} {'db+rest':>9}"
    )
    rows = (
        ("full sync", runs.full, FULL_TARGET_S),
        ("incremental, nothing changed", runs.unchanged, UNCHANGED_TARGET_S),
        ("incremental, one event changed", runs.changed, None),
    )
    for title, samples, target in rows:
        median = statistics.median(samples.total)
        line = (
            f"    {title:<31} {len(samples.total):>4} {ms(median):>9}"
            f" {ms(min(samples.total)):>9} {ms(max(samples.total)):>9}"
        )
        for phase in (samples.read, samples.expand, samples.rest):
            line += f" {ms(statistics.median(phase)) if max(phase) > 0 else '–':>9}"
        if target is not None:
            line += f"  target < {target:g} s: {'met' if median < target else 'MISSED'}"
        print(line)


def main() -> None:
    started = time.monotonic()
    logging.getLogger("app.services.integrations.calendars.sync").setLevel(logging.WARNING)
    pg_version = postgres_version()
    print("Calendar sync benchmark: one CalDAV calendar of 2,000 events, synced in full and again")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()}"
        f" {platform.python_version()}, {platform.platform()}"
    )
    print(f"         PostgreSQL {pg_version or 'unreachable'}, SQLite {sqlite3.sqlite_version}")
    print(
        f"         Radicale {version('radicale')}, caldav {version('caldav')}, icalendar"
        f" {version('icalendar')}, recurring-ical-events {version('recurring-ical-events')}"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    print(
        f"events:  {SINGLE:,} single + {RECURRING:,} recurring series; window"
        f" {WINDOW.start:%Y-%m-%d %H:%MZ} – {WINDOW.end:%Y-%m-%d %H:%MZ} ({TIMEZONE},"
        f" {HORIZON_DAYS}-day horizon)"
    )
    items = calendar_items()
    step = iter(range(1, 1_000))
    with (
        tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp,
        radicale_server(Path(tmp) / "radicale") as server,
    ):
        filled, calendar_url = timed(lambda: fill_calendar(server, items))
        baseline = measure_baseline(server, calendar_url)
        print(
            f"         {sum(len(t) for t in items.values()) / 1e6:.1f} MB of iCalendar,"
            f" written and listed in {filled:.1f} s; busy periods in the window:"
            f" {baseline.busy_count:,} ({baseline.recurring_periods:,} from the series)"
        )
        print()
        report_baseline(baseline)
        expected = baseline.busy_count
        if pg_version is None:
            print("\n  PostgreSQL: skipped, not reachable")
        else:
            with postgres_database() as url:
                runs = run_backend(url, server, calendar_url, expected, step)
            print()
            report_backend(f"PostgreSQL {pg_version}", runs)
        path = Path(tmp) / "calendar_sync.sqlite3"
        runs = run_backend(f"sqlite:///{path}", server, calendar_url, expected, step)
        print()
        report_backend(f"SQLite {sqlite3.sqlite_version}", runs)
    print()
    print(
        "  read = read_calendar (calendar lookup when not remembered, PROPFIND, and unless"
        " unchanged the REPORT\n  and caldav's parsing); expand = busy_periods; db+rest = the"
        " remainder (reading the connection,\n  the busy-time difference and its writes, the"
        " commit). Medians of each column on their own."
    )
    print()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
