"""Benchmark of the inbound sync from the providers other than CalDAV: one calendar of 2,000 events
synced in full, then again with nothing changed, with one event changed and with one deleted, from a
calendar feed, from Google Calendar and from Microsoft 365, on PostgreSQL. The CalDAV figures are
``bench.calendar_sync``'s; this bench uses the same events (its generator, ``calendar_items``), the
same fixed instant ``NOW`` and window, so the figures sit beside each other.

Run from the project root (a few minutes for all three, by the machine's load; needs PostgreSQL
at ``TEST_POSTGRES_URL``)::

    .venv/bin/python -m bench.provider_sync [--provider feed|google|microsoft|all]

The servers, in this process (the app waits for each answer, so they never run beside it):

* **feed** (``kind: ics``): ``tests.feed_servers``, a loopback HTTP server serving one
  iCalendar file as a feed host does (``ETag``, ``Last-Modified``, ``304`` to a matching
  conditional GET). The file holds the 2,000 events' VEVENTs (a series and its overrides under
  one UID) and the two VTIMEZONEs once: 0.7 MB.
* **google**: ``tests.google_servers.FakeGoogle``, the loopback fake of Google's OAuth server
  and Calendar API v3, with the account's primary calendar in New York time. Each of the
  2,000 events is added through the fake's control API (``add_event``) as a person would make
  it: its times (a date for all-day ones; the TZID as ``timeZone``), its RRULE and EXDATEs,
  ``transparency`` and ``status``. The fake cannot edit one instance of a series, so each of
  the RECURRENCE-ID overrides that is not cancelled becomes an EXDATE of the series plus an
  event of its own with the series' ``iCalUID`` (a cancelled one only the EXDATE;
  ``Parsed`` says what becomes of the one override that names no occurrence): 2,035
  events, the same busy time.
* **microsoft**: ``tests.microsoft_servers.FakeMicrosoft``, the loopback fake of the Microsoft
  identity platform and Graph, the mailbox's default calendar. Each event is made through the
  fake's control API as a person makes it in Outlook (``graph_item``): the zone by its Windows
  name, the RRULE as a patterned recurrence, then each EXDATE and cancelled override as an
  occurrence deleted and each other override as an occurrence moved, one by one: 2,000 events
  (Graph gives each its own ``iCalUId``, which the checks map).

Before anything is timed, the busy periods the app's iCalendar expansion finds in the 2,000
events (``busy_periods``: 4,897 in the window) are what every full sync must store, whatever
the provider: a provider that lost or doubled an event cannot produce a figure.

On PostgreSQL (a throw-away database, migrated, dropped at the end), provisioned with one sub
account (America/New_York, a 60-day horizon, the window [NOW - 1 day, NOW + 67 days]) and one
connection, ``sync_connection(…, now=NOW)`` + ``db.session.commit()``:

1. Full sync, ``FULL_RUNS`` times: before each, the connection's items and busy time are
   deleted and its calendar row forgets its markers, as on a new connection, so the sync reads
   the window in full and inserts every item and busy period. (For Google and Microsoft the
   refresh token is exchanged for an access token once before, untimed, as a periodic sync
   finds one.) Target: under 10 s.
2. Nothing changed, ``UNCHANGED_RUNS`` times after ``UNCHANGED_WARMUP`` untimed: the feed's
   conditional GET answered ``304``; Google's ``events.list`` with the sync token and Graph's
   delta link, answering nothing. Target: under 1 s.
3. One event changed, ``CHANGED_RUNS`` times: ``CHANGED_UID`` (a UTC single event) moved by an
   hour, back and forth (not timed), then synced: 1 busy period added and 1 removed. The feed
   is served again with that event moved (a whole-feed GET; every other event is recognised
   by its text and not expanded again: the bench counts the expansions, which must be 1);
   Google and Graph answer that one event. Target: under 0.5 s.
4. One event deleted, ``DELETED_RUNS`` times: the series with the most busy periods in the
   window (of those without overrides), removed (not timed), then synced: its periods removed
   (the feed served without it; Google answers its instances as cancelled, Graph as
   ``@removed``). Then it comes back (not timed; at Google and Microsoft as a new event) and
   is synced, timed as well ("that series back").
5. The feed only: served without ``ETag`` and ``Last-Modified`` (as some hosts serve feeds),
   unchanged, ``PLAIN_RUNS`` times after one untimed: every sync is a whole-file GET, parse and
   split, and finds every event as it was (nothing expanded, nothing written but the attempt).

Each sync is split into phases by wrapping, for the bench's run only, the provider's ``read``
(the adapter ``provider_for(kind)`` returns, which the sync module calls), the function through
which it makes its HTTP requests (the feed's ``_get``, ``ApiSession._send``) and the function it
turns one item into busy time with (the feed's ``ical_item``: parsing and expansion of one
event; Google's and Microsoft's ``_item``: one event's JSON): http = the requests, the
server's time included; items = the items' function; other = the rest of the read (the feed's
parse of the whole file and its split by UID; for the APIs, making the httpx client, the
access token's lookup before every request, decoding JSON); db+rest = the remainder (reading
the connection, the items' and busy times' differences and writes, the commit).

Every timed sync has a floor measured right beside it (before it, or every other run after it,
as in ``bench.calendar_sync``): the same HTTP requests on a new connection with plain
``http.client`` (feed) or ``httpx`` (the APIs, as the app's client, with one TLS context made
once: ``floor_tls``), no app, no database: the feed's GET (conditional, with the validators the
sync sends) and its body; Google's pages of ``events.list`` (the window, or the sync token the
sync starts from), Graph's pages of ``calendarView/delta`` (the window, or the delta link the
sync starts from), and their JSON. "above" = each sync minus its own floor: the app's own
cost. For the fakes the floor is mostly the fake's own time to answer (it computes a listing's
every instance and compares them with what the token saw, in Python, under one lock): a real
Google or Graph answers from an index, across a network.

Checked, not timed: every sync's status and counts; the requests it made (as the fakes
record them, and for the feed as the provider's ``_get`` returned them: the feed server keeps
its record only after it has answered): each incremental sync must make exactly the expected
ones; the floor's answer (a 304 where the sync must find one; the APIs' rounds holding exactly
the changed or removed events); how many items went through the items' function (the feed's
expansions: 1 for one change); after each full sync, as many busy periods as ``busy_periods`` found,
the items expected and one calendar row with its markers and the window's end; after each
incremental one, that every other item's rows kept their ids and the changed event's rows are
exactly its periods; at the end, the counts again.
"""

