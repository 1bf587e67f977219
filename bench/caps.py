"""Benchmark of booking caps on GET /v1/api/calendar/availability: what a calendar with caps
pays over the same calendar without.

Run from the project root (about a minute; PostgreSQL at ``TEST_POSTGRES_URL`` and Redis at
``TEST_REDIS_URL``, as ``bench.availability``)::

    .venv/bin/python -m bench.caps

Caps (``app.scheduling.caps``) are the ``booking_limits`` of the event type and of the
calendar's settings (JSON; NULL: none). With any set, computing availability runs one more
statement (the active bookings of every day, week and month the window touches) and checks every
open slot against every cap; with none set, nothing more runs. The target: with caps, the
availability median at most 10 % above the median without.

The data: ``bench.availability``'s workload (1,000 bookings and 500 blocked times over the
31-day window from the Monday after today, seed ``bench.availability.SEED``), written by its
``populate`` into a throw-away PostgreSQL database (``postgres_database``), served by its
``gunicorn`` (2 sync workers). The question: "Cleaning", the 31 days.

The caps: ``CAPS`` on "Cleaning" (none of the bookings are of it) and on the calendar (all
1,000 count against it): each period with a count and minutes, as high as the API accepts
(``app.validation``), so no slot is over any, yet every slot is checked against all six. Every
answer, with caps or without, must hold the slot count ``bench.availability.engine_path``
computes for the workload. Before the warm-up a probe with ``TIGHT`` (one booking a day on the
calendar) must answer fewer slots: the server does read caps switched on in the database.

Availability is kept per calendar version (``app.services.availability.cache``), so asked twice
it would time the cached answer, caps or not. Before every availability request (untimed), the
calendar gets a fresh version, a random 63-bit number as its triggers draw: every answer timed
is computed (version read, cached set missed, slots computed, version read again, set cached). The
sets kept under those versions are deleted from Redis at the end.

The requests: one client, sequential. Caps are switched by updating the two columns directly
(their triggers give the calendar a new version too), then waiting out
``API_KEY_CACHE_SECONDS``: each worker answers a key with the calendar settings it read along
with it for that long (``app.api.key_cache``), so a request right after a switch could still see
the calendar's caps as they were. ``WARMUP`` iterations without caps and as many with, then
``ROUNDS`` rounds of a block of ``BLOCK`` iterations without caps and one with, the order
alternating round by round so a drift of the machine weighs on both alike. An iteration:
availability, then ``GET /v1/api/calendar/bookings?limit=1``, the framework floor
``bench.availability`` times alongside (here: the baseline). Median and p95 of each; each
availability median ÷ the baseline's; the change of the median with caps over without.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import redis
from sqlalchemy import create_engine, null, select, update

from app.config import Settings
from app.models import CalendarSettings, CalendarVersion, EventType
from app.models.types import utcnow
from app.scheduling.timezones import zone
from bench.availability import (
    API_KEY_HEADER,
    DAYS,
    POSTGRES_ADMIN_URL,
    SEED,
    TIMEZONE,
    Calendar,
    Timing,
    Workload,
    engine_path,
    gunicorn,
    make_workload,
    next_monday,
    populate,
    postgres_database,
    postgres_version,
    slot_count,
)

# The Redis bench.availability.gunicorn hands the server: where its cached sets go.
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

# The highest count and minutes the API accepts, short of a count a month: the window's month
# can hold nearly all 1,000 bookings (from a Monday the 1st, all of them).
CAPS: dict[str, Any] = {
    "perDay": {"count": 1000, "minutes": 24 * 60},
    "perWeek": {"count": 1000, "minutes": 7 * 24 * 60},
    "perMonth": {"minutes": 31 * 24 * 60},
}
TIGHT: dict[str, Any] = {"perDay": {"count": 1}}
# How long a worker may answer with calendar settings read before a switch (a margin added).
KEY_KEPT_SECONDS = Settings().api_key_cache_seconds + 0.1
WARMUP, ROUNDS, BLOCK = 20, 4, 50  # 200 timed requests with caps, 200 without
TARGET = 0.10  # with caps, the median at most 10 % above the median without
BASELINE = "/v1/api/calendar/bookings?limit=1"


class CalendarRows:
    """The served calendar's rows this process writes: its caps and its version."""

    def __init__(self, url: str, event_type_id: int) -> None:
        self._engine = create_engine(url)
        self._event_type_id = event_type_id
        with self._engine.connect() as conn:
            self.sub_account_id: int = conn.scalar(
                select(EventType.sub_account_id).where(EventType.id == event_type_id)
            )
        self.versions: set[int] = set()

    def set_caps(self, limits: dict[str, Any] | None) -> None:
        """``limits`` on the event type and the calendar (None: SQL NULL, no cap), seen by
        every request once this returns: the workers' copies of the calendar settings kept with
        the API key have expired by then."""
        value = null() if limits is None else limits
        with self._engine.begin() as conn:
            conn.execute(
                update(EventType)
                .where(EventType.id == self._event_type_id)
                .values(booking_limits=value)
            )
            conn.execute(
                update(CalendarSettings)
                .where(CalendarSettings.sub_account_id == self.sub_account_id)
                .values(booking_limits=value)
            )
        time.sleep(KEY_KEPT_SECONDS)

    def new_version(self) -> None:
        """A version no answer is kept under, drawn as the triggers draw theirs."""
        version = secrets.randbits(63)
        with self._engine.begin() as conn:
            changed = conn.execute(
                update(CalendarVersion)
                .where(CalendarVersion.sub_account_id == self.sub_account_id)
                .values(version=version)
            ).rowcount
        if changed != 1:
            raise RuntimeError(f"no calendar_versions row for sub account {self.sub_account_id}")
        self.versions.add(version)

    def close(self) -> None:
        self._engine.dispose()


