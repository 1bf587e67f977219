"""Benchmark of round-robin availability: the 31-day question of an event type over 10 hosts
against the same question of a one-host event type with the same load per host, computed and
kept, against floor B measured in the same run on the same server configuration.

Run from the project root (about 80 s; PostgreSQL at ``TEST_POSTGRES_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``, and Redis at ``TEST_REDIS_URL``, default
``redis://127.0.0.1:6379/0``)::

    .venv/bin/python -m bench.teams [--rounds N] [--runs N] [--profile]

The data: one throw-away database (``bench.availability.postgres_database``), migrated, one
agency provisioned (``app.services.accounts.provisioning.provision``) with two sub accounts,
America/New_York, one availability profile "Office" (Mon–Fri 09:00–17:00, weekends closed):

* "Team clinic": ``HOSTS`` hosts, "Host 1" … "Host 10". "Team call" is round robin over all
  of them (equal priority and weight, no ``maxAhead``); "Host 1 call" is a one-host type of
  Host 1 (its row tells what a team member's calendar costs next to the solo clinic's).
* "Solo clinic": one host, "Host 1", and "Solo call", its one-host type.

All types: 30 minutes on a 30-minute grid, no buffers, no minimum notice, a 365-day horizon,
the profile's hours. The busy time, bulk inserted with each row's ``host_id``: per host
``BOOKINGS_PER_HOST`` confirmed 30-minute bookings, one per 30-minute cell drawn without
replacement (so one host's never overlap, as the per-host exclusion constraint requires), and
``BLOCKED_PER_HOST`` manual blocked times of 15–60 minutes starting anywhere in a drawn cell;
``IN_HOURS_SHARE`` of both inside working hours, the rest at night or on weekends, all in the
31-day window from the Monday after today. Each host draws with a seed of its own
(``SEED`` × 100 + its number), so the hosts are busy at different times; the solo clinic's host
gets exactly the team's Host 1's rows.

The servers: three, side by side, each as the Procfile's ``web`` (``gunicorn -c
gunicorn.conf.py``, ``bench.hot_path.procfile_server``: 2 gevent workers, one environment,
``bench.capacity.service_env``, with the rate limit at 1,000,000/minute in Redis under a key
prefix of the run's own):

* the floors, ``bench.floor_app`` (floor B: ``GET /floor/select/<id>``, one primary-key
  ``SELECT`` of a booking row, the seeded ids in turn);
* the API with ``AVAILABILITY_KEEP_SECONDS=0``: nothing kept, every answer computed;
* the API as deployed (sets kept for an hour, in Redis and each worker's memory): after the
  warm-up every answer is the kept set of the question.

The requests: one client, sequential, a keep-alive connection per server and calendar.
``WARMUP`` untimed iterations, then ``ROUNDS`` rounds of ``RUNS``; each iteration asks floor B
and every question once (``KINDS``), in a freshly shuffled order. Nothing changes the calendars
while measuring, so every question has one answer throughout.

The checks: every answer 200; before timing, each question's answer has 31 days and the slot
count computed here from the rows (``app.scheduling``: each host's open slots, and for round
robin their union), so the round-robin answer has at least as many slots as the one-host one,
and the team's Host 1 alone as many as the solo clinic; the kept server's answer is the
computed server's (the same days and slots); after the warm-up the kept server holds both
calendars' sets in Redis under their current versions, and every timed answer of a question
carries the body and the ``ETag`` of its first.

The figures: median and p95 of each, pooled over the rounds with the rounds' range of medians;
RR-10 computed ÷ one host computed (target ≤ 3×), RR-10 kept ÷ one host kept (target ≤ 1.2×),
and each ÷ floor B. Then, with the servers stopped, ``compute_slot_set`` in this process on the
same database (medians of ``PROFILE_RUNS``, the questions taking turns, and how many statements
each runs): what computing the set costs without HTTP; with ``--profile``, cProfile of the
round-robin question's runs (the functions with the most cumulative and internal time).
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import io
import json
import os
import platform
import pstats
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib.metadata import version
from itertools import chain
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg
import redis
from flask_migrate import upgrade
from sqlalchemy import event, insert

from app import create_app
from app.extensions import db
from app.models import BlockedTime, BlockedTimeSource, Booking, Permission, SubAccount
from app.models.types import utcnow
from app.scheduling.intervals import Interval, merge
from app.scheduling.round_robin import AssignmentReason
from app.scheduling.slots import SlotRules, open_slots
from app.scheduling.timezones import InstantInput, zone
from app.scheduling.working_hours import WeeklySchedule, working_ranges
from app.services.accounts.provisioning import provision
from app.services.availability.open_time import AvailabilityQuery, compute_slot_set
from bench import availability, capacity, floor_app
from bench.availability import API_KEY_HEADER, DAYS, TIMEZONE, Timing
from bench.hot_path import FLOOR_A, FLOOR_B, Server, cpu_model, procfile_server, spread

HOSTS = 10
BOOKINGS_PER_HOST = 100
BLOCKED_PER_HOST = 50
IN_HOURS_SHARE = 0.8
SLOT_MINUTES = 30
BLOCKED_MINUTES = (15, 30, 45, 60)
WORKING_HOURS = (9 * 60, 17 * 60)
HORIZON_DAYS = 365
CELL = timedelta(minutes=SLOT_MINUTES)
SEED = 20261207

ROUNDS, RUNS, WARMUP = 3, 100, 20
PROFILE_RUNS = 100
SHOWN_FUNCTIONS = 18

KINDS = {
    "floor_b": "floor B: GET, one PK SELECT",
    "one_computed": "one host, computed",
    "rr_computed": "RR-10, computed",
    "member_computed": "the team's Host 1 alone, computed",
    "one_kept": "one host, kept",
    "rr_kept": "RR-10, kept",
}


@dataclass(frozen=True)
class Ratio:
    label: str
    subject: str
    base: str
    limit: float | None = None


RATIOS = (
    Ratio("RR-10 computed ÷ one host computed", "rr_computed", "one_computed", 3.0),
    Ratio("RR-10 kept ÷ one host kept", "rr_kept", "one_kept", 1.2),
    Ratio("one host computed ÷ floor B", "one_computed", "floor_b"),
    Ratio("RR-10 computed ÷ floor B", "rr_computed", "floor_b"),
    Ratio("one host kept ÷ floor B", "one_kept", "floor_b"),
    Ratio("RR-10 kept ÷ floor B", "rr_kept", "floor_b"),
    Ratio("team's Host 1 computed ÷ one host computed", "member_computed", "one_computed"),
)

SCHEDULE = WeeklySchedule(timezone=TIMEZONE, weekly={day: [WORKING_HOURS] for day in range(5)})
RULES = SlotRules(duration=CELL, step=CELL)  # what compute_slot_set uses: no notice, no horizon


# --- the workload ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HostLoad:
    bookings: list[Interval]
    blocked: list[Interval]


def cells(window: Interval) -> tuple[list[datetime], list[datetime]]:
    """The window's 30-minute cells inside working hours and outside."""
    working = working_ranges(SCHEDULE, *window)
    inside: list[datetime] = []
    outside: list[datetime] = []
    cell = window.start
    while cell < window.end:
        in_hours = any(w.overlaps(Interval(cell, cell + CELL)) for w in working)
        (inside if in_hours else outside).append(cell)
        cell += CELL
    return inside, outside


