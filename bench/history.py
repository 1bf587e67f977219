"""Benchmark: does the cost of availability and of a booking create stay flat as one
calendar's history grows?

Run from the project root (a few minutes; PostgreSQL at ``TEST_POSTGRES_URL``)::

    .venv/bin/python -m bench.history

The calendar (America/New_York, Mon–Fri 09:00–17:00 and Sat–Sun 10:00–14:00, a 30-minute event
type on a 30-minute grid, no buffers, no notice, a 10-year horizon) gets a past: it is grown to
0, 100,000 and 300,000 past bookings, plus a sixth as many past blocked times (0, 16,666,
50,000). Past bookings are 15 minutes long, one every 20 minutes back from yesterday (300,000
reach about 11 years back); 40 % are still ``confirmed`` (active: they are in the exclusion
constraint's GiST index), the rest ``completed``, ``cancelled`` or ``no_show``. Each has one
attendee, ``client<n mod 50,000>@history.test`` (returning clients). Blocked times are 30, 60 or
90 minutes, one every 2 hours back from yesterday. Rows are inserted in bulk (``INSERT … SELECT
generate_series``, then ``VACUUM ANALYZE`` as autovacuum would do soon after).

A twin calendar, configured alike, never gets a past. At each size a real gunicorn (``wsgi:app``, 2
sync workers, started once) is sent, sequentially, 20 warm-up then 80 timed rounds of:

* ``GET /availability`` on each calendar: the 31 days from the Monday after next (an empty
  future: the answer must be the same on both calendars and at every size, which is checked);
* ``POST …/bookings`` on each calendar: one 30-minute slot in working hours well after that
  window, a unique ``idempotencyKey`` and a fresh attendee email (never conflicting; every
  answer must be 201);
* the floor: ``GET /bookings?limit=1`` on the twin (framework and connection cost);
* every 5th round (they were slow enough before to dominate the run), on the grown calendar:
  ``GET /bookings?email=…&limit=5`` for a returning client (the count of matches is checked
  against the rows inserted), and ``GET /bookings?limit=1``, whose ``total`` counts every
  booking of the calendar, so this one grows with the history by definition.

Printed: medians and p95s per size, each availability and create median's ratio to the empty
size's, and to the twin's in the same rounds. This VM's speed drifts (up to 2× minute to
minute): the first ratio takes the drift between sizes (the floor's own ratio shows how much),
the second does not, as both calendars are measured turn by turn.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg

from app.models import Permission
from app.models.types import utcnow
from app.scheduling.timezones import local_to_utc, zone
from bench.availability import (
    API_KEY_HEADER,
    Timing,
    gunicorn,
    next_monday,
    postgres_database,
    postgres_version,
)
from bench.booking_writes import migrate_and_provision

SIZES = (0, 100_000, 300_000)
BLOCKED_PER_BOOKINGS = 6  # a sixth as many past blocked times as past bookings
CLIENTS = 50_000  # distinct attendee emails of the past
PAST_STEP = timedelta(minutes=20)
PAST_MINUTES = 15
BLOCKED_STEP = timedelta(hours=2)
TIMEZONE = "America/New_York"
SLOT_MINUTES = 30
HORIZON_DAYS = 3650
WINDOW_DAYS = 31
WARMUP, RUNS = 20, 80
LIST_EVERY = 5
SAMPLE_CLIENT = 7  # the returning client the email filter looks for
SAMPLE_EMAIL = f"Client{SAMPLE_CLIENT}@History.test"  # mixed case: the filter ignores case
TARGET_RATIO = 1.1
LIMIT_1 = "/v1/api/calendar/bookings?limit=1"


# --- the calendars ---------------------------------------------------------------------------


def tenant_document() -> dict[str, Any]:
    weekday, weekend = [["09:00", "17:00"]], [["10:00", "14:00"]]
    hours = {d: weekday for d in ("mon", "tue", "wed", "thu", "fri")}
    hours |= {"sat": weekend, "sun": weekend}

    def sub_account(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "timezone": TIMEZONE,
            "settings": {"minimumNoticeMinutes": 0, "bookingHorizonDays": HORIZON_DAYS},
            "availabilityProfiles": [{"name": "Office", "default": True, "weeklyHours": hours}],
            "eventTypes": [
                {
                    "name": "Visit",
                    "duration": SLOT_MINUTES,
                    "slotInterval": SLOT_MINUTES,
                    "availabilityProfile": "Office",
                }
            ],
            "apiKeys": [{"name": "bench", "permissions": [p.value for p in Permission]}],
        }

    return {
        "agencies": [
            {
                "name": "Bench agency",
                "owner": {"email": "owner@history.test", "password": "s3cret-pass"},
                "subAccounts": [sub_account("History clinic"), sub_account("Twin clinic")],
            }
        ]
    }


@dataclass(frozen=True)
class Calendar:
    sub_account_id: int
    event_type_id: int
    api_key: str


@dataclass(frozen=True)
class Setup:
    grown: Calendar
    twin: Calendar  # configured alike, never given a past


def prepare(url: str) -> Setup:
    created = migrate_and_provision(url, tenant_document())
    grown, twin = (
        Calendar(s["id"], s["eventTypes"]["Visit"], s["apiKeys"]["bench"]) for s in created
    )
    return Setup(grown, twin)


# --- the past --------------------------------------------------------------------------------


def history_anchor() -> datetime:
    """Yesterday 00:00 UTC: every past row ends before it."""
    return datetime.combine(utcnow().date() - timedelta(days=1), clock(0), UTC)


# Past booking n's status: 40 % still confirmed (active), the rest completed, cancelled or
# no_show (a literal % is %% for psycopg's placeholders).
_STATUS_SQL = (
    "CASE WHEN n %% 10 < 4 THEN 'confirmed' WHEN n %% 10 < 8 THEN 'completed'"
    " WHEN n %% 10 = 8 THEN 'cancelled' ELSE 'no_show' END"
)


def grow_postgres(url: str, setup: Setup, done: int, target: int) -> None:
    """Past bookings ``done`` … ``target - 1`` (and their attendees and blocked times)."""
    params = {
        "sub": setup.grown.sub_account_id,
        "et": setup.grown.event_type_id,
        "anchor": history_anchor(),
        "step": PAST_STEP,
        "length": timedelta(minutes=PAST_MINUTES),
        "bstep": BLOCKED_STEP,
        "lo": done,
        "hi": target - 1,
        "blo": done // BLOCKED_PER_BOOKINGS,
        "bhi": target // BLOCKED_PER_BOOKINGS - 1,
        "clients": CLIENTS,
        "tz": TIMEZONE,
    }
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(
                f"""
                INSERT INTO bookings (uid, sub_account_id, event_type_id, status, title, timezone,
                    metadata, start_at, end_at, occupied_start, occupied_end, created_at,
                    updated_at)
                SELECT 'hist-' || n, %(sub)s, %(et)s, {_STATUS_SQL},
                    'Visit with client' || (n %% %(clients)s), %(tz)s, '{{}}',
                    s, s + %(length)s, s, s + %(length)s, s - interval '7 days', s
                FROM generate_series(%(lo)s::int, %(hi)s::int) AS n,
                    LATERAL (SELECT %(anchor)s::timestamptz - (n + 1) * %(step)s::interval) AS t(s)
                """,
                params,
            )
            conn.execute(
                """
                INSERT INTO attendees (booking_id, email, name, timezone, is_organizer,
                    created_at, updated_at, link_key)
                SELECT b.id, 'client' || (n %% %(clients)s) || '@history.test',
                    'client' || (n %% %(clients)s), %(tz)s, false, b.created_at, b.created_at,
                    'hist-' || n
                FROM generate_series(%(lo)s::int, %(hi)s::int) AS n
                JOIN bookings b ON b.uid = 'hist-' || n
                """,
                params,
            )
            conn.execute(
                """
                INSERT INTO blocked_times (sub_account_id, start_at, end_at, reason, source,
                    created_at)
                SELECT %(sub)s, s, s + (30 * (1 + k %% 3)) * interval '1 minute', 'Closed',
                    'manual', s - interval '30 days'
                FROM generate_series(%(blo)s::int, %(bhi)s::int) AS k,
                    LATERAL (SELECT %(anchor)s::timestamptz - (k + 1) * %(bstep)s::interval)
                        AS t(s)
                """,
                params,
            )
        conn.execute("VACUUM ANALYZE bookings, attendees, blocked_times")


def sample_client_bookings(size: int) -> int:
    """Past bookings of ``SAMPLE_EMAIL`` among the first ``size``."""
    return len(range(SAMPLE_CLIENT, size, CLIENTS))


# --- the requests ----------------------------------------------------------------------------


class FutureSlots:
    """30-minute weekday slots in working hours, each handed out once, starting a week after
    the availability window (so the window's answer never changes)."""

    def __init__(self, first_day: date) -> None:
        self.slots = self._slots(first_day)

    @staticmethod
    def _slots(day: date) -> Iterator[datetime]:
        tz = zone(TIMEZONE)
        while True:
            if day.weekday() < 5:
                for minutes in range(9 * 60, 17 * 60, SLOT_MINUTES):
                    yield local_to_utc(day, clock(minutes // 60, minutes % 60), tz)
            day += timedelta(days=1)

    def body(self) -> bytes:
        start = next(self.slots)
        end = start + timedelta(minutes=SLOT_MINUTES)
        return json.dumps(
            {
                "startTime": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "endTime": end.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "attendees": [{"email": f"new-{uuid.uuid4().hex[:12]}@history.test"}],
                "idempotencyKey": uuid.uuid4().hex,
            }
        ).encode()


@dataclass
class Samples:
    availability: list[float] = field(default_factory=list)
    availability_twin: list[float] = field(default_factory=list)
    create: list[float] = field(default_factory=list)
    create_twin: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    email: list[float] = field(default_factory=list)
    full_list: list[float] = field(default_factory=list)


class Client:
    def __init__(self, port: int, setup: Setup, first_day: date) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.setup = setup
        creates_from = first_day + timedelta(days=WINDOW_DAYS + 7)
        self.slots = {id(c): FutureSlots(creates_from) for c in (setup.grown, setup.twin)}
        self.window = {"startDate": first_day.isoformat()}
        self.window["endDate"] = (first_day + timedelta(days=WINDOW_DAYS - 1)).isoformat()
        self.email_list = "/v1/api/calendar/bookings?" + urlencode(
            {"email": SAMPLE_EMAIL, "limit": 5}
        )
        self.availability_answer: bytes | None = None

    def send(
        self, method: str, path: str, key: str, body: bytes | None = None, expect: int = 200
    ) -> tuple[float, bytes]:
        headers = {API_KEY_HEADER: key, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        started = time.perf_counter()
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        answer = response.read()
        elapsed = time.perf_counter() - started
        if response.status != expect:
            raise SystemExit(f"FAILED: {method} {path}: {response.status} {answer[:300]!r}")
        return elapsed, answer

    def availability(self, calendar: Calendar) -> float:
        """The answer must be the same on both calendars and at every size."""
        query = urlencode({**self.window, "eventTypeId": calendar.event_type_id})
        path = f"/v1/api/calendar/availability?{query}"
        elapsed, answer = self.send("GET", path, calendar.api_key)
        if self.availability_answer is None:
            self.availability_answer = answer
        elif answer != self.availability_answer:
            raise SystemExit("FAILED: the availability answer differs (history or calendar)")
        return elapsed

    def create(self, calendar: Calendar) -> float:
        path = f"/v1/api/calendar/event-types/{calendar.event_type_id}/bookings"
        body = self.slots[id(calendar)].body()
        return self.send("POST", path, calendar.api_key, body, 201)[0]

    def round(self, n: int, size: int, samples: Samples) -> None:
        grown, twin = self.setup.grown, self.setup.twin
        samples.availability.append(self.availability(grown))
        samples.availability_twin.append(self.availability(twin))
        samples.create.append(self.create(grown))
        samples.create_twin.append(self.create(twin))
        samples.floor.append(self.send("GET", LIMIT_1, twin.api_key)[0])
        if n % LIST_EVERY:
            return
        elapsed, answer = self.send("GET", self.email_list, grown.api_key)
        total, expected = json.loads(answer)["total"], sample_client_bookings(size)
        if total != expected:
            raise SystemExit(f"FAILED: the email filter found {total} bookings, not {expected}")
        samples.email.append(elapsed)
        samples.full_list.append(self.send("GET", LIMIT_1, grown.api_key)[0])

    def close(self) -> None:
        self.conn.close()


def measure(client: Client, size: int) -> Samples:
    warm, timed = Samples(), Samples()
    for n in range(WARMUP):
        client.round(n, size, warm)
    for n in range(RUNS):
        client.round(n, size, timed)
    return timed


# --- report ----------------------------------------------------------------------------------


def report(rows: list[tuple[int, Samples]]) -> None:
    """Availability and create: median, p95, ratio to the empty size's median, ratio to the
    twin's median in the same rounds. The others: median."""
    print(
        f"    {'past':>9}  {'past':>7}  {'availability (ms)':^29}  {'POST create (ms)':^29}"
        f"  {'floor':>6}  {'email':>6}  {'list':>6}"
    )
    print(
        f"    {'bookings':>9}  {'blocked':>7}"
        + "  median    p95  ×size 0  ×twin" * 2
        + f"  {'median':>6}  {'median':>6}  {'median':>6}"
    )
    base = rows[0][1]

    def median(samples: Samples, attr: str) -> float:
        return Timing(getattr(samples, attr)).median_ms

    for size, samples in rows:
        line = f"    {size:>9,}  {size // BLOCKED_PER_BOOKINGS:>7,}"
        for attr in ("availability", "create"):
            timing = Timing(getattr(samples, attr))
            line += (
                f"  {timing.median_ms:6.1f} {timing.p95_ms:6.1f}"
                f"  {timing.median_ms / median(base, attr):6.2f}×"
                f" {timing.median_ms / median(samples, attr + '_twin'):5.2f}×"
            )
        for attr in ("floor", "email", "full_list"):
            line += f"  {median(samples, attr):6.1f}"
        print(line)
    last = rows[-1][1]
    for attr, title in (("availability", "availability"), ("create", "POST create")):
        to_empty = median(last, attr) / median(base, attr)
        to_twin = median(last, attr) / median(last, attr + "_twin")
        # Judged on the twin: the ratio to the empty size also holds the drift between sizes.
        verdict = "met" if to_twin <= TARGET_RATIO else "MISSED"
        print(
            f"    {title} at {SIZES[-1]:,}: {to_twin:.2f}× the twin's median in the same rounds"
            f" (target ≤ {TARGET_RATIO}×: {verdict}); {to_empty:.2f}× the empty size's, with"
            f" the floor at {median(last, 'floor') / median(base, 'floor'):.2f}× its own"
        )


def run_sizes(label: str, url: str, log_dir: Path) -> None:
    print(f"  {label}")
    setup = prepare(url)
    today = utcnow().astimezone(zone(TIMEZONE)).date()
    first_day = next_monday(today) + timedelta(days=7)
    rows: list[tuple[int, Samples]] = []
    done = 0
    with gunicorn(url, log_dir / "gunicorn.log") as port:
        client = Client(port, setup, first_day)
        for size in SIZES:
            started = time.monotonic()
            grow_postgres(url, setup, done, size)
            done = size
            grown_in = time.monotonic() - started
            started = time.monotonic()
            rows.append((size, measure(client, size)))
            print(
                f"    grown to {size:,} past bookings in {grown_in:.1f} s,"
                f" measured in {time.monotonic() - started:.1f} s"
            )
        client.close()
    report(rows)


def main() -> None:
    started = time.monotonic()
    pg_version = postgres_version()
    print("History benchmark: one calendar's past grows; does the present get slower?")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()}"
        f" {platform.python_version()}, {platform.platform()}"
    )
    print(f"         PostgreSQL {pg_version or 'unreachable'}")
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    print(
        f"sizes:   {', '.join(f'{s:,}' for s in SIZES)} past bookings (+ a sixth as many past"
        f" blocked times); {WARMUP} warm-up + {RUNS} timed rounds per size, gunicorn 2 sync"
        " workers"
    )
    print(
        "rounds:  availability (31 days) and POST create on the grown calendar and on its twin"
        " (never grown), floor = GET bookings?limit=1 of the twin;"
    )
    print(
        f"         every {LIST_EVERY}th round on the grown calendar GET bookings?email=…&limit=5"
        " and GET bookings?limit=1 (its total counts the whole history)"
    )
    print()
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    with tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp, postgres_database() as url:
        run_sizes(f"PostgreSQL {pg_version}", url, Path(tmp))
    print()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
