"""Benchmark of the availability engine and of GET /v1/api/calendar/availability.

Run from the project root (about 25 seconds; needs the venv, plus PostgreSQL at
``TEST_POSTGRES_URL`` for the endpoint's figures)::

    .venv/bin/python -m bench.availability

What is measured, all on one deterministic workload (seed ``SEED``):

* The calendar: America/New_York, Mon–Fri 09:00–17:00 and Sat–Sun 10:00–14:00; the queried
  event type lasts 30 minutes on a 30-minute grid with a 10-minute buffer after, no minimum
  notice, a 365-day horizon. The window is the 31 days from the next Monday after today.
* Busy time: 1,000 active bookings (15-minute "Quick check" appointments, also with a
  10-minute buffer after, never overlapping each other as a double-booking-free calendar
  requires) and 500 manual blocked times of 15–60 minutes. Both are spread over the whole
  window; 5% fall inside working hours and the rest outside, so the engine walks all 1,500
  intervals while most of the 432 slots of an empty calendar stay open (1,500 intervals spread
  evenly over the 744 hours would leave almost none).

1. Engine: the pure path ``check_availability`` runs once its inputs are loaded:
   ``merge`` of each busy list and of their union, ``working_ranges``, ``open_slots`` and
   ``slots_by_day``. Median and p95 of ``time.perf_counter`` over 200 runs; target ≤ 5 ms.
2. Growth: the same with 10× and 100× the busy intervals in the same window (intervals may
   then overlap; fewer slots stay open). The ratio of medians should stay near or below the
   scale factor: linear, not quadratic. A plain list comprehension over the same intervals is
   timed alongside: at 150,000 intervals even that slows per item (the objects no longer fit
   the CPU caches), so compare the engine's ratio with the scan's, not with 100.
3. Endpoint: a throw-away PostgreSQL database (created through the admin database, migrated,
   provisioned, filled with the same busy time by bulk insert, dropped at the end) served by a
   real gunicorn (``wsgi:app``, 2 sync workers) on a free loopback port. Sequential
   requests, 20 warm-up then 200 timed, alternating the availability query with the minimal
   authenticated endpoint ``GET /v1/api/calendar/bookings?limit=1`` as the framework floor.
   Target: availability median ≤ 25 ms. The response is checked: 200, one entry per day, and
   the same slot count the engine computes.

gunicorn's sync workers close the connection after each response, so every request includes a
loopback TCP connect (``http.client`` reconnects by itself); the baseline pays it too.
"""

from __future__ import annotations

import http.client
import io
import json
import math
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, suppress
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from datetime import time as clock
from itertools import chain
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg
from flask_migrate import upgrade
from sqlalchemy import insert