def host_load(window: Interval, number: int) -> HostLoad:
    """Host ``number``'s busy time (its own seed)."""
    rng = random.Random(SEED * 100 + number)
    inside, outside = cells(window)
    bookings_in = round(BOOKINGS_PER_HOST * IN_HOURS_SHARE)
    starts = rng.sample(inside, bookings_in) + rng.sample(outside, BOOKINGS_PER_HOST - bookings_in)
    bookings = [Interval(start, start + CELL) for start in starts]
    blocked_in = round(BLOCKED_PER_HOST * IN_HOURS_SHARE)
    starts = rng.choices(inside, k=blocked_in) + rng.choices(
        outside, k=BLOCKED_PER_HOST - blocked_in
    )
    blocked = []
    for cell in starts:
        start = cell + timedelta(minutes=rng.randrange(0, SLOT_MINUTES, 5))
        blocked.append(Interval(start, start + timedelta(minutes=rng.choice(BLOCKED_MINUTES))))
    rng.shuffle(bookings)
    rng.shuffle(blocked)
    return HostLoad(bookings, blocked)


def open_of(window: Interval, load: HostLoad) -> list[Interval]:
    """One host's open slots, as the engine computes them from its rows."""
    busy = merge(chain(load.bookings, load.blocked))
    return open_slots(working_ranges(SCHEDULE, *window), busy, RULES, window)


