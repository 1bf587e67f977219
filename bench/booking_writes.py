"""Benchmark of booking creation: POST /v1/api/calendar/event-types/<id>/bookings.

Run from the project root (about two minutes; needs the venv and PostgreSQL at
``TEST_POSTGRES_URL``, default ``postgresql://postgres@127.0.0.1:5432/postgres``)::

    .venv/bin/python -m bench.booking_writes

The workload of 1 and 3 never conflicts, so every create does the whole write path
(per-calendar advisory lock, idempotency-key lookup, working hours and busy-time check, insert
of the booking, its attendee and a new contact, commit) and answers 201; 2 measures the creates
that are refused for their time (400 with ``suggestedSlots``) and slot holds next to accepted
creates:

* A throw-away PostgreSQL database (created through the admin database, migrated, dropped at
  the end) with 4 identical sub accounts, plus a fifth of the same kind that only 2 uses:
  calendar open 24/7 in UTC, no minimum notice, a 3,650-day horizon, one 15-minute event type
  without buffers on a 15-minute grid, one full-permission API key each.
* Request n books slot n, ``BASE + n × 15 min`` (``BASE`` is midnight UTC two days ahead), so
  no two requests of the whole run overlap, on any sub account. Each body carries a unique
  ``idempotencyKey`` (as a careful agent sends) and one attendee with a fresh email.

1. Latency: a real gunicorn (``wsgi:app``, 2 sync workers) on a free loopback port; sequential
   requests, 20 warm-up then 300 timed, alternating the create with the minimal authenticated
   request ``GET /v1/api/calendar/bookings?limit=1`` (same key, same server) as the baseline.
   Median and p95.
2. Refusals and holds, on the same server and database, on the fifth sub account. Set up
   through the API first: a *full day* (all 96 slots booked) followed by a *busy day* (3 of
   every 4 slots booked, so 24 open); the 6 days after those are empty. Then, in
   ``REFUSAL_ROUNDS`` rounds of ``REFUSAL_RUNS`` (after ``REFUSAL_WARMUP`` untimed), each
   iteration makes these requests, the steps in a freshly shuffled order:

   * accepted: a create of a free slot (201) like those of 1 (this sub account's own slot
     counter fills days from BASE one after the other, so the day loaded holds 0-95
     bookings, as in 1);
   * busy day: a create of a booked slot of the busy day (400 ``slot_taken``; its 5
     suggestions come from the same day, already loaded);
   * full day: a create of a slot of the full day (400 ``slot_taken``; the suggestions must
     come from the following days, which the server loads for it);
   * hold, then create with its token: ``POST …/holds`` of a free slot (201 with a
     ``holdToken``), then the create of that slot sending ``holdToken`` (201);
   * the baseline GET, as in 1.

   Every refused create carries a fresh ``idempotencyKey`` and attendee like an accepted one.
   Each answer is checked: the refusals must be 400 with ``code`` ``slot_taken`` and exactly
   the 5 suggestions the rule gives (the nearest open slots of the day; for the full day the
   first 5 open slots of the busy day). Printed: median and p95 per kind, each round's median,
   and the ratio of the refused creates' median to the accepted one's (per round and overall)
   against the target (``REFUSAL_TARGET``). At the end no hold may be left (each was consumed).
3. Throughput: 8 client threads, each creating back-to-back on its own connection; creates per
   second = completed requests / wall time until the last answer. Rows: 2 and 4 gunicorn
   workers (both servers run side by side), all clients on ONE sub account (every write waits
   for that calendar's advisory lock: the worst case) or spread over 4 sub accounts (writes
   proceed in parallel). The rows take turns, 4 rounds of 2.5 s each, so drift in the
   machine's speed (large on shared virtual machines) hits every row alike; the per-round
   spread is printed. Any non-201 answer fails the run; at the end a SQL count must find
   exactly as many active bookings as 201 answers. The client threads run on the same machine
   and their CPU share is printed: on a small machine they compete with the server for cores.
   Bookings accumulate over the run (a few thousand in all); the queries use indexes.

gunicorn's sync workers close the connection after each response, so every request includes a
loopback TCP connect (``http.client`` reconnects by itself); the baseline pays it too.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import platform
import random
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack, redirect_stderr
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as clock
from importlib.metadata import version
from pathlib import Path
from typing import Any

from flask_migrate import upgrade
from sqlalchemy import func, select

from app import create_app
from app.extensions import db
from app.models import ACTIVE_STATUSES, Booking, Permission, SlotHold
from app.models.types import utcnow
from app.services.accounts.provisioning import WEEKDAYS, provision
from bench.availability import (
    API_KEY_HEADER,
    Timing,
    gunicorn,
    postgres_database,
    postgres_version,
)

SUB_ACCOUNTS = 4
SLOT = timedelta(minutes=15)
HORIZON_DAYS = 3650
WARMUP, RUNS = 20, 300
LATENCY_WORKERS = 2
CLIENTS = 8
LOAD_ROUNDS, ROUND_SECONDS = 4, 2.5
LOAD_ROWS = ((2, 1), (2, SUB_ACCOUNTS), (4, 1), (4, SUB_ACCOUNTS))  # (workers, sub accounts)
BASELINE = "/v1/api/calendar/bookings?limit=1"
SHOWN_ERRORS = 3
# 2: refusals and holds
REFUSAL_WARMUP, REFUSAL_ROUNDS, REFUSAL_RUNS = 10, 5, 60
REFUSAL_TARGET = 1.5  # a refused create costs at most this many accepted ones (medians)
FULL_DAY = 30  # days after BASE: the full day; the busy day is the next
SLOTS_PER_DAY = timedelta(days=1) // SLOT
BUSY_DAY_OPEN = 4  # on the busy day, every 4th slot (index 3, 7, ...) stays open
SUGGESTIONS = 5
SEED = 20260101


# --- the calendars ---------------------------------------------------------------------------


def tenant_document(count: int = SUB_ACCOUNTS + 1) -> dict[str, Any]:
    open_all_day = {day: [["00:00", "24:00"]] for day in WEEKDAYS}
    sub_accounts = [
        {
            "name": f"Bench calendar {n}",
            "timezone": "UTC",
            "settings": {"minimumNoticeMinutes": 0, "bookingHorizonDays": HORIZON_DAYS},
            "availabilityProfiles": [
                {"name": "Always", "default": True, "weeklyHours": open_all_day}
            ],
            "eventTypes": [
                {
                    "name": "Call",
                    "duration": SLOT.seconds // 60,
                    "slotInterval": SLOT.seconds // 60,
                    "availabilityProfile": "Always",
                }
            ],
            "apiKeys": [{"name": "bench", "permissions": [p.value for p in Permission]}],
        }
        for n in range(count)
    ]
    return {
        "agencies": [
            {
                "name": "Bench agency",
                "owner": {"email": "owner@bench.test", "password": "s3cret-pass"},
                "subAccounts": sub_accounts,
            }
        ]
    }


@dataclass(frozen=True)
class Calendar:
    """One sub account as a client sees it."""

    api_key: str
    create_path: str

    @property
    def hold_path(self) -> str:
        return self.create_path.removesuffix("/bookings") + "/holds"

    @property
    def headers(self) -> dict[str, str]:
        return {
            API_KEY_HEADER: self.api_key,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }


def migrate_and_provision(url: str, document: dict[str, Any]) -> list[dict[str, Any]]:
    """Migrate the database at ``url`` and provision ``document``'s first agency; returns the
    provisioning output of its sub accounts."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench"})
    with app.app_context():
        with redirect_stderr(io.StringIO()):  # alembic's INFO lines
            upgrade()
        created = provision(document)["agencies"][0]["subAccounts"]
        db.session.commit()
        db.session.remove()
        db.engine.dispose()
    return created


