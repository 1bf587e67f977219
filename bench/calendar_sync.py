"""Benchmark of the inbound CalDAV sync: one calendar of 2,000 events (a fifth of them
recurring) synced in full, then again with nothing changed, with one event changed and with
one deleted, against a real Radicale and a real Xandikos, on PostgreSQL.

Run from the project root (a few minutes for both servers; needs the dev venv, for Radicale
and Xandikos, and PostgreSQL at ``TEST_POSTGRES_URL``)::

    .venv/bin/python -m bench.calendar_sync [--server radicale|xandikos|both]

The servers, each holding one calendar "Personal" (id ``personal``) made through the caldav
client, its 2,000 items written straight into its storage (PUTs would take minutes):

* Radicale (``tests.radicale_servers``, no authentication, filesystem storage), calendar of
  user ``bench``: the items are written into the collection's folder as ``<UID>.ics``; the
  first REPORT of the window fills Radicale's item cache (about 15 s), which a server that
  received its items by PUT already has.
* Xandikos (``tests.xandikos_servers``: no authentication, one principal, ``/user/``, which
  also holds its default calendar "calendar"; a git repository per collection). A PUT there
  commits a new tree of the whole collection, so 2,000 PUTs take over two minutes (0.1 s each
  at 2,000 items). The items are written into the collection's working tree in the form a PUT
  leaves them (Xandikos's own ``ICalendarFile.normalized``: byte for byte the same) and
  committed once with dulwich, the git library Xandikos itself uses; Xandikos reads its index
  again when the index file changed.

Before anything is timed, the window's REPORT must return exactly those 2,000 UIDs.

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

First, per server, the baseline: the server alone, no database, each read on a new client as
every sync makes (a new connection):

* the calendar lookup by display name (principal, its calendars, their names), as a first
  sync does it, and the PROPFIND of the change markers (sync-token, ctag, display name)
  through the caldav client: medians of ``PROPFIND_RUNS``;
* the window's calendar-query REPORT as raw HTTP (``http.client``: the server's time and the
  transfer) and through caldav's ``search`` as a full read calls it (+ the client's parsing
  of the multistatus): medians of ``BASELINE_RUNS``;
* the members' ETags (a depth-1 PROPFIND, what the ETag fallback asks): medians of
  ``BASELINE_RUNS``;
* ``busy_periods`` on the REPORT's answer (icalendar's parsing and recurring-ical-events'
  expansion, no I/O), once: its count is what every full sync must store.

Then, on PostgreSQL (a throw-away database, migrated, dropped at the end), provisioned with one sub
account whose connection names the calendar by its display name, ``sync_connection(…, now=NOW)`` +
``db.session.commit()``:

1. Full sync, ``FULL_RUNS`` times: before each, the connection's ``ConnectedCalendar`` rows,
   their ``CalendarItem`` rows and its busy time are deleted, as on a new connection, so the
   sync finds the calendar by name, reads the window (calendar-query), expands it and inserts
   every item and busy period (``synced``, all added). Target: under 10 s.
2. Nothing changed, ``UNCHANGED_RUNS`` times after 2 untimed: ``unchanged``, one PROPFIND.
   Target: under 1 s.
3. One event changed, ``CHANGED_RUNS`` times: ``CHANGED_UID`` (a UTC single event) moved by an
   hour, back and forth, PUT through caldav (not timed), then synced: ``synced``, 1 busy period
   added and 1 removed; a sync-collection REPORT and a multiget of that resource. Target:
   under 0.5 s.
4. One event deleted, ``DELETED_RUNS`` times: the series with the most busy periods in the
   window, DELETEd through caldav (not timed), then synced: ``synced``, its periods removed,
   nothing fetched. Then it is PUT back (not timed) and synced again, timed as well ("that
   series back"): its periods added.
5. The ETag fallback, for servers with neither sync tokens nor a ctag: the provider's
   ``SYNC_TOKEN`` and ``CTAG`` replaced by a property no server has (as
   ``tests/worker/test_calendar_sync.py::test_without_sync_token_or_ctag_the_etags_tell_a_change``
   does); after a first full sync (1 run, timed), nothing changed ``ETAG_RUNS`` times (the
   markers' PROPFIND and the members' ETags) and one event changed ``ETAG_RUNS`` times (+ a
   multiget of it).

Each sync is split into phases by wrapping, for the bench's run only, the provider's ``read``
(the adapter ``provider_for("caldav")`` returns, which the sync module calls: the whole CalDAV
side, lookup, requests, caldav's parsing and the expansion) and ``ical_item`` where
``providers.caldav`` looks it up (one item's parsing and expansion): caldav = read minus
expand; db+rest = the remainder (reading the connection, the items' and busy times' differences
and writes, the commit).

Every timed sync has a floor of its own, measured right beside it (before it, every other run
after it, so neither always finds the server warmed up by the other; the VM's speed drifts too
much for a floor measured minutes apart): the same requests on a new caldav client, with no
app and no database. Full: the lookup by name, the markers' PROPFIND, the calendar-query through
caldav's ``search`` and ``busy_periods`` of its answer. Nothing changed: the PROPFIND. One
change, one deletion, the series back: the PROPFIND, the sync-collection REPORT since the token
the sync starts from (which must list exactly the changed resource, or the deleted one as
removed) and the calendar-multiget of what it lists, expanded. The ETag rows: the PROPFIND of
the absent markers and the members' ETags (+ the calendar-query and its expansion, or the
multiget of the changed resource). "above" = each sync minus its own floor: the app's own
cost. Printed: median, min and max of the whole, the median of each phase, of the floors and of
the differences.

Checked, not timed: every sync's status and counts; the requests it made (caldav's
``DAVClient.request`` recorded: an incremental sync making other requests than the expected
ones fails the run); after each full sync, as many busy periods as the baseline's
``busy_periods`` found (so both servers agree), one item per event, one
calendar row with its markers and the window's end; after each incremental one, that every
other item's rows kept their ids, and the changed event's rows are exactly its periods; at the
end, the count again.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import logging
import os
import platform
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as clock
from functools import partial
from importlib.metadata import version
from itertools import groupby
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit
from zoneinfo import ZoneInfo

import caldav
from caldav.elements import dav
from caldav.elements.base import BaseElement
from sqlalchemy import delete, func, select

import app.services.integrations.calendars.providers.caldav as caldav_provider
from app import create_app
from app.extensions import db
from app.models import BlockedTime, CalendarItem, ConnectedCalendar, Permission
from app.scheduling.intervals import Interval
from app.scheduling.timezones import zone
from app.services.integrations.calendars.busy_time import (
    CalendarObject,
    busy_periods,
    object_busy_periods,
)
from app.services.integrations.calendars.providers import provider_for
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
from tests.xandikos_servers import OwnXandikos, delete_raw_event, put_raw_event, xandikos_server

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday
TIMEZONE = "America/New_York"
HORIZON_DAYS = 60
WINDOW = Interval(NOW - LOOK_BACK, NOW + timedelta(days=HORIZON_DAYS) + READ_AHEAD)
FIRST_DAY = NOW.date()
DAYS = 67  # single events on FIRST_DAY … FIRST_DAY + 66: all inside WINDOW in New York
SINGLE, RECURRING = 1_600, 400
SEED = 20310106
USER, PASSWORD = "bench", "any"  # neither server authenticates
CALENDAR_NAME, CALENDAR_ID = "Personal", "personal"
SECRET_KEY = "bench"  # migrate_and_provision's: the connection's password is encrypted with it
CHANGED_UID = "single-0001"  # a UTC event; the "changed" runs move it by an hour, back and forth

FULL_RUNS = 3
UNCHANGED_WARMUP, UNCHANGED_RUNS = 2, 20
CHANGED_RUNS = 5
DELETED_RUNS = 5
ETAG_RUNS = 5  # the ETag fallback's "nothing changed" and "one event changed"
BASELINE_RUNS = 3  # the REPORTs of the baseline
PROPFIND_RUNS = 10  # the lookups and PROPFINDs of the baseline
INCREMENT_RUNS = 5  # the incremental reads of the baseline
FULL_TARGET_S = 10.0
UNCHANGED_TARGET_S = 1.0
CHANGED_TARGET_S = 0.5

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


# --- the servers -----------------------------------------------------------------------------

Server = OwnRadicale | OwnXandikos


@dataclass
class Target:
    """One CalDAV server holding the bench's calendar."""

    label: str
    server: Server
    calendar_url: str = ""

    def client(self) -> caldav.DAVClient:
        """A new caldav client, as every sync makes one."""
        return caldav.DAVClient(
            url=self.server.url, username=USER, password=PASSWORD, timeout=60, enable_rfc6764=False
        )

    def item_url(self, uid: str) -> str:
        return f"{self.calendar_url.rstrip('/')}/{uid}.ics"

    def put(self, uid: str, text: str) -> None:
        """One event PUT through the caldav client, byte for byte (any calendar app's write)."""
        with self.client() as client:
            put_raw_event(client.calendar(url=self.calendar_url), uid, text)

    def delete(self, uid: str) -> None:
        """One event DELETEd through the caldav client."""
        with self.client() as client:
            delete_raw_event(client.calendar(url=self.calendar_url), uid)