def tenant_document() -> dict[str, Any]:
    hours = {day: [["09:00", "17:00"]] for day in ("mon", "tue", "wed", "thu", "fri")}
    settings = {
        "defaultDuration": SLOT_MINUTES,
        "minimumNoticeMinutes": 0,
        "bookingHorizonDays": HORIZON_DAYS,
    }
    call = {
        "duration": SLOT_MINUTES,
        "slotInterval": SLOT_MINUTES,
        "availabilityProfile": "Office",
        "minimumNoticeMinutes": 0,
        "bookingHorizonDays": HORIZON_DAYS,
    }
    hosts = [{"name": f"Host {n}"} for n in range(1, HOSTS + 1)]

    def clinic(name: str, hosts: list[dict[str, str]], types: list[dict[str, Any]]) -> Any:
        return {
            "name": name,
            "timezone": TIMEZONE,
            "settings": settings,
            "hosts": hosts,
            "availabilityProfiles": [{"name": "Office", "default": True, "weeklyHours": hours}],
            "eventTypes": [{**call, **t} for t in types],
            "apiKeys": [{"name": "bench", "permissions": [p.value for p in Permission]}],
        }

    return {
        "agencies": [
            {
                "name": "Bench agency, teams",
                "owner": {"email": "owner-teams@bench.test", "password": "s3cret-pass"},
                "subAccounts": [
                    clinic(
                        "Team clinic",
                        hosts,
                        [
                            {"name": "Team call", "assignment": "round_robin", "hosts": hosts},
                            {"name": "Host 1 call", "host": "Host 1"},
                        ],
                    ),
                    clinic("Solo clinic", hosts[:1], [{"name": "Solo call"}]),
                ],
            }
        ]
    }


@dataclass(frozen=True)
class Tenant:
    team_key: str
    solo_key: str
    team_id: int
    solo_id: int
    rr_type: int
    member_type: int
    solo_type: int
    booking_ids: list[int]