from __future__ import annotations

import argparse
import http.client
import logging
import os
import platform
import re
import ssl
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from datetime import time as clock
from functools import cache
from importlib.metadata import version
from typing import Any
from urllib.parse import urlsplit

import httpx
import icalendar
from dateutil.rrule import rrulestr
from sqlalchemy import delete, func, select

import app.services.integrations.calendars.providers.feed as feed_provider
import app.services.integrations.calendars.providers.google as google_provider
import app.services.integrations.calendars.providers.microsoft as microsoft_provider
from app import create_app
from app.extensions import db
from app.models import BlockedTime, CalendarItem, ConnectedCalendar
from app.scheduling.timezones import zone
from app.services.integrations.calendars.busy_time import (
    CalendarObject,
    busy_periods,
    object_busy_periods,
)
from app.services.integrations.calendars.oauth import valid_access_token
from app.services.integrations.calendars.providers import provider_for
from app.services.integrations.calendars.providers.http_json import ApiSession
from app.services.integrations.calendars.sync import SyncResult, sync_connection
from bench.availability import postgres_database, postgres_version
from bench.booking_writes import migrate_and_provision
from bench.calendar_sync import (
    CHANGED_TARGET_S,
    CHANGED_UID,
    FULL_TARGET_S,
    HORIZON_DAYS,
    NOW,
    RECURRING,
    SINGLE,
    TIMEZONE,
    UNCHANGED_TARGET_S,
    VTIMEZONES,
    WINDOW,
    calendar_items,
    changed_item,
    check,
    median,
    ms,
    requests_text,
    tenant_document,
    timed,
)
from tests.feed_servers import Feed, feed_server
from tests.google_servers import FakeGoogle
from tests.microsoft_servers import FakeMicrosoft, patterned_recurrence

SECRET_KEY = "bench"  # migrate_and_provision's: the connection's secret is encrypted with it
CONNECTION = "Personal"
EMAIL = "bench@calendar-sync.test"  # the account at the fakes
CLIENT_ID, CLIENT_SECRET = "bench-client-id", "bench-client-secret"

FULL_RUNS = 3
UNCHANGED_WARMUP, UNCHANGED_RUNS = 2, 10
CHANGED_RUNS = 5
DELETED_RUNS = 3  # each also times the series coming back
PLAIN_RUNS = 3  # a feed served without validators
BASELINE_RUNS = 3


# --- the calendar ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Calendar:
    """The bench's events and what the app's iCalendar expansion finds in them."""

    items: dict[str, str]  # UID → iCalendar text (bench.calendar_sync's generator)
    periods: Counter[str]  # busy periods in the window by UID
    deleted_uid: str  # the series deleted and brought back
    expand_seconds: float  # busy_periods of all 2,000, no I/O

    @property
    def busy(self) -> int:
        return sum(self.periods.values())

    @property
    def deleted_periods(self) -> int:
        return self.periods[self.deleted_uid]


def the_calendar() -> Calendar:
    items = calendar_items()
    objects = [CalendarObject(uid, text) for uid, text in items.items()]
    seconds, found = timed(lambda: busy_periods(objects, WINDOW, zone(TIMEZONE)))
    periods = Counter(p.uid for p in found)
    plain_series = [
        uid
        for uid, text in items.items()
        if uid.startswith("series-") and "RECURRENCE-ID" not in text
    ]
    deleted = max(sorted(plain_series), key=periods.__getitem__)
    return Calendar(items, periods, deleted, seconds)


def vevent_lines(text: str) -> list[list[str]]:
    """The unfolded content lines of each VEVENT of one item (the generator folds none)."""
    events, current = [], None
    for line in text.split("\r\n"):
        if line == "BEGIN:VEVENT":
            current = [line]
        elif current is not None:
            current.append(line)
            if line == "END:VEVENT":
                events.append(current)
                current = None
    return events


def feed_text(items: dict[str, str]) -> str:
    """One iCalendar file of every item's VEVENTs, the time zones once, as a feed host serves
    a calendar."""
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//calendar-booking bench//provider sync//EN",
        "CALSCALE:GREGORIAN",
        f"X-WR-CALNAME:{CONNECTION}",
    ]
    for tzid in sorted(VTIMEZONES):
        lines.extend(VTIMEZONES[tzid])
    for text in items.values():
        for event in vevent_lines(text):
            lines.extend(event)
    lines.append("END:VCALENDAR")
    return "\r\n".join(lines) + "\r\n"


# --- timing the phases -------------------------------------------------------------------------


@dataclass
class Phases:
    """Seconds one sync spent in the provider's read, of which in HTTP requests and in the
    items' function (and how many items went through it); the requests it made, where the
    bench records them on the app's side."""

    read: float = 0.0
    http: float = 0.0
    items: float = 0.0
    item_calls: int = 0
    requests: list[str] = field(default_factory=list)