def window_query() -> bytes:
    """The calendar-query REPORT body of a full read: VEVENTs in the window, a day wider on both
    sides (as the CalDAV provider asks)."""
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


def raw_report(target: Target, timeout: float = 60) -> bytes:
    """The window's calendar-query REPORT as plain HTTP on a new connection: the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", target.server.port, timeout=timeout)
    credentials = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    headers = {
        "Depth": "1",
        "Content-Type": "application/xml; charset=utf-8",
        "Authorization": f"Basic {credentials}",
    }
    try:
        conn.request("REPORT", urlsplit(target.calendar_url).path, window_query(), headers)
        response = conn.getresponse()
        answer = response.read()
    finally:
        conn.close()
    if response.status != 207:
        raise SystemExit(f"FAILED: REPORT answered {response.status}: {answer[:300]!r}")
    return answer


def make_calendar(target: Target) -> Path:
    """The bench's calendar, made through the caldav client; returns its folder in storage."""
    with target.client() as client:
        calendar = client.principal().make_calendar(name=CALENDAR_NAME, cal_id=CALENDAR_ID)
        target.calendar_url = str(calendar.url)
    if isinstance(target.server, OwnRadicale):
        folder = target.server.storage / USER / CALENDAR_ID
        marker = folder / ".Radicale.props"
    else:
        folder = target.server.storage / "user" / "calendars" / CALENDAR_ID
        marker = folder / ".git"
    if not marker.exists():
        raise SystemExit(f"FAILED: no collection at {folder}")
    return folder


