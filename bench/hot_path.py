"""Benchmark of the hot path against floors measured in the same run, on the same server
configuration: how far above a bare Flask app the API's most frequent requests are.

Run from the project root (about 75 s; ``--quick`` about 40 s; PostgreSQL at
``TEST_POSTGRES_URL``, default ``postgresql://postgres@127.0.0.1:5432/postgres``, and Redis at
``TEST_REDIS_URL``, default ``redis://127.0.0.1:6379/0``)::

    .venv/bin/python -m bench.hot_path [--quick] [--rounds N] [--seconds S] [--runs N]
        [--compare poll]

``--compare NAME`` starts a third server: the API with the library internal ``NAME`` swapped
for the plain library path (``bench.plain_paths``). Its requests (by id, availability, the
list, a create; by id under load) take turns with the API's own in every iteration and round,
marked "plain", and the summary ends with each pair's ratio, plain ÷ as built, per round: what
the internal gains, free of the machine's drift between runs (docs/performance.md, "Library
internals: kept and removed").

The servers. Two, side by side, both started as the Procfile's ``web`` starts the API:
``gunicorn -c gunicorn.conf.py <app>`` from the project root, with one environment
(``bench.capacity.service_env``): ``DATABASE_URL`` on PostgreSQL, so gevent workers,
``REDIS_URL`` set, so ``WEB_CONCURRENCY`` workers (2 unless the environment says otherwise),
keep-alive 5 s, the JSON access log (to a file). The rate limit is 1,000,000/minute, counted in
Redis under a key prefix of the run's own, so the limiter runs on every request but refuses
none; a create's outbox message goes to a Celery queue of the run's own (both deleted at the
end). The two apps:

* the floors, ``bench.floor_app``: a bare Flask app with psycopg (a small pool per worker):
  floor A ``GET /floor/json`` (no database), floor B ``GET /floor/select/<id>`` (one
  primary-key ``SELECT`` of a booking row), floor C ``POST /floor/insert`` (one single-row
  ``INSERT`` transaction into a scratch table of its own);
* the API, ``wsgi:app``.

The data: one throw-away database (``bench.availability.postgres_database``), migrated. The
busy calendar is ``bench.availability``'s clinic (America/New_York, Mon–Fri 09:00–17:00,
Sat–Sun 10:00–14:00; "Cleaning", 30 minutes with a 10-minute buffer, is what availability is
asked for; "Quick check", 15 minutes with a 10-minute buffer, is what creates book), seeded by
``bench.availability.populate`` with its workload of 1,000 bookings and 500 blocked times, of
which ``PAST_SHARE`` was moved ``PAST_SHIFT`` back into the past (mostly completed, some
cancelled or no-show, a few still confirmed), and the rest stays in the 31-day window the
availability request asks for (from the Monday after today). Three more sub accounts
configured alike, without busy time, for the creates over four calendars.

The requests (every answer is checked):

* floors A, B, C as above; floor B reads the busy calendar's seeded bookings, id after id;
* ``GET /v1/api/calendar/bookings/<id>``: the same ids, with the busy calendar's key;
* ``GET /v1/api/calendar/availability`` for "Cleaning", 31 days: the slot count must equal
  what the engine computes for the busy time in the window. Asked three times in a row, right
  after the iteration's create on the busy calendar (after the window, so its slots stay as
  seeded, but the calendar has a new version): the first question after a booking (computed
  and kept), the same question again (the cached answer: the same ETag) and once more with that
  ETag in ``If-None-Match`` (a 304 with no body);
* ``GET /v1/api/calendar/bookings?limit=50``: the busy calendar's first page (its past), 50;
* ``POST /v1/api/calendar/event-types/<Quick check>/bookings``: each a distinct free slot in
  working hours after the window (:00 and :30, each handed out once), a unique
  ``idempotencyKey`` and a fresh attendee, 201 every time (floor C gets the same bodies).

Each round (``ROUNDS``; rounds repeat so the noise shows):

1. Latency: one client, sequential requests on keep-alive connections (one to each server,
   opened for the round), ``RUNS`` iterations after a few untimed ones; each iteration sends
   every request once, in a freshly shuffled order: floors A, B, C, by id, the list, and at a
   shuffled place the create on the busy calendar followed by the three availability
   questions. The same iteration also times, from this process on
   a psycopg connection of its own, floor B's query alone and what two API requests cannot do
   without: the busy rows the availability request reads (its one statement) and
   the list's queries (count, page of 50, their attendees); and the availability engine alone
   on the same busy time (``bench.availability.engine_path``). Median and p95.
2. Throughput: ``CLIENTS`` client threads, each with its own keep-alive connection, sending
   back-to-back for ``ROUND_SECONDS``: floor A, floor B, by id, floor C, creates all on the busy
   calendar, creates spread over the four calendars (thread t on calendar t mod 4); the rows
   take turns, starting one further on each round. Requests/s = answers / wall time until the
   last answer. Also the CPU each request cost: the server's worker processes, the database's
   backends (PostgreSQL's processes serving this database), Redis (shared with other work on
   the machine), this client process; and what the rest of the machine used meanwhile (other
   work: a CI run on the same cores shows there).

Then a summary, pooled over the rounds with the rounds' range: every target ratio, "met" or
"NOT met" (the pooled figure decides; how many rounds met it is shown), and where the time
goes: floor B minus its query (HTTP, Flask, JSON) plus the raw SQL and engine times, the least
availability and the list could take as built; for each throughput target, the CPU a request
costs in all against the floor's, and what it may cost to reach the target with the cores as
busy; the creates' rate on one calendar against four. At the end the database must hold one
booking per 201 of the API and one scratch row per 201 of floor C.

The client threads share the machine's cores with the servers, PostgreSQL and Redis: on a
2-core machine the floors' throughput is partly the client's limit (its CPU is printed).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from datetime import time as clock
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg
import redis

from app.models.types import utcnow
from app.scheduling.intervals import Interval
from app.scheduling.timezones import local_to_utc, zone
from bench import availability, booking_writes, capacity, floor_app, plain_paths

CLIENTS = 8
ROUNDS, ROUND_SECONDS, RUNS = 3, 2.5, 100
QUICK = {"rounds": 2, "seconds": 1.5, "runs": 40}
WARMUP_RUNS, WARMUP_SECONDS = 20, 1.0  # before the first round: latency iterations, per row
ROUND_WARMUP_RUNS = 3  # untimed iterations on each round's fresh connections

PAST_SHARE = 0.5  # of the 1,000 bookings and 500 blocked times
PAST_SHIFT = timedelta(weeks=8)  # the window's first day is 1–7 days ahead: all of it past
PAST_STATUSES = ("completed",) * 6 + ("cancelled", "no_show", "confirmed")
OTHER_CALENDARS = 3
LIST_LIMIT = 50
SEED = 20261201

BY_ID = "/v1/api/calendar/bookings/{}"
LIST = f"/v1/api/calendar/bookings?limit={LIST_LIMIT}"
FLOOR_A, FLOOR_B, FLOOR_C = "/floor/json", "/floor/select/{}", "/floor/insert"

LATENCY = {
    "floor_a": "floor A: GET, bare JSON",
    "floor_b": "floor B: GET, one PK SELECT",
    "floor_c": "floor C: POST, one INSERT txn",
    "by_id": "GET /bookings/:id",
    "availability": "GET /availability, 31 d, after a booking",
    "availability_again": "GET /availability, 31 d, again",
    "availability_304": "GET /availability, 31 d, 304",
    "availability_seated": "GET /availability, seats + caps, after",
    "availability_seated_again": "GET /availability, seats + caps, again",
    "list": f"GET /bookings?limit={LIST_LIMIT}",
    "create": "POST create, busy calendar",
    "sql_pk": "  raw SQL: floor B's PK SELECT",
    "sql_busy": "  raw SQL: availability's rows",
    "sql_list": "  raw SQL: the list's queries",
    "engine": "  availability engine alone",
}
HTTP_KINDS = (
    "floor_a",
    "floor_b",
    "floor_c",
    "by_id",
    "availability",
    "availability_again",
    "availability_304",
    "availability_seated",
    "availability_seated_again",
    "list",
    "create",
)
# Timed in this order, at a shuffled place of each iteration: a booking on the busy calendar
# (after the window, so the window's slots stay as seeded, but the calendar has a new version),
# the first question after it (computed), the same question again (kept) and asked with the
# last answer's ETag (304); then the same for the seated, capped "Class" (computed, kept).
AFTER_A_BOOKING = (
    "create",
    "availability",
    "availability_again",
    "availability_304",
    "availability_seated",
    "availability_seated_again",
)
# "Class": "Cleaning" with seats and caps on it per day, week and month, high enough to close
# nothing (so it offers the same slots, each with every seat free), but counted all the same.
CLASS_SEATS = 5
CLASS_LIMITS = {
    period: {"count": 1000, "minutes": 44640} for period in ("perDay", "perWeek", "perMonth")
}
THROUGHPUT = {
    "floor_a": "floor A: GET, bare JSON",
    "floor_b": "floor B: GET, one PK SELECT",
    "by_id": "GET /bookings/:id",
    "floor_c": "floor C: POST, one INSERT txn",
    "create_1": "POST create, 1 calendar",
    "create_4": "POST create, 4 calendars",
}


@dataclass(frozen=True)
class Target:
    label: str
    kind: str  # "rate": throughput ratio; "latency": ratio of medians; "ms": a median
    subject: str
    floor: str | None
    limit: float
    at_least: bool


TARGETS = (
    Target("GET /bookings/:id throughput ÷ floor B's", "rate", "by_id", "floor_b", 0.50, True),
    Target("availability 31 d median ÷ floor B's", "latency", "availability", "floor_b", 3, False),
    Target("availability 31 d median, ms", "ms", "availability", None, 10, False),
    Target("availability again ÷ floor B", "latency", "availability_again", "floor_b", 1.5, False),
    Target("availability 304 ÷ floor B", "latency", "availability_304", "floor_b", 1.2, False),
    Target("creates over 4 calendars/s ÷ floor C's", "rate", "create_4", "floor_c", 0.33, True),
    Target("creates on 1 calendar/s ÷ floor C's", "rate", "create_1", "floor_c", 0.25, True),
    Target(f"list of {LIST_LIMIT} median ÷ floor B's", "latency", "list", "floor_b", 4, False),
    # Issue 41: seats and caps cost availability at most 10 % (computed, and kept).
    Target(
        "availability seats+caps ÷ without",
        "latency",
        "availability_seated",
        "availability",
        1.10,
        False,
    ),
    Target(
        "again, seats+caps ÷ without",
        "latency",
        "availability_seated_again",
        "availability_again",
        1.10,
        False,
    ),
)


class Failed(Exception):
    """An answer that is not what the request must get."""


# --- the calendars ---------------------------------------------------------------------------


class OfficeSlots:
    """Free "Quick check" starts of one calendar, each handed out once, to any thread: :00 and
    :30 of the working hours (a booking and its buffer fill 25 minutes) from ``first_day``."""

    def __init__(self, first_day: date) -> None:
        self._starts = self._generate(first_day)
        self._lock = threading.Lock()
        self.latest = utcnow() + timedelta(days=availability.HORIZON_DAYS - 1)

    @staticmethod
    def _generate(day: date) -> Iterator[datetime]:
        tz = zone(availability.TIMEZONE)
        occupied = availability.BOOKING_MINUTES + availability.BUFFER_AFTER_MINUTES
        while True:
            first, end = (
                availability.WEEKDAY_HOURS if day.weekday() < 5 else availability.WEEKEND_HOURS
            )
            for minute in range(first, end - occupied + 1, 30):
                yield local_to_utc(day, clock(minute // 60, minute % 60), tz)
            day += timedelta(days=1)

    def body(self) -> bytes:
        with self._lock:
            start = next(self._starts)
        if start > self.latest:
            raise Failed("no free slot left within the booking horizon: run fewer rounds")
        return booking_writes.create_body(start)


@dataclass(frozen=True)
class Setup:
    window: availability.Calendar
    calendars: list[booking_writes.Calendar]  # the busy one first; create paths: Quick check
    slots: list[OfficeSlots]
    booking_ids: list[int]  # the busy calendar's seeded bookings
    availability_path: str
    seated_path: str  # the same question of "Class"
    expected_slots: int
    sub_account_id: int
    occupied: list[Interval]  # the busy time in the window, as the engine takes it
    blocked: list[Interval]
    seeded: dict[str, int]

    @property
    def busy(self) -> booking_writes.Calendar:
        return self.calendars[0]


def others_document() -> dict[str, Any]:
    """``OTHER_CALENDARS`` sub accounts configured as the busy clinic, in an agency of their
    own."""
    agency = availability.tenant_document()["agencies"][0]
    clinic = agency["subAccounts"][0]
    return {
        "agencies": [
            {
                **agency,
                "name": "Bench agency, more calendars",
                "owner": {"email": "owner-more@bench.test", "password": "s3cret-pass"},
                "subAccounts": [
                    {**clinic, "name": f"Bench clinic {n + 2}"} for n in range(OTHER_CALENDARS)
                ],
            }
        ]
    }


def split_workload(
    workload: availability.Workload,
) -> tuple[availability.Workload, availability.Workload]:
    """The past part (moved back ``PAST_SHIFT``, past statuses) and the part left in the
    window."""
    rng = random.Random(SEED)
    past_bookings = round(len(workload.bookings) * PAST_SHARE)
    past_blocked = round(len(workload.blocked) * PAST_SHARE)
    past = availability.Workload(
        [
            availability.BookingRow(
                row.start - PAST_SHIFT, row.end - PAST_SHIFT, rng.choice(PAST_STATUSES)
            )
            for row in workload.bookings[:past_bookings]
        ],
        [
            Interval(i.start - PAST_SHIFT, i.end - PAST_SHIFT)
            for i in workload.blocked[:past_blocked]
        ],
    )
    future = availability.Workload(
        workload.bookings[past_bookings:], workload.blocked[past_blocked:]
    )
    return past, future


def prepare(url: str) -> Setup:
    today = utcnow().astimezone(zone(availability.TIMEZONE)).date()
    window = availability.Calendar.starting(availability.next_monday(today), utcnow())
    past, future = split_workload(availability.make_workload(window, 1))
    tenant = availability.populate(
        url,
        availability.Workload(past.bookings + future.bookings, past.blocked + future.blocked),
    )
    others = booking_writes.migrate_and_provision(url, others_document())
    with psycopg.connect(floor_app.conninfo(url), autocommit=True) as conn:
        conn.execute(floor_app.CREATE_TABLE)
        (sub_account_id,) = conn.execute(
            "SELECT sub_account_id FROM event_types WHERE id = %s", (tenant.event_type_id,)
        ).fetchone()
        (quick_check,) = conn.execute(
            "SELECT id FROM event_types WHERE sub_account_id = %s AND name = 'Quick check'",
            (sub_account_id,),
        ).fetchone()
        (seated_class,) = conn.execute(
            "INSERT INTO event_types (sub_account_id, name, duration, buffer_before,"
            " buffer_after, slot_interval, location, availability_profile_id,"
            " minimum_notice_minutes, booking_horizon_days, active, created_at, updated_at,"
            " seats, booking_limits)"
            " SELECT sub_account_id, 'Class', duration, buffer_before, buffer_after,"
            " slot_interval, location, availability_profile_id, minimum_notice_minutes,"
            " booking_horizon_days, active, created_at, updated_at, %s, %s::json"
            " FROM event_types WHERE id = %s RETURNING id",
            (CLASS_SEATS, json.dumps(CLASS_LIMITS), tenant.event_type_id),
        ).fetchone()
        booking_ids = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM bookings WHERE sub_account_id = %s ORDER BY id", (sub_account_id,)
            )
        ]
    path = "/v1/api/calendar/event-types/{}/bookings"
    calendars = [booking_writes.Calendar(tenant.api_key, path.format(quick_check))] + [
        booking_writes.Calendar(s["apiKeys"]["bench"], path.format(s["eventTypes"]["Quick check"]))
        for s in others
    ]
    after_window = window.last_day + timedelta(days=2)
    occupied = future.occupied
    expected = availability.slot_count(availability.engine_path(window, occupied, future.blocked))
    active = sum(row.status in ("pending", "confirmed") for row in past.bookings + future.bookings)

    def asked(event_type_id: int) -> str:
        return "/v1/api/calendar/availability?" + urlencode(
            {
                "startDate": window.first_day.isoformat(),
                "endDate": window.last_day.isoformat(),
                "eventTypeId": event_type_id,
            }
        )

    return Setup(
        window=window,
        calendars=calendars,
        slots=[OfficeSlots(after_window) for _ in calendars],
        booking_ids=booking_ids,
        availability_path=asked(tenant.event_type_id),
        seated_path=asked(seated_class),
        expected_slots=expected,
        sub_account_id=sub_account_id,
        occupied=occupied,
        blocked=future.blocked,
        seeded={
            "bookings": len(booking_ids),
            "active": active,
            "past bookings": len(past.bookings),
            "past blocked": len(past.blocked),
            "window bookings": len(future.bookings),
            "window blocked": len(future.blocked),
        },
    )


# --- the servers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    name: str
    port: int
    workers: list[int]
    worker_class: str


def expected_workers(env: dict[str, str]) -> int:
    """What gunicorn.conf.py makes of this environment (REDIS_URL is set)."""
    return int(env.get("WEB_CONCURRENCY") or 2)


@contextmanager
def procfile_server(
    name: str, app_spec: str, env: dict[str, str], log_path: Path, ready_path: str
) -> Iterator[Server]:
    """``gunicorn -c gunicorn.conf.py <app_spec>`` from the project root on a free loopback
    port (the Procfile's ``web`` with ``app_spec`` for ``wsgi:app``), once every worker runs
    and ``ready_path`` answers 200."""
    port = availability.free_port()
    env = {**env, "HOST": "127.0.0.1", "PORT": str(port)}
    command = [str(availability.GUNICORN), "-c", "gunicorn.conf.py", app_spec]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=availability.ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + availability.SERVER_START_TIMEOUT
        wanted = expected_workers(env)
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} did not come up:\n{tail}")
            workers = capacity.children(process.pid)
            if len(workers) == wanted and answers(port, ready_path):
                break
            time.sleep(0.1)
        log_text = log_path.read_text(errors="replace")
        worker_class = next(
            (
                line.split("Using worker:", 1)[1].strip()
                for line in log_text.splitlines()
                if "Using worker:" in line
            ),
            "?",
        )
        yield Server(name, port, workers, worker_class)
        if capacity.children(process.pid) != workers:
            raise SystemExit(f"FAILED: a worker of {name} was restarted during the run")
    finally:
        availability.stop(process)


@contextmanager
def plain_server(name: str | None, env: dict[str, str], log_dir: Path) -> Iterator[Server | None]:
    """With ``--compare NAME``: the API with ``NAME`` on the plain library path."""
    if not name:
        yield None
        return
    with procfile_server(
        f"the API, plain {name}",
        "bench.plain_paths:app",
        {
            **env,
            "HOT_PATH_PLAIN": name,
            "PROMETHEUS_MULTIPROC_DIR": str(log_dir / "plain-metrics"),
        },
        log_dir / "plain.log",
        "/healthz",
    ) as server:
        print(f"        {server.name}: {server.worker_class} workers: {len(server.workers)}")
        yield server


PLAIN = "_plain"  # the suffix of the kinds and rows sent to the plain server
COMPARED_LATENCY = ("by_id", "availability", "list", "create")
COMPARED_THROUGHPUT = ("by_id",)


def swapped(row: str) -> str:
    """The other row of a compared pair (by id as built and plain); any other row itself."""
    if row.endswith(PLAIN):
        return row.removesuffix(PLAIN)
    return row + PLAIN if row + PLAIN in THROUGHPUT else row


def compare_with_plain() -> None:
    """Add the plain server's kinds and rows, each after the API's own."""
    for table, kinds in ((LATENCY, COMPARED_LATENCY), (THROUGHPUT, COMPARED_THROUGHPUT)):
        entries = list(table.items())
        table.clear()
        for kind, label in entries:
            table[kind] = label
            if kind in kinds:
                table[kind + PLAIN] = label + " (plain)"


def answers(port: int, path: str) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


# --- CPU -------------------------------------------------------------------------------------


def redis_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "redis-server":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@dataclass
class Cpu:
    """CPU seconds used over some intervals, by whom; ``busy`` and ``total`` are the machine's
    (all cores)."""

    seconds: float = 0.0
    workers: float = 0.0
    postgres: float = 0.0
    redis: float = 0.0
    client: float = 0.0
    busy: float = 0.0
    total: float = 0.0

    def add(self, other: Cpu) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def ours(self) -> float:
        return self.workers + self.postgres + self.redis + self.client

    @property
    def others_share(self) -> float:
        """The rest of the machine's busy time, in % of all its cores."""
        return (self.busy - self.ours) / self.total if self.total else float("nan")

    @property
    def machine_share(self) -> float:
        return self.busy / self.total if self.total else float("nan")


class CpuMeter:
    """Counts the CPU of one server's workers, this database's PostgreSQL backends, Redis and
    this process between ``start`` and ``stop``."""

    def __init__(self, probe: psycopg.Connection[Any], workers: list[int]) -> None:
        self.probe = probe
        self.workers = workers
        self.redis = redis_pids()

    def backends(self) -> list[int]:
        rows = self.probe.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        return [row[0] for row in rows]

    def start(self) -> tuple[capacity.Snapshot, dict[int, float], float]:
        backends = {pid: capacity.process_cpu(pid) for pid in self.backends()}
        redis_cpu = sum(capacity.process_cpu(pid) for pid in self.redis)
        return capacity.Snapshot.take(self.workers), backends, redis_cpu

    def stop(self, started: tuple[capacity.Snapshot, dict[int, float], float]) -> Cpu:
        after = capacity.Snapshot.take(self.workers)
        redis_cpu = sum(capacity.process_cpu(pid) for pid in self.redis)
        backends = self.backends()
        before, backends_before, redis_before = started
        postgres = sum(
            capacity.process_cpu(pid) - backends_before.get(pid, 0.0) for pid in backends
        )
        return Cpu(
            seconds=after.at - before.at,
            workers=after.watched - before.watched,
            postgres=postgres,
            redis=redis_cpu - redis_before,
            client=after.client - before.client,
            busy=after.busy - before.busy,
            total=after.total - before.total,
        )


# --- 1: latency ------------------------------------------------------------------------------


@dataclass
class Tallies:
    """201s answered, for the final checks."""

    created: int = 0
    floor_rows: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, created: int = 0, floor_rows: int = 0) -> None:
        with self.lock:
            self.created += created
            self.floor_rows += floor_rows