@contextmanager
def wrapped(
    owner: Any,
    name: str,
    spent: Phases,
    into: str,
    *,
    count: str | None = None,
    record: Callable[[tuple, Any], str] | None = None,
) -> Iterator[None]:
    """``owner.name`` (a module's function, a class's method or an instance's) timed into
    ``spent.<into>``, counted into ``spent.<count>`` and its calls described by ``record``
    into ``spent.requests``, while the block runs: the bench's own instrument, the app is not
    changed."""
    own = vars(owner).get(name)  # a module's or class's own attribute; None: an instance's
    original = own if own is not None else getattr(owner, name)

    def timed_call(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            result = original(*args, **kwargs)
        finally:
            setattr(spent, into, getattr(spent, into) + time.perf_counter() - started)
            if count is not None:
                setattr(spent, count, getattr(spent, count) + 1)
        if record is not None:
            spent.requests.append(record(args, result))
        return result

    setattr(owner, name, timed_call)
    try:
        yield
    finally:
        if own is not None:
            setattr(owner, name, own)
        else:
            delattr(owner, name)  # the class's method again


@contextmanager
def phases(source: Source) -> Iterator[Phases]:
    spent = Phases()
    http_owner, http_name = source.http_function
    item_owner, item_name = source.item_function
    with (
        wrapped(provider_for(source.kind), "read", spent, "read"),
        wrapped(http_owner, http_name, spent, "http", record=source.record),
        wrapped(item_owner, item_name, spent, "items", count="item_calls"),
    ):
        yield spent


@dataclass
class Samples:
    total: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)
    http: list[float] = field(default_factory=list)
    items: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    item_calls: set[int] = field(default_factory=set)
    requests: set[str] = field(default_factory=set)  # the request sequences seen

    def add(self, total: float, spent: Phases, floor: float, requests: str) -> None:
        self.total.append(total)
        self.read.append(spent.read)
        self.http.append(spent.http)
        self.items.append(spent.items)
        self.floor.append(floor)
        self.item_calls.add(spent.item_calls)
        self.requests.add(requests)

    @property
    def other(self) -> list[float]:
        """The read without its requests and items: parsing, splitting, decoding, the token."""
        return [r - h - i for r, h, i in zip(self.read, self.http, self.items, strict=True)]

    @property
    def rest(self) -> list[float]:
        """The database and everything else: reading the connection, the differences and
        their writes, the commit."""
        return [t - r for t, r in zip(self.total, self.read, strict=True)]

    @property
    def above_floor(self) -> list[float]:
        """Each sync minus its own floor: the app's own cost."""
        return [t - f for t, f in zip(self.total, self.floor, strict=True)]


ROWS = (  # key, title, target in seconds
    ("full", "full sync (first: no items)", FULL_TARGET_S),
    ("unchanged", "nothing changed", UNCHANGED_TARGET_S),
    ("changed", "one event changed", CHANGED_TARGET_S),
    ("deleted", "one series deleted", None),
    ("restored", "that series back", None),
    ("plain", "no validators, unchanged", None),
)


# --- the providers' servers --------------------------------------------------------------------


@dataclass(frozen=True)
class Markers:
    """What the connection's calendar row kept from the last read: the floor of an incremental
    sync asks what the sync asks."""

    sync_token: str | None
    ctag: str | None