def fill_calendar(target: Target, items: dict[str, str]) -> None:
    """A new calendar holding ``items``, written straight into its storage (see the module
    docstring); fails unless the server's answer to the window's REPORT holds exactly those
    UIDs (that first REPORT also fills Radicale's item cache)."""
    folder = make_calendar(target)
    if isinstance(target.server, OwnRadicale):
        for uid, text in items.items():
            (folder / f"{uid}.ics").write_text(text, encoding="utf-8", newline="")
    else:
        from dulwich.repo import Repo
        from xandikos.icalendar import ICalendarFile

        names = []
        for uid, text in items.items():
            stored = b"".join(ICalendarFile([text.encode()], "text/calendar").normalized())
            (folder / f"{uid}.ics").write_bytes(stored)
            names.append(f"{uid}.ics")
        worktree = Repo(str(folder)).get_worktree()
        worktree.stage(names)
        author = b"bench <bench@calendar-sync.test>"
        worktree.commit(message=b"The bench's events", committer=author, author=author)
    answer = raw_report(target, timeout=300)
    served = set(re.findall(rb"^UID:(\S+)\r?$", answer, re.MULTILINE))
    if {uid.decode() for uid in served} != set(items):
        raise SystemExit(f"FAILED: the server serves {len(served)} UIDs, not {len(items)}")


# --- timing ----------------------------------------------------------------------------------


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = run()
    return time.perf_counter() - started, value


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if abs(seconds) >= 0.1 else f"{seconds * 1000:.1f} ms"


def median(values: list[float]) -> float:
    return statistics.median(values)


class Absent(BaseElement):
    """A property no server has: asked for instead of the sync-token and ctag, it leaves the
    provider only the members' ETags to tell a change by."""

    tag = "{urn:example:absent}property"


@contextmanager
def without_markers() -> Iterator[None]:
    """The CalDAV provider asks for ``Absent`` instead of the sync-token and the ctag."""
    saved = caldav_provider.SYNC_TOKEN, caldav_provider.CTAG
    caldav_provider.SYNC_TOKEN = caldav_provider.CTAG = Absent
    try:
        yield
    finally:
        caldav_provider.SYNC_TOKEN, caldav_provider.CTAG = saved


@dataclass
class Baseline:
    lookup: list[float] = field(default_factory=list)
    propfind: list[float] = field(default_factory=list)
    raw_report: list[float] = field(default_factory=list)
    search: list[float] = field(default_factory=list)
    member_etags: list[float] = field(default_factory=list)
    expand: float = 0.0
    objects: int = 0
    report_bytes: int = 0
    periods: Counter[str] = field(default_factory=Counter)  # busy periods by UID

    @property
    def busy_count(self) -> int:
        return sum(self.periods.values())


def measure_baseline(target: Target) -> Baseline:
    baseline = Baseline()
    url = target.calendar_url

    def propfind() -> dict:
        with target.client() as client:
            calendar = client.calendar(url=url)
            return calendar.get_properties([SYNC_TOKEN(), CTAG(), dav.DisplayName()])

    def search() -> list[CalendarObject]:
        with target.client() as client:
            return window_objects(client.calendar(url=url))

    def etags() -> dict[str, str | None]:
        with target.client() as client:
            return member_etags(client.calendar(url=url))

    for _ in range(PROPFIND_RUNS):
        with target.client() as client:
            baseline.lookup.append(timed(partial(find_calendar, client))[0])
        elapsed, props = timed(propfind)
        if not props.get(SYNC_TOKEN.tag):
            raise SystemExit(f"FAILED: no sync-token in {props}")
        baseline.propfind.append(elapsed)
    for _ in range(BASELINE_RUNS):
        elapsed, answer = timed(partial(raw_report, target))
        baseline.raw_report.append(elapsed)
        baseline.objects, baseline.report_bytes = answer.count(b"BEGIN:VCALENDAR"), len(answer)
        elapsed, objects = timed(search)
        baseline.search.append(elapsed)
        if baseline.objects != SINGLE + RECURRING or len(objects) != SINGLE + RECURRING:
            raise SystemExit(f"FAILED: the REPORT found {baseline.objects}/{len(objects)} events")
        elapsed, found = timed(etags)
        baseline.member_etags.append(elapsed)
        if len(found) != SINGLE + RECURRING:
            raise SystemExit(f"FAILED: {len(found)} members' ETags, not {SINGLE + RECURRING}")
    baseline.expand, periods = timed(partial(busy_periods, objects, WINDOW, zone(TIMEZONE)))
    baseline.periods = Counter(p.uid for p in periods)
    return baseline