def populate(url: str, loads: list[HostLoad]) -> Tenant:
    """Migrate, provision, and bulk-insert each host's rows (the solo clinic's host: Host
    1's)."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench"})
    with app.app_context():
        with redirect_stderr(io.StringIO()):  # alembic's INFO lines
            upgrade()
        team, solo = provision(tenant_document())["agencies"][0]["subAccounts"]
        # (sub account, event type, host, reason, load) for every host's rows
        owners = [
            (
                team["id"],
                team["eventTypes"]["Team call"],
                team["hosts"][f"Host {n + 1}"],
                AssignmentReason.LEAST_RECENTLY_BOOKED,
                load,
            )
            for n, load in enumerate(loads)
        ]
        owners.append(
            (
                solo["id"],
                solo["eventTypes"]["Solo call"],
                solo["hosts"]["Host 1"],
                AssignmentReason.SINGLE,
                loads[0],
            )
        )
        now = utcnow()
        booking_ids = db.session.scalars(
            insert(Booking).returning(Booking.id, sort_by_parameter_order=True),
            [
                {
                    "uid": f"bench-teams-{host_id}-{n}",
                    "sub_account_id": sub_account_id,
                    "host_id": host_id,
                    "assignment_reason": reason,
                    "event_type_id": event_type_id,
                    "status": "confirmed",
                    "title": f"Call with client{n}@bench.test",
                    "timezone": TIMEZONE,
                    "meta": {},
                    "start_at": interval.start,
                    "end_at": interval.end,
                    "occupied_start": interval.start,
                    "occupied_end": interval.end,
                    "confirmed_at": now,
                    "created_at": now,
                    "updated_at": now,
                }
                for sub_account_id, event_type_id, host_id, reason, load in owners
                for n, interval in enumerate(load.bookings)
            ],
        ).all()
        db.session.execute(
            insert(BlockedTime),
            [
                {
                    "sub_account_id": sub_account_id,
                    "host_id": host_id,
                    "start_at": interval.start,
                    "end_at": interval.end,
                    "reason": "bench",
                    "source": BlockedTimeSource.MANUAL,
                    "created_at": now,
                }
                for sub_account_id, _, host_id, _, load in owners
                for interval in load.blocked
            ],
        )
        db.session.commit()
        db.session.remove()
        db.engine.dispose()
    return Tenant(
        team_key=team["apiKeys"]["bench"],
        solo_key=solo["apiKeys"]["bench"],
        team_id=team["id"],
        solo_id=solo["id"],
        rr_type=team["eventTypes"]["Team call"],
        member_type=team["eventTypes"]["Host 1 call"],
        solo_type=solo["eventTypes"]["Solo call"],
        booking_ids=list(booking_ids),
    )


# --- the requests ----------------------------------------------------------------------------


class Connection:
    """One keep-alive connection to a server, with one calendar's key."""

    def __init__(self, port: int, api_key: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {API_KEY_HEADER: api_key, "Accept": "application/json"}

    def get(self, path: str) -> tuple[float, bytes, str]:
        """Seconds to the last byte of a 200's body, the body and its ETag."""
        started = time.perf_counter()
        self.conn.request("GET", path, headers=self.headers)
        response = self.conn.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise SystemExit(f"FAILED: GET {path}: {response.status} {body[:300]!r}")
        return elapsed, body, response.headers.get("ETag") or ""

    def close(self) -> None:
        self.conn.close()


@dataclass
class Question:
    """One availability question sent to one server; its first answer, which every later one
    must repeat."""

    connection: Connection
    path: str
    body: bytes = b""
    etag: str = ""

    def ask(self) -> float:
        elapsed, body, etag = self.connection.get(self.path)
        if not self.body:
            self.body, self.etag = body, etag
        elif body != self.body or etag != self.etag:
            raise SystemExit(f"FAILED: {self.path} answered differently ({etag} ≠ {self.etag})")
        return elapsed


@dataclass
class Client:
    floors: Connection
    booking_ids: list[int]
    questions: dict[str, Question]
    connections: list[Connection]
    turn: int = 0
    samples: dict[str, list[float]] = field(default_factory=dict)

    def timed(self, kind: str) -> float:
        if kind != "floor_b":
            return self.questions[kind].ask()
        booking_id = self.booking_ids[self.turn % len(self.booking_ids)]
        self.turn += 1
        elapsed, body, _ = self.floors.get(FLOOR_B.format(booking_id))
        if json.loads(body)["id"] != booking_id:
            raise SystemExit(f"FAILED: floor B answered another row than {booking_id}")
        return elapsed

    def iteration(self, rng: random.Random) -> dict[str, float]:
        order = list(KINDS)
        rng.shuffle(order)
        return {kind: self.timed(kind) for kind in order}

    def close(self) -> None:
        for connection in self.connections:
            connection.close()


def client(
    tenant: Tenant, window: availability.Calendar, floors: Server, api: dict[str, Server]
) -> Client:
    def path(event_type_id: int) -> str:
        return "/v1/api/calendar/availability?" + urlencode(
            {
                "startDate": window.first_day.isoformat(),
                "endDate": window.last_day.isoformat(),
                "eventTypeId": event_type_id,
            }
        )

    connections: dict[tuple[str, str], Connection] = {}

    def connection(mode: str, key: str) -> Connection:
        if (mode, key) not in connections:
            connections[mode, key] = Connection(api[mode].port, key)
        return connections[mode, key]

    questions = {}
    for mode in ("computed", "kept"):
        questions[f"one_{mode}"] = Question(
            connection(mode, tenant.solo_key), path(tenant.solo_type)
        )
        questions[f"rr_{mode}"] = Question(connection(mode, tenant.team_key), path(tenant.rr_type))
    questions["member_computed"] = Question(
        connection("computed", tenant.team_key), path(tenant.member_type)
    )
    floors_connection = Connection(floors.port, "")
    return Client(
        floors_connection,
        tenant.booking_ids,
        questions,
        [floors_connection, *connections.values()],
    )


# --- the checks ------------------------------------------------------------------------------


def answered(body: bytes) -> list[dict[str, Any]]:
    """An availability answer's days (as many as the window's), with their start times."""
    days = json.loads(body)
    if len(days) not in (DAYS, DAYS + 1):
        raise SystemExit(f"FAILED: unexpected answer: {len(days)} days")
    return days


def slot_starts(body: bytes) -> list[str]:
    return [slot["start"] for day in answered(body) for slot in day["slots"]]


def check_answers(questions: dict[str, Question], expected: dict[str, int]) -> dict[str, int]:
    """Each question's first answer against the slots computed here; returns the counts."""
    counts = {}
    for kind, question in questions.items():
        counts[kind] = len(slot_starts(question.body))
        wanted = expected[kind.rsplit("_", 1)[0]]
        if counts[kind] != wanted:
            raise SystemExit(f"FAILED: {kind}: {counts[kind]} slots, computed here: {wanted}")
    for name in ("one", "rr"):
        computed, kept = questions[f"{name}_computed"], questions[f"{name}_kept"]
        if slot_starts(computed.body) != slot_starts(kept.body):
            raise SystemExit(f"FAILED: {name}: the kept server's slots are not the computed's")
    if counts["rr_computed"] < counts["one_computed"]:
        raise SystemExit("FAILED: round robin offers fewer slots than its one host")
    return counts


def versions(url: str, sub_account_ids: list[int]) -> dict[int, int]:
    with psycopg.connect(floor_app.conninfo(url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT sub_account_id, version FROM calendar_versions WHERE sub_account_id = ANY(%s)",
            (sub_account_ids,),
        ).fetchall()
    return {sub_account_id: version for sub_account_id, version in rows}


def kept_keys(calendars: dict[int, int]) -> dict[int, list[bytes]]:
    """The slot sets Redis keeps under each calendar's version (random 63-bit numbers: this
    run's own)."""
    client = redis.Redis.from_url(capacity.REDIS_URL)
    found = {
        sub_account_id: list(
            client.scan_iter(match=f"availability:{sub_account_id}:{version:x}:*", count=1000)
        )
        for sub_account_id, version in calendars.items()
    }
    client.close()
    return found


def forget_kept(calendars: dict[int, int]) -> int:
    keys = [key for found in kept_keys(calendars).values() for key in found]
    if keys:
        client = redis.Redis.from_url(capacity.REDIS_URL)
        client.delete(*keys)
        client.close()
    return len(keys)


def check_logs(log_dir: Path, names: list[str]) -> None:
    for name in names:
        lines = (log_dir / name).read_text(errors="replace").splitlines()
        errors = [line for line in lines if "ERROR" in line or "Traceback" in line]
        for line in errors[:5]:
            print(f"  {name}: {line[:300]}")
        if errors:
            raise SystemExit(f"FAILED: {len(errors)} lines with ERROR or Traceback in {name}")


# --- the run ---------------------------------------------------------------------------------


def timing(samples: list[float]) -> Timing:
    return Timing(samples or [float("nan")])


@contextmanager
def servers(env: dict[str, str], log_dir: Path) -> Iterator[tuple[Server, dict[str, Server]]]:
    def metrics(name: str) -> dict[str, str]:
        return {"PROMETHEUS_MULTIPROC_DIR": str(log_dir / f"{name}-metrics")}

    deployed = {k: v for k, v in env.items() if k != "AVAILABILITY_KEEP_SECONDS"}
    with (
        procfile_server(
            "the floors", "bench.floor_app:app", {**env, **metrics("floors")},
            log_dir / "floors.log", FLOOR_A,
        ) as floors,
        procfile_server(
            "the API, nothing kept",
            "wsgi:app",
            {**deployed, **metrics("computed"), "AVAILABILITY_KEEP_SECONDS": "0"},
            log_dir / "computed.log",
            "/healthz",
        ) as computed,
        procfile_server(
            "the API, as deployed", "wsgi:app", {**deployed, **metrics("kept")},
            log_dir / "kept.log", "/healthz",
        ) as kept,
    ):  # fmt: skip
        yield floors, {"computed": computed, "kept": kept}


def measure(
    args: argparse.Namespace, the_client: Client, url: str, tenant: Tenant
) -> list[dict[str, list[float]]]:
    rng = random.Random(SEED)
    for _ in range(WARMUP):
        the_client.iteration(rng)
    calendars = versions(url, [tenant.team_id, tenant.solo_id])
    held = kept_keys(calendars)
    if not all(held.values()):
        raise SystemExit(f"FAILED: the kept server keeps no set of some calendar: {held}")
    print(
        f"kept: after the warm-up Redis holds {sum(map(len, held.values()))} sets under the"
        " calendars' current versions; every timed answer must repeat its question's first"
        " (body and ETag)"
    )
    return timed_rounds(the_client, rng, KINDS, args.rounds, args.runs)


def timed_rounds(
    the_client: Any, rng: random.Random, kinds: dict[str, str], rounds: int, runs: int
) -> list[dict[str, list[float]]]:
    """``rounds`` rounds of ``runs`` iterations of ``the_client`` (its ``iteration(rng)``
    times each of ``kinds`` once): each round's milliseconds by kind."""
    timed = []
    for _ in range(rounds):
        samples: dict[str, list[float]] = {kind: [] for kind in kinds}
        for _ in range(runs):
            for kind, elapsed in the_client.iteration(rng).items():
                samples[kind].append(elapsed)
        timed.append(samples)
    return timed


def report(rounds: list[dict[str, list[float]]]) -> None:
    print_medians(rounds, KINDS, RATIOS, kind_width=34, ratio_width=44)


def print_medians(
    rounds: list[dict[str, list[float]]],
    kinds: dict[str, str],
    ratios: tuple[Ratio, ...],
    *,
    kind_width: int,
    ratio_width: int,
) -> None:
    """Each kind's median and p95 pooled over the rounds, ÷ floor B (``floor_b``), with the
    rounds' medians; then each ratio of pooled medians with the rounds' range, and its
    target when it has one."""
    pooled = {kind: [s for r in rounds for s in r[kind]] for kind in kinds}
    median = {kind: timing(pooled[kind]).median_ms for kind in kinds}
    header = "sequential, keep-alive"
    print(f"{header:<{kind_width + 2}}  median ms   p95 ms   ÷ floor B   rounds' medians")
    for kind, label in kinds.items():
        t = timing(pooled[kind])
        medians = [timing(r[kind]).median_ms for r in rounds]
        print(
            f"  {label:<{kind_width}}  {t.median_ms:9.2f}  {t.p95_ms:7.2f}"
            f"  {t.median_ms / median['floor_b']:8.2f}×"
            f"   [{spread(medians)}]"
        )
    print()
    print("Ratios of medians (pooled; the rounds' range)")
    for ratio in ratios:
        value = median[ratio.subject] / median[ratio.base]
        per_round = [
            timing(r[ratio.subject]).median_ms / timing(r[ratio.base]).median_ms for r in rounds
        ]
        verdict = ""
        if ratio.limit is not None:
            met = "met" if value <= ratio.limit else "NOT met"
            verdict = f"  target ≤ {ratio.limit:g}×: {met}"
        print(f"  {ratio.label:<{ratio_width}} {value:6.2f}×  [{spread(per_round):>11}]{verdict}")


def in_process(url: str, tenant: Tenant, window: availability.Calendar, profile: bool) -> None:
    """``compute_slot_set`` alone, in this process, the questions taking turns: medians of
    ``PROFILE_RUNS`` each and the statements each runs; with ``profile``, cProfile of the
    round-robin question."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench"})
    asked = {
        "one host": (tenant.solo_id, tenant.solo_type),
        "RR-10": (tenant.team_id, tenant.rr_type),
        "the team's Host 1 alone": (tenant.team_id, tenant.member_type),
    }
    profiler = cProfile.Profile()
    statements = [0]

    def counted(*_: Any) -> None:
        statements[0] += 1

    with app.app_context():
        questions = {}
        for label, (sub_account_id, event_type_id) in asked.items():
            sub_account = db.session.get(SubAccount, sub_account_id)
            assert sub_account is not None
            questions[label] = (
                sub_account,
                AvailabilityQuery(
                    InstantInput(window.first_day), InstantInput(window.last_day), event_type_id
                ),
            )
        samples: dict[str, list[float]] = {label: [] for label in questions}
        counts = {}
        event.listen(db.engine, "before_cursor_execute", counted)
        for label, question in questions.items():
            compute_slot_set(*question)  # what is read once (the settings) read before
            statements[0] = 0
            compute_slot_set(*question)
            counts[label] = statements[0]
        event.remove(db.engine, "before_cursor_execute", counted)
        for _ in range(PROFILE_RUNS):
            for label, question in questions.items():
                started = time.perf_counter()
                compute_slot_set(*question)
                samples[label].append(time.perf_counter() - started)
        medians = {label: statistics.median(s) * 1000 for label, s in samples.items()}
        print(
            f"compute_slot_set in this process (no HTTP; median of {PROFILE_RUNS}, taking"
            " turns; statements): "
            + ", ".join(f"{label} {medians[label]:.2f} ms ({counts[label]})" for label in medians)
            + f"; RR-10 ÷ one host {medians['RR-10'] / medians['one host']:.2f}×"
        )
        if profile:
            profiler.enable()
            for _ in range(PROFILE_RUNS):
                compute_slot_set(*questions["RR-10"])
            profiler.disable()
            for sort in ("cumulative", "tottime"):
                out = io.StringIO()
                stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(sort)
                stats.print_stats(SHOWN_FUNCTIONS)
                print(f"cProfile of the RR-10 question, {PROFILE_RUNS} runs, by {sort}:")
                print("\n".join(line for line in out.getvalue().splitlines()[6:] if line))
        db.session.remove()
        db.engine.dispose()


def run(args: argparse.Namespace, log_dir: Path) -> None:
    today = utcnow().astimezone(zone(TIMEZONE)).date()
    window = availability.Calendar.starting(availability.next_monday(today), utcnow())
    loads = [host_load(window.window, n) for n in range(1, HOSTS + 1)]
    opens = [open_of(window.window, load) for load in loads]
    expected = {
        "one": len(opens[0]),
        "member": len(opens[0]),
        "rr": len(set(chain.from_iterable(opens))),
    }
    inside, outside = cells(window.window)
    print(
        f"window: {DAYS} days from {window.first_day} ({TIMEZONE}), Mon–Fri 09:00–17:00:"
        f" {len(inside)} working 30-min cells, {len(outside)} outside"
    )
    print(
        f"busy: per host {BOOKINGS_PER_HOST} bookings (30 min) + {BLOCKED_PER_HOST} blocked"
        f" times ({BLOCKED_MINUTES[0]}–{BLOCKED_MINUTES[-1]} min), {IN_HOURS_SHARE:.0%} inside"
        f" working hours; {HOSTS} hosts on the team ({HOSTS * BOOKINGS_PER_HOST:,} bookings,"
        f" {HOSTS * BLOCKED_PER_HOST:,} blocked), the solo clinic's host as the team's Host 1"
    )
    print(
        f"open 30-min slots computed here: one host {expected['one']},"
        f" RR-10 {expected['rr']} (per host {min(map(len, opens))}–{max(map(len, opens))})"
    )
    queue, prefix = f"bench-teams-{uuid.uuid4().hex}", f"bench-{uuid.uuid4().hex}"
    with availability.postgres_database() as url:
        started = time.monotonic()
        tenant = populate(url, loads)
        print(f"set-up {time.monotonic() - started:.1f} s")
        env = capacity.service_env(url, queue, prefix, "")
        calendars: dict[int, int] = {}
        try:
            with servers(env, log_dir) as (floors, api):
                print(
                    f"servers: gunicorn -c gunicorn.conf.py, {floors.worker_class} workers:"
                    f" {len(floors.workers)} (floors), {len(api['computed'].workers)} (API,"
                    f" AVAILABILITY_KEEP_SECONDS=0), {len(api['kept'].workers)} (API, as"
                    " deployed)"
                )
                the_client = client(tenant, window, floors, api)
                try:
                    rounds = measure(args, the_client, url, tenant)
                    counts = check_answers(the_client.questions, expected)
                finally:
                    the_client.close()
                calendars = versions(url, [tenant.team_id, tenant.solo_id])
            check_logs(log_dir, ["floors.log", "computed.log", "kept.log"])
        finally:
            forgotten = forget_kept(calendars) if calendars else 0
            capacity.forget_keys(queue, prefix)
        print(
            f"answers: 200, {DAYS} days; slots: one host {counts['one_computed']}, RR-10"
            f" {counts['rr_computed']}, the team's Host 1 {counts['member_computed']} (as computed"
            f" here), kept = computed; {forgotten} kept sets deleted from Redis"
        )
        print(
            f"{args.rounds} rounds × {args.runs} iterations after {WARMUP} untimed; each"
            " iteration asks everything once, in a shuffled order"
        )
        print()
        report(rounds)
        print()
        in_process(url, tenant, window, args.profile)


def memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"default {ROUNDS}")
    parser.add_argument("--runs", type=int, default=RUNS, help=f"per round, default {RUNS}")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile compute_slot_set on the RR question"
    )
    args = parser.parse_args()
    run_measured(
        "Teams benchmark: round-robin availability over 10 hosts against one host and floor B",
        lambda tmp: run(args, tmp),
    )


def run_measured(title: str, run_in: Callable[[Path], None]) -> None:
    """Print the benchmark's title, the date and the machine (its cores and model, memory,
    platform, Python, PostgreSQL, Redis, gunicorn and gevent, the load average), run
    ``run_in`` in a temporary folder, then print the load average and the time it all took."""
    started = time.monotonic()
    pg_version = availability.postgres_version()
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    redis_version = redis.Redis.from_url(capacity.REDIS_URL).info("server")["redis_version"]
    print(title)
    print(f"date: {utcnow():%Y-%m-%d %H:%M} UTC")
    print(
        f"machine: nproc {len(os.sched_getaffinity(0))}, {cpu_model()}, {memory_gib():.1f} GiB,"
        f" {platform.platform()}"
    )
    print(
        f"         {platform.python_implementation()} {platform.python_version()}, PostgreSQL"
        f" {pg_version}, Redis {redis_version}, gunicorn {version('gunicorn')}, gevent"
        f" {version('gevent')}"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp:
        run_in(Path(tmp))
    print(
        f"load average at the end {os.getloadavg()[0]:.2f}; total"
        f" {time.monotonic() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
