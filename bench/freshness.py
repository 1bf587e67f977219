"""Benchmark of how fresh connected calendars' busy time is, on a deployment run as the Procfile
runs one: how soon a change made at Google or Microsoft stops being offered (push), how soon a
CalDAV or feed change does (polling), what asking the calendars at the moment of a write adds
to a create (the live check), and what a burst of 5,000 notifications costs.

Run from the project root (12–14 minutes for all four parts: push 1½, poll 5½–6, live 1,
burst 3½–5; PostgreSQL at ``TEST_POSTGRES_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``, and Redis at ``TEST_REDIS_URL``, default
``redis://127.0.0.1:6379/0``)::

    .venv/bin/python -m bench.freshness [--part push|poll|live|burst|all] [--changes N]
        [--poll-changes N] [--poll-interval S] [--creates N] [--burst-connections N]
        [--burst-per-channel N] [--burst-threads N] [--burst-latency-ms MS] [--log-dir DIR]

The deployment. Each part runs on one of its own: a throw-away PostgreSQL database
(``bench.availability.postgres_database``), migrated with ``flask_migrate.upgrade`` through
``create_app`` and dropped at the end; the web, ``gunicorn -c gunicorn.conf.py wsgi:app`` from
the project root (``bench.hot_path.procfile_server``: gevent workers, ``WEB_CONCURRENCY`` 2 unless
the environment says otherwise); one worker, ``celery -A worker worker`` with the default
concurrency (one pool process a core); and ``celery -A worker beat`` where polling is measured.
Redis is the broker (a Celery queue of the part's own) and counts the rate limits (a key prefix
of its own; the API's limit is 1,000,000/minute, so the limiter runs but refuses nothing; the
push endpoints keep their built-in 6,000/minute an address, which no part reaches); both are
deleted at the end. ``CALENDAR_PUSH=on``, ``CALDAV_ALLOW_PRIVATE=1``, ``METRICS_TOKEN`` set (the
bench reads the web's counters), and the worker's ``PUBLIC_URL`` is the web's address, so the
channels it makes deliver there. The bench process provisions through
``tests.factories.TenantFactory`` on the same database with the same broker
(``CELERY_BROKER_URL``, ``CELERY_QUEUE``), so the sync a new connection asks for reaches the
worker at once. The fakes run in this process: ``tests.google_servers.FakeGoogle`` and
``tests.microsoft_servers.FakeMicrosoft`` (which deliver their push messages over loopback from
a courier thread, one at a time) and the feed of ``tests.feed_servers``; Radicale
(``tests.radicale_servers``) in its own process. Everything is on 127.0.0.1: no network latency,
and no provider's own delay between a change and its notification. The servers' logs go to a
temporary folder (``--log-dir`` keeps them); lines with ERROR or a traceback are shown.

Tenants: America/New_York, an availability profile open around the clock (``ALWAYS_OPEN``), one
event type "Cleaning" of 30 minutes; each change and each create takes a distinct 30-minute slot
of next week (``next_monday``), checked to be offered first. Connections do not write back
(``writeBack: false``): the worker's write-back would add events, pushes and syncs of its own.

1. **push** (``--changes``, default 50, per kind): one tenant with one Google connection and one
   with one Microsoft connection; once the worker has read each and made its channel (a
   ``push_channels`` row), for each change: t0 just before ``add_event`` at the fake, t1 when
   ``GET /v1/api/calendar/availability`` (that day, polled every 25 ms on a keep-alive
   connection, at most 30 s) no longer offers the slot: the fake's push, the web's handling, the
   enqueueing, the worker's sync and the availability answer. The kinds take turns, with a random
   pause of 0.2–1 s between changes (so a change seldom lands while the last change's sync still
   holds its connection). No beat: nothing is polled. Target: p95 ≤ 5 s.
2. **poll** (``--poll-changes``, default 30, per kind; ``--poll-interval``, default 10 s, is the
   deployment's ``SYNC_INTERVAL_SECONDS``): a CalDAV connection (Radicale) and a feed, with beat
   running; the changes begin after beat's first poll (one interval after it starts). Each
   change waits a random 0–interval first, so it falls at a random moment of the poll cycle (as
   a person's change would); then t0, the event added (Radicale: a PUT through the caldav client;
   the feed: served anew with one more event), t1 as above (at most 3 × interval + 15 s). The two
   kinds run side by side, each in a thread of its own. Expected: uniform(0, interval) + one
   sync. Sync durations, in every part, are the worker's own log (``Task calendars.sync[…]
   succeeded in …``, by result).
3. **live** (``--creates``, default 100, per row, after 10 untimed iterations): ``POST …/bookings``
   (201) for a tenant with no connection, one with a Google connection, one with a Microsoft
   connection and one with a CalDAV connection (the fakes and Radicale answering as usual, each
   connection read once before), and the floors of ``bench.floor_app`` (A: bare JSON, B: one
   primary-key ``SELECT`` of a booking row, C: one single-row ``INSERT`` transaction) served by
   ``gunicorn -c gunicorn.conf.py bench.floor_app:app`` with the same environment. Each
   iteration sends every row once, in a shuffled order, one client on keep-alive connections;
   creates take distinct slots, distinct attendees and fresh ``idempotencyKey``s (floor C gets
   the same bodies). The web publishes the creates' outbox events to a queue no worker consumes
   (as ``bench.hot_path``, whose worker does not run): consumed, each create's follow-up
   (``outbox.deliver`` and three ``outbox.handle``, about 150 ms of a pool process) would compete
   for the cores with the next request timed. Median and p95; the live check's outcomes and its
   mean time asking (``calendar_live_checks_total``, every one must be ``clear``;
   ``calendar_live_check_duration_seconds``) are read from ``/metrics``. The database must hold
   one booking per 201 and one floor C row per 201.
4. **burst** (``--burst-connections``, default 1,000; ``--burst-per-channel``, default 5): one
   agency with that many sub accounts, each with one Google connection (each its own account at
   the fake), provisioned in one document with the enqueueing off, so the marks wait; a
   ``push_channels`` row is inserted for each connection's calendar with a secret the bench
   knows (its SHA-256 stored, a channel id and resource id of the bench's choosing, expiring in
   a week), so the worker makes no channel itself; then ``calendars.sync_requested`` hands the
   marks to the worker, and the first syncs drain (timed: first syncs/s). One event is added to
   every calendar at the fake (no push: the fake knows no channel), then every channel gets
   ``--burst-per-channel`` Google notifications (``X-Goog-Channel-ID``/``-Token``/``-Resource-ID``,
   ``X-Goog-Resource-State: exists``), all shuffled, sent from ``--burst-threads`` (32) threads
   over one httpx client. Measured: how long the web took to answer them all (notifications/s,
   answer times; the CPU of the web's and the worker's processes meanwhile), and the drain: from
   the first notification until no connection has a sync queued (``sync_requested_at``) or
   running (``sync_running_until``) and every one was attempted after the burst began
   (``last_attempt_at``), sampled every 0.2 s. No beat, and ``SYNC_INTERVAL_SECONDS`` an hour:
   nothing is polled. Each sync of a Google connection is one ``events.list`` (its sync token):
   the fake, subclassed here, records each list's start and end by account, after holding it
   ``--burst-latency-ms`` (default 50 ms, outside the fake's lock: a stand-in for Google's answer
   time, which also lets two syncs of one connection overlap at the fake if they ever ran at
   once). Then, the drain done, 200 notifications one at a time (a lone notification's answer
   time), and the channels' periodic upkeep (``calendars.keep_channels``) run once, timed from
   the worker's log. Checked and printed (``ok`` / ``NOT``, the run goes on): every answer 200,
   none refused, drained, every connection synced at least once, fewer syncs than notifications
   (the rule is one queued and one running at any moment, so a notification that comes after
   the queued sync has begun queues one more), no two lists of one account overlapping, the
   ``accepted`` notifications (each queued one sync) equal to the lists, every event stored; for
   a connection synced more than twice, its notifications' and lists' times are printed.

Each part prints its figures in a table at the end; ``--part all`` prints them all again last.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import io
import json
import math
import os
import platform
import random
import re
import secrets
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, redirect_stderr
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
from flask import Flask
from flask_migrate import upgrade
from sqlalchemy import insert

from app import create_app
from app.extensions import db
from app.models import PushChannel
from app.services.accounts.provisioning import provision
from bench import availability, capacity, floor_app, hot_path
from tests.factories import (
    ALWAYS_OPEN,
    NEW_YORK,
    Tenant,
    TenantFactory,
    next_monday,
    ny,
    provider_connection,
    z,
)
from tests.feed_servers import feed_server
from tests.google_servers import FakeGoogle
from tests.microsoft_servers import FakeMicrosoft
from tests.oauth_fakes import ACCOUNT_EMAIL
from tests.radicale_servers import connection_doc, fresh_user, radicale_server, vevent

PARTS = ("push", "poll", "live", "burst")
SLOT = timedelta(minutes=30)
POLL_EVERY = 0.025  # seconds between availability questions while a change is awaited
PUSH_LIMIT = 30.0  # seconds a pushed change is awaited
PUSH_TARGET_P95 = 5.0
PUSH_PAUSE = (0.2, 1.0)  # seconds between two pushed changes
CHANGES, POLL_CHANGES, POLL_INTERVAL = 50, 30, 10
CREATES, CREATE_WARMUP = 100, 10
BURST_CONNECTIONS, BURST_PER_CHANNEL, BURST_THREADS, BURST_LATENCY_MS = 1000, 5, 32, 50
BURST_INTERVAL = 3600  # SYNC_INTERVAL_SECONDS while the burst runs: nothing is polled
SETTLE_TIMEOUT = 60.0  # a new connection read, its channel made
DRAIN_TIMEOUT = 300.0
SEQUENTIAL = 200  # notifications sent one at a time after the burst
PUSH_INTERVAL = 60  # SYNC_INTERVAL_SECONDS of the push and live parts (the default)
METRICS_TOKEN = "bench-freshness-metrics"
SEED = 20261127
SYNCED = re.compile(r"Task calendars\.sync\[[^\]]+\] succeeded in ([0-9.e-]+)s: '([^']*)'")
POLLED = re.compile(r"Task calendars\.sync_all\[[^\]]+\] succeeded")
KEPT = re.compile(r"Task calendars\.keep_channels\[[^\]]+\] succeeded in ([0-9.e-]+)s: (\d+)")
GOOGLE_PUSH = "/push/google"


# --- figures ---------------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile (``share`` 0.95 for p95)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def spread(values: list[float], unit: float = 1.0, form: str = "{:.2f}") -> str:
    """``p50 / p95 / max`` of ``values`` × ``unit``."""
    if not values:
        return "–"
    return " / ".join(
        form.format(v * unit)
        for v in (statistics.median(values), percentile(values, 0.95), max(values))
    )


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table, as docs/performance.md writes them."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def sync_times(log_path: Path, start: int = 0) -> dict[str, list[float]]:
    """The worker's ``calendars.sync`` tasks since byte ``start`` of its log: seconds by result
    (``synced``, ``unchanged``, ``waiting``, ``nothing queued``, ``failed``)."""
    found: dict[str, list[float]] = defaultdict(list)
    text = log_path.read_text(errors="replace")[start:]
    for seconds, result in SYNCED.findall(text):
        found[result].append(float(seconds))
    return found


def log_errors(log_path: Path) -> list[str]:
    lines = log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if "ERROR" in line or "Traceback" in line]


# --- the deployment --------------------------------------------------------------------------


@dataclass
class Deployment:
    """A part's deployment: the database (``url``, ``pg`` for checks), the web (``base``), the
    worker's log, the environment they share, and the bench's own app on the same database and
    broker (inside its app context while the deployment lasts)."""

    name: str
    url: str
    base: str
    web: hot_path.Server
    app: Flask
    env: dict[str, str]
    pg: psycopg.Connection[Any]
    worker_log: Path
    worker_pid: int
    log_dir: Path

    def tenant(self, *connections: dict[str, Any]) -> Tenant:
        """A provisioned tenant with ``connections``: open around the clock, "Cleaning" 30 min."""
        return TenantFactory().create(
            calendarConnections=list(connections),
            availabilityProfiles=[{"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}],
            eventTypes=[{"name": "Cleaning", "duration": 30, "availabilityProfile": "Always"}],
        )

    def offered(self, client: httpx.Client, tenant: Tenant, day: date) -> set[str]:
        answer = client.get(
            f"{self.base}/v1/api/calendar/availability",
            params={
                "startDate": day.isoformat(),
                "endDate": day.isoformat(),
                "eventTypeId": tenant.event_types["Cleaning"],
            },
            headers=tenant.headers(),
        )
        if answer.status_code != 200:
            raise RuntimeError(f"availability answered {answer.status_code}: {answer.text[:300]}")
        return {slot["start"] for slot in answer.json()[0]["slots"]}

    def value(self, query: str, *params: Any) -> Any:
        row = self.pg.execute(query, params).fetchone()
        return row[0] if row else None

    def wait(
        self, predicate: Callable[[], bool], what: str, timeout: float = SETTLE_TIMEOUT
    ) -> float:
        """Seconds until ``predicate()`` holds (asked every 50 ms); fails after ``timeout``."""
        started = time.perf_counter()
        while not predicate():
            if time.perf_counter() - started > timeout:
                raise SystemExit(f"FAILED: {what} not within {timeout:.0f} s ({self.name})")
            time.sleep(0.05)
        return time.perf_counter() - started

    def wait_read(self, connection_id: int) -> None:
        self.wait(
            lambda: (
                self.value(
                    "SELECT last_success_at FROM calendar_connections WHERE id = %s", connection_id
                )
                is not None
            ),
            f"connection {connection_id} read",
        )

    def wait_channel(self, connection_id: int) -> None:
        self.wait(
            lambda: (
                self.value(
                    "SELECT count(*) FROM push_channels WHERE calendar_connection_id = %s",
                    connection_id,
                )
                > 0
            ),
            f"connection {connection_id}'s push channel made",
        )

    def metrics(self, name: str) -> dict[str, float]:
        """The web's metric ``name`` by its labels (as written; "" for none), from
        ``/metrics``."""
        answer = httpx.get(
            f"{self.base}/metrics",
            headers={"Authorization": f"Bearer {METRICS_TOKEN}"},
            timeout=10,
            trust_env=False,
        )
        answer.raise_for_status()
        found: dict[str, float] = {}
        for line in answer.text.splitlines():
            if line.startswith((name + "{", name + " ")):
                labels, number = line[len(name) :].rsplit(" ", 1)
                found[labels.strip()] = found.get(labels.strip(), 0.0) + float(number)
        return found

    def worker_log_size(self) -> int:
        return len(self.worker_log.read_text(errors="replace"))


@contextmanager
def beat(env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The Procfile's ``celery -A worker beat --loglevel INFO`` (its schedule file beside the
    log), until it has started."""
    schedule = log_path.with_name(log_path.stem + "-schedule")
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                str(capacity.CELERY),
                "-A",
                "worker",
                "beat",
                "--loglevel",
                "INFO",
                "-s",
                str(schedule),
            ],
            cwd=availability.ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        capacity.wait_for_log(process, log_path, "beat: Starting", "beat")
        yield process
    finally:
        availability.stop(process)