from app import create_app
from app.extensions import db
from app.models import Attendee, BlockedTime, BlockedTimeSource, Booking, Permission
from app.models.types import utcnow
from app.scheduling.intervals import Interval, merge
from app.scheduling.slots import SlotRules, open_slots, slots_by_day
from app.scheduling.timezones import local_to_utc, zone
from app.scheduling.working_hours import WeeklySchedule, working_ranges
from app.services.accounts.provisioning import provision

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = Path(sys.executable).with_name("gunicorn")
POSTGRES_ADMIN_URL = os.environ.get(
    "TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
API_KEY_HEADER = "x-calendar-api-key"

SEED = 20261121
TIMEZONE = "America/New_York"
DAYS = 31
WEEKDAY_HOURS = (9 * 60, 17 * 60)
WEEKEND_HOURS = (10 * 60, 14 * 60)
SLOT_MINUTES = 30
BUFFER_AFTER_MINUTES = 10
HORIZON_DAYS = 365
BOOKINGS = 1_000
BLOCKED = 500
BOOKING_MINUTES = 15
BLOCKED_MINUTES = (15, 30, 45, 60)
IN_HOURS_SHARE = 0.05
CELL = timedelta(minutes=30)  # bookings sit one per cell, so they never overlap

ENGINE_TARGET_MS = 5.0
ENDPOINT_TARGET_MS = 25.0
GROWTH = ((1, 20, 200), (10, 5, 50), (100, 2, 10))  # (scale, warm-up runs, timed runs)
HTTP_WARMUP, HTTP_RUNS = 20, 200
SERVER_START_TIMEOUT = 30.0


# --- timing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    samples: list[float]  # seconds

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000

    @property
    def p95_ms(self) -> float:
        ordered = sorted(self.samples)
        return ordered[math.ceil(0.95 * len(ordered)) - 1] * 1000

    def __str__(self) -> str:
        return f"median {self.median_ms:7.2f} ms   p95 {self.p95_ms:7.2f} ms"


def measure(run: Callable[[], object], warmup: int, runs: int) -> Timing:
    for _ in range(warmup):
        run()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return Timing(samples)


def verdict(value_ms: float, target_ms: float) -> str:
    return f"target ≤ {target_ms:g} ms median: {'met' if value_ms <= target_ms else 'MISSED'}"


# --- the workload ----------------------------------------------------------------------------


def next_monday(today: date) -> date:
    return today + timedelta(days=7 - today.weekday())


SCHEDULE = WeeklySchedule(
    timezone=TIMEZONE,
    weekly={day: [WEEKDAY_HOURS if day < 5 else WEEKEND_HOURS] for day in range(7)},
)


@dataclass(frozen=True)
class Calendar:
    """The window and the rules the service would derive for the queried event type."""

    first_day: date
    window: Interval
    rules: SlotRules

    @classmethod
    def starting(cls, first_day: date, now: datetime) -> Calendar:
        tz = zone(TIMEZONE)
        window = Interval(
            local_to_utc(first_day, clock(0), tz),
            local_to_utc(first_day + timedelta(days=DAYS), clock(0), tz),
        )
        rules = SlotRules(
            duration=timedelta(minutes=SLOT_MINUTES),
            step=timedelta(minutes=SLOT_MINUTES),
            buffer_after=timedelta(minutes=BUFFER_AFTER_MINUTES),
            earliest_start=now,
            latest_start=now + timedelta(days=HORIZON_DAYS),
        )
        return cls(first_day, window, rules)

    @property
    def last_day(self) -> date:
        return self.first_day + timedelta(days=DAYS - 1)


@dataclass(frozen=True)
class BookingRow:
    start: datetime
    end: datetime
    status: str

    @property
    def occupied(self) -> Interval:
        return Interval(self.start, self.end + timedelta(minutes=BUFFER_AFTER_MINUTES))


@dataclass(frozen=True)
class Workload:
    bookings: list[BookingRow]
    blocked: list[Interval]

    @property
    def occupied(self) -> list[Interval]:
        return [b.occupied for b in self.bookings]


def make_workload(calendar: Calendar, scale: int) -> Workload:
    """``scale`` × (1,000 bookings + 500 blocked times) in the window, in shuffled order (the
    engine sorts; the database hands rows back in no particular order either).

    The window is cut into 30-minute cells, inside or outside working hours. A booking
    (15 minutes + 10 buffer) starts 0 or 5 minutes into a cell drawn without replacement, so at
    scale 1 no two bookings overlap; blocked times start anywhere in a drawn cell."""
    rng = random.Random(SEED * 1000 + scale)
    working = working_ranges(SCHEDULE, *calendar.window)
    inside: list[datetime] = []
    outside: list[datetime] = []
    cell = calendar.window.start
    while cell < calendar.window.end:
        in_hours = any(w.overlaps(Interval(cell, cell + CELL)) for w in working)
        (inside if in_hours else outside).append(cell)
        cell += CELL

    bookings_in = round(BOOKINGS * IN_HOURS_SHARE) * scale
    cells = rng.sample(inside * scale, bookings_in)
    cells += rng.sample(outside * scale, BOOKINGS * scale - bookings_in)
    bookings = []
    for cell in cells:
        start = cell + timedelta(minutes=rng.choice((0, 5)))
        end = start + timedelta(minutes=BOOKING_MINUTES)
        bookings.append(BookingRow(start, end, rng.choice(("pending", "confirmed"))))

    blocked_in = round(BLOCKED * IN_HOURS_SHARE) * scale
    cells = rng.choices(inside, k=blocked_in)
    cells += rng.choices(outside, k=BLOCKED * scale - blocked_in)
    blocked = []
    for cell in cells:
        start = cell + timedelta(minutes=rng.randrange(0, 30, 5))
        blocked.append(Interval(start, start + timedelta(minutes=rng.choice(BLOCKED_MINUTES))))

    rng.shuffle(bookings)
    rng.shuffle(blocked)
    return Workload(bookings, blocked)


# --- 1 and 2: the engine ---------------------------------------------------------------------


def engine_path(
    calendar: Calendar, bookings: list[Interval], blocked: list[Interval]
) -> list[tuple[date, list[Interval]]]:
    """What ``check_availability`` computes once ``load_busy`` has fetched the rows."""
    busy = merge(chain(merge(bookings), merge(blocked), merge(())))
    working = working_ranges(SCHEDULE, *calendar.window)
    slots = open_slots(working, busy, calendar.rules, calendar.window)
    return slots_by_day(slots, zone(TIMEZONE), calendar.first_day, calendar.last_day)


def slot_count(days: list[tuple[date, list[Interval]]]) -> int:
    return sum(len(slots) for _, slots in days)


def plain_scan(bookings: list[Interval], blocked: list[Interval]) -> list[Interval]:
    """The cheapest pass over the same inputs: the growth table's yardstick for what merely
    touching n intervals costs on this machine (cache misses included)."""
    return [i for i in chain(bookings, blocked) if i.start < i.end]


def bench_engine(calendar: Calendar, workload: Workload) -> int:
    """Sections 1 and 2; returns the 1× slot count for the endpoint check."""
    rows = []
    for scale, warmup, runs in GROWTH:
        load = workload if scale == 1 else make_workload(calendar, scale)
        bookings, blocked = load.occupied, load.blocked
        timing = measure(lambda b=bookings, k=blocked: engine_path(calendar, b, k), warmup, runs)
        scan = measure(lambda b=bookings, k=blocked: plain_scan(b, k), warmup, runs)
        merged = len(merge(chain(bookings, blocked)))
        slots = slot_count(engine_path(calendar, bookings, blocked))
        rows.append((scale, len(bookings), len(blocked), merged, slots, runs, timing, scan))

    engine, scan, slots = rows[0][6], rows[0][7], rows[0][4]
    print(
        f"  {slot_count(engine_path(calendar, [], []))} slots on an empty calendar, {slots} open"
        f" with this busy time ({rows[0][3]:,} intervals after merging)"
    )
    print(f"  {rows[0][5]} runs: {engine}   {verdict(engine.median_ms, ENGINE_TARGET_MS)}")
    print()
    print("2. Growth, same 31-day window (intervals overlap above 1×); plain scan = one list")
    print("   comprehension over the same intervals, for what touching n objects costs here")
    engine_columns = "  scale  bookings  blocked  merged  slots  runs  median ms   p95 ms   ratio"
    print(engine_columns + "  scan ms   ratio")
    for scale, n_bookings, n_blocked, merged, n_slots, runs, timing, plain in rows:
        print(
            f"  {scale:>4}×  {n_bookings:>8,}  {n_blocked:>7,}  {merged:>6,}  {n_slots:>5}"
            f"  {runs:>4}  {timing.median_ms:>9.2f}  {timing.p95_ms:>7.2f}"
            f"  {timing.median_ms / engine.median_ms:>5.1f}×"
            f"  {plain.median_ms:>7.2f}  {plain.median_ms / scan.median_ms:>5.1f}×"
        )
    return slots


# --- 3 and 4: the endpoint -------------------------------------------------------------------


def tenant_document() -> dict[str, Any]:
    hours = {
        day: [[f"{start // 60:02}:{start % 60:02}", f"{end // 60:02}:{end % 60:02}"]]
        for day, (start, end) in zip(
            ("mon", "tue", "wed", "thu", "fri", "sat", "sun"),
            [WEEKDAY_HOURS] * 5 + [WEEKEND_HOURS] * 2,
            strict=True,
        )
    }
    return {
        "agencies": [
            {
                "name": "Bench agency",
                "owner": {"email": "owner@bench.test", "password": "s3cret-pass"},
                "subAccounts": [
                    {
                        "name": "Bench clinic",
                        "timezone": TIMEZONE,
                        "settings": {
                            "defaultDuration": SLOT_MINUTES,
                            "minimumNoticeMinutes": 0,
                            "bookingHorizonDays": HORIZON_DAYS,
                        },
                        "availabilityProfiles": [
                            {"name": "Office", "default": True, "weeklyHours": hours}
                        ],
                        "eventTypes": [
                            {
                                "name": "Cleaning",
                                "duration": SLOT_MINUTES,
                                "bufferAfter": BUFFER_AFTER_MINUTES,
                                "availabilityProfile": "Office",
                                "minimumNoticeMinutes": 0,
                                "bookingHorizonDays": HORIZON_DAYS,
                            },
                            {
                                "name": "Quick check",
                                "duration": BOOKING_MINUTES,
                                "bufferAfter": BUFFER_AFTER_MINUTES,
                                "availabilityProfile": "Office",
                            },
                        ],
                        "apiKeys": [
                            {"name": "bench", "permissions": [p.value for p in Permission]}
                        ],
                    }
                ],
            }
        ]
    }


@dataclass(frozen=True)
class Tenant:
    api_key: str
    event_type_id: int


def populate(url: str, workload: Workload) -> Tenant:
    """Migrate, provision, and bulk-insert the workload as rows (as tests/factories.py's
    ``make_booking`` would leave them, occupied interval included)."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench"})
    with app.app_context():
        with redirect_stderr(io.StringIO()):  # alembic's INFO lines
            upgrade()
        created = provision(tenant_document())["agencies"][0]["subAccounts"][0]
        sub_account_id = created["id"]
        quick_check = created["eventTypes"]["Quick check"]
        now = utcnow()
        booking_ids = db.session.scalars(
            insert(Booking).returning(Booking.id, sort_by_parameter_order=True),
            [
                {
                    "uid": f"bench-{n}",
                    "sub_account_id": sub_account_id,
                    "event_type_id": quick_check,
                    "status": row.status,
                    "title": f"Quick check with patient{n}@bench.test",
                    "timezone": TIMEZONE,
                    "meta": {},
                    "start_at": row.start,
                    "end_at": row.end,
                    "occupied_start": row.occupied.start,
                    "occupied_end": row.occupied.end,
                    "created_at": now,
                    "updated_at": now,
                }
                for n, row in enumerate(workload.bookings)
            ],
        ).all()
        db.session.execute(
            insert(Attendee),
            [
                {
                    "booking_id": booking_id,
                    "email": f"patient{n}@bench.test",
                    "name": f"patient{n}",
                    "timezone": TIMEZONE,
                    "created_at": now,
                    "updated_at": now,
                }
                for n, booking_id in enumerate(booking_ids)
            ],
        )
        db.session.execute(
            insert(BlockedTime),
            [
                {
                    "sub_account_id": sub_account_id,
                    "start_at": interval.start,
                    "end_at": interval.end,
                    "reason": "bench",
                    "source": BlockedTimeSource.MANUAL,
                    "created_at": now,
                }
                for interval in workload.blocked
            ],
        )
        db.session.commit()
        db.session.remove()
        db.engine.dispose()
    return Tenant(created["apiKeys"]["bench"], created["eventTypes"]["Cleaning"])


@contextmanager
def postgres_database() -> Iterator[str]:
    """A throw-away database on the admin URL's server, dropped (connections and all) after."""
    name = f"calbook_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        server = POSTGRES_ADMIN_URL.rsplit("/", 1)[0].split("://", 1)[1]
        yield f"postgresql+psycopg://{server}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (gunicorn stops its workers gracefully), then SIGKILL to the process group the
    server was started in, in case anything of it is left."""
    if process.poll() is None:
        process.terminate()
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextmanager
def gunicorn(database_url: str, log_path: Path, workers: int = 2) -> Iterator[int]:
    """``gunicorn wsgi:app`` with ``workers`` sync workers on a free loopback port, until it
    answers."""
    port = free_port()
    # The benchmark sends far more than the 60 requests a minute an API key may make. Several
    # workers need shared counts: the machine's Redis, under a key prefix of this server's own.
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SECRET_KEY": "bench",
        "RATE_LIMIT": "1000000/minute",
        "REDIS_URL": os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "RATELIMIT_KEY_PREFIX": f"bench-{uuid.uuid4().hex}",
    }
    # --config /dev/null: sync workers exactly as given here, not the deployment's
    # gunicorn.conf.py (threads, access log), which gunicorn would read from the project root.
    command = [
        str(GUNICORN),
        "--config",
        os.devnull,
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "wsgi:app",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not come up:\n{log_path.read_text()[-2000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/v1/api/calendar/bookings")  # 401 once the app answers
                conn.getresponse().read()
                conn.close()
                break
            except OSError:
                time.sleep(0.1)
        yield port
    finally:
        stop(process)


def bench_endpoint(
    label: str, database_url: str, workload: Workload, calendar: Calendar, engine_slots: int
) -> None:
    print(f"  {label}")
    tenant = populate(database_url, workload)
    availability = "/v1/api/calendar/availability?" + urlencode(
        {
            "startDate": calendar.first_day.isoformat(),
            "endDate": calendar.last_day.isoformat(),
            "eventTypeId": tenant.event_type_id,
        }
    )
    baseline = "/v1/api/calendar/bookings?limit=1"
    headers = {API_KEY_HEADER: tenant.api_key, "Accept": "application/json"}
    with (
        tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp,
        gunicorn(database_url, Path(tmp) / "gunicorn.log") as port,
    ):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

        def get(path: str) -> tuple[float, bytes]:
            started = time.perf_counter()
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
            elapsed = time.perf_counter() - started
            if response.status != 200:
                raise RuntimeError(f"GET {path}: {response.status} {body[:500]!r}")
            return elapsed, body

        for _ in range(HTTP_WARMUP):
            get(availability)
            get(baseline)
        samples: dict[str, list[float]] = {availability: [], baseline: []}
        body = b""
        for _ in range(HTTP_RUNS):
            elapsed, body = get(availability)
            samples[availability].append(elapsed)
            samples[baseline].append(get(baseline)[0])
        conn.close()

    days = json.loads(body)
    slots = sum(len(day["slots"]) for day in days)
    if len(days) not in (DAYS, DAYS + 1) or slots != engine_slots:
        raise SystemExit(f"unexpected answer: {len(days)} days, {slots} slots")
    avail, base = Timing(samples[availability]), Timing(samples[baseline])
    print(f"    availability        {avail}   {verdict(avail.median_ms, ENDPOINT_TARGET_MS)}")
    print(f"    bookings?limit=1    {base}")
    print(
        f"    above the floor     median {avail.median_ms - base.median_ms:7.2f} ms"
        f"   answer: 200, {len(days)} days, {slots} slots (engine: {engine_slots}),"
        f" {len(body):,} bytes"
    )


def postgres_version() -> str | None:
    try:
        with psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3) as conn:
            return conn.execute("SHOW server_version").fetchone()[0]
    except psycopg.OperationalError:
        return None


def main() -> None:
    started = time.monotonic()
    pg_version = postgres_version()
    today = utcnow().astimezone(zone(TIMEZONE)).date()
    calendar = Calendar.starting(next_monday(today), utcnow())
    workload = make_workload(calendar, 1)

    print("Availability benchmark")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.platform()}"
    )
    print(f"         PostgreSQL {pg_version or 'unreachable'}")
    print(
        f"window:  {DAYS} days from {calendar.first_day} ({TIMEZONE}); Mon–Fri 09:00–17:00,"
        f" Sat–Sun 10:00–14:00; {SLOT_MINUTES}-min slots every {SLOT_MINUTES} min,"
        f" {BUFFER_AFTER_MINUTES}-min buffer after"
    )
    print(
        f"busy:    {BOOKINGS:,} bookings ({BOOKING_MINUTES} min + {BUFFER_AFTER_MINUTES} buffer),"
        f" {BLOCKED:,} blocked ({BLOCKED_MINUTES[0]}–{BLOCKED_MINUTES[-1]} min);"
        f" {IN_HOURS_SHARE:.0%} inside working hours; seed {SEED}"
    )
    print()
    print("1. Engine: merge + working_ranges + open_slots + slots_by_day")
    engine_slots = bench_engine(calendar, workload)

    print()
    print(
        f"3. GET /v1/api/calendar/availability, gunicorn 2 sync workers, sequential,"
        f" {HTTP_WARMUP} warm-up + {HTTP_RUNS} timed each, alternating with the baseline"
    )
    if pg_version is None:
        print(f"  PostgreSQL: skipped, {POSTGRES_ADMIN_URL} is not reachable")
    else:
        with postgres_database() as url:
            bench_endpoint(f"PostgreSQL {pg_version}", url, workload, calendar, engine_slots)
    print()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