class Source:
    """One provider's server holding the bench's calendar, and what the bench does to it.
    ``serving`` starts the server and fills the calendar (untimed); ``floor`` makes a sync's
    requests without the app and checks their answer; ``received`` tells the requests a sync
    made."""

    kind: str
    label: str
    http_function: tuple[Any, str]  # where the provider makes its requests
    item_function: tuple[Any, str]  # where it turns one item into busy time
    record: Callable[[tuple, Any], str] | None = None  # describes a call of http_function
    full_requests: str  # a full sync's, as a regular expression
    expected_requests: dict[str, str]  # incremental rows: exactly these

    def __init__(self, calendar: Calendar) -> None:
        self.calendar = calendar

    def serving(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """The app's settings for this provider."""
        raise NotImplementedError

    def connection(self) -> dict[str, Any]:
        """The connection as the provisioning document describes it."""
        raise NotImplementedError

    def prepare(self, connection_id: int) -> None:
        """Anything the first timed sync should not pay for once (in the app's context)."""

    def item_count(self, deleted: bool = False) -> int:
        """How many items a sync keeps: the calendar's, or without the deleted series."""
        raise NotImplementedError

    def change(self, step: int) -> None:
        """``CHANGED_UID`` as ``changed_item(step)`` has it."""
        raise NotImplementedError

    def delete(self) -> None:
        raise NotImplementedError

    def restore(self) -> None:
        raise NotImplementedError

    def floor(self, row: str, markers: Markers) -> float:
        raise NotImplementedError

    def without_validators(self) -> AbstractContextManager[None] | None:
        """The calendar served with neither ``ETag`` nor ``Last-Modified`` while the block
        runs (feeds only; None: the provider has no such thing)."""
        return None

    def external_uid(self, uid: str) -> str:
        """The UID the connection's busy rows of the event ``uid`` carry."""
        return uid

    def expected_items(self, row: str) -> int:
        """How many items a sync of ``row`` puts through the items' function."""
        raise NotImplementedError

    def mark(self) -> int:
        """Where the server's record of requests is (0 where the app's side records them)."""
        return 0

    def received(self, since: int, spent: Phases) -> list[str]:
        """The requests a sync made, described."""
        return spent.requests

    def baseline(self) -> list[tuple[str, list[float]]]:
        """The server alone, no app: (title, seconds of each run)."""
        return []


class FeedSource(Source):
    kind = "ics"
    label = "Calendar feed (tests.feed_servers)"
    http_function = (feed_provider, "_get")
    item_function = (feed_provider, "ical_item")
    full_requests = r"GET 200"
    expected_requests = {
        "unchanged": "GET 304 (conditional)",
        "changed": "GET 200 (conditional)",
        "deleted": "GET 200 (conditional)",
        "restored": "GET 200 (conditional)",
        "plain": "GET 200",
    }
    path = "/calendar/secret-address/bench.ics"

    def __init__(self, calendar: Calendar) -> None:
        super().__init__(calendar)
        self.feed: Feed | None = None
        self.items = dict(calendar.items)

    @contextmanager
    def serving(self) -> Iterator[Feed]:
        with feed_server(self.path) as feed:
            self.feed = feed
            self.serve()
            yield feed

    def serve(self) -> None:
        self.feed.serve(feed_text(self.items))

    def config(self) -> dict[str, Any]:
        return {"CALDAV_ALLOW_PRIVATE": True}  # the feed is on loopback

    def connection(self) -> dict[str, Any]:
        return {"name": CONNECTION, "kind": "ics", "url": self.feed.url}

    def item_count(self, deleted: bool = False) -> int:
        return len(self.calendar.items) - deleted

    def change(self, step: int) -> None:
        self.items[CHANGED_UID] = changed_item(step)
        self.serve()

    def delete(self) -> None:
        del self.items[self.calendar.deleted_uid]
        self.serve()

    def restore(self) -> None:
        self.items[self.calendar.deleted_uid] = self.calendar.items[self.calendar.deleted_uid]
        self.serve()

    def get(self, conditions: dict[str, str]) -> tuple[int, bytes]:
        """The feed's GET on a new connection, as the app sends it."""
        conn = http.client.HTTPConnection("127.0.0.1", urlsplit(self.feed.url).port, timeout=60)
        headers = {"Accept": "text/calendar, */*;q=0.5", **conditions}
        try:
            conn.request("GET", self.path, headers=headers)
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        return response.status, body

    def floor(self, row: str, markers: Markers) -> float:
        conditions = {}
        if row != "full" and markers.sync_token:
            conditions["If-None-Match"] = markers.sync_token
        if row != "full" and markers.ctag:
            conditions["If-Modified-Since"] = markers.ctag
        started = time.perf_counter()
        status, _ = self.get(conditions)
        elapsed = time.perf_counter() - started
        if status != (304 if row == "unchanged" else 200):
            raise SystemExit(f"FAILED: the {row} floor's GET answered {status}")
        return elapsed

    @staticmethod
    def record(args: tuple, result: Any) -> str:
        """A call of the feed's ``_get(target, conditions, access, started)``: its status,
        and whether it was conditional. (Recorded on the app's side: the test server keeps
        its record only after it has answered, which may come after the sync has ended.)"""
        status, _, _ = result
        return f"GET {status}" + (" (conditional)" if args[1].get("If-None-Match") else "")

    @contextmanager
    def without_validators(self) -> Iterator[None]:
        self.feed.answer = "plain"
        self.serve()
        try:
            yield
        finally:
            self.feed.answer = 200
            self.serve()

    def expected_items(self, row: str) -> int:
        """Every event on a first read; after that only the new or changed one is expanded,
        the others are recognised by their text."""
        return {"full": self.item_count(), "changed": 1, "restored": 1}.get(row, 0)

    def baseline(self) -> list[tuple[str, list[float]]]:
        fetched = [timed(lambda: self.get({}))[0] for _ in range(BASELINE_RUNS)]
        etag, modified = self.feed.etag, self.feed.last_modified
        conditions = {"If-None-Match": etag, "If-Modified-Since": modified}
        not_modified = [timed(lambda: self.get(conditions))[0] for _ in range(BASELINE_RUNS)]
        _, body = self.get({})
        parse, _ = timed(lambda: icalendar.Calendar.from_ical(body.decode()))
        split, _ = timed(lambda: feed_provider._events_by_uid(feed_provider._split(body, "bench")))
        return [
            (f"GET of the whole feed, http.client ({len(body) / 1e6:.1f} MB)", fetched),
            ("the conditional GET answered 304", not_modified),
            ("icalendar's parse of the whole feed (no I/O)", [parse]),
            ("the feed split by UID as text (the app's _split + _events_by_uid)", [split]),
            (
                "busy_periods of the 2,000 events: parse + expand (no I/O)",
                [self.calendar.expand_seconds],
            ),
        ]


class ApiSource(Source):
    """A provider with a REST API and OAuth (Google, Microsoft), served by its loopback fake:
    the fake's control API makes the calendar; a round of its listing (in full, or since a
    token) is what a floor asks."""

    http_function = (ApiSession, "_send")
    query_names: tuple[str, ...]  # the query parameters that tell the fake's requests apart

    def __init__(self, calendar: Calendar) -> None:
        super().__init__(calendar)
        self.fake: Any = None
        self.ids: dict[str, str] = {}  # UID → the id of its event or series
        self.listed = 0  # events and instances a full round lists (not removed)
        self.access_token = ""

    def fill(self) -> None:
        """The calendar's events, made through the fake's control API."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        return self.fake.app_settings()  # its client is the bench's (CLIENT_ID, CLIENT_SECRET)

    def round(self, token: str | None) -> tuple[list[dict[str, Any]], str, float]:
        """A round of the listing on a new client, as the app asks it (in full, or since
        ``token``): its items, the token it ends with, the seconds it took."""
        raise NotImplementedError

    def removed(self, item: dict[str, Any]) -> bool:
        """Whether a round lists ``item`` as gone."""
        raise NotImplementedError

    @contextmanager
    def serving(self) -> Iterator[Any]:
        with self.fake:
            self.fake.add_account(EMAIL, time_zone=TIMEZONE)
            self.fill()
            self.access_token = self.fake.issue_access_token(EMAIL)
            items, _, _ = self.round(None)
            self.listed = sum(1 for item in items if not self.removed(item))
            yield self.fake

    def connection(self) -> dict[str, Any]:
        return {
            "name": CONNECTION,
            "kind": self.kind,
            "refreshToken": self.fake.issue_refresh_token(EMAIL),
            "writeBack": False,
        }

    def prepare(self, connection_id: int) -> None:
        """The refresh token is exchanged for an access token once: a periodic sync finds one
        (it lasts an hour; syncs come every 5 minutes)."""
        valid_access_token(connection_id, 10.0)

    def item_count(self, deleted: bool = False) -> int:
        return self.listed - (self.calendar.deleted_periods if deleted else 0)

    def expected_items(self, row: str) -> int:
        periods = self.calendar.deleted_periods
        return {"full": self.listed, "changed": 1, "restored": periods}.get(row, 0)

    def floor(self, row: str, markers: Markers) -> float:
        items, _, elapsed = self.round(None if row == "full" else markers.sync_token)
        removed = [item for item in items if self.removed(item)]
        changed = [item for item in items if not self.removed(item)]
        if row == "changed" and changed and changed[0]["id"] != self.ids[CHANGED_UID]:
            raise SystemExit(f"FAILED: the changed floor listed {changed[0]['id']}")
        series = self.calendar.deleted_periods
        expected = {
            "full": (self.listed, 0),
            "unchanged": (0, 0),
            "changed": (1, 0),
            "deleted": (0, series),
            "restored": (series, 0),
        }[row]
        if (len(changed), len(removed)) != expected:
            raise SystemExit(
                f"FAILED: the {row} floor's round listed {len(changed)} events and"
                f" {len(removed)} removed (expected {expected})"
            )
        return elapsed

    def mark(self) -> int:
        return len(self.fake.requests)

    def received(self, since: int, spent: Phases) -> list[str]:
        """From the fake's record (kept before it answers)."""
        with self.fake.lock:
            made = self.fake.requests[since:]
        described = []
        for r in made:
            asked = next((name for name in self.query_names if name in r.query), None)
            described.append(
                f"{r.method} {r.path.rsplit('/', 1)[-1]}" + (f" ({asked})" if asked else "")
            )
        return described

    def baseline(self) -> list[tuple[str, list[float]]]:
        full, token = [], ""
        for _ in range(BASELINE_RUNS):
            _, token, elapsed = self.round(None)
            full.append(elapsed)
        nothing = [self.round(token)[2] for _ in range(BASELINE_RUNS)]
        return [
            (f"a full round of the window, httpx ({self.listed:,} events and instances)", full),
            ("a round since its token, nothing changed", nothing),
        ]

    def pages(
        self, url: str, params: dict[str, str] | None, headers: dict[str, str], next_page: Any
    ) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
        """Every page of one round on a new client: its items, the last page, the seconds.
        ``next_page(page, params)`` gives the next (url, params), or None after the last."""
        headers = {"Authorization": f"Bearer {self.access_token}", **headers}
        items: list[dict[str, Any]] = []
        started = time.perf_counter()
        with httpx.Client(timeout=60, verify=floor_tls()) as client:
            while True:
                response = client.get(url, params=params, headers=headers)
                response.raise_for_status()
                page = response.json()
                items += page.get("items", page.get("value", []))
                following = next_page(page, params)
                if following is None:
                    break
                url, params = following
        return items, page, time.perf_counter() - started


class GoogleSource(ApiSource):
    kind = "google"
    label = "Google Calendar (tests.google_servers.FakeGoogle)"
    item_function = (google_provider, "_item")
    query_names = ("syncToken", "pageToken", "timeMin")
    full_requests = r"GET events \(timeMin\)(, GET events \(pageToken\)( ×\d+)?)?"
    expected_requests = dict.fromkeys(
        ("unchanged", "changed", "deleted", "restored"), "GET events (syncToken)"
    )

    def __init__(self, calendar: Calendar) -> None:
        super().__init__(calendar)
        self.fake = FakeGoogle(CLIENT_ID, CLIENT_SECRET)

    def fill(self) -> None:
        for uid, text in self.calendar.items.items():
            first, *overrides = google_events(uid, text)
            self.ids[uid] = self.fake.add_event(EMAIL, **first)
            for event in overrides:
                self.fake.add_event(EMAIL, **event)

    def change(self, step: int) -> None:
        (event,) = google_events(CHANGED_UID, changed_item(step))
        self.fake.update_event(EMAIL, self.ids[CHANGED_UID], start=event["start"], end=event["end"])

    def delete(self) -> None:
        self.fake.delete_event(EMAIL, self.ids[self.calendar.deleted_uid])

    def restore(self) -> None:
        uid = self.calendar.deleted_uid
        (event,) = google_events(uid, self.calendar.items[uid])
        self.ids[uid] = self.fake.add_event(EMAIL, **event)  # a deleted id cannot come back

    def round(self, token: str | None) -> tuple[list[dict[str, Any]], str, float]:
        """events.list's pages, as ``providers.google`` asks them."""
        url = f"{self.fake.calendar_api_url}/calendars/primary/events"
        asked = {"syncToken": token} if token else {"timeMin": rfc3339(WINDOW.start)}
        if not token:
            asked["timeMax"] = rfc3339(WINDOW.end)
        params = {**asked, "singleEvents": "true", "maxResults": str(google_provider.PAGE_SIZE)}

        def next_page(page: dict[str, Any], params: dict[str, str]) -> Any:
            if not page.get("nextPageToken"):
                return None
            return url, {**params, "pageToken": page["nextPageToken"]}

        items, last, elapsed = self.pages(url, params, {}, next_page)
        return items, last["nextSyncToken"], elapsed

    def removed(self, item: dict[str, Any]) -> bool:
        return item.get("status") == "cancelled"


class MicrosoftSource(ApiSource):
    kind = "microsoft"
    label = "Microsoft 365 (tests.microsoft_servers.FakeMicrosoft)"
    item_function = (microsoft_provider, "_item")
    query_names = ("$deltatoken", "$skiptoken", "startDateTime")
    full_requests = r"GET delta \(startDateTime\)(, GET delta \(\$skiptoken\)( ×\d+)?)?"
    expected_requests = dict.fromkeys(
        ("unchanged", "changed", "deleted", "restored"), "GET delta ($deltatoken)"
    )

    def __init__(self, calendar: Calendar) -> None:
        super().__init__(calendar)
        self.fake = FakeMicrosoft(CLIENT_ID, CLIENT_SECRET)
        self.calendar_id = ""
        self.ical_uids: dict[str, str] = {}  # UID → the iCalUId Graph gave its event

    def fill(self) -> None:
        self.calendar_id = next(c.id for c in self.fake.calendars.values() if c.is_default)
        for uid, text in self.calendar.items.items():
            self.add(uid, text)

    def add(self, uid: str, text: str) -> None:
        """One item as a person makes it in Outlook: the event or series, then the
        occurrences deleted (EXDATE, a cancelled override) or moved (an override) one by one."""
        item = graph_item(text)
        event_id = self.fake.add_event(self.calendar_id, **item.event)
        for key, moved in item.edits:
            occurrence = f"{event_id}_{key}"
            if moved is None:
                self.fake.delete_event(self.calendar_id, occurrence)
            else:
                zone_name = item.event["time_zone"]
                self.fake.update_event(self.calendar_id, occurrence, time_zone=zone_name, **moved)
        self.ids[uid] = event_id
        self.ical_uids[uid] = self.fake.event(self.calendar_id, event_id)["iCalUId"]

    def external_uid(self, uid: str) -> str:
        return self.ical_uids[uid]  # Graph chooses an event's iCalUId

    def change(self, step: int) -> None:
        event = graph_item(changed_item(step)).event
        self.fake.update_event(
            self.calendar_id,
            self.ids[CHANGED_UID],
            time_zone=event["time_zone"],
            start=event["start"],
            end=event["end"],
        )

    def delete(self) -> None:
        self.fake.delete_event(self.calendar_id, self.ids[self.calendar.deleted_uid])

    def restore(self) -> None:
        uid = self.calendar.deleted_uid
        self.add(uid, self.calendar.items[uid])

    def round(self, token: str | None) -> tuple[list[dict[str, Any]], str, float]:
        """calendarView/delta's pages, as ``providers.microsoft`` asks them: from the window,
        or the delta link kept (the sync token)."""
        url = token or f"{self.fake.graph_url}/me/calendarView/delta"
        params = None
        if not token:
            params = {"startDateTime": rfc3339(WINDOW.start), "endDateTime": rfc3339(WINDOW.end)}

        def next_page(page: dict[str, Any], params: Any) -> Any:
            link = page.get("@odata.nextLink")
            return (link, None) if link else None

        headers = dict(microsoft_provider.ANSWER_IN_UTC)
        items, last, elapsed = self.pages(url, params, headers, next_page)
        return items, last["@odata.deltaLink"], elapsed

    def removed(self, item: dict[str, Any]) -> bool:
        return "@removed" in item


WINDOWS_ZONES = {
    "America/New_York": "Eastern Standard Time",
    "Europe/Berlin": "W. Europe Standard Time",
}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass(frozen=True)
class GraphItem:
    """One item as ``FakeMicrosoft`` takes it: ``add_event``'s arguments, then its occurrences
    changed one by one, by date (``YYYYMMDD``, the series' wall time): None deleted, else the
    new start and end."""

    event: dict[str, Any]
    edits: list[tuple[str, dict[str, Any] | None]]


def graph_item(text: str) -> GraphItem:
    """An item of the generator as a person would make it in Outlook: the zone by its Windows
    name, the RRULE as a patterned recurrence (every rule of the generator is daily or
    weekly), each EXDATE and cancelled override a deleted occurrence, each other override a
    moved one (``Parsed``)."""
    item = parsed(text)
    master = item.master
    start, end = master.decoded("DTSTART"), master.decoded("DTEND")
    tzid = master["DTSTART"].params.get("TZID") if isinstance(start, datetime) else None
    zone_name = WINDOWS_ZONES[str(tzid)] if tzid else "UTC"
    series_zone = zone(str(tzid)) if tzid else UTC
    free = str(master.get("TRANSP", "")).upper() == "TRANSPARENT"
    event: dict[str, Any] = {
        "start": start,
        "end": end,
        "time_zone": zone_name,
        "subject": str(master.get("SUMMARY", "Busy")),
        "show_as": "free" if free else "busy",
        "is_cancelled": cancelled(master),
    }

    def key(value: datetime | date) -> str:
        day = value.astimezone(series_zone).date() if isinstance(value, datetime) else value
        return f"{day:%Y%m%d}"

    edits: list[tuple[str, dict[str, Any] | None]] = []
    if "RRULE" in master:
        rule = master["RRULE"]
        first_day = start.astimezone(series_zone).date() if isinstance(start, datetime) else start
        days = tuple(
            WEEKDAYS[["MO", "TU", "WE", "TH", "FR", "SA", "SU"].index(d)]
            for d in rule.get("BYDAY", [])
        )
        daily = rule["FREQ"][0] == "DAILY" and not days
        until = rule.get("UNTIL")
        count = rule.get("COUNT")
        event["recurrence"] = patterned_recurrence(
            "daily" if daily else "weekly",
            first_day,
            days_of_week=() if daily else days or (WEEKDAYS[first_day.weekday()],),
            interval=rule.get("INTERVAL", [1])[0],
            end_date=until[0].astimezone(UTC).date() if until else None,
            occurrences=count[0] if count else None,
            time_zone=zone_name,
        )
        edits += [(key(value), None) for value in exdates(master)]
        for component, _ in item.overrides:
            moved = {"start": component.decoded("DTSTART"), "end": component.decoded("DTEND")}
            edits.append(
                (key(component.decoded("RECURRENCE-ID")), None if cancelled(component) else moved)
            )
    return GraphItem(event, edits)


def exdates(component: Any) -> list[datetime | date]:
    found = component.get("EXDATE")
    if found is None:
        return []
    return [
        value.dt
        for listed in (found if isinstance(found, list) else [found])
        for value in listed.dts
    ]


@cache
def floor_tls() -> ssl.SSLContext:
    """One TLS context for every floor's client: building one (what ``httpx.Client()`` does
    by default, loading certifi's certificates) takes about 16 ms of CPU, which is no part
    of a request's necessary cost, even on plain HTTP."""
    return ssl.create_default_context()


def rfc3339(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Parsed:
    """One item of the generator as a provider with its own event model takes it: the event
    or series, its RRULE and EXDATE lines as written, and its overrides with their
    RECURRENCE-ID line. An override whose RECURRENCE-ID is no occurrence of its series is
    left out: such a provider has no such instance to change. (The generator makes one,
    series-0193: a UTC series at 17:30Z whose override names 16:30Z, New York's wall time after
    the change of time; its moved time is an occurrence's, which the iCalendar expansion
    counts once, so the busy time is the same.)"""

    master: Any
    recurrence: list[str]
    overrides: list[tuple[Any, str]]


def parsed(text: str) -> Parsed:
    components = icalendar.Calendar.from_ical(text).walk("VEVENT")
    raw = vevent_lines(text)
    master = components[0]
    recurrence = [line for line in raw[0] if line.startswith(("RRULE:", "EXDATE:", "EXDATE;"))]
    overrides = []
    if len(components) > 1:
        start = master.decoded("DTSTART")
        first = start if isinstance(start, datetime) else datetime.combine(start, clock())
        occurrences = rrulestr("\n".join(recurrence), dtstart=first, forceset=True)
        for component, lines in zip(components[1:], raw[1:], strict=True):
            if component.decoded("RECURRENCE-ID") in occurrences:
                (line,) = [line for line in lines if line.startswith("RECURRENCE-ID")]
                overrides.append((component, line))
    return Parsed(master, recurrence, overrides)


def cancelled(component: Any) -> bool:
    return str(component.get("STATUS", "")).upper() == "CANCELLED"


def google_events(uid: str, text: str) -> list[dict[str, Any]]:
    """One item's events as ``FakeGoogle.add_event`` takes them (see the module docstring):
    the event or series, then its overrides as events of their own (``Parsed``)."""
    item = parsed(text)
    recurrence, events = list(item.recurrence), []
    for component, recurrence_id in item.overrides:
        recurrence.append("EXDATE" + recurrence_id.removeprefix("RECURRENCE-ID"))
        if not cancelled(component):
            events.append(google_event(uid, component, []))
    return [google_event(uid, item.master, recurrence), *events]


def google_event(uid: str, component: Any, recurrence: list[str]) -> dict[str, Any]:
    start, end = component.decoded("DTSTART"), component.decoded("DTEND")
    event: dict[str, Any] = {
        "start": start,
        "end": end,
        "summary": str(component.get("SUMMARY", "Busy")),
        "iCalUID": uid,
    }
    if isinstance(start, datetime):
        tzid = component["DTSTART"].params.get("TZID")
        event["time_zone"] = str(tzid) if tzid else "UTC"
    if recurrence:
        event["recurrence"] = recurrence
    if str(component.get("TRANSP", "")).upper() == "TRANSPARENT":
        event["transparency"] = "transparent"
    if cancelled(component):
        event["status"] = "cancelled"
    return event


# --- the database side -----------------------------------------------------------------------


class Bench:
    """The runs against one provider's server, on one database."""

    def __init__(self, source: Source, step: Iterator[int]) -> None:
        self.source, self.step = source, step
        self.calendar = source.calendar
        self.rows: dict[str, Samples] = {key: Samples() for key, _, _ in ROWS}
        self.connection_id = 0

    def run(self, url: str) -> dict[str, Samples]:
        created = migrate_and_provision(url, tenant_document(self.source.connection()))
        self.connection_id = created[0]["calendarConnections"][CONNECTION]
        config = {"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": SECRET_KEY}
        app = create_app({**config, **self.source.config()})
        with app.app_context():
            self.source.prepare(self.connection_id)
            self.syncs()
            db.session.remove()
            db.engine.dispose()
        return {key: samples for key, samples in self.rows.items() if samples.total}

    def syncs(self) -> None:
        busy, items = self.calendar.busy, self.source.item_count()
        for n in range(FULL_RUNS):
            self.forget()
            result = self.sync("full")
            check(result, "synced", f"full sync {n}", added=busy, removed=0, busy_count=busy)
            self.check_rows(busy, items)
        for n in range(UNCHANGED_WARMUP + UNCHANGED_RUNS):
            result = self.sync("unchanged" if n >= UNCHANGED_WARMUP else None)
            check(result, "unchanged", f"unchanged sync {n}", added=0, busy_count=busy)
        for n in range(CHANGED_RUNS):
            before = self.row_ids()
            step = next(self.step)
            self.source.change(step)
            result = self.sync("changed")
            one = {"added": 1, "removed": 1, "busy_count": busy}
            check(result, "synced", f"changed sync {n}", **one)
            self.check_touched(before, removed=1, added=1)
            self.check_item(CHANGED_UID, changed_item(step))
        uid, periods = self.calendar.deleted_uid, self.calendar.deleted_periods
        for n in range(DELETED_RUNS):
            before = self.row_ids()
            self.source.delete()
            result = self.sync("deleted")
            fewer = {"added": 0, "removed": periods, "busy_count": busy - periods}
            check(result, "synced", f"sync after a deletion {n}", **fewer)
            self.check_rows(busy - periods, self.source.item_count(deleted=True))
            self.check_touched(before, removed=periods, added=0)
            before = self.row_ids()
            self.source.restore()
            result = self.sync("restored")
            more = {"added": periods, "removed": 0, "busy_count": busy}
            check(result, "synced", f"sync after the series came back {n}", **more)
            self.check_touched(before, removed=0, added=periods)
            self.check_item(uid, self.calendar.items[uid])
        plain = self.source.without_validators()
        if plain is not None:
            with plain:
                self.sync(None)  # the first answer without validators: none are kept
                for n in range(PLAIN_RUNS):
                    result = self.sync("plain")
                    check(result, "synced", f"sync without validators {n}", added=0, removed=0)
                    self.check_rows(busy, items, markers=False)
            self.sync(None)  # the validators again
        self.check_rows(busy, items)

    def sync(self, row: str | None) -> SyncResult:
        """One sync and its commit, timed into ``row`` (None: a warm-up), with its floor
        measured right before it or, every other run, right after it."""
        samples = self.rows[row] if row is not None else None
        markers = self.markers()
        floor_first = samples is not None and len(samples.total) % 2 == 0
        if floor_first:
            below = self.source.floor(row, markers)
        since = self.source.mark()
        with phases(self.source) as spent:
            started = time.perf_counter()
            result = sync_connection(self.connection_id, now=NOW)
            db.session.commit()
            elapsed = time.perf_counter() - started
        made = requests_text(self.source.received(since, spent))
        if samples is not None and not floor_first:
            below = self.source.floor(row, markers)
        if result.skipped:
            raise SystemExit(f"FAILED: {row}: {result.skipped} events skipped ({result.error})")
        if samples is None:
            return result
        expected = self.source.expected_requests.get(row)
        if expected is not None and made != expected:
            raise SystemExit(f"FAILED: {row}: the server received {made} (expected {expected})")
        if row == "full" and not re.fullmatch(self.source.full_requests, made):
            raise SystemExit(f"FAILED: {row}: the server received {made}")
        if spent.item_calls != self.source.expected_items(row):
            raise SystemExit(
                f"FAILED: {row}: {spent.item_calls} items read one by one, not"
                f" {self.source.expected_items(row)}"
            )
        samples.add(elapsed, spent, below, made)
        return result

    def markers(self) -> Markers:
        row = db.session.execute(
            select(ConnectedCalendar.sync_token, ConnectedCalendar.ctag).where(
                ConnectedCalendar.calendar_connection_id == self.connection_id
            )
        ).first()
        db.session.commit()
        return Markers(*row) if row else Markers(None, None)

    def forget(self) -> None:
        """The next sync is a first one: no items, no busy time, no markers."""
        mine = ConnectedCalendar.calendar_connection_id == self.connection_id
        calendars = select(ConnectedCalendar.id).where(mine)
        db.session.execute(
            delete(BlockedTime).where(BlockedTime.calendar_connection_id == self.connection_id)
        )
        db.session.execute(
            delete(CalendarItem).where(CalendarItem.connected_calendar_id.in_(calendars))
        )
        for row in db.session.scalars(select(ConnectedCalendar).where(mine)):
            row.forget_sync_state()
        db.session.commit()

    def row_ids(self) -> set[tuple]:
        """The connection's busy rows as (id, start, end, UID)."""
        rows = set(
            db.session.execute(
                select(
                    BlockedTime.id,
                    BlockedTime.start_at,
                    BlockedTime.end_at,
                    BlockedTime.external_uid,
                ).where(BlockedTime.calendar_connection_id == self.connection_id)
            )
        )
        db.session.commit()
        return rows

    def check_touched(self, before: set[tuple], *, removed: int, added: int) -> None:
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
                BlockedTime.external_uid == self.source.external_uid(uid),
            )
            .order_by(BlockedTime.start_at)
        ).all()
        db.session.commit()
        if [tuple(r) for r in rows] != sorted((p.start, p.end) for p in periods):
            raise SystemExit(f"FAILED: {uid}'s rows are {rows}, its periods {periods}")

    def check_rows(self, busy: int, items: int, *, markers: bool = True) -> None:
        """Busy periods, items (each period on one) and the calendar row as expected (with
        the markers of the last read, unless the server gave none)."""
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
        if (
            bool(row.sync_token) != markers
            or row.synced_until != WINDOW.end
            or row.synced_timezone != TIMEZONE
        ):
            raise SystemExit(
                f"FAILED: calendar row {row.remote_id} token {row.sync_token!r} ctag"
                f" {row.ctag!r} until {row.synced_until} in {row.synced_timezone}"
            )
        db.session.commit()