class Sequential:
    """One round's sequential client: a keep-alive connection to each server and one to
    PostgreSQL (for the raw SQL)."""

    def __init__(
        self,
        setup: Setup,
        api: Server,
        floors: Server,
        pg: psycopg.Connection[Any],
        floor_slots: booking_writes.Slots,
        tallies: Tallies,
        plain: Server | None = None,
    ) -> None:
        self.setup = setup
        unused = booking_writes.Slots()
        self.api = booking_writes.Client(api.port, setup.busy, unused)
        self.floors = booking_writes.Client(floors.port, setup.busy, unused)
        self.plain = booking_writes.Client(plain.port, setup.busy, unused) if plain else None
        self.pg = pg
        self.floor_slots = floor_slots
        self.tallies = tallies
        self.turn = 0
        self.etag = ""
        self.seated_etag = ""

    def close(self) -> None:
        self.api.close()
        self.floors.close()
        if self.plain is not None:
            self.plain.close()

    def next_id(self) -> int:
        return self.setup.booking_ids[self.turn % len(self.setup.booking_ids)]

    def http(
        self, client: booking_writes.Client, method: str, path: str, body: bytes | None, want: int
    ) -> tuple[float, bytes]:
        elapsed, status, answer = client.send(method, path, body)
        if status != want:
            raise Failed(f"{method} {path}: {status} {answer[:300]!r}")
        return elapsed, answer

    def timed(self, kind: str) -> float:
        """One request of ``kind``; its latency in seconds."""
        if kind.endswith(PLAIN):
            api, self.api = self.api, self.plain
            try:
                return self.timed(kind.removesuffix(PLAIN))
            finally:
                self.api = api
        setup = self.setup
        if kind == "floor_a":
            return self.http(self.floors, "GET", FLOOR_A, None, 200)[0]
        if kind == "floor_b":
            booking_id = self.next_id()
            elapsed, answer = self.http(self.floors, "GET", FLOOR_B.format(booking_id), None, 200)
            if json.loads(answer)["id"] != booking_id:
                raise Failed(f"floor B answered another row than {booking_id}")
            return elapsed
        if kind == "floor_c":
            elapsed, _ = self.http(self.floors, "POST", FLOOR_C, self.floor_slots.body(), 201)
            self.tallies.count(floor_rows=1)
            return elapsed
        if kind == "by_id":
            booking_id = self.next_id()
            elapsed, answer = self.http(self.api, "GET", BY_ID.format(booking_id), None, 200)
            if json.loads(answer)["id"] != booking_id:
                raise Failed(f"GET {BY_ID.format(booking_id)} answered another booking")
            return elapsed
        if kind in ("availability", "availability_again"):
            elapsed, answer = self.http(self.api, "GET", setup.availability_path, None, 200)
            slots = sum(len(day["slots"]) for day in json.loads(answer))
            if slots != setup.expected_slots:
                raise Failed(f"availability: {slots} slots, the engine: {setup.expected_slots}")
            etag = self.api.last_headers["ETag"]
            if kind == "availability_again" and etag != self.etag:
                raise Failed(f"availability asked again: tag {etag}, was {self.etag}")
            self.etag = etag
            return elapsed
        if kind in ("availability_seated", "availability_seated_again"):
            elapsed, answer = self.http(self.api, "GET", setup.seated_path, None, 200)
            seats = [slot["seatsRemaining"] for day in json.loads(answer) for slot in day["slots"]]
            if len(seats) != setup.expected_slots or set(seats) != {CLASS_SEATS}:
                raise Failed(f"seated availability: {len(seats)} slots, seats {set(seats)}")
            etag = self.api.last_headers["ETag"]
            if kind == "availability_seated_again" and etag != self.seated_etag:
                raise Failed(f"seated availability asked again: tag {etag}")
            self.seated_etag = etag
            return elapsed
        if kind == "availability_304":
            elapsed, _, answer = self.api.send(
                "GET", setup.availability_path, None, {"If-None-Match": self.etag}
            )
            if _ != 304 or answer:
                raise Failed(f"availability with If-None-Match: {_} {answer[:200]!r}")
            return elapsed
        if kind == "list":
            elapsed, answer = self.http(self.api, "GET", LIST, None, 200)
            if len(json.loads(answer)["bookings"]) != LIST_LIMIT:
                raise Failed(f"GET {LIST}: not {LIST_LIMIT} bookings")
            return elapsed
        if kind == "create":
            body = setup.slots[0].body()
            elapsed, _ = self.http(self.api, "POST", setup.busy.create_path, body, 201)
            self.tallies.count(created=1)
            return elapsed
        started = time.perf_counter()
        if kind == "sql_pk":
            self.pg.execute("SELECT * FROM bookings WHERE id = %s", (self.next_id(),)).fetchone()
        elif kind == "sql_busy":
            self.busy_rows()
        elif kind == "sql_list":
            self.list_rows()
        else:
            availability.engine_path(setup.window, setup.occupied, setup.blocked)
        return time.perf_counter() - started

    def busy_rows(self) -> None:
        """The one statement availability reads the window's busy time with
        (``app.services.scheduling_inputs.load_busy``: a range-overlap query per table,
        bookings, blocked times and holds, as one ``UNION ALL``; no holds here)."""
        window = (self.setup.sub_account_id, *self.setup.window.window)
        rows = self.pg.execute(
            "SELECT 0, occupied_start, occupied_end, expires_at FROM slot_holds"
            " WHERE sub_account_id = %s"
            " AND tstzrange(occupied_start, occupied_end, '[)') && tstzrange(%s, %s, '[)')"
            " UNION ALL SELECT 1, occupied_start, occupied_end, NULL FROM bookings"
            " WHERE sub_account_id = %s AND status IN ('pending', 'confirmed')"
            " AND tstzrange(occupied_start, occupied_end, '[)') && tstzrange(%s, %s, '[)')"
            " UNION ALL SELECT CASE source WHEN 'external' THEN 3 ELSE 2 END, start_at, end_at,"
            " NULL FROM blocked_times WHERE sub_account_id = %s"
            " AND tstzrange(start_at, end_at, '[)') && tstzrange(%s, %s, '[)')",
            window * 3,
        ).fetchall()
        bookings = sum(1 for row in rows if row[0] == 1)
        if bookings != self.setup.seeded["window bookings"] or len(rows) == bookings:
            raise Failed(f"raw SQL found {bookings} bookings in the window")

    def list_rows(self) -> None:
        """The list's count, its page and the page's attendees."""
        sub_account = (self.setup.sub_account_id,)
        self.pg.execute("SELECT count(*) FROM bookings WHERE sub_account_id = %s", sub_account)
        page = self.pg.execute(
            "SELECT * FROM bookings WHERE sub_account_id = %s ORDER BY start_at, id LIMIT %s",
            (*sub_account, LIST_LIMIT),
        ).fetchall()
        column = [c.name for c in self.pg.execute("SELECT * FROM bookings LIMIT 0").description]
        ids = [row[column.index("id")] for row in page]
        self.pg.execute("SELECT * FROM attendees WHERE booking_id = ANY(%s)", (ids,)).fetchall()

    def iteration(self, rng: random.Random, samples: dict[str, list[float]] | None) -> None:
        kinds = [kind for kind in LATENCY if kind not in AFTER_A_BOOKING]
        rng.shuffle(kinds)
        at = rng.randrange(len(kinds) + 1)
        kinds[at:at] = AFTER_A_BOOKING
        for kind in kinds:
            elapsed = self.timed(kind)
            if samples is not None:
                samples[kind].append(elapsed)
        self.turn += 1