def prepare(url: str) -> list[Calendar]:
    """Migrate and provision the sub accounts."""
    created = migrate_and_provision(url, tenant_document())
    return [
        Calendar(
            s["apiKeys"]["bench"],
            f"/v1/api/calendar/event-types/{s['eventTypes']['Call']}/bookings",
        )
        for s in created
    ]


def active_bookings(url: str) -> int:
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench"})
    with app.app_context():
        count = db.session.scalar(
            select(func.count()).select_from(Booking).where(Booking.status.in_(ACTIVE_STATUSES))
        )
        db.session.remove()
        db.engine.dispose()
    return count


class Slots:
    """Hands out slot n = BASE + n × 15 min, each once, to any thread."""

    def __init__(self) -> None:
        self.base = datetime.combine(utcnow().date() + timedelta(days=2), clock(0), UTC)
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> datetime:
        """The start of the next slot."""
        with self._lock:
            n, self._next = self._next, self._next + 1
        return self.base + n * SLOT

    def body(self) -> bytes:
        start = self.take()
        n = (start - self.base) // SLOT
        return create_body(start, f"caller{n}@bench.test")


def stamp(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def create_body(start: datetime, email: str | None = None, hold_token: str | None = None) -> bytes:
    """A create of the 15-minute slot at ``start`` with a unique idempotencyKey and one
    attendee, ``email`` or a fresh one (and the hold's token, if given)."""
    key = uuid.uuid4().hex
    body: dict[str, Any] = {
        "startTime": stamp(start),
        "endTime": stamp(start + SLOT),
        "attendees": [{"email": email or f"caller-{key}@bench.test"}],
        "idempotencyKey": key,
    }
    if hold_token is not None:
        body["holdToken"] = hold_token
    return json.dumps(body).encode()


# --- the server and the client ---------------------------------------------------------------


@dataclass
class Tally:
    """What a client saw: latencies of the 201s, and the other answers."""

    created: list[float]
    failures: list[str]

    @classmethod
    def empty(cls) -> Tally:
        return cls([], [])

    def add(self, other: Tally) -> None:
        self.created += other.created
        self.failures += other.failures

    def check(self, what: str) -> None:
        if self.failures:
            shown = "\n  ".join(self.failures[:SHOWN_ERRORS])
            raise SystemExit(f"FAILED: {len(self.failures)} non-201 answers to {what}:\n  {shown}")


class Client:
    """One connection to the server (reopened by ``http.client`` after each close)."""

    def __init__(self, port: int, calendar: Calendar, slots: Slots) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.calendar = calendar
        self.slots = slots

    def send(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[float, int, bytes]:
        """One request; its time, status and body. The answer's headers are ``last_headers``."""
        started = time.perf_counter()
        try:
            self.conn.request(
                method, path, body=body, headers={**self.calendar.headers, **(headers or {})}
            )
            response = self.conn.getresponse()
            status, answer = response.status, response.read()
            self.last_headers = response.headers
        except OSError as err:
            self.conn.close()
            status, answer = 0, repr(err).encode()
        return time.perf_counter() - started, status, answer

    def create(self, tally: Tally) -> None:
        elapsed, status, answer = self.send("POST", self.calendar.create_path, self.slots.body())
        if status == 201:
            tally.created.append(elapsed)
        else:
            tally.failures.append(f"{status} {answer[:300]!r}")

    def baseline(self) -> float:
        elapsed, status, answer = self.send("GET", BASELINE)
        if status != 200:
            raise SystemExit(f"FAILED: GET {BASELINE}: {status} {answer[:300]!r}")
        return elapsed

    def close(self) -> None:
        self.conn.close()


# --- 1: latency ------------------------------------------------------------------------------


def bench_latency(label: str, port: int, calendar: Calendar, slots: Slots) -> int:
    """Sequential creates alternating with the baseline; returns the number of 201s."""
    client = Client(port, calendar, slots)
    warm = Tally.empty()
    for _ in range(WARMUP):
        client.create(warm)
        client.baseline()
    timed, floor = Tally.empty(), []
    for _ in range(RUNS):
        client.create(timed)
        floor.append(client.baseline())
    client.close()
    print(f"  {label}")
    warm.check("the warm-up creates")
    timed.check("the timed creates")
    create, base = Timing(timed.created), Timing(floor)
    print(f"    POST create (201)   {create}")
    print(f"    bookings?limit=1    {base}")
    print(f"    above the floor     median {create.median_ms - base.median_ms:7.2f} ms")
    return len(warm.created) + len(timed.created)


# --- 2: refusals and holds ------------------------------------------------------------------

KINDS = {
    "baseline": "GET bookings?limit=1 (baseline)",
    "accepted": "POST create, 201 (accepted)",
    "busy": "POST create, 400, busy day",
    "full": "POST create, 400, full day",
    "hold": "POST hold, 201",
    "held": "POST create with holdToken, 201",
}
REFUSED = {
    "busy": "busy day (suggestions from the day loaded)",
    "full": "full day (suggestions from following days)",
}
HOLD_TTL_SECONDS = 120


def busy_day_open(index: int) -> bool:
    """Whether slot ``index`` of the busy day stays open."""
    return index % BUSY_DAY_OPEN == BUSY_DAY_OPEN - 1


@dataclass
class Refusals:
    """Section 2's calendar, its days, and what the client saw."""

    client: Client
    slots: Slots  # free slots, for the accepted creates and the holds
    rng: random.Random
    full_day: list[datetime] = field(default_factory=list)  # every slot booked
    busy_taken: list[datetime] = field(default_factory=list)
    busy_open: list[datetime] = field(default_factory=list)
    rounds: list[dict[str, list[float]]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    created: int = 0  # 201 answers to creates, the set-up's included
    turn: int = 0

    @classmethod
    def layout(cls, client: Client, slots: Slots) -> Refusals:
        full = slots.base + timedelta(days=FULL_DAY)
        busy = full + timedelta(days=1)
        refusals = cls(client, slots, random.Random(SEED))
        refusals.full_day = [full + i * SLOT for i in range(SLOTS_PER_DAY)]
        for i in range(SLOTS_PER_DAY):
            start = busy + i * SLOT
            (refusals.busy_open if busy_day_open(i) else refusals.busy_taken).append(start)
        return refusals

    def set_up(self) -> None:
        """Book the full day and the busy day's taken slots through the API."""
        for start in self.full_day + self.busy_taken:
            _, status, answer = self.client.send(
                "POST", self.client.calendar.create_path, create_body(start)
            )
            if status != 201:
                raise SystemExit(f"FAILED: setting up section 2: {status} {answer[:300]!r}")
            self.created += 1

    # The steps of one iteration; each appends its latencies to ``times``.

    def accepted(self, times: dict[str, list[float]]) -> None:
        body = create_body(self.slots.take())
        elapsed, status, answer = self.client.send("POST", self.client.calendar.create_path, body)
        self.expect("accepted", status == 201, status, answer)
        self.created += status == 201
        times["accepted"].append(elapsed)

    def baseline(self, times: dict[str, list[float]]) -> None:
        times["baseline"].append(self.client.baseline())

    def busy(self, times: dict[str, list[float]]) -> None:
        wanted = self.busy_taken[self.turn % len(self.busy_taken)]
        nearest = sorted(self.busy_open, key=lambda s: (abs(s - wanted), s))[:SUGGESTIONS]
        self.refused("busy", wanted, nearest, times)

    def full(self, times: dict[str, list[float]]) -> None:
        wanted = self.full_day[self.turn % len(self.full_day)]
        self.refused("full", wanted, self.busy_open[:SUGGESTIONS], times)

    def hold_then_create(self, times: dict[str, list[float]]) -> None:
        start = self.slots.take()
        hold = {
            "startTime": stamp(start),
            "endTime": stamp(start + SLOT),
            "ttlSeconds": HOLD_TTL_SECONDS,
        }
        elapsed, status, answer = self.client.send(
            "POST", self.client.calendar.hold_path, json.dumps(hold).encode()
        )
        token = json.loads(answer).get("holdToken") if status == 201 else None
        self.expect("hold", isinstance(token, str) and token.startswith("hold_"), status, answer)
        times["hold"].append(elapsed)
        if token is None:
            return
        body = create_body(start, hold_token=token)
        elapsed, status, answer = self.client.send("POST", self.client.calendar.create_path, body)
        self.expect("held", status == 201, status, answer)
        self.created += status == 201
        times["held"].append(elapsed)

    def refused(
        self, kind: str, wanted: datetime, expected: list[datetime], times: dict[str, list[float]]
    ) -> None:
        elapsed, status, answer = self.client.send(
            "POST", self.client.calendar.create_path, create_body(wanted)
        )
        want = [{"start": stamp(s), "end": stamp(s + SLOT)} for s in expected]
        try:
            got = json.loads(answer)
        except ValueError:
            got = {}
        ok = status == 400 and got.get("code") == "slot_taken" and got.get("suggestedSlots") == want
        self.expect(kind, ok, status, answer)
        times[kind].append(elapsed)

    def expect(self, kind: str, ok: bool, status: int, answer: bytes) -> None:
        if ok:
            self.checked[kind] += 1
        else:
            self.failures.append(f"{KINDS[kind]}: {status} {answer[:300]!r}")

    def iteration(self, times: dict[str, list[float]]) -> None:
        steps = [self.accepted, self.baseline, self.busy, self.full, self.hold_then_create]
        self.rng.shuffle(steps)
        for step in steps:
            step(times)
        self.turn += 1

    def run(self) -> None:
        warm: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for _ in range(REFUSAL_WARMUP):
            self.iteration(warm)
        for _ in range(REFUSAL_ROUNDS):
            times: dict[str, list[float]] = {kind: [] for kind in KINDS}
            for _ in range(REFUSAL_RUNS):
                self.iteration(times)
            self.rounds.append(times)

    def report(self) -> None:
        every = {kind: Timing([t for r in self.rounds for t in r[kind]]) for kind in KINDS}
        per_round = {kind: [Timing(r[kind]).median_ms for r in self.rounds] for kind in KINDS}
        floor = every["baseline"].median_ms
        print(
            f"  {'kind':<36}  median ms   p95 ms  above baseline  medians of the"
            f" {REFUSAL_ROUNDS} rounds (ms)"
        )
        for kind, label in KINDS.items():
            timing = every[kind]
            rounds = " ".join(f"{m:5.1f}" for m in per_round[kind])
            above = "" if kind == "baseline" else f"{timing.median_ms - floor:8.2f}"
            print(
                f"  {label:<36}  {timing.median_ms:9.2f}  {timing.p95_ms:7.2f}  {above:>14}"
                f"  {rounds}"
            )
        accepted = every["accepted"].median_ms
        print(f"  refused / accepted, medians (target: at most {REFUSAL_TARGET:g}×)")
        for kind, label in REFUSED.items():
            ratio = every[kind].median_ms / accepted
            ratios = [r / a for r, a in zip(per_round[kind], per_round["accepted"], strict=True)]
            verdict = "met" if ratio <= REFUSAL_TARGET else "NOT MET"
            print(
                f"    {label:<44}  {ratio:5.2f}×  (rounds {min(ratios):.2f}–{max(ratios):.2f}×)"
                f"  {verdict}"
            )
        print(
            f"  checked: {self.checked['busy']} busy-day and {self.checked['full']} full-day"
            f" refusals (400 slot_taken with the {SUGGESTIONS} expected suggestedSlots),"
        )
        print(
            f"           {self.checked['accepted']} accepted creates, {self.checked['hold']} holds"
            f" and {self.checked['held']} creates with their token (201)"
        )


def bench_refusals(label: str, port: int, calendar: Calendar) -> int:
    """Section 2 on ``calendar`` (one no other section writes to); returns the number of
    bookings it created."""
    slots = Slots()
    refusals = Refusals.layout(Client(port, calendar, slots), slots)
    refusals.set_up()
    refusals.run()
    refusals.client.close()
    print(f"  {label}")
    refusals.report()
    if refusals.failures:
        shown = "\n  ".join(refusals.failures[:SHOWN_ERRORS])
        raise SystemExit(f"FAILED: {len(refusals.failures)} unexpected answers:\n  {shown}")
    return refusals.created


# --- 2: throughput ---------------------------------------------------------------------------


@dataclass
class Load:
    """One row's rounds, summed."""

    tally: Tally
    seconds: float = 0.0
    client_cpu_seconds: float = 0.0
    round_rates: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.tally.created) / self.seconds


def hammer(port: int, calendars: list[Calendar], slots: Slots, load: Load) -> None:
    """One round: ``CLIENTS`` threads creating back-to-back for ``ROUND_SECONDS``; thread t
    books on ``calendars[t % len(calendars)]``. The round lasts until the last answer."""
    go = threading.Barrier(CLIENTS + 1)
    done = threading.Event()
    tallies = [Tally.empty() for _ in range(CLIENTS)]

    def run(n: int) -> None:
        client = Client(port, calendars[n % len(calendars)], slots)
        go.wait()
        while not done.is_set():
            client.create(tallies[n])
        client.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    go.wait()
    started, cpu = time.perf_counter(), time.process_time()
    time.sleep(ROUND_SECONDS)
    done.set()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    load.client_cpu_seconds += time.process_time() - cpu
    load.seconds += seconds
    load.round_rates.append(sum(len(t.created) for t in tallies) / seconds)
    for tally in tallies:
        load.tally.add(tally)


def load_row(workers: int, spread: int, load: Load) -> str:
    latency = Timing(load.tally.created or [float("nan")])
    rounds = f"{min(load.round_rates):.0f}–{max(load.round_rates):.0f}"
    return (
        f"  {workers:>7}  {spread:>12}  {len(load.tally.created):>7,}  {load.rate:>9.1f}"
        f"  {rounds:>9}  {len(load.tally.failures):>7}  {latency.median_ms:>9.2f}"
        f"  {latency.p95_ms:>7.2f}  {load.client_cpu_seconds / load.seconds:>10.0%}"
    )


# --- main ------------------------------------------------------------------------------------


def bench_postgres(label: str, url: str, log_dir: Path) -> None:
    calendars = prepare(url)
    slots = Slots()
    loads = {row: Load(Tally.empty()) for row in LOAD_ROWS}
    with ExitStack() as servers:
        ports = {
            workers: servers.enter_context(
                gunicorn(url, log_dir / f"gunicorn-{workers}.log", workers)
            )
            for workers in sorted({w for w, _ in LOAD_ROWS} | {LATENCY_WORKERS})
        }
        server = f"{label}, gunicorn {LATENCY_WORKERS} sync workers"
        created = bench_latency(server, ports[LATENCY_WORKERS], calendars[0], slots)
        print()
        print(
            f"2. Refused creates and holds: a full day ({SLOTS_PER_DAY} of {SLOTS_PER_DAY} slots"
            f" booked) and the busy day after it ({SLOTS_PER_DAY // BUSY_DAY_OPEN} slots open),"
        )
        print(
            f"   {REFUSAL_WARMUP} warm-up + {REFUSAL_ROUNDS} rounds × {REFUSAL_RUNS} iterations,"
            " each request kind once per iteration in shuffled order"
        )
        created += bench_refusals(
            f"{server}, sub account {SUB_ACCOUNTS + 1} (only this section's)",
            ports[LATENCY_WORKERS],
            calendars[SUB_ACCOUNTS],
        )
        check_holds(url)
        for _ in range(LOAD_ROUNDS):
            for (workers, spread), load in loads.items():
                hammer(ports[workers], calendars[:spread], slots, load)
    print()
    print(
        f"3. Throughput, PostgreSQL: {CLIENTS} client threads creating back-to-back,"
        f" {LOAD_ROUNDS} rounds of {ROUND_SECONDS:g} s per row, rows interleaved"
    )
    print(
        "  workers  sub accounts  creates  creates/s  per round  non-201  median ms   p95 ms"
        "  client CPU"
    )
    for (workers, spread), load in loads.items():
        print(load_row(workers, spread, load))
    for (workers, spread), load in loads.items():
        load.tally.check(f"{workers} workers, {spread} sub account(s)")
        created += len(load.tally.created)
    check_count(url, created)


def check_count(url: str, created: int) -> None:
    in_db = active_bookings(url)
    verdict = "ok" if in_db == created else "MISMATCH"
    print(f"  database check: {in_db:,} active bookings, {created:,} answers 201: {verdict}")
    if in_db != created:
        raise SystemExit("FAILED: the database does not hold one booking per 201")


def check_holds(url: str) -> None:
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench"})
    with app.app_context():
        left = db.session.scalar(select(func.count()).select_from(SlotHold))
        db.session.remove()
        db.engine.dispose()
    print(f"  database check: {left} holds left (each was consumed): {'ok' if not left else 'NO'}")
    if left:
        raise SystemExit("FAILED: holds were left in the database")


def main() -> None:
    started = time.monotonic()
    pg_version = postgres_version()
    print("Booking-write benchmark")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.platform()}"
    )
    print(
        f"         PostgreSQL {pg_version or 'unreachable'},"
        f" gunicorn {version('gunicorn')} (sync workers)"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    print(
        f"calendars: {SUB_ACCOUNTS} sub accounts, UTC, open 24/7, no notice,"
        f" {HORIZON_DAYS}-day horizon; 15-min event type, no buffers, 15-min grid"
    )
    print(
        "requests:  each books its own 15-min slot (none overlap), unique idempotencyKey,"
        " one attendee with a fresh email"
    )
    print()
    print(
        f"1. Latency, sequential, {WARMUP} warm-up + {RUNS} timed each, alternating the create"
        f" with the baseline GET {BASELINE}"
    )
    with tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp:
        if pg_version is None:
            raise SystemExit("PostgreSQL is not reachable: every figure needs it")
        with postgres_database() as url:
            bench_postgres(f"PostgreSQL {pg_version}", url, Path(tmp))
    print()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