# --- report ----------------------------------------------------------------------------------


def report_baseline(lines: list[tuple[str, list[float]]]) -> None:
    print(f"  The server alone, no app, no database (medians of {BASELINE_RUNS} or 1 run):")
    for title, values in lines:
        print(f"    {title:<74} {ms(median(values)):>9}")


def report_database(label: str, rows: dict[str, Samples]) -> None:
    print(f"  {label}: sync_connection + commit")
    print(
        f"    {'':<28} {'runs':>4} {'median':>9} {'min':>9} {'max':>9} {'http':>9}"
        f" {'items':>9} {'other':>9} {'db+rest':>9} {'floor':>9} {'above':>9}"
    )
    for key, title, target in ROWS:
        samples = rows.get(key)
        if samples is None:
            continue
        middle = median(samples.total)
        line = (
            f"    {title:<28} {len(samples.total):>4} {ms(middle):>9}"
            f" {ms(min(samples.total)):>9} {ms(max(samples.total)):>9}"
        )
        columns = (samples.http, samples.items, samples.other, samples.rest, samples.floor)
        for phase in (*columns, samples.above_floor):
            line += f" {ms(median(phase)):>9}"
        if target is not None:
            line += f"  < {target:g} s: {'met' if middle < target else 'MISSED'}"
        print(line)