@contextmanager
def deployment(
    name: str,
    log_dir: Path,
    provider_env: dict[str, str],
    *,
    interval: int,
    with_beat: bool,
    web_queue: str = "",
) -> Iterator[Deployment]:
    """A fresh database, the web, one worker (and beat when ``with_beat``), as the module
    docstring says; ``interval`` is ``SYNC_INTERVAL_SECONDS``. ``web_queue``: a suffix for the
    web's ``CELERY_QUEUE``, a queue no worker consumes (what the web publishes then waits)."""
    queue, prefix = f"bench-freshness-{uuid.uuid4().hex}", f"bench-{uuid.uuid4().hex}"
    with availability.postgres_database() as url:
        app = create_app(
            {
                "SQLALCHEMY_DATABASE_URI": url,
                "SECRET_KEY": capacity.SECRET_KEY,
                "CELERY_BROKER_URL": capacity.REDIS_URL,
                "CELERY_QUEUE": queue,
                "OUTBOX_DISPATCH": True,
                "CALDAV_ALLOW_PRIVATE": True,
            }
        )
        with app.app_context(), redirect_stderr(io.StringIO()):  # alembic's INFO lines
            upgrade()
        env = {
            **capacity.service_env(url, queue, prefix, ""),
            **provider_env,
            "CALENDAR_PUSH": "on",
            "CALDAV_ALLOW_PRIVATE": "1",
            "SYNC_INTERVAL_SECONDS": str(interval),
            "METRICS_TOKEN": METRICS_TOKEN,
        }
        web_log, worker_log = log_dir / f"{name}-web.log", log_dir / f"{name}-worker.log"
        try:
            with (
                hot_path.procfile_server(
                    "the API",
                    "wsgi:app",
                    {
                        **env,
                        "CELERY_QUEUE": queue + web_queue,
                        "PROMETHEUS_MULTIPROC_DIR": str(log_dir / f"{name}-web-metrics"),
                    },
                    web_log,
                    "/healthz",
                ) as web,
                ExitStack() as stack,
                psycopg.connect(
                    floor_app.conninfo(url), autocommit=True, application_name="bench-freshness"
                ) as pg,
                app.app_context(),
            ):
                base = f"http://127.0.0.1:{web.port}"
                worker_env = {**env, "PUBLIC_URL": base}
                worker = stack.enter_context(capacity.celery_worker(worker_env, worker_log))
                capacity.wait_for_log(worker, worker_log, "ready.", "the worker")
                if with_beat:
                    stack.enter_context(beat(worker_env, log_dir / f"{name}-beat.log"))
                print(
                    f"  [{name}] web {base} ({web.worker_class}, {len(web.workers)} workers),"
                    f" worker pid {worker.pid} ({len(capacity.children(worker.pid))} pool"
                    f" processes){', beat' if with_beat else ''};"
                    f" SYNC_INTERVAL_SECONDS={interval}",
                    flush=True,
                )
                yield Deployment(
                    name, url, base, web, app, env, pg, worker_log, worker.pid, log_dir
                )
                db.session.remove()
            for path in (web_log, worker_log):
                errors = log_errors(path)
                if errors:
                    print(f"  [{name}] {path.name}: {len(errors)} lines with ERROR or Traceback:")
                    for line in errors[:5]:
                        print(f"    {line[:300]}")
        finally:
            with app.app_context():
                db.engine.dispose()
            capacity.forget_keys(queue, prefix)
            if web_queue:
                capacity.forget_keys(queue + web_queue, prefix)