@contextmanager
def calendar_rows(url: str, event_type_id: int) -> Iterator[CalendarRows]:
    """``CalendarRows`` whose connections are closed after, before the database is dropped."""
    rows = CalendarRows(url, event_type_id)
    try:
        yield rows
    finally:
        rows.close()


def forget_kept_sets(sub_account_id: int, versions: set[int]) -> int:
    """Delete the slot sets the server kept in Redis under ``versions`` (the run's own: random
    63-bit numbers, so no other calendar's); returns how many."""
    client = redis.Redis.from_url(REDIS_URL)
    hexes = {f"{version:x}".encode() for version in versions}  # as the keys spell them
    ours = [
        key
        for key in client.scan_iter(match=f"availability:{sub_account_id}:*", count=1000)
        if key.split(b":")[2] in hexes
    ]
    if ours:
        client.delete(*ours)
    client.close()
    return len(ours)


class Client:
    """One client on the server's port. gunicorn's sync workers close the connection after
    each answer, so every request includes a loopback connect (``http.client`` reconnects),
    the baseline's as well."""

    def __init__(self, port: int, api_key: str) -> None:
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self._headers = {API_KEY_HEADER: api_key, "Accept": "application/json"}

    def get(self, path: str) -> tuple[float, bytes]:
        """Seconds to the last byte of a 200's body, and the body."""
        started = time.perf_counter()
        self._conn.request("GET", path, headers=self._headers)
        response = self._conn.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"GET {path}: {response.status} {body[:500]!r}")
        return elapsed, body

    def close(self) -> None:
        self._conn.close()


def slots_in(body: bytes) -> int:
    """The slot count of an availability answer, which must have one entry per day."""
    days = json.loads(body)
    if len(days) not in (DAYS, DAYS + 1):
        raise RuntimeError(f"unexpected answer: {len(days)} days")
    return sum(len(day["slots"]) for day in days)