def find_calendar(client: caldav.DAVClient) -> Any:
    """The calendar looked up by its display name, as a first sync finds it."""
    calendars = client.principal().get_calendars()
    names = [c.get_display_name() for c in calendars]
    if names.count(CALENDAR_NAME) != 1:
        raise SystemExit(f"FAILED: the principal's calendars are {names}")
    return calendars[names.index(CALENDAR_NAME)]


def window_objects(calendar: Any) -> list[CalendarObject]:
    """The window's events, asked as a full read asks (a day wider on both sides)."""
    found = calendar.search(
        event=True,
        start=WINDOW.start - timedelta(days=1),
        end=WINDOW.end + timedelta(days=1),
        expand=False,
        post_filter=False,
    )
    return [CalendarObject(str(o.url), o.data) for o in found]


def fetched_objects(calendar: Any, paths: set[str]) -> list[CalendarObject]:
    """The resources at ``paths``, one calendar-multiget (none when there are none)."""
    if not paths:
        return []
    found = calendar.multiget([calendar.url.join(path) for path in sorted(paths)])
    return [CalendarObject(str(o.url), o.data) for o in found]


def floor(target: Target, row: str, token: str | None, listed: set[str], gone: set[str]) -> float:
    """The server and the caldav client alone, on a new client, for the requests the sync of
    ``row`` makes (and the expansion of what they fetch); ``token``: the stored sync-token an
    incremental sync asks changes since, which must list the paths ``listed`` as changed and
    ``gone`` as removed."""
    started = time.perf_counter()
    with target.client() as client:
        full = row.endswith("full")
        calendar = find_calendar(client) if full else client.calendar(url=target.calendar_url)
        if row.startswith("etag"):
            calendar.get_properties([Absent(), Absent(), dav.DisplayName()])
            member_etags(calendar)
        else:
            calendar.get_properties([SYNC_TOKEN(), CTAG(), dav.DisplayName()])
        if full:
            objects = window_objects(calendar)
        elif row == "etag_changed":
            objects = fetched_objects(calendar, listed)
        elif row in ("changed", "deleted", "restored"):
            report = calendar.get_objects_by_sync_token(
                token, load_objects=False, disable_fallback=True
            )
            changed = {_path(o.url) for o in report.objects} - {
                _path(u) for u in report.deleted_urls
            }
            removed = {_path(u) for u in report.deleted_urls}
            if (changed, removed) != (listed, gone):
                raise SystemExit(
                    f"FAILED: sync-collection listed {sorted(changed)} changed and"
                    f" {sorted(removed)} removed (expected {sorted(listed)}, {sorted(gone)})"
                )
            objects = fetched_objects(calendar, changed)
        else:
            objects = []
        busy_periods(objects, WINDOW, zone(TIMEZONE))
    return time.perf_counter() - started


def member_etags(calendar: Any) -> dict[str, str | None]:
    """The members' ETags, one depth-1 PROPFIND, as the provider's ETag fallback asks them."""
    response = calendar.get_properties([dav.GetEtag()], depth=1, parse_response_xml=False)
    found = response.expand_simple_props([dav.GetEtag()])
    own = _path(calendar.url).rstrip("/")
    return {
        path: props.get(dav.GetEtag.tag)
        for href, props in found.items()
        for path in [_path(calendar.url.join(href))]
        if path.rstrip("/") != own
    }


def _path(url: Any) -> str:
    return unquote(urlsplit(str(url)).path)


# --- the database side -----------------------------------------------------------------------


def caldav_connection(server_url: str) -> dict[str, Any]:
    """The connection of the bench's sub account: the Radicale or Xandikos calendar by name."""
    return {
        "name": "Personal",
        "url": server_url,
        "username": USER,
        "password": PASSWORD,
        "calendar": CALENDAR_NAME,
    }


def tenant_document(connection: dict[str, Any]) -> dict[str, Any]:
    """One agency, one sub account (New York, a 60-day horizon) with ``connection``."""
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
                        "calendarConnections": [connection],
                    }
                ],
            }
        ]
    }