def week_slots(first_day: date) -> list[datetime]:
    """Every 30-minute slot of the week from ``first_day``, New York time, as UTC instants."""
    return [
        ny(first_day + timedelta(days=d), h, m)
        for d in range(7)
        for h in range(24)
        for m in (0, 30)
    ]


def local_day(instant: datetime) -> date:
    return instant.astimezone(NEW_YORK).date()


def await_gone(
    dep: Deployment,
    client: httpx.Client,
    tenant: Tenant,
    slot: datetime,
    change: Callable[[datetime], Any],
    limit: float,
) -> float | None:
    """Seconds from just before ``change(slot)`` until availability no longer offers ``slot``
    (None: still offered after ``limit`` seconds). The slot must be offered before."""
    day, start = local_day(slot), z(slot)
    if start not in dep.offered(client, tenant, day):
        raise SystemExit(f"FAILED: {start} is not offered before the change ({dep.name})")
    t0 = time.perf_counter()
    change(slot)
    while True:
        if start not in dep.offered(client, tenant, day):
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > limit:
            return None
        time.sleep(POLL_EVERY)


def http_client() -> httpx.Client:
    return httpx.Client(timeout=10, trust_env=False)


def sync_lines(label: str, times: dict[str, list[float]]) -> list[str]:
    """The worker's sync durations of a part, by result, as table rows."""
    rows = []
    for result in ("synced", "unchanged", "waiting", "nothing queued"):
        if times.get(result):
            rows.append(
                [
                    f"{label}: `calendars.sync` → {result}",
                    str(len(times[result])),
                    spread(times[result], 1000, "{:.0f}") + " ms",
                ]
            )
    return rows


# --- 1: staleness by push --------------------------------------------------------------------