def bench_database(
    label: str, url: str, workload: Workload, calendar: Calendar, engine_slots: int
) -> None:
    """Populate ``url``, serve it, time both sides and print them (module docstring)."""
    print(f"  {label}")
    tenant = populate(url, workload)
    question = "/v1/api/calendar/availability?" + urlencode(
        {
            "startDate": calendar.first_day.isoformat(),
            "endDate": calendar.last_day.isoformat(),
            "eventTypeId": tenant.event_type_id,
        }
    )
    samples: dict[str, list[float]] = {"without": [], "with": [], "baseline": []}
    with (
        tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp,
        gunicorn(url, Path(tmp) / "gunicorn.log") as port,
        calendar_rows(url, tenant.event_type_id) as rows,
    ):
        client = Client(port, tenant.api_key)

        def computed() -> tuple[float, int]:
            rows.new_version()
            elapsed, body = client.get(question)
            return elapsed, slots_in(body)

        def block(with_caps: bool, iterations: int, timed: bool) -> None:
            rows.set_caps(CAPS if with_caps else None)
            for _ in range(iterations):
                elapsed, slots = computed()
                if slots != engine_slots:
                    state = "with" if with_caps else "without"
                    raise RuntimeError(f"{slots} slots {state} caps, the engine: {engine_slots}")
                baseline = client.get(BASELINE)[0]
                if timed:
                    samples["with" if with_caps else "without"].append(elapsed)
                    samples["baseline"].append(baseline)

        try:
            rows.set_caps(TIGHT)
            probe = computed()[1]
            if probe >= engine_slots:
                raise RuntimeError(f"{probe} slots with {TIGHT}: the caps are not read")
            block(False, WARMUP, timed=False)
            block(True, WARMUP, timed=False)
            for round_ in range(ROUNDS):
                for with_caps in (False, True) if round_ % 2 == 0 else (True, False):
                    block(with_caps, BLOCK, timed=True)
        finally:
            client.close()
            forgotten = forget_kept_sets(rows.sub_account_id, rows.versions)

    without, with_caps = Timing(samples["without"]), Timing(samples["with"])
    baseline = Timing(samples["baseline"])
    change = with_caps.median_ms / without.median_ms - 1
    print(f"    baseline bookings?limit=1   {baseline}")
    for name, timing in (("without caps", without), ("with caps   ", with_caps)):
        ratio = timing.median_ms / baseline.median_ms
        print(f"    availability {name}   {timing}   {ratio:4.2f}× baseline")
    print(
        f"    with caps over without      median {change:+.1%},"
        f" p95 {with_caps.p95_ms / without.p95_ms - 1:+.1%}"
        f"   target ≤ +{TARGET:.0%}: {'met' if change <= TARGET else 'MISSED'}"
    )
    print(
        f"    answers: 200, {engine_slots} slots each (the engine's), with caps and without;"
        f" probe {TIGHT}: {probe} slots; {forgotten} cached sets deleted from Redis"
    )


def main() -> None:
    started = time.monotonic()
    pg_version = postgres_version()
    today = utcnow().astimezone(zone(TIMEZONE)).date()
    calendar = Calendar.starting(next_monday(today), utcnow())
    workload = make_workload(calendar, 1)
    engine_slots = slot_count(engine_path(calendar, workload.occupied, workload.blocked))

    print("Booking caps benchmark: GET /v1/api/calendar/availability with caps and without")
    print(f"date:    {utcnow():%Y-%m-%d %H:%M} UTC")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()}"
        f" {platform.python_version()}, {platform.platform()}"
    )
    print(f"         PostgreSQL {pg_version or 'unreachable'}")
    print(
        f"data:    bench.availability's workload, seed {SEED}: {len(workload.bookings):,}"
        f" bookings, {len(workload.blocked):,} blocked; {DAYS} days from {calendar.first_day}"
        f" ({TIMEZONE}), {engine_slots} open slots"
    )
    print(f"caps:    {json.dumps(CAPS)}, on the event type and the calendar")
    print(
        f"requests: gunicorn 2 sync workers, sequential; {WARMUP} warm-up iterations each way,"
        f" then {ROUNDS} rounds of {BLOCK} without caps and {BLOCK} with, alternating order;"
        " every availability answer computed (a fresh calendar version before each)"
    )
    print()
    if pg_version is None:
        raise SystemExit(f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL}")
    with postgres_database() as url:
        bench_database(f"PostgreSQL {pg_version}", url, workload, calendar, engine_slots)
    print()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