def latency_round(
    make: Callable[[], Sequential], rng: random.Random, warmup: int, runs: int
) -> dict[str, list[float]]:
    client = make()
    try:
        for _ in range(warmup):
            client.iteration(rng, None)
        samples: dict[str, list[float]] = {kind: [] for kind in LATENCY}
        for _ in range(runs):
            client.iteration(rng, samples)
    except Failed as failure:
        raise SystemExit(f"FAILED: {failure}") from failure
    finally:
        client.close()
    return samples


# --- 2: throughput ---------------------------------------------------------------------------


@dataclass
class Load:
    """One throughput row, its rounds summed."""

    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    round_rates: list[float] = field(default_factory=list)
    cpu: Cpu = field(default_factory=Cpu)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.cpu.seconds if self.cpu.seconds else float("nan")

    def add(self, other: Load) -> None:
        self.latencies += other.latencies
        self.failures += other.failures
        self.round_rates += other.round_rates
        self.cpu.add(other.cpu)

    def per_request_ms(self, seconds: float) -> float:
        return seconds / len(self.latencies) * 1000 if self.latencies else float("nan")


Request = tuple[str, str, bytes | None, int]  # method, path, body, the status it must get


def row_requests(
    row: str, setup: Setup, floor_slots: booking_writes.Slots
) -> tuple[Callable[[int], booking_writes.Calendar], Callable[[int, int], Request]]:
    """For ``row``: the calendar (key) of thread n, and its i-th request."""
    ids = setup.booking_ids

    def calendar(n: int) -> booking_writes.Calendar:
        return setup.calendars[n % len(setup.calendars)] if row == "create_4" else setup.busy

    row = row.removesuffix(PLAIN)

    def request(n: int, i: int) -> Request:
        booking_id = ids[(n * len(ids) // CLIENTS + i) % len(ids)]
        if row == "floor_a":
            return "GET", FLOOR_A, None, 200
        if row == "floor_b":
            return "GET", FLOOR_B.format(booking_id), None, 200
        if row == "by_id":
            return "GET", BY_ID.format(booking_id), None, 200
        if row == "floor_c":
            return "POST", FLOOR_C, floor_slots.body(), 201
        spread = len(setup.calendars) if row == "create_4" else 1
        return "POST", calendar(n).create_path, setup.slots[n % spread].body(), 201

    return calendar, request


def load_round(
    server: Server,
    row: str,
    setup: Setup,
    floor_slots: booking_writes.Slots,
    seconds: float,
    meter: CpuMeter,
    tallies: Tallies,
) -> Load:
    """``CLIENTS`` threads sending ``row``'s requests back-to-back for ``seconds``; the round
    lasts until the last answer."""
    calendar, request = row_requests(row, setup, floor_slots)
    go = threading.Barrier(CLIENTS + 1)
    done = threading.Event()
    results = [Load() for _ in range(CLIENTS)]
    unused = booking_writes.Slots()

    def run(n: int) -> None:
        client = booking_writes.Client(server.port, calendar(n), unused)
        load, i = results[n], 0
        go.wait()
        while not done.is_set():
            try:
                method, path, body, want = request(n, i)
            except Failed as failure:
                load.failures.append(str(failure))
                break
            elapsed, status, answer = client.send(method, path, body)
            if status == want:
                load.latencies.append(elapsed)
            else:
                load.failures.append(f"{method} {path}: {status} {answer[:300]!r}")
            i += 1
        client.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    go.wait()
    started = meter.start()
    time.sleep(seconds)
    done.set()
    for thread in threads:
        thread.join()
    total = Load(cpu=meter.stop(started))
    for load in results:
        total.add(load)
    total.round_rates = [total.rate]
    created = len(total.latencies) if row.startswith("create") else 0
    tallies.count(created=created, floor_rows=len(total.latencies) if row == "floor_c" else 0)
    return total


def check(load: Load, what: str) -> None:
    if load.failures:
        shown = "\n  ".join(load.failures[: booking_writes.SHOWN_ERRORS])
        raise SystemExit(f"FAILED: {len(load.failures)} unexpected answers to {what}:\n  {shown}")


# --- the report ------------------------------------------------------------------------------


@dataclass
class Round:
    latency: dict[str, list[float]]
    loads: dict[str, Load]


def timing(samples: list[float]) -> availability.Timing:
    return availability.Timing(samples or [float("nan")])


def print_round(number: int, result: Round, runs: int, seconds: float) -> None:
    print(f"Round {number}")
    title = f"latency: sequential, keep-alive, {runs} each"
    print(f"  {title:<40}    median ms   p95 ms")
    for kind, label in LATENCY.items():
        t = timing(result.latency[kind])
        print(f"    {label:<40}  {t.median_ms:9.2f}  {t.p95_ms:7.2f}")
    title = f"throughput: {CLIENTS} clients, {seconds:g} s each"
    print(f"  {title:<36}    req/s{LOAD_COLUMNS}")
    for row, label in THROUGHPUT.items():
        print(f"    {label:<34}  {load_line(result.loads[row])}")


LOAD_COLUMNS = (
    "  median ms   p95 ms   CPU ms a request: server     PG  Redis  client    all  other work"
)


def load_line(load: Load, rates: str = "") -> str:
    t, cpu, per = timing(load.latencies), load.cpu, load.per_request_ms
    return (
        f"{load.rate:>7.0f}{rates}  {t.median_ms:>9.2f}  {t.p95_ms:>7.2f}"
        f"   {per(cpu.workers):>24.2f}  {per(cpu.postgres):>5.2f}  {per(cpu.redis):>5.2f}"
        f"  {per(cpu.client):>6.2f}  {per(cpu.ours):>5.2f}  {cpu.others_share:>10.0%}"
    )


def spread(values: list[float], form: str = "{:.2f}") -> str:
    return f"{form.format(min(values))}–{form.format(max(values))}"


def target_value(target: Target, latency: dict[str, list[float]], loads: dict[str, Load]) -> float:
    if target.kind == "rate":
        assert target.floor is not None
        return loads[target.subject].rate / loads[target.floor].rate
    subject = timing(latency[target.subject]).median_ms
    if target.kind == "ms":
        return subject
    assert target.floor is not None
    return subject / timing(latency[target.floor]).median_ms


def met(target: Target, value: float) -> bool:
    return value >= target.limit if target.at_least else value <= target.limit


def summary(rounds: list[Round]) -> None:
    latency = {kind: [s for r in rounds for s in r.latency[kind]] for kind in LATENCY}
    loads = {row: Load() for row in THROUGHPUT}
    for r in rounds:
        for row, load in r.loads.items():
            loads[row].add(load)
    print(f"Summary: {len(rounds)} rounds pooled; in brackets, the range of the rounds' figures")
    print(f"  {'latency: sequential':<40}    median ms   p95 ms   rounds' medians")
    for kind, label in LATENCY.items():
        t = timing(latency[kind])
        medians = [timing(r.latency[kind]).median_ms for r in rounds]
        print(f"    {label:<40}  {t.median_ms:9.2f}  {t.p95_ms:7.2f}   [{spread(medians)}]")
    title = f"throughput: {CLIENTS} clients"
    print(f"  {title:<36}    req/s     [rounds]{LOAD_COLUMNS}")
    for row, label in THROUGHPUT.items():
        rates = f"  [{spread(loads[row].round_rates, '{:.0f}'):>9}]"
        print(f"    {label:<34}  {load_line(loads[row], rates)}")
    machine = Cpu()
    for load in loads.values():
        machine.add(load.cpu)
    print(
        f"    (CPU: the server's workers, this database's PostgreSQL backends, Redis, this client;"
        f" during these rows the machine's {os.cpu_count()} cores were"
        f" {machine.machine_share:.0%} busy, {machine.others_share:.0%} with other work)"
    )
    print()
    print("Targets (ratios within the same run; the pooled figure decides)")
    for target in TARGETS:
        value = target_value(target, latency, loads)
        per_round = [target_value(target, r.latency, r.loads) for r in rounds]
        sign = "≥" if target.at_least else "≤"
        rounds_met = sum(met(target, v) for v in per_round)
        print(
            f"  {target.label:<44} {value:6.2f}  [{spread(per_round):>11}]  target {sign}"
            f" {target.limit:<4g}  {'met' if met(target, value) else 'NOT met':<7}"
            f"  ({rounds_met} of {len(rounds)} rounds)"
        )
    print()
    where_the_time_goes(latency, loads)


def where_the_time_goes(latency: dict[str, list[float]], loads: dict[str, Load]) -> None:
    """What part of each figure the design cannot shed: the latency of the data an answer needs,
    fetched as bare SQL, and the engine; for throughput, the CPU a request costs."""
    print("Where the time goes (pooled medians; CPU per request from the throughput rows)")
    median = {kind: timing(latency[kind]).median_ms for kind in LATENCY}
    bare = median["floor_b"] - median["sql_pk"]  # floor B without its query
    print(
        f"  floor B {median['floor_b']:.2f} ms = its query, by raw SQL from this process,"
        f" {median['sql_pk']:.2f} + HTTP, Flask and JSON {bare:.2f}"
    )
    least = bare + median["sql_busy"] + median["engine"]
    print(
        f"  availability {median['availability']:.2f} ms; HTTP, Flask and JSON {bare:.2f} + its"
        f" busy rows by raw SQL {median['sql_busy']:.2f} + the engine alone"
        f" {median['engine']:.2f} = {least:.2f} ms = {least / median['floor_b']:.1f}× floor B,"
        " before its other queries, the key, the rate limit and its 31 days of JSON"
    )
    least = bare + median["sql_list"]
    print(
        f"  list of {LIST_LIMIT} {median['list']:.2f} ms; HTTP, Flask and JSON {bare:.2f} + its"
        f" queries by raw SQL {median['sql_list']:.2f} = {least:.2f} ms ="
        f" {least / median['floor_b']:.1f}× floor B, before the key, the rate limit and"
        f" serializing {LIST_LIMIT} bookings"
    )
    for target in TARGETS:
        if target.kind != "rate":
            continue
        assert target.floor is not None
        a, b = loads[target.subject], loads[target.floor]
        per_a, per_b = a.per_request_ms, b.per_request_ms
        cost_a, cost_b = per_a(a.cpu.ours), per_b(b.cpu.ours)
        allowed = cost_b / target.limit
        rest = cost_a - per_a(a.cpu.workers)
        workers = (
            f"so the workers {allowed - rest:.2f} with the rest as now"
            if allowed > rest
            else f"which the rest alone ({rest:.2f}: PostgreSQL, Redis, client) exceeds"
        )
        print(
            f"  {THROUGHPUT[target.subject]}: {cost_a:.2f} ms of CPU a request in all"
            f" ({per_a(a.cpu.workers):.2f} in the server's workers, {per_a(a.cpu.postgres):.2f}"
            f" in PostgreSQL), {THROUGHPUT[target.floor].split(':')[0]} {cost_b:.2f}; at"
            f" {target.limit:g}× the floor's rate with the cores as busy, a request may cost"
            f" {allowed:.2f} ms in all, {workers}"
        )
    one, four = loads["create_1"], loads["create_4"]
    print(
        f"  creates: one every {1000 / one.rate:.1f} ms on one calendar, every"
        f" {1000 / four.rate:.1f} ms over four (same clients, same rounds), at"
        f" {one.per_request_ms(one.cpu.ours):.2f} and {four.per_request_ms(four.cpu.ours):.2f} ms"
        " of CPU each: the difference is waiting, not CPU (creates on one calendar take its lock in"
        " turn)"
    )


# --- main ------------------------------------------------------------------------------------


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def check_logs(log_dir: Path) -> None:
    """No error in either server's log (the access log lines are JSON, one a request)."""
    for name in ("floors.log", "api.log"):
        lines = (log_dir / name).read_text(errors="replace").splitlines()
        errors = [line for line in lines if "ERROR" in line or "Traceback" in line]
        print(f"{name}: {len(lines):,} lines, {len(errors)} with ERROR or Traceback")
        for line in errors[: booking_writes.SHOWN_ERRORS]:
            print(f"  {line[:300]}")
        if errors:
            raise SystemExit(f"FAILED: errors in {name}")


def check_database(url: str, setup: Setup, tallies: Tallies) -> None:
    with psycopg.connect(floor_app.conninfo(url), autocommit=True) as conn:
        (bookings,) = conn.execute("SELECT count(*) FROM bookings").fetchone()
        (rows,) = conn.execute(f"SELECT count(*) FROM {floor_app.TABLE}").fetchone()
    api = bookings - setup.seeded["bookings"]
    ok = api == tallies.created and rows == tallies.floor_rows
    print(
        f"database check: {api:,} bookings beyond the seeded ones for {tallies.created:,} creates"
        f" answered 201; {rows:,} scratch rows for {tallies.floor_rows:,} floor C 201s:"
        f" {'ok' if ok else 'MISMATCH'}"
    )
    if not ok:
        raise SystemExit("FAILED: the database does not hold one row per 201")


def run(args: argparse.Namespace, log_dir: Path) -> None:
    queue, prefix = f"bench-hot-path-{uuid.uuid4().hex}", f"bench-{uuid.uuid4().hex}"
    rng = random.Random(SEED)
    tallies = Tallies()
    floor_slots = booking_writes.Slots()
    with availability.postgres_database() as url:
        started = time.monotonic()
        setup = prepare(url)
        seeded = setup.seeded
        print(
            f"busy calendar: {seeded['bookings']:,} bookings and"
            f" {seeded['past blocked'] + seeded['window blocked']:,} blocked times;"
            f" {seeded['past bookings']:,} + {seeded['past blocked']:,} of them"
            f" {PAST_SHIFT.days // 7} weeks back (past statuses), {seeded['window bookings']:,} +"
            f" {seeded['window blocked']:,} in the 31-day window from {setup.window.first_day}"
            f" ({setup.expected_slots} open 30-min slots); {seeded['active']:,} active"
        )
        print(
            f"               + {OTHER_CALENDARS} calendars configured alike, empty; creates book"
            " 15 min (+10 buffer) at :00/:30 in working hours after the window"
        )
        print(f"set-up {time.monotonic() - started:.1f} s")
        env = capacity.service_env(url, queue, prefix, "")
        try:
            with (
                procfile_server(
                    "the floors",
                    "bench.floor_app:app",
                    {**env, "PROMETHEUS_MULTIPROC_DIR": str(log_dir / "floor-metrics")},
                    log_dir / "floors.log",
                    FLOOR_A,
                ) as floors,
                procfile_server(
                    "the API",
                    "wsgi:app",
                    {**env, "PROMETHEUS_MULTIPROC_DIR": str(log_dir / "api-metrics")},
                    log_dir / "api.log",
                    "/healthz",
                ) as api,
                plain_server(args.compare, env, log_dir) as plain,
                psycopg.connect(
                    floor_app.conninfo(url), autocommit=True, application_name="bench-client"
                ) as pg,
            ):
                print(
                    f"servers: gunicorn -c gunicorn.conf.py, {floors.worker_class} workers:"
                    f" {len(floors.workers)} (floors), {api.worker_class} workers:"
                    f" {len(api.workers)} (API); WEB_CONCURRENCY"
                    f" {'=' + env['WEB_CONCURRENCY'] if env.get('WEB_CONCURRENCY') else 'unset'}"
                )
                measure(args, setup, floors, api, plain, pg, floor_slots, tallies, rng)
            check_logs(log_dir)
            check_database(url, setup, tallies)
        finally:
            capacity.forget_keys(queue, prefix)


def measure(
    args: argparse.Namespace,
    setup: Setup,
    floors: Server,
    api: Server,
    plain: Server | None,
    pg: psycopg.Connection[Any],
    floor_slots: booking_writes.Slots,
    tallies: Tallies,
    rng: random.Random,
) -> None:
    def server(row: str) -> Server:
        if row.startswith("floor"):
            return floors
        return plain if plain is not None and row.endswith(PLAIN) else api

    servers = {row: server(row) for row in THROUGHPUT}
    meters = {row: CpuMeter(pg, servers[row].workers) for row in THROUGHPUT}

    def sequential() -> Sequential:
        return Sequential(setup, api, floors, pg, floor_slots, tallies, plain)

    def load(row: str, seconds: float) -> Load:
        return load_round(servers[row], row, setup, floor_slots, seconds, meters[row], tallies)

    started = time.monotonic()
    latency_round(sequential, rng, WARMUP_RUNS, 0)
    for row in THROUGHPUT:
        check(load(row, WARMUP_SECONDS), f"the warm-up of {THROUGHPUT[row]}")
    print(f"warm-up {time.monotonic() - started:.1f} s")
    print()
    rounds = []
    rows = list(THROUGHPUT)
    for number in range(args.rounds):
        samples = latency_round(sequential, rng, ROUND_WARMUP_RUNS, args.runs)
        loads = {}
        order = rows[number % len(rows) :] + rows[: number % len(rows)]
        if number % 2:  # a compared pair in the other order: neither always goes first
            order = [swapped(row) for row in order]
        for row in order:
            loads[row] = load(row, args.seconds)
            check(loads[row], THROUGHPUT[row])
        result = Round(samples, {row: loads[row] for row in THROUGHPUT})
        rounds.append(result)
        print_round(number + 1, result, args.runs, args.seconds)
        print()
    summary(rounds)
    print()
    if plain is not None:
        comparison(rounds, args.compare)
        print()


def comparison(rounds: list[Round], name: str) -> None:
    """Each compared request: plain ÷ as built, pooled and per round (above 1: the internal
    gains; 1.10 is its keeping threshold)."""
    print(f"What {name} gains: the plain library path ÷ as built, same rounds (≥ 1.10: kept)")
    for kind in COMPARED_LATENCY:
        built = [s for r in rounds for s in r.latency[kind]]
        plain = [s for r in rounds for s in r.latency[kind + PLAIN]]
        per_round = [
            timing(r.latency[kind + PLAIN]).median_ms / timing(r.latency[kind]).median_ms
            for r in rounds
        ]
        built_ms, plain_ms = timing(built).median_ms, timing(plain).median_ms
        print(
            f"  {LATENCY[kind]:<32} median {built_ms:6.2f} → plain {plain_ms:6.2f} ms:"
            f" {plain_ms / built_ms:.2f}×  [rounds {spread(per_round)}]"
        )
    for row in COMPARED_THROUGHPUT:
        built_load, plain_load = Load(), Load()
        for r in rounds:
            built_load.add(r.loads[row])
            plain_load.add(r.loads[row + PLAIN])
        per_round = [r.loads[row].rate / r.loads[row + PLAIN].rate for r in rounds]
        print(
            f"  {THROUGHPUT[row]:<32} {built_load.rate:6.0f} → plain {plain_load.rate:6.0f} req/s:"
            f" as built ÷ plain {built_load.rate / plain_load.rate:.2f}×  [rounds"
            f" {spread(per_round)}]; CPU a request"
            f" {built_load.cpu.ours / len(built_load.latencies) * 1000:.2f} → plain"
            f" {plain_load.cpu.ours / len(plain_load.latencies) * 1000:.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, help=f"rounds (default {ROUNDS})")
    parser.add_argument(
        "--seconds", type=float, help=f"seconds per throughput row (default {ROUND_SECONDS:g})"
    )
    parser.add_argument("--runs", type=int, help=f"latency iterations per round (default {RUNS})")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK} unless given (about a minute)"
    )
    parser.add_argument(
        "--compare",
        choices=plain_paths.CHOICES,
        help="also serve the API with this library internal swapped for the plain library"
        " path (bench.plain_paths), its requests taking turns with the API's own",
    )
    args = parser.parse_args()
    if args.compare:
        compare_with_plain()
    defaults = QUICK if args.quick else {"rounds": ROUNDS, "seconds": ROUND_SECONDS, "runs": RUNS}
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    started = time.monotonic()
    pg_version = availability.postgres_version()
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    redis_version = redis.Redis.from_url(capacity.REDIS_URL).info("server")["redis_version"]
    print("Hot-path benchmark: the API against bare floors, same server configuration, same run")
    print(
        f"machine: nproc {len(os.sched_getaffinity(0))} ({os.cpu_count()} CPUs), {cpu_model()},"
        f" {platform.platform()}"
    )
    print(
        f"         {platform.python_implementation()} {platform.python_version()}, PostgreSQL"
        f" {pg_version}, Redis {redis_version}, gunicorn {version('gunicorn')}, gevent"
        f" {version('gevent')}, Flask {version('flask')}, psycopg {version('psycopg')}"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    print(
        f"rounds: {args.rounds}; latency {args.runs} iterations, throughput {CLIENTS} client"
        f" threads × {args.seconds:g} s per row; rate limit {capacity.RATE_LIMIT} in Redis"
    )
    with tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp:
        run(args, Path(tmp))
    print(
        f"load average at the end {os.getloadavg()[0]:.2f}; total"
        f" {time.monotonic() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