def part_push(args: argparse.Namespace, log_dir: Path) -> list[str]:
    rng = random.Random(SEED)
    with FakeGoogle() as google, FakeMicrosoft() as microsoft:
        google.add_account(ACCOUNT_EMAIL)
        microsoft.add_account(ACCOUNT_EMAIL)
        outlook = next(c.id for c in microsoft.calendars.values() if c.is_default)
        provider_env = {**google.app_settings(), **microsoft.app_settings()}
        with deployment(
            "push", log_dir, provider_env, interval=PUSH_INTERVAL, with_beat=False
        ) as dep:
            tenants = {
                "google": dep.tenant(provider_connection(google, "Google", writeBack=False)),
                "microsoft": dep.tenant(provider_connection(microsoft, "Outlook", writeBack=False)),
            }
            adders: dict[str, Callable[[datetime], Any]] = {
                "google": lambda s: google.add_event(ACCOUNT_EMAIL, s, s + SLOT),
                "microsoft": lambda s: microsoft.add_event(outlook, s, s + SLOT),
            }
            for tenant in tenants.values():
                connection_id = next(iter(tenant.connections.values()))
                dep.wait_read(connection_id)
                dep.wait_channel(connection_id)
            log_start = dep.worker_log_size()
            slots = week_slots(next_monday())
            seconds: dict[str, list[float]] = {kind: [] for kind in tenants}
            missed: Counter[str] = Counter()
            started = time.perf_counter()
            with http_client() as client:
                for i in range(args.changes):
                    for kind, tenant in tenants.items():
                        time.sleep(rng.uniform(*PUSH_PAUSE))
                        slot = slots[i]
                        took = await_gone(dep, client, tenant, slot, adders[kind], PUSH_LIMIT)
                        if took is None:
                            missed[kind] += 1
                        else:
                            seconds[kind].append(took)
                    if (i + 1) % 10 == 0:
                        print(
                            f"  [push] {i + 1} changes a kind,"
                            f" {time.perf_counter() - started:.0f} s",
                            flush=True,
                        )
            times = sync_times(dep.worker_log, log_start)
            notified = dep.metrics("calendar_push_notifications_total")
            pushes = {
                "google": [p for p in google.pushes if p.state != "sync"],
                "microsoft": list(microsoft.pushes),
            }
    rows = []
    for kind in tenants:
        answered = Counter(p.status for p in pushes[kind])
        p95 = percentile(seconds[kind], 0.95) if seconds[kind] else float("inf")
        rows.append(
            [
                f"{kind.title()}, pushed",
                str(len(seconds[kind])),
                spread(seconds[kind]) + " s",
                str(missed[kind]),
                f"{'met' if p95 <= PUSH_TARGET_P95 and not missed[kind] else 'NOT met'}"
                f" (p95 ≤ {PUSH_TARGET_P95:g} s)",
                ", ".join(f"{n} × {status}" for status, n in sorted(answered.items(), key=str)),
            ]
        )
    lines = [
        f"Part 1, staleness by push: {args.changes} changes a kind, t1 − t0 (p50 / p95 / max);"
        f" availability polled every {POLL_EVERY * 1000:.0f} ms",
        *table(
            [
                "Kind",
                "Changes seen",
                "Staleness",
                f"Not seen in {PUSH_LIMIT:g} s",
                "Target",
                "Pushes delivered (web's status)",
            ],
            rows,
        ),
        "",
        *table(["Worker (both kinds)", "Tasks", "p50 / p95 / max"], sync_lines("push", times)),
        f"web's push counters: {json.dumps(notified)}",
    ]
    return lines


# --- 2: staleness by polling -----------------------------------------------------------------


def feed_text(events: list[str]) -> str:
    head = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//calendar-booking bench//EN"]
    return "\r\n".join([*head, *events, "END:VCALENDAR", ""])


def feed_event(uid: str, slot: datetime) -> str:
    return "\r\n".join(
        [
            "BEGIN:VEVENT",
            f"UID:{uid}",
            "DTSTAMP:20300101T000000Z",
            f"DTSTART:{slot:%Y%m%dT%H%M%SZ}",
            f"DTEND:{slot + SLOT:%Y%m%dT%H%M%SZ}",
            "SUMMARY:Busy",
            "END:VEVENT",
        ]
    )


def part_poll(args: argparse.Namespace, log_dir: Path) -> list[str]:
    interval = args.poll_interval
    limit = 3 * interval + 15
    with radicale_server(log_dir / "radicale-poll") as radicale, feed_server() as feed:
        user = fresh_user()
        calendar = radicale.make_calendar(user, "Personal")
        feed_events: list[str] = []
        feed.serve(feed_text(feed_events))
        with deployment("poll", log_dir, {}, interval=interval, with_beat=True) as dep:
            tenants = {
                "caldav": dep.tenant(connection_doc("Personal", radicale, user, writeBack=False)),
                "feed": dep.tenant({"name": "Feed", "kind": "ics", "url": feed.url}),
            }
            for tenant in tenants.values():
                dep.wait_read(next(iter(tenant.connections.values())))
            # Beat's first poll comes one interval after it starts: the changes begin after
            # it, so each falls at a random moment of a running cycle.
            dep.wait(
                lambda: POLLED.search(dep.worker_log.read_text(errors="replace")) is not None,
                "beat's first poll",
                3 * interval + 15,
            )
            log_start = dep.worker_log_size()

            def add_caldav(slot: datetime) -> None:
                calendar.add_event(
                    vevent(
                        f"bench-{uuid.uuid4().hex}",
                        f"DTSTART:{slot:%Y%m%dT%H%M%SZ}",
                        f"DTEND:{slot + SLOT:%Y%m%dT%H%M%SZ}",
                    )
                )

            def add_feed(slot: datetime) -> None:
                feed_events.append(feed_event(f"bench-{uuid.uuid4().hex}", slot))
                feed.serve(feed_text(feed_events))

            adders = {"caldav": add_caldav, "feed": add_feed}
            seconds: dict[str, list[float]] = {kind: [] for kind in tenants}
            missed: Counter[str] = Counter()
            started = time.perf_counter()

            def run(kind: str, offset: int) -> None:
                rng = random.Random(SEED + offset)
                slots = week_slots(next_monday())
                with http_client() as client:
                    for i in range(args.poll_changes):
                        time.sleep(rng.uniform(0, interval))
                        slot = slots[i]
                        took = await_gone(dep, client, tenants[kind], slot, adders[kind], limit)
                        if took is None:
                            missed[kind] += 1
                        else:
                            seconds[kind].append(took)
                        if (i + 1) % 10 == 0:
                            print(
                                f"  [poll] {kind}: {i + 1} changes,"
                                f" {time.perf_counter() - started:.0f} s",
                                flush=True,
                            )

            with ThreadPoolExecutor(len(tenants)) as pool:
                for done in [pool.submit(run, kind, n) for n, kind in enumerate(tenants)]:
                    done.result()
            times = sync_times(dep.worker_log, log_start)
            polls = len(POLLED.findall(dep.worker_log.read_text(errors="replace")[log_start:]))
    rows = [
        [
            {"caldav": "CalDAV (Radicale), polled", "feed": "Feed, polled"}[kind],
            str(len(seconds[kind])),
            spread(seconds[kind]) + " s",
            str(missed[kind]),
        ]
        for kind in tenants
    ]
    return [
        f"Part 2, staleness by polling: SYNC_INTERVAL_SECONDS={interval}, {args.poll_changes}"
        f" changes a kind at random moments of the cycle, t1 − t0 (p50 / p95 / max)",
        *table(["Kind", "Changes seen", "Staleness", f"Not seen in {limit:g} s"], rows),
        "",
        *table(["Worker (both kinds)", "Tasks", "p50 / p95 / max"], sync_lines("poll", times)),
        f"polls run by beat meanwhile: {polls}",
    ]