def report_requests(rows: dict[str, Samples]) -> None:
    print("  What each sync asked the server, and the items that went through the items' function:")
    for key, title, _ in ROWS:
        if key in rows:
            calls = ", ".join(str(n) for n in sorted(rows[key].item_calls))
            print(f"    {title:<28} {' | '.join(sorted(rows[key].requests))}; items: {calls}")


SOURCES: dict[str, Callable[[Calendar], Source]] = {
    "feed": FeedSource,
    "google": GoogleSource,
    "microsoft": MicrosoftSource,
}


def run_source(name: str, calendar: Calendar, pg_version: str) -> None:
    source = SOURCES[name](calendar)
    step = iter(range(1, 10_000))
    started = time.monotonic()
    with source.serving():
        filled = time.monotonic() - started
        print()
        print(
            f"{source.label}: {len(calendar.items):,} events, ready in {filled:.1f} s; busy"
            f" periods in the window: {calendar.busy:,}; items kept: {source.item_count():,};"
            f" the series deleted: {calendar.deleted_uid} ({calendar.deleted_periods} periods)"
        )
        report_baseline(source.baseline())
        with postgres_database() as url:
            rows = Bench(source, step).run(url)
        print()
        report_database(f"PostgreSQL {pg_version}", rows)
        print()
        report_requests(rows)
    print(
        f"\n  {source.label}: {time.monotonic() - started:.0f} s; load average now"
        f" {os.getloadavg()[0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", choices=("feed", "google", "microsoft", "all"), default="all")
    chosen = parser.parse_args().provider
    names = ("feed", "google", "microsoft") if chosen == "all" else (chosen,)
    started = time.monotonic()
    logging.getLogger("app.services.integrations.calendars.sync").setLevel(logging.WARNING)
    pg_version = postgres_version()
    print("Provider sync benchmark: one calendar of 2,000 events, synced in full and again")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()}"
        f" {platform.python_version()}, {platform.platform()}"
    )
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    print(f"         PostgreSQL {pg_version}")
    print(
        f"         icalendar {version('icalendar')}, recurring-ical-events"
        f" {version('recurring-ical-events')}, httpx {version('httpx')}, urllib3"
        f" {version('urllib3')}"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    print(
        f"events:  {SINGLE:,} single + {RECURRING:,} recurring series; window"
        f" {WINDOW.start:%Y-%m-%d %H:%MZ} – {WINDOW.end:%Y-%m-%d %H:%MZ} ({TIMEZONE},"
        f" {HORIZON_DAYS}-day horizon)"
    )
    calendar = the_calendar()
    for name in names:
        run_source(name, calendar, pg_version)
    print()
    for line in (
        "http = the provider's requests (the server's time included); items = the function that",
        "turns one item into busy time (the feed: parse + expand one event; the APIs: one event's",
        "JSON); other = the rest of the read (the feed's parse and split of the whole file; the",
        "httpx client, the access token, decoding JSON); db+rest = the remainder (reading the",
        "connection, the differences and their writes, the commit); floor = the same HTTP",
        "requests with plain http.client or httpx, measured beside each sync; above = the sync",
        "minus its floor, the app's own cost. Medians of each column on their own.",
    ):
        print(f"  {line}")
    print()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