@dataclass
class Phases:
    """Seconds one sync spent in the provider's read (the CalDAV side, expansion included),
    of which in expansion, and the requests it made."""

    read: float = 0.0
    expand: float = 0.0
    requests: list[str] = field(default_factory=list)


@contextmanager
def phases() -> Iterator[Phases]:
    """Times the provider's ``read`` (where the sync module finds it: on the adapter
    ``provider_for`` returns) and ``ical_item`` (where ``providers.caldav`` looks it up), and
    records caldav's requests, by wrapping them for the bench only (the app is not changed)."""
    spent = Phases()
    provider = provider_for("caldav")
    read, ical_item = provider.read, caldav_provider.ical_item
    request = caldav.DAVClient.request

    def timed_read(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return read(*args, **kwargs)
        finally:
            spent.read += time.perf_counter() - started

    def timed_item(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return ical_item(*args, **kwargs)
        finally:
            spent.expand += time.perf_counter() - started

    def recorded(self: Any, url: str, method: str = "GET", body: Any = "", *a: Any, **k: Any):
        headers = (a[0] if a else k.get("headers")) or {}
        spent.requests.append(describe(method, body, headers))
        return request(self, url, method, body, *a, **k)

    provider.read, caldav_provider.ical_item = timed_read, timed_item
    caldav.DAVClient.request = recorded
    try:
        yield spent
    finally:
        del provider.read  # the class's method again
        caldav_provider.ical_item = ical_item
        caldav.DAVClient.request = request


def describe(method: str, body: Any, headers: Any) -> str:
    """A request in a word or two: the method, a PROPFIND's depth, a REPORT's kind."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    if method == "REPORT":
        found = re.search(r"<(?:\w+:)?(sync-collection|calendar-multiget|calendar-query)\b", text)
        return f"REPORT {found.group(1) if found else '?'}"
    depth = {str(k).lower(): v for k, v in dict(headers).items()}.get("depth")
    return f"{method} depth {depth}" if method == "PROPFIND" and depth else method


def requests_text(requests: list[str]) -> str:
    return ", ".join(
        f"{name} ×{n}" if n > 1 else name
        for name, group in groupby(requests)
        for n in [len(list(group))]
    )


@dataclass
class Samples:
    total: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)
    expand: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    requests: set[str] = field(default_factory=set)  # the request sequences seen

    def add(self, total: float, spent: Phases, floor: float) -> None:
        self.total.append(total)
        self.read.append(spent.read)
        self.expand.append(spent.expand)
        self.floor.append(floor)
        self.requests.add(requests_text(spent.requests))

    @property
    def above_floor(self) -> list[float]:
        """Each sync minus its own floor: the app's own cost."""
        return [t - f for t, f in zip(self.total, self.floor, strict=True)]

    @property
    def caldav(self) -> list[float]:
        """The CalDAV side without the expansion: requests, the server, caldav's parsing."""
        return [r - e for r, e in zip(self.read, self.expand, strict=True)]

    @property
    def rest(self) -> list[float]:
        """The database and everything else: reading the connection, the items' and busy
        times' differences and their writes, the commit."""
        return [t - r for t, r in zip(self.total, self.read, strict=True)]


ROWS = (  # key, title, target in seconds
    ("full", "full sync (first: no calendar rows)", FULL_TARGET_S),
    ("unchanged", "nothing changed", UNCHANGED_TARGET_S),
    ("changed", "one event changed (PUT)", CHANGED_TARGET_S),
    ("deleted", "one series deleted (DELETE)", None),
    ("restored", "that series back (PUT)", None),
    ("etag_full", "ETags, no token: full sync", None),
    ("etag_unchanged", "ETags: nothing changed", UNCHANGED_TARGET_S),
    ("etag_changed", "ETags: one event changed (PUT)", CHANGED_TARGET_S),
)

# The requests each incremental sync must make, no more (a full one's depend on the lookup)
EXPECTED_REQUESTS = {
    "unchanged": "PROPFIND depth 0",
    "changed": "PROPFIND depth 0, REPORT sync-collection, REPORT calendar-multiget",
    "deleted": "PROPFIND depth 0, REPORT sync-collection",
    "restored": "PROPFIND depth 0, REPORT sync-collection, REPORT calendar-multiget",
    "etag_unchanged": "PROPFIND depth 0, PROPFIND depth 1",
    "etag_changed": "PROPFIND depth 0, PROPFIND depth 1, REPORT calendar-multiget",
}


@dataclass
class Expected:
    """What the calendar holds: busy periods in all, and those of the deleted series."""

    busy: int
    deleted_uid: str
    deleted_periods: int


class Bench:
    """The runs against one server, on one database."""

    def __init__(self, target: Target, expected: Expected, step: Iterator[int]) -> None:
        self.target, self.expected, self.step = target, expected, step
        self.rows: dict[str, Samples] = {key: Samples() for key, _, _ in ROWS}
        self.connection_id = 0

    def run(self, url: str) -> dict[str, Samples]:
        created = migrate_and_provision(
            url, tenant_document(caldav_connection(self.target.server.url))
        )
        self.connection_id = created[0]["calendarConnections"]["Personal"]
        app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": SECRET_KEY})
        with app.app_context():
            self.syncs()
            db.session.remove()
            db.engine.dispose()
        return {key: samples for key, samples in self.rows.items() if samples.total}

    def syncs(self) -> None:
        busy, items = self.expected.busy, SINGLE + RECURRING
        for n in range(FULL_RUNS):
            self.forget()
            result = self.sync("full")
            check(result, "synced", f"full sync {n}", added=busy, removed=0, busy_count=busy)
            self.check_rows(busy, items, sync_token=True)
        for n in range(UNCHANGED_WARMUP + UNCHANGED_RUNS):
            result = self.sync("unchanged" if n >= UNCHANGED_WARMUP else None)
            check(result, "unchanged", f"unchanged sync {n}", added=0, busy_count=busy)
        for n in range(CHANGED_RUNS):
            self.one_change("changed", n)
        uid, periods = self.expected.deleted_uid, self.expected.deleted_periods
        original = calendar_items()[uid]
        path = _path(self.target.item_url(uid))
        for n in range(DELETED_RUNS):
            before = self.row_ids()
            self.target.delete(uid)
            result = self.sync("deleted", gone={path})
            fewer = {"added": 0, "removed": periods, "busy_count": busy - periods}
            check(result, "synced", f"sync after a deletion {n}", **fewer)
            self.check_rows(busy - periods, items - 1, sync_token=True)
            self.check_touched(before, removed=periods, added=0)
            before = self.row_ids()
            self.target.put(uid, original)
            result = self.sync("restored", listed={path})
            more = {"added": periods, "removed": 0, "busy_count": busy}
            check(result, "synced", f"sync after the series came back {n}", **more)
            self.check_touched(before, removed=0, added=periods)
            self.check_item(uid, original)
        self.check_rows(busy, items, sync_token=True)
        with without_markers():
            self.forget()
            result = self.sync("etag_full")
            check(result, "synced", "ETag full sync", added=busy, removed=0, busy_count=busy)
            self.check_rows(busy, items, sync_token=False)
            for n in range(ETAG_RUNS):
                result = self.sync("etag_unchanged")
                check(result, "unchanged", f"ETag unchanged sync {n}", busy_count=busy)
            for n in range(ETAG_RUNS):
                self.one_change("etag_changed", n)
        self.check_rows(busy, items, sync_token=False)

    def one_change(self, row: str, n: int) -> None:
        """``CHANGED_UID`` moved by an hour (PUT, not timed), then synced."""
        before = self.row_ids()
        text = changed_item(next(self.step))
        self.target.put(CHANGED_UID, text)
        result = self.sync(row, listed={_path(self.target.item_url(CHANGED_UID))})
        one = {"added": 1, "removed": 1, "busy_count": self.expected.busy}
        check(result, "synced", f"{row} sync {n}", **one)
        self.check_touched(before, removed=1, added=1)
        self.check_item(CHANGED_UID, text)

    def sync(
        self, row: str | None, listed: Iterable[str] = (), gone: Iterable[str] = ()
    ) -> SyncResult:
        """One sync and its commit, timed into ``row`` (None: a warm-up), with its floor (see
        ``floor``: ``listed`` and ``gone`` are what the server must list as changed and removed
        since the stored sync-token), measured right before the sync or, every other run, right
        after it, so that neither always finds the server warmed up by the other."""
        samples = self.rows[row] if row is not None else None
        token = self.stored_token()
        floor_first = samples is not None and len(samples.total) % 2 == 0
        if floor_first:
            below = floor(self.target, row, token, set(listed), set(gone))
        with phases() as spent:
            started = time.perf_counter()
            result = sync_connection(self.connection_id, now=NOW)
            db.session.commit()
            elapsed = time.perf_counter() - started
        if samples is not None and not floor_first:
            below = floor(self.target, row, token, set(listed), set(gone))
        if result.skipped:
            raise SystemExit(f"FAILED: {row}: {result.skipped} events skipped")
        if samples is not None:
            made = requests_text(spent.requests)
            if row in EXPECTED_REQUESTS and made != EXPECTED_REQUESTS[row]:
                raise SystemExit(
                    f"FAILED: {row}: the sync asked {made} (expected {EXPECTED_REQUESTS[row]})"
                )
            reports = [r for r in spent.requests if r.startswith("REPORT")]
            if row.endswith("full") and reports != ["REPORT calendar-query"]:
                raise SystemExit(f"FAILED: {row}: the sync asked {made}")
            samples.add(elapsed, spent, below)
        return result

    def stored_token(self) -> str | None:
        return db.session.scalar(
            select(ConnectedCalendar.sync_token).where(
                ConnectedCalendar.calendar_connection_id == self.connection_id
            )
        )

    def forget(self) -> None:
        """The next sync is a first one: no calendar rows, no items, no busy time."""
        calendars = select(ConnectedCalendar.id).where(
            ConnectedCalendar.calendar_connection_id == self.connection_id
        )
        db.session.execute(
            delete(BlockedTime).where(BlockedTime.calendar_connection_id == self.connection_id)
        )
        db.session.execute(
            delete(CalendarItem).where(CalendarItem.connected_calendar_id.in_(calendars))
        )
        db.session.execute(
            delete(ConnectedCalendar).where(
                ConnectedCalendar.calendar_connection_id == self.connection_id
            )
        )
        db.session.commit()

    def row_ids(self) -> set[tuple]:
        """The connection's busy rows as (id, start, end, UID)."""
        return set(
            db.session.execute(
                select(
                    BlockedTime.id,
                    BlockedTime.start_at,
                    BlockedTime.end_at,
                    BlockedTime.external_uid,
                ).where(BlockedTime.calendar_connection_id == self.connection_id)
            )
        )

    def check_touched(self, before: set[tuple], *, removed: int, added: int) -> None:
        """Only the changed item's rows were deleted or inserted: every other row is as it was,
        same id."""
        after = self.row_ids()
        if (len(before - after), len(after - before)) != (removed, added):
            raise SystemExit(
                f"FAILED: {len(before - after)} rows gone and {len(after - before)} new"
                f" (expected {removed} and {added})"
            )

    def check_item(self, uid: str, text: str) -> None:
        """The event's rows are exactly its busy periods in the window."""
        _, periods = object_busy_periods(CalendarObject(uid, text), WINDOW, zone(TIMEZONE))
        rows = db.session.execute(
            select(BlockedTime.start_at, BlockedTime.end_at)
            .where(
                BlockedTime.calendar_connection_id == self.connection_id,
                BlockedTime.external_uid == uid,
            )
            .order_by(BlockedTime.start_at)
        ).all()
        if [tuple(r) for r in rows] != sorted((p.start, p.end) for p in periods):
            raise SystemExit(f"FAILED: {uid}'s rows are {rows}, its periods {periods}")

    def check_rows(self, busy: int, items: int, *, sync_token: bool) -> None:
        """Busy periods, items (each period on one) and the calendar row as expected."""
        count = db.session.scalar
        mine = BlockedTime.calendar_connection_id == self.connection_id
        stored = count(select(func.count()).select_from(BlockedTime).where(mine))
        unitemised = count(
            select(func.count())
            .select_from(BlockedTime)
            .where(mine, BlockedTime.calendar_item_id.is_(None))
        )
        calendars = db.session.scalars(
            select(ConnectedCalendar).where(
                ConnectedCalendar.calendar_connection_id == self.connection_id
            )
        ).all()
        kept = count(
            select(func.count())
            .select_from(CalendarItem)
            .where(CalendarItem.connected_calendar_id.in_([c.id for c in calendars]))
        )
        if (stored, unitemised, kept, len(calendars)) != (busy, 0, items, 1):
            raise SystemExit(
                f"FAILED: {stored} busy periods ({unitemised} without an item), {kept} items,"
                f" {len(calendars)} calendar rows (expected {busy}, 0, {items}, 1)"
            )
        (row,) = calendars
        markers_ok = (
            bool(row.sync_token) if sync_token else not row.sync_token and row.ctag[:6] == "etags:"
        )
        if (
            not markers_ok
            or _path(row.remote_id) != _path(self.target.calendar_url)
            or row.synced_until != WINDOW.end
            or row.synced_timezone != TIMEZONE
        ):
            raise SystemExit(
                f"FAILED: calendar row {row.remote_id} token {row.sync_token!r} ctag"
                f" {row.ctag!r} until {row.synced_until} in {row.synced_timezone}"
            )


def check(result: SyncResult, status: str, what: str, **expected: int) -> None:
    actual = {name: getattr(result, name) for name in expected}
    if result.status != status or actual != expected:
        raise SystemExit(
            f"FAILED: {what}: {result.status} {actual} (expected {status} {expected});"
            f" {result.error or ''}"
        )


# --- report ----------------------------------------------------------------------------------


def report_baseline(baseline: Baseline) -> None:
    print(
        f"  The server alone, no database (medians of {PROPFIND_RUNS}, of {BASELINE_RUNS}, then 1"
        " run; a new client\n  each time, as every sync makes):"
    )
    rows = (
        ("calendar lookup by name (principal, its calendars, display names)", baseline.lookup),
        ("PROPFIND of the change markers (sync-token, ctag), caldav client", baseline.propfind),
        (
            f"REPORT of the window, raw HTTP ({baseline.objects:,} objects,"
            f" {baseline.report_bytes / 1e6:.1f} MB)",
            baseline.raw_report,
        ),
        ("REPORT of the window through caldav's search (+ its parsing)", baseline.search),
        ("the members' ETags (PROPFIND depth 1, the ETag fallback's)", baseline.member_etags),
        ("busy_periods of the REPORT's answer: parse + expand (no I/O)", [baseline.expand]),
    )
    for title, values in rows:
        print(f"    {title:<70} {ms(median(values)):>9}")


def report_database(label: str, rows: dict[str, Samples]) -> None:
    print(f"  {label}: sync_connection + commit")
    print(
        f"    {'':<36} {'runs':>4} {'median':>9} {'min':>9} {'max':>9}"
        f" {'caldav':>9} {'expand':>9} {'db+rest':>9} {'floor':>9} {'above':>9}"
    )
    for key, title, target in ROWS:
        samples = rows.get(key)
        if samples is None:
            continue
        middle = median(samples.total)
        line = (
            f"    {title:<36} {len(samples.total):>4} {ms(middle):>9}"
            f" {ms(min(samples.total)):>9} {ms(max(samples.total)):>9}"
        )
        columns = (samples.caldav, samples.expand, samples.rest, samples.floor)
        for phase in (*columns, samples.above_floor):
            line += f" {ms(median(phase)):>9}"
        if target is not None:
            line += f"  < {target:g} s: {'met' if middle < target else 'MISSED'}"
        print(line)


def report_requests(rows: dict[str, Samples]) -> None:
    print("  The requests each sync made (the same in every run of a row unless listed apart):")
    for key, title, _ in ROWS:
        if key in rows:
            print(f"    {title:<36} {' | '.join(sorted(rows[key].requests))}")


def run_server(kind: str, items: dict[str, str], folder: Path, pg_version: str) -> None:
    opened = radicale_server if kind == "radicale" else xandikos_server
    package = "radicale" if kind == "radicale" else "xandikos"
    step = iter(range(1, 10_000))
    started = time.monotonic()
    with opened(folder / kind) as server:
        target = Target(f"{package.capitalize()} {version(package)}", server)
        filled, _ = timed(partial(fill_calendar, target, items))
        baseline = measure_baseline(target)
        series = {uid: n for uid, n in baseline.periods.items() if uid.startswith("series-")}
        deleted_uid = max(sorted(series), key=series.__getitem__)
        expected = Expected(baseline.busy_count, deleted_uid, series[deleted_uid])
        print()
        print(
            f"{target.label}: {sum(len(t) for t in items.values()) / 1e6:.1f} MB of iCalendar,"
            f" written and listed in {filled:.1f} s; busy periods in the window:"
            f" {expected.busy:,} ({sum(series.values()):,} from the series); the series deleted:"
            f" {deleted_uid} ({expected.deleted_periods} periods)"
        )
        report_baseline(baseline)
        with postgres_database() as url:
            rows = Bench(target, expected, step).run(url)
        print()
        report_database(f"PostgreSQL {pg_version}", rows)
        print()
        report_requests(rows)
    print(f"\n  {target.label}: {time.monotonic() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("radicale", "xandikos", "both"), default="both")
    chosen = parser.parse_args().server
    servers = ("radicale", "xandikos") if chosen == "both" else (chosen,)
    started = time.monotonic()
    logging.getLogger("app.services.integrations.calendars.sync").setLevel(logging.WARNING)
    pg_version = postgres_version()
    print("Calendar sync benchmark: one CalDAV calendar of 2,000 events, synced in full and again")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()}"
        f" {platform.python_version()}, {platform.platform()}"
    )
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    print(f"         PostgreSQL {pg_version}")
    print(
        f"         Radicale {version('radicale')}, Xandikos {version('xandikos')}, caldav"
        f" {version('caldav')}, icalendar {version('icalendar')}, recurring-ical-events"
        f" {version('recurring-ical-events')}"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    print(
        f"events:  {SINGLE:,} single + {RECURRING:,} recurring series; window"
        f" {WINDOW.start:%Y-%m-%d %H:%MZ} – {WINDOW.end:%Y-%m-%d %H:%MZ} ({TIMEZONE},"
        f" {HORIZON_DAYS}-day horizon)"
    )
    items = calendar_items()
    with tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp:
        for kind in servers:
            run_server(kind, items, Path(tmp), pg_version)
    print()
    print(
        "  caldav = the provider's read without the expansion (lookup, requests, the server,"
        " caldav's parsing);\n  expand = ical_item (icalendar's parsing, recurring-ical-events'"
        " expansion); db+rest = the remainder\n  (reading the connection, the items' and busy"
        " times' differences and writes, the commit); floor = the\n  server and caldav alone for"
        " the same requests (+ busy_periods on what they fetch), measured beside\n  each sync;"
        " above = the sync minus its floor, the app's own cost. Medians of each column on\n"
        "  their own."
    )
    print()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