# --- 3: the live check's cost on a create ----------------------------------------------------


LIVE_ROWS = {
    "floor_a": "floor A: GET, bare JSON",
    "floor_b": "floor B: GET, one PK SELECT",
    "floor_c": "floor C: POST, one INSERT txn",
    "none": "POST create, no connection",
    "google": "POST create, 1 Google connection",
    "microsoft": "POST create, 1 Microsoft connection",
    "caldav": "POST create, 1 CalDAV connection (Radicale)",
}


class Timer:
    """One client's keep-alive connections to the API and the floors; each request timed."""

    def __init__(self, api_port: int, floor_port: int) -> None:
        self.ports = {"api": api_port, "floors": floor_port}
        self.conns: dict[str, http.client.HTTPConnection] = {}

    def request(
        self, server: str, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[float, int, bytes]:
        conn = self.conns.get(server)
        if conn is None:
            conn = self.conns[server] = http.client.HTTPConnection(
                "127.0.0.1", self.ports[server], timeout=30
            )
        started = time.perf_counter()
        try:
            conn.request(method, path, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
        except (http.client.HTTPException, OSError):
            conn.close()
            del self.conns[server]
            raise
        return time.perf_counter() - started, answer.status, data

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def part_live(args: argparse.Namespace, log_dir: Path) -> list[str]:
    rng = random.Random(SEED)
    with (
        FakeGoogle() as google,
        FakeMicrosoft() as microsoft,
        radicale_server(log_dir / "radicale-live") as radicale,
    ):
        google.add_account(ACCOUNT_EMAIL)
        microsoft.add_account(ACCOUNT_EMAIL)
        user = fresh_user()
        radicale.make_calendar(user, "Personal")
        provider_env = {**google.app_settings(), **microsoft.app_settings()}
        with deployment(
            "live",
            log_dir,
            provider_env,
            interval=PUSH_INTERVAL,
            with_beat=False,
            web_queue="-unconsumed",
        ) as dep:
            dep.pg.execute(floor_app.CREATE_TABLE)
            tenants = {
                "none": dep.tenant(),
                "google": dep.tenant(provider_connection(google, "Google", writeBack=False)),
                "microsoft": dep.tenant(provider_connection(microsoft, "Outlook", writeBack=False)),
                "caldav": dep.tenant(connection_doc("Personal", radicale, user, writeBack=False)),
            }
            for kind, tenant in tenants.items():
                if kind != "none":
                    connection_id = next(iter(tenant.connections.values()))
                    dep.wait_read(connection_id)
                    if kind != "caldav":
                        dep.wait_channel(connection_id)
            with hot_path.procfile_server(
                "the floors",
                "bench.floor_app:app",
                {**dep.env, "PROMETHEUS_MULTIPROC_DIR": str(log_dir / "live-floor-metrics")},
                log_dir / "live-floors.log",
                hot_path.FLOOR_A,
            ) as floors:
                print(
                    f"  [live] floors: gunicorn -c gunicorn.conf.py bench.floor_app:app,"
                    f" {floors.worker_class}, {len(floors.workers)} workers",
                    flush=True,
                )
                samples = measure_creates(args, dep, tenants, floors, rng)
            outcomes = dep.metrics("calendar_live_checks_total")
            asked = {
                part: sum(dep.metrics(f"calendar_live_check_duration_seconds_{part}").values())
                for part in ("sum", "count")
            }
            counts = {
                kind: dep.value(
                    "SELECT count(*) FROM bookings WHERE sub_account_id = %s", t.sub_account_id
                )
                for kind, t in tenants.items()
            }
            floor_rows = dep.value(f"SELECT count(*) FROM {floor_app.TABLE}")
    total = args.creates + CREATE_WARMUP
    if any(n != total for n in counts.values()) or floor_rows != total:
        raise SystemExit(f"FAILED: bookings {counts}, floor rows {floor_rows}; expected {total}")
    floor_c = statistics.median(samples["floor_c"])
    none = statistics.median(samples["none"])
    rows = []
    for row, label in LIVE_ROWS.items():
        median = statistics.median(samples[row])
        added = (
            f"{(median - none) * 1000:+.1f} ms" if row in ("google", "microsoft", "caldav") else ""
        )
        rows.append(
            [
                label,
                f"{median * 1000:.1f}",
                f"{percentile(samples[row], 0.95) * 1000:.1f}",
                f"{median / floor_c:.2f}×",
                f"{median / none:.2f}×" if row not in ("floor_a", "floor_b", "floor_c") else "",
                added,
            ]
        )
    return [
        f"Part 3, the live check's cost: {args.creates} timed iterations (after {CREATE_WARMUP}),"
        " every row once each, shuffled; one client, keep-alive",
        *table(
            [
                "Request",
                "Median ms",
                "p95 ms",
                "÷ floor C",
                "÷ no connection",
                "Live check adds (median)",
            ],
            rows,
        ),
        f"live checks counted by the web: {json.dumps(outcomes)}; asking the calendars took"
        f" {asked['sum'] / max(asked['count'], 1) * 1000:.1f} ms on average (its histogram's"
        " sum ÷ count, the three kinds together)",
        f"bookings stored: {json.dumps(counts)}; floor C rows: {floor_rows}",
    ]


def measure_creates(
    args: argparse.Namespace,
    dep: Deployment,
    tenants: dict[str, Tenant],
    floors: hot_path.Server,
    rng: random.Random,
) -> dict[str, list[float]]:
    slots = week_slots(next_monday())
    used: Counter[str] = Counter()
    samples: dict[str, list[float]] = {row: [] for row in LIVE_ROWS}
    timer = Timer(dep.web.port, floors.port)
    booking_ids: list[int] = []

    def body(kind: str) -> bytes:
        start = slots[used[kind]]
        used[kind] += 1
        n = sum(used.values())
        return json.dumps(
            {
                "startTime": z(start),
                "endTime": z(start + SLOT),
                "attendees": [{"email": f"guest{n}@example.test", "name": f"Guest {n}"}],
                "idempotencyKey": f"bench-{uuid.uuid4().hex}",
            }
        ).encode()

    def one(row: str) -> float:
        json_headers = {"Content-Type": "application/json"}
        if row == "floor_a":
            took, status, _ = timer.request("floors", "GET", hot_path.FLOOR_A, None, {})
            expected = 200
        elif row == "floor_b":
            path = hot_path.FLOOR_B.format(booking_ids[used["floor_b"] % len(booking_ids)])
            used["floor_b"] += 1
            took, status, _ = timer.request("floors", "GET", path, None, {})
            expected = 200
        elif row == "floor_c":
            took, status, _ = timer.request(
                "floors", "POST", hot_path.FLOOR_C, body("floor_c"), json_headers
            )
            expected = 201
        else:
            tenant = tenants[row]
            path = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
            took, status, data = timer.request(
                "api", "POST", path, body(row), {**json_headers, **tenant.headers()}
            )
            expected = 201
            if status == 201 and row == "none":
                booking_ids.append(json.loads(data)["id"])
        if status != expected:
            raise SystemExit(f"FAILED: {LIVE_ROWS[row]} answered {status}")
        return took

    try:
        rows = [r for r in LIVE_ROWS if r != "floor_b"]
        for _ in range(CREATE_WARMUP):
            rng.shuffle(rows)
            for row in rows:
                one(row)
        rows = list(LIVE_ROWS)
        for _ in range(args.creates):
            rng.shuffle(rows)
            for row in rows:
                samples[row].append(one(row))
    finally:
        timer.close()
    return samples


# --- 4: a burst of notifications -------------------------------------------------------------


class ListTimedGoogle(FakeGoogle):
    """The Google fake, each ``events.list`` held ``latency`` seconds before the fake takes it
    up (outside its lock) and recorded by account with its start and end (monotonic)."""

    def __init__(self, *args: Any, latency: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.latency = latency
        self.lists: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.token_requests = 0

    def wsgi(self, environ: dict[str, Any], start_response: Callable) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == self.token_path:
            with self.lock:
                self.token_requests += 1
        if environ.get("REQUEST_METHOD") != "GET" or not path.endswith("/events"):
            return super().wsgi(environ, start_response)
        started = time.monotonic()
        if self.latency:
            time.sleep(self.latency)
        answer = super().wsgi(environ, start_response)
        ended = time.monotonic()
        token = environ.get("HTTP_AUTHORIZATION", "").partition(" ")[2]
        with self.lock:
            held = self.access_tokens.get(token)
            owner = held.grant.account.email if held is not None else "?"
            self.lists[owner].append((started, ended))
        return answer


@dataclass(frozen=True)
class Channel:
    connection_id: int
    email: str
    channel_id: str
    resource_id: str
    secret: str


@dataclass
class Drain:
    """The connections' sync state over time, sampled every 0.2 s."""

    seconds: float | None = None  # from the burst's start until drained
    most_running: int = 0  # the most leases held at once
    samples: int = 0


DRAIN_QUERY = """
SELECT count(*) FILTER (WHERE sync_requested_at IS NOT NULL),
       count(*) FILTER (WHERE sync_running_until IS NOT NULL),
       count(*) FILTER (WHERE last_attempt_at IS NULL OR last_attempt_at < %s),
       count(*) FILTER (WHERE last_success_at IS NULL)
FROM calendar_connections
"""


def part_burst(args: argparse.Namespace, log_dir: Path) -> list[str]:
    rng = random.Random(SEED)
    count = args.burst_connections
    with ListTimedGoogle(latency=args.burst_latency_ms / 1000) as google:
        emails = [f"burst-{n:05d}@example.test" for n in range(count)]
        for email in emails:
            google.add_account(email)
        tokens = [google.issue_refresh_token(email) for email in emails]
        with deployment(
            "burst", log_dir, google.app_settings(), interval=BURST_INTERVAL, with_beat=False
        ) as dep:
            started = time.perf_counter()
            channels = provision_burst(dep, emails, tokens)
            print(
                f"  [burst] {count} sub accounts and connections provisioned, channels inserted"
                f" ({time.perf_counter() - started:.1f} s)",
                flush=True,
            )
            # The enqueueing: as a worker starting does it, for every mark waiting.
            dep.app.extensions["celery"].send_task("calendars.sync_requested")
            warm_started = datetime.now(UTC)
            warm = dep.wait(
                lambda: (
                    dep.pg.execute(DRAIN_QUERY, (warm_started,)).fetchone()[:2] == (0, 0)
                    and dep.value(
                        "SELECT count(*) FROM calendar_connections WHERE last_success_at IS NULL"
                    )
                    == 0
                ),
                "the first syncs drained",
                DRAIN_TIMEOUT,
            )
            first_syncs = sum(len(v) for v in google.lists.values())
            print(
                f"  [burst] first syncs: {first_syncs} in {warm:.1f} s"
                f" ({first_syncs / warm:.1f}/s); {google.token_requests} token requests",
                flush=True,
            )
            for n, email in enumerate(emails):
                slot = ny(next_monday(), 9) + timedelta(minutes=30 * (n % 16))
                google.add_event(email, slot, slot + SLOT)
            google.lists.clear()
            google.token_requests = 0
            notified_before = dep.metrics("calendar_push_notifications_total")
            log_start = dep.worker_log_size()
            messages = [c for c in channels for _ in range(args.burst_per_channel)]
            rng.shuffle(messages)
            result = burst(dep, messages, args.burst_threads)
            print(f"  [burst] sent and drained ({result.drain.seconds} s)", flush=True)
            notified = dep.metrics("calendar_push_notifications_total")
            times = sync_times(dep.worker_log, log_start)
            last_attempts = dep.value(
                "SELECT count(*) FROM calendar_connections WHERE last_attempt_at >= %s",
                result.began_at,
            )
            failing = dep.value(
                "SELECT count(*) FROM calendar_connections WHERE consecutive_failures > 0"
            )
            busy = dep.value("SELECT count(*) FROM blocked_times WHERE source = 'external'")
            lists = {email: list(spans) for email, spans in google.lists.items() if email != "?"}
            alone = one_at_a_time(dep, rng.sample(channels, min(SEQUENTIAL, count)))
            kept = keep_channels_once(dep)
    per_connection = Counter(len(lists.get(email, [])) for email in emails)
    overlaps = sum(
        1
        for spans in lists.values()
        for a, b in zip(sorted(spans), sorted(spans)[1:], strict=False)
        if b[0] < a[1]
    )
    total_lists = sum(len(s) for s in lists.values())
    outcome = {
        key: notified.get(key, 0.0) - notified_before.get(key, 0.0)
        for key in sorted(set(notified) | set(notified_before))
    }
    accepted = sum(v for k, v in outcome.items() if '"accepted"' in k)
    refused = sum(v for k, v in outcome.items() if '"refused"' in k)
    drain = result.drain.seconds
    checks = {
        f"every notification answered 200 ({result.statuses[200]:,} of {len(messages):,})": (
            result.statuses[200] == len(messages)
        ),
        "none refused (web's counter)": refused == 0,
        f"drained within {DRAIN_TIMEOUT:.0f} s": drain is not None,
        "every connection attempted since the burst began": last_attempts == count,
        "every connection synced at least once": 0 not in per_connection,
        f"fewer syncs a connection than notifications ({args.burst_per_channel})": (
            max(per_connection) < args.burst_per_channel
        ),
        "no two lists of one account overlapping": overlaps == 0,
        f"accepted notifications = syncs ({accepted:.0f} = {total_lists})": (
            accepted == total_lists
        ),
        "every event stored, no connection failing": busy == count and failing == 0,
    }
    syncs = sum(len(v) for r, v in times.items() if r in ("synced", "unchanged"))
    accept_rate = len(messages) / result.accept_seconds
    rows = [
        [
            "Notifications sent",
            f"{len(messages):,} ({args.burst_per_channel} a channel, shuffled,"
            f" {args.burst_threads} threads)",
        ],
        [
            "Answered (web's status)",
            ", ".join(f"{n:,} × {s}" for s, n in sorted(result.statuses.items())),
        ],
        [
            "Web: all answered in",
            f"{result.accept_seconds:.1f} s = {accept_rate:.0f} notifications/s",
        ],
        ["Web: answer time p50 / p95 / max", spread(result.latencies, 1000, "{:.1f}") + " ms"],
        [
            f"Web: {len(alone)} notifications one at a time, answer p50 / p95 / max",
            spread(alone, 1000, "{:.1f}") + " ms",
        ],
        ["Web's counters (this burst)", json.dumps(outcome)],
        [
            "Drained (no sync queued or running, every connection attempted since the start)",
            f"{drain:.1f} s from the first notification" if drain else "NOT within the limit",
        ],
        [
            "Syncs (events.list at the fake)",
            f"{total_lists:,} = {total_lists / drain:.1f}/s" if drain else str(total_lists),
        ],
        [
            "Syncs per connection",
            ", ".join(f"{k}: {v:,}" for k, v in sorted(per_connection.items())),
        ],
        ["Two lists of one account overlapping", str(overlaps)],
        ["Most leases held at once (sampled every 0.2 s)", str(result.drain.most_running)],
        [
            "Worker's sync tasks p50 / p95 / max",
            "; ".join(
                f"{r} {len(v):,}: " + spread(v, 1000, "{:.0f}") + " ms"
                for r, v in sorted(times.items())
            ),
        ],
        [
            "CPU during burst + drain",
            f"web {result.web_cpu:.1f} s, worker {result.worker_cpu:.1f} s"
            f" (of {drain or 0:.1f} s wall × 2 cores)",
        ],
        ["Busy periods stored / connections failing", f"{busy:,} / {failing}"],
        [
            "Channels' upkeep, `calendars.keep_channels` once (none due for renewal)",
            f"{kept[1]:,} connections looked at in {kept[0]:.1f} s"
            f" = {kept[0] / max(kept[1], 1) * 1000:.1f} ms each",
        ],
        [
            "First syncs (before the burst)",
            f"{first_syncs:,} in {warm:.1f} s = {first_syncs / warm:.1f}/s",
        ],
    ]
    lines = [
        f"Part 4, a burst: {count:,} Google connections with a channel each, fake's"
        f" events.list held {args.burst_latency_ms} ms; {syncs:,} sync tasks ran",
        *table(["Burst", "Figure"], rows),
        "checks:",
        *(f"  {'ok ' if held else 'NOT'} {what}" for what, held in checks.items()),
    ]
    by_email = {c.email: c for c in channels}
    most = [email for email, spans in lists.items() if len(spans) > 2][:3]
    for email in most:
        channel = by_email[email]
        sent = sorted(
            (a.sent - result.began, a.answered - result.began, a.status)
            for a in result.answers
            if a.channel_id == channel.channel_id
        )
        spans = sorted((a - result.began, b - result.began) for a, b in lists[email])
        lines.append(
            f"  connection {channel.connection_id}, {len(spans)} syncs: notifications (sent →"
            " answered, status) "
            + ", ".join(f"{a:.2f}→{b:.2f} {st}" for a, b, st in sent)
            + "; events.list "
            + ", ".join(f"{a:.2f}–{b:.2f}" for a, b in spans)
            + " (s after the burst began)"
        )
    return lines


def one_at_a_time(dep: Deployment, channels: list[Channel]) -> list[float]:
    """Seconds to answer each of ``channels``' notification, sent one after the other (the
    drain done: the web and worker otherwise idle but for the syncs these ask for)."""
    seconds = []
    with http_client() as client:
        for channel in channels:
            started = time.perf_counter()
            status = client.post(dep.base + GOOGLE_PUSH, headers=google_headers(channel, 99))
            seconds.append(time.perf_counter() - started)
            if status.status_code != 200:
                print(f"  [burst] a notification alone answered {status.status_code}")
    return seconds


def keep_channels_once(dep: Deployment) -> tuple[float, int]:
    """Once the syncs the last notifications asked for are done: the periodic upkeep of the
    channels (``calendars.keep_channels``, which beat runs every 15 minutes) run once; its
    seconds and the connections it looked at, from the worker's log."""
    dep.wait(
        lambda: dep.pg.execute(DRAIN_QUERY, (datetime.now(UTC),)).fetchone()[:2] == (0, 0),
        "the last syncs drained",
        DRAIN_TIMEOUT,
    )
    start = dep.worker_log_size()
    dep.app.extensions["celery"].send_task("calendars.keep_channels")
    found: list[re.Match[str]] = []

    def done() -> bool:
        match = KEPT.search(dep.worker_log.read_text(errors="replace")[start:])
        if match is not None:
            found.append(match)
        return match is not None

    dep.wait(done, "the channels' upkeep", DRAIN_TIMEOUT)
    return float(found[0].group(1)), int(found[0].group(2))


def google_headers(channel: Channel, number: int) -> dict[str, str]:
    """A Google ``exists`` message of ``channel``, as the fake (and Google) sends it."""
    return {
        "X-Goog-Channel-ID": channel.channel_id,
        "X-Goog-Channel-Token": channel.secret,
        "X-Goog-Resource-ID": channel.resource_id,
        "X-Goog-Resource-State": "exists",
        "X-Goog-Message-Number": str(number),
        "X-Goog-Resource-URI": "https://www.googleapis.com/calendar/v3/calendars/primary/events",
    }


def provision_burst(dep: Deployment, emails: list[str], tokens: list[str]) -> list[Channel]:
    """One agency of ``len(emails)`` sub accounts, each one Google connection, with the
    enqueueing off (the marks wait); a channel row for each connection's calendar."""
    doc = {
        "agencies": [
            {
                "name": "Burst agency",
                "owner": {
                    "email": f"burst-{uuid.uuid4().hex[:8]}@example.test",
                    "password": "s3cret-pass",
                },
                "subAccounts": [
                    {
                        "name": f"Burst {n}",
                        "timezone": "America/New_York",
                        "calendarConnections": [
                            {
                                "name": "Google",
                                "kind": "google",
                                "refreshToken": token,
                                "writeBack": False,
                            }
                        ],
                    }
                    for n, token in enumerate(tokens)
                ],
            }
        ]
    }
    dep.app.config["OUTBOX_DISPATCH"] = False
    try:
        created = provision(doc)
        db.session.commit()
    finally:
        dep.app.config["OUTBOX_DISPATCH"] = True
    ids = [s["calendarConnections"]["Google"] for s in created["agencies"][0]["subAccounts"]]
    calendars = dict(
        dep.pg.execute(
            "SELECT calendar_connection_id, id FROM connected_calendars"
            " WHERE calendar_connection_id = ANY(%s)",
            (ids,),
        ).fetchall()
    )
    now = datetime.now(UTC)
    channels = [
        Channel(
            connection_id,
            email,
            str(uuid.uuid4()),
            secrets.token_urlsafe(20),
            secrets.token_urlsafe(32),
        )
        for connection_id, email in zip(ids, emails, strict=True)
    ]
    db.session.execute(
        insert(PushChannel),
        [
            {
                "calendar_connection_id": c.connection_id,
                "connected_calendar_id": calendars[c.connection_id],
                "kind": "google",
                "channel_id": c.channel_id,
                "resource_id": c.resource_id,
                "secret_digest": hashlib.sha256(c.secret.encode()).hexdigest(),
                "expires_at": now + timedelta(days=7),
                "created_at": now,
            }
            for c in channels
        ],
    )
    db.session.commit()
    return channels


@dataclass(frozen=True)
class Answer:
    channel_id: str
    sent: float
    answered: float
    status: int


@dataclass
class Burst:
    began_at: datetime
    began: float  # perf_counter
    answers: list[Answer]
    drain: Drain
    web_cpu: float
    worker_cpu: float

    @property
    def accept_seconds(self) -> float:
        return max(a.answered for a in self.answers) - self.began

    @property
    def latencies(self) -> list[float]:
        return [a.answered - a.sent for a in self.answers]

    @property
    def statuses(self) -> Counter[int]:
        return Counter(a.status for a in self.answers)


def burst(dep: Deployment, messages: list[Channel], threads: int) -> Burst:
    """Send every message at once from ``threads`` threads; meanwhile sample the drain."""
    limits = httpx.Limits(max_connections=threads, max_keepalive_connections=threads)
    answers: list[Answer] = []
    numbers: Counter[str] = Counter()
    lock = threading.Lock()
    url = dep.base + GOOGLE_PUSH
    worker_pids = [dep.worker_pid, *capacity.children(dep.worker_pid)]

    def cpu() -> tuple[float, float]:
        return (
            sum(capacity.process_cpu(p) for p in dep.web.workers),
            sum(capacity.process_cpu(p) for p in worker_pids),
        )

    cpu_before = cpu()
    with httpx.Client(limits=limits, timeout=60, trust_env=False) as client:

        def send(channel: Channel) -> None:
            with lock:
                numbers[channel.channel_id] += 1
                number = numbers[channel.channel_id] + 1  # the sync message was 1
            sent = time.perf_counter()
            try:
                status = client.post(url, headers=google_headers(channel, number)).status_code
            except httpx.HTTPError:
                status = 0
            with lock:
                answers.append(Answer(channel.channel_id, sent, time.perf_counter(), status))

        drain = Drain()
        began_at = datetime.now(UTC)
        began = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            futures = [pool.submit(send, m) for m in messages]
            while True:
                queued, running, unattempted, _ = dep.pg.execute(
                    DRAIN_QUERY, (began_at,)
                ).fetchone()
                drain.samples += 1
                drain.most_running = max(drain.most_running, running)
                if all(f.done() for f in futures) and (queued, running, unattempted) == (0, 0, 0):
                    drain.seconds = time.perf_counter() - began
                    break
                if time.perf_counter() - began > DRAIN_TIMEOUT:
                    print(
                        f"  [burst] not drained: {queued} queued, {running} running,"
                        f" {unattempted} not attempted since the start",
                        flush=True,
                    )
                    break
                time.sleep(0.2)
    cpu_after = cpu()
    return Burst(
        began_at=began_at,
        began=began,
        answers=answers,
        drain=drain,
        web_cpu=cpu_after[0] - cpu_before[0],
        worker_cpu=cpu_after[1] - cpu_before[1],
    )


# --- main ------------------------------------------------------------------------------------


RUNNERS: dict[str, Callable[[argparse.Namespace, Path], list[str]]] = {
    "push": part_push,
    "poll": part_poll,
    "live": part_live,
    "burst": part_burst,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--part", choices=(*PARTS, "all"), default="all")
    parser.add_argument("--changes", type=int, default=CHANGES, help="pushed changes a kind")
    parser.add_argument(
        "--poll-changes", type=int, default=POLL_CHANGES, help="polled changes a kind"
    )
    parser.add_argument(
        "--poll-interval", type=int, default=POLL_INTERVAL, help="SYNC_INTERVAL_SECONDS, polling"
    )
    parser.add_argument("--creates", type=int, default=CREATES, help="timed creates a row")
    parser.add_argument("--burst-connections", type=int, default=BURST_CONNECTIONS)
    parser.add_argument("--burst-per-channel", type=int, default=BURST_PER_CHANNEL)
    parser.add_argument("--burst-threads", type=int, default=BURST_THREADS)
    parser.add_argument(
        "--burst-latency-ms",
        type=int,
        default=BURST_LATENCY_MS,
        help="how long the Google fake holds each events.list in the burst",
    )
    parser.add_argument(
        "--log-dir", help="keep the servers' logs in this folder (default: a temporary one)"
    )
    args = parser.parse_args()
    parts = PARTS if args.part == "all" else (args.part,)
    pg_version = availability.postgres_version()
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    redis_version = redis.Redis.from_url(capacity.REDIS_URL).info("server")["redis_version"]
    print("Freshness of connected calendars: push, polling, the live check, a burst")
    print(
        f"machine: nproc {len(os.sched_getaffinity(0))}, {hot_path.cpu_model()},"
        f" {platform.platform()}"
    )
    print(
        f"         {platform.python_implementation()} {platform.python_version()}, PostgreSQL"
        f" {pg_version}, Redis {redis_version}, gunicorn {version('gunicorn')}, celery"
        f" {version('celery')}"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    started = time.monotonic()
    results: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp:
        log_dir = Path(args.log_dir) if args.log_dir else Path(tmp)
        log_dir.mkdir(parents=True, exist_ok=True)
        for part in parts:
            part_started = time.monotonic()
            print(f"\n== {part} ==", flush=True)
            results[part] = RUNNERS[part](args, log_dir)
            print()
            print("\n".join(results[part]))
            print(
                f"({part}: {time.monotonic() - part_started:.0f} s, load average"
                f" {os.getloadavg()[0]:.2f})",
                flush=True,
            )
    if len(parts) > 1:
        print("\n== all parts ==")
        for lines in results.values():
            print("\n".join(lines))
            print()
    print(
        f"load average at the end {os.getloadavg()[0]:.2f}; total"
        f" {time.monotonic() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
