"""Benchmark of capacity: what one web process and one worker sustain on this machine, as the
deployment guide runs them (PostgreSQL, Redis as rate-limit store and broker).

Run from the project root (about two and a quarter minutes; needs the dev venv, for aiosmtpd,
PostgreSQL at ``TEST_POSTGRES_URL``, default ``postgresql://postgres@127.0.0.1:5432/postgres``,
and Redis at ``TEST_REDIS_URL``, default ``redis://127.0.0.1:6379/0``)::

    .venv/bin/python -m bench.capacity

The setup:

* A throw-away PostgreSQL database (created through the admin database, migrated with
  ``flask_migrate.upgrade``, dropped at the end), provisioned with 8 "web" sub accounts, each
  with one full-permission API key: UTC, a 3,650-day horizon, no minimum notice; a 15-minute
  "Call" event type on a calendar open 24/7 (what the creates book) and a 30-minute
  "Consultation" on a 30-minute grid, Mon–Fri 09:00–17:00 America/New_York (what availability
  is asked for). Plus 4 "notified" sub accounts for the worker: ``notifyOnBooking`` on and a
  webhook subscription (provisioning's ``webhooks``) to ``booking.created`` at a local receiver.
* The web process: ``gunicorn -c gunicorn.conf.py wsgi:app``, the checked-in configuration,
  with ``WEB_CONCURRENCY=1`` and ``DATABASE_URL`` on PostgreSQL, so ONE gevent worker process
  (keep-alive 5 s, 1,000 connections), its JSON access log written to a file. ``REDIS_URL`` is
  the machine's Redis, shared with whatever else runs there, so this server's rate-limit
  counts get a key prefix of their own (``RATELIMIT_KEY_PREFIX``) and its Celery messages a
  queue of their own (``CELERY_QUEUE``); both are deleted at the end.
* Rate limits: ``RATE_LIMIT`` (and ``RATE_LIMIT_UNAUTHENTICATED``) = 1,000,000/minute. The
  limiter still runs on every agent request (its moving-window script in Redis, one round
  trip); only the 60/minute a key gets by default would refuse the load. The log Redis keeps
  per key then holds a minute of requests instead of 60 entries; its script does a binary
  search over it, so this costs about the same.
* ``APP_ENV`` is not ``production``: production accepts only ``https://`` webhook targets, and
  the local receiver is plain HTTP (``WEBHOOK_ALLOW_PRIVATE=1`` lets the loopback address
  through). Nothing else on these paths depends on it.

1. Web process. Four requests, each at 1, 8 and 32 client threads; every thread keeps its own
   keep-alive connection (``http.client``) and sends back-to-back, thread t on web sub account
   t mod 8 with its key:

   a. ``GET /healthz`` without a key, as a load balancer asks: the floor (no database);
   b. ``GET /v1/api/calendar/bookings?limit=1``: the cheapest authenticated request (key
      lookup, rate limit, one page query and its count);
   c. ``GET /v1/api/calendar/availability`` for "Consultation" over one week (Monday to
      Sunday, a year ahead so no create lands in it): 80 open slots, checked on every answer;
   d. ``POST /v1/api/calendar/event-types/<Call>/bookings``: as ``bench.booking_writes``,
      slot n = midnight UTC two days ahead + n × 15 min, so no two creates of the run overlap;
      a unique ``idempotencyKey`` and one attendee with a fresh email. Each create commits an
      outbox event and hands it to Redis (``OUTBOX_DISPATCH``, on as in production).

   Rows (request × threads) take turns: 3 rounds of 2.5 s each, after a 0.5 s warm-up of
   each request at 8 threads. Requests/s = completed requests / wall time until the last
   answer; median and p95 of the client's latency. Any status but 200 (201 for creates) fails
   the run. Also printed, over each row's rounds: the CPU of the gunicorn worker process and
   of this (client) process, in % of one core, and the whole machine's busy time, in % of all
   its cores. The client threads run on the same machine: they take CPU from the server.

2. Worker. ``celery -A worker worker --loglevel INFO``, the Procfile's command (the default
   prefork pool, one process per CPU), on the same database, Redis and queue, with
   ``SMTP_URL`` at a real SMTP server (aiosmtpd, ``tests.mail_servers``) and the webhook
   subscriptions at a real HTTP receiver (``tests.webhook_receivers``), both in this process
   on loopback ports. First, the queue is emptied of section 1's messages (one per create:
   their number is checked against the 201s; their outbox rows stay undelivered, no beat runs
   the sweep). Then, with no worker running, 300 bookings are created on the notified sub
   accounts through the web process (8 client threads): 300 ``outbox.deliver`` messages wait
   in Redis (checked). Then the worker is started and timed until the SMTP server holds 300
   messages and the receiver 300 POSTs. Each event costs the worker 5 tasks (``outbox.deliver``,
   one ``outbox.handle`` per handler: calendar write-back with nothing to do, notifications
   sending one email, webhooks planning one delivery; then ``webhooks.send`` POSTs it).
   Printed: the start-up (launch to "ready."), the drain (events, emails, webhooks and tasks
   per second from "ready." to the last delivery, and to the first), the worker's CPU (main and
   pool processes), and each task's median time in the pool as Celery logs it. Checks: one
   email per attendee and one POST per event (distinct ``webhook-id``s) reached the sinks; in
   SQL every webhook delivery ``succeeded`` and every mail ``sent``, and every event has
   ``delivered_at`` or else every handler's record ``delivered`` (how many lack the stamp is
   printed: without beat, no sweep comes to stamp them).

At the end a SQL count must find exactly as many active bookings as 201 answers.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import platform
import re
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import redis
from sqlalchemy import func, select

from app import create_app
from app.extensions import db
from app.models import (
    DeliveryStatus,
    MailMessage,
    MailStatus,
    OutboxDelivery,
    OutboxEvent,
    Permission,
    WebhookDelivery,
    WebhookDeliveryStatus,
)
from app.models.types import utcnow
from app.services.accounts.provisioning import WEEKDAYS
from app.services.integrations.outbox import registered_handlers
from bench.availability import (
    GUNICORN,
    ROOT,
    SERVER_START_TIMEOUT,
    Timing,
    free_port,
    postgres_database,
    postgres_version,
    stop,
)
from bench.booking_writes import (
    HORIZON_DAYS,
    SHOWN_ERRORS,
    SLOT,
    Calendar,
    Client,
    Slots,
    check_count,
    migrate_and_provision,
)
from tests.mail_servers import Inbox, smtp_server
from tests.webhook_receivers import Receiver, webhook_receiver

CELERY = GUNICORN.with_name("celery")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SECRET_KEY = "bench"
RATE_LIMIT = "1000000/minute"

WEB_SUB_ACCOUNTS = 8
NOTIFIED_SUB_ACCOUNTS = 4
LEVELS = (1, 8, 32)
ROUNDS, ROUND_SECONDS = 3, 2.5
WARMUP_SECONDS, WARMUP_CLIENTS = 0.5, 8

OFFICE_TIMEZONE = "America/New_York"
OFFICE_DAYS = ("mon", "tue", "wed", "thu", "fri")
OFFICE_HOURS = ("09:00", "17:00")
CONSULTATION_MINUTES = 30
WEEK_SLOTS = len(OFFICE_DAYS) * 8 * 60 // CONSULTATION_MINUTES  # 80
AVAILABILITY_AHEAD = timedelta(days=365)

BACKLOG, BACKLOG_CLIENTS = 300, 8
TASKS_PER_EVENT = 5  # outbox.deliver, 3 × outbox.handle, webhooks.send
WORKER_START_TIMEOUT, DRAIN_TIMEOUT = 60.0, 120.0
SUCCEEDED = re.compile(r"Task ([\w.]+)\[[^\]]+\] succeeded in ([0-9.e-]+)s")

ENDPOINTS = {
    "healthz": "GET /healthz",
    "bookings": "GET bookings?limit=1",
    "availability": "GET availability, week",
    "create": "POST booking",
}


# --- the calendars ---------------------------------------------------------------------------


def sub_account(name: str, webhook_url: str | None = None) -> dict[str, Any]:
    open_all_day = {day: [["00:00", "24:00"]] for day in WEEKDAYS}
    office = {day: [list(OFFICE_HOURS)] for day in OFFICE_DAYS}
    doc: dict[str, Any] = {
        "name": name,
        "timezone": "UTC",
        "settings": {
            "minimumNoticeMinutes": 0,
            "bookingHorizonDays": HORIZON_DAYS,
            "notifyOnBooking": True,
        },
        "availabilityProfiles": [
            {"name": "Always", "default": True, "weeklyHours": open_all_day},
            {"name": "Office", "timezone": OFFICE_TIMEZONE, "weeklyHours": office},
        ],
        "eventTypes": [
            {
                "name": "Call",
                "duration": SLOT.seconds // 60,
                "slotInterval": SLOT.seconds // 60,
                "availabilityProfile": "Always",
            },
            {
                "name": "Consultation",
                "duration": CONSULTATION_MINUTES,
                "slotInterval": CONSULTATION_MINUTES,
                "availabilityProfile": "Office",
            },
        ],
        "apiKeys": [{"name": "bench", "permissions": [p.value for p in Permission]}],
    }
    if webhook_url:
        doc["webhooks"] = [{"name": "receiver", "url": webhook_url, "events": ["booking.created"]}]
    return doc


def tenant_document(webhook_url: str) -> dict[str, Any]:
    return {
        "agencies": [
            {
                "name": "Bench agency",
                "owner": {"email": "owner@bench.test", "password": "s3cret-pass"},
                "subAccounts": [
                    *(sub_account(f"Web calendar {n}") for n in range(WEB_SUB_ACCOUNTS)),
                    *(
                        sub_account(f"Notified calendar {n}", webhook_url)
                        for n in range(NOTIFIED_SUB_ACCOUNTS)
                    ),
                ],
            }
        ]
    }


class Anonymous(Calendar):
    """What a load balancer's health check sends: no API key."""

    @property
    def headers(self) -> dict[str, str]:
        return {"Accept": "application/json"}


HEALTH_CHECK = Anonymous("", "")


@dataclass(frozen=True)
class Tenant:
    """One sub account as a client sees it: creates and the week's availability query."""

    sub_account_id: int
    calendar: Calendar
    availability_path: str


def prepare(url: str, webhook_url: str) -> tuple[list[Tenant], list[Tenant]]:
    """Migrate and provision; returns the web and the notified sub accounts."""
    # Provisioning checks the webhook URL as the worker will: a loopback address needs this.
    os.environ["WEBHOOK_ALLOW_PRIVATE"] = "1"
    created = migrate_and_provision(url, tenant_document(webhook_url))
    today = utcnow().date() + AVAILABILITY_AHEAD
    monday = today + timedelta(days=-today.weekday() % 7)
    tenants = [
        Tenant(
            s["id"],
            Calendar(
                s["apiKeys"]["bench"],
                f"/v1/api/calendar/event-types/{s['eventTypes']['Call']}/bookings",
            ),
            "/v1/api/calendar/availability?"
            + urlencode(
                {
                    "startDate": monday.isoformat(),
                    "endDate": (monday + timedelta(days=6)).isoformat(),
                    "eventTypeId": s["eventTypes"]["Consultation"],
                }
            ),
        )
        for s in created
    ]
    return tenants[:WEB_SUB_ACCOUNTS], tenants[WEB_SUB_ACCOUNTS:]


# --- processes and their CPU -----------------------------------------------------------------

TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` so far; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@dataclass(frozen=True)
class Snapshot:
    """CPU counters at one instant: this process's, the watched processes', the machine's."""

    at: float
    client: float
    watched: float
    busy: float
    total: float

    @classmethod
    def take(cls, pids: list[int]) -> Snapshot:
        cpu = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        idle = cpu[3] + cpu[4]  # idle + iowait
        return cls(
            time.perf_counter(),
            time.process_time(),
            sum(process_cpu(pid) for pid in pids),
            (sum(cpu) - idle) / TICKS,
            sum(cpu) / TICKS,
        )


@dataclass
class Usage:
    """CPU used between snapshots, summed over several intervals."""

    seconds: float = 0.0
    client: float = 0.0
    watched: float = 0.0
    busy: float = 0.0
    total: float = 0.0

    def add(self, before: Snapshot, after: Snapshot) -> None:
        self.seconds += after.at - before.at
        self.client += after.client - before.client
        self.watched += after.watched - before.watched
        self.busy += after.busy - before.busy
        self.total += after.total - before.total

    @property
    def machine(self) -> float:
        return self.busy / self.total if self.total else float("nan")


def wait_for_log(process: subprocess.Popen[bytes], log_path: Path, text: str, what: str) -> None:
    deadline = time.monotonic() + WORKER_START_TIMEOUT
    while text not in log_path.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{what} did not come up:\n{tail}")
        time.sleep(0.05)


@contextmanager
def web_server(env: dict[str, str], log_path: Path) -> Iterator[tuple[int, int]]:
    """``gunicorn -c gunicorn.conf.py wsgi:app`` (the checked-in configuration) on a free
    loopback port; yields the port and the pid of its one worker process."""
    port = free_port()
    env = {**env, "HOST": "127.0.0.1", "PORT": str(port), "WEB_CONCURRENCY": "1"}
    command = [str(GUNICORN), "-c", "gunicorn.conf.py", "wsgi:app"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"gunicorn did not come up:\n{tail}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            finally:
                conn.close()
            time.sleep(0.1)
        workers = children(process.pid)
        if len(workers) != 1:
            raise RuntimeError(f"expected one gunicorn worker, found {workers}")
        yield port, workers[0]
        if children(process.pid) != workers:
            raise SystemExit("FAILED: the gunicorn worker was restarted during the run")
    finally:
        stop(process)


@contextmanager
def celery_worker(env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The Procfile's ``celery -A worker worker --loglevel INFO``; yields once it is ready."""
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [str(CELERY), "-A", "worker", "worker", "--loglevel", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        stop(process)


# --- 1: the web process ----------------------------------------------------------------------


@dataclass
class Row:
    """One request at one concurrency, its rounds summed."""

    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    round_rates: list[float] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.usage.seconds

    def check(self, what: str) -> None:
        if self.failures:
            shown = "\n  ".join(self.failures[:SHOWN_ERRORS])
            raise SystemExit(
                f"FAILED: {len(self.failures)} unexpected answers to {what}:\n  {shown}"
            )


def one_request(endpoint: str, tenant: Tenant, slots: Slots) -> tuple[str, str, bytes | None, int]:
    """Method, path, body and the expected status of one ``endpoint`` request."""
    if endpoint == "healthz":
        return "GET", "/healthz", None, 200
    if endpoint == "bookings":
        return "GET", "/v1/api/calendar/bookings?limit=1", None, 200
    if endpoint == "availability":
        return "GET", tenant.availability_path, None, 200
    return "POST", tenant.calendar.create_path, slots.body(), 201


def answer_is_right(endpoint: str, answer: bytes) -> bool:
    if endpoint != "availability":
        return True
    return sum(len(day["slots"]) for day in json.loads(answer)) == WEEK_SLOTS


def run_round(
    port: int,
    endpoint: str,
    clients: int,
    seconds: float,
    tenants: list[Tenant],
    slots: Slots,
    row: Row,
    web_pid: int,
) -> None:
    """``clients`` threads sending ``endpoint`` back-to-back for ``seconds``, thread t on
    ``tenants[t % len(tenants)]``; the round lasts until the last answer."""
    go = threading.Barrier(clients + 1)
    done = threading.Event()
    results: list[tuple[list[float], list[str]]] = [([], []) for _ in range(clients)]

    def run(n: int) -> None:
        tenant = tenants[n % len(tenants)]
        client = Client(port, HEALTH_CHECK if endpoint == "healthz" else tenant.calendar, slots)
        latencies, failures = results[n]
        go.wait()
        while not done.is_set():
            method, path, body, expected = one_request(endpoint, tenant, slots)
            elapsed, status, answer = client.send(method, path, body)
            if status == expected and answer_is_right(endpoint, answer):
                latencies.append(elapsed)
            else:
                failures.append(f"{method} {path}: {status} {answer[:300]!r}")
        client.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    go.wait()
    before = Snapshot.take([web_pid])
    time.sleep(seconds)
    done.set()
    for thread in threads:
        thread.join()
    after = Snapshot.take([web_pid])
    row.usage.add(before, after)
    row.round_rates.append(sum(len(lat) for lat, _ in results) / (after.at - before.at))
    for latencies, failures in results:
        row.latencies += latencies
        row.failures += failures


def bench_web(port: int, web_pid: int, tenants: list[Tenant], slots: Slots) -> int:
    """Section 1; returns the number of 201s."""
    created = 0
    for endpoint in ENDPOINTS:
        warm = Row()
        run_round(port, endpoint, WARMUP_CLIENTS, WARMUP_SECONDS, tenants, slots, warm, web_pid)
        warm.check(f"the warm-up of {ENDPOINTS[endpoint]}")
        created += len(warm.latencies) if endpoint == "create" else 0
    rows = {(endpoint, clients): Row() for endpoint in ENDPOINTS for clients in LEVELS}
    for _ in range(ROUNDS):
        for (endpoint, clients), row in rows.items():
            run_round(port, endpoint, clients, ROUND_SECONDS, tenants, slots, row, web_pid)
    print(
        "  request                 clients  requests    req/s  per round  median ms   p95 ms"
        "  web CPU  client CPU  machine"
    )
    for (endpoint, clients), row in rows.items():
        latency = Timing(row.latencies or [float("nan")])
        rounds = f"{min(row.round_rates):.0f}–{max(row.round_rates):.0f}"
        usage = row.usage
        print(
            f"  {ENDPOINTS[endpoint]:<22}  {clients:>7}  {len(row.latencies):>8,}"
            f"  {row.rate:>7.0f}  {rounds:>9}  {latency.median_ms:>9.2f}  {latency.p95_ms:>7.2f}"
            f"  {usage.watched / usage.seconds:>7.0%}  {usage.client / usage.seconds:>10.0%}"
            f"  {usage.machine:>7.0%}"
        )
    for (endpoint, clients), row in rows.items():
        row.check(f"{ENDPOINTS[endpoint]} at {clients} clients")
        created += len(row.latencies) if endpoint == "create" else 0
    return created


# --- 2: the worker ---------------------------------------------------------------------------


def queued(broker: redis.Redis, queue: str) -> int:
    return sum(broker.llen(key) for key in broker.scan_iter(match=f"{queue}*", count=1000))


def empty_queue(broker: redis.Redis, queue: str) -> None:
    for key in list(broker.scan_iter(match=f"{queue}*", count=1000)):
        broker.delete(key)


def make_backlog(port: int, tenants: list[Tenant], slots: Slots) -> None:
    """``BACKLOG`` creates on the notified sub accounts, ``BACKLOG_CLIENTS`` threads."""
    lock = threading.Lock()
    handed = [0]
    failures: list[str] = []

    def run(n: int) -> None:
        tenant = tenants[n % len(tenants)]
        client = Client(port, tenant.calendar, slots)
        while True:
            with lock:
                if handed[0] >= BACKLOG or failures:
                    break
                handed[0] += 1
            method, path, body, expected = one_request("create", tenant, slots)
            _, status, answer = client.send(method, path, body)
            if status != expected:
                failures.append(f"{method} {path}: {status} {answer[:300]!r}")
        client.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(BACKLOG_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"FAILED: creating the backlog:\n  {failures[0]}")


@dataclass
class Drain:
    """When the worker became ready and when the sinks received the first and last of each;
    ``perf_counter`` instants."""

    launched: float
    ready: float = 0.0
    first_email: float | None = None
    first_webhook: float | None = None
    last_email: float | None = None
    last_webhook: float | None = None
    usage: Usage = field(default_factory=Usage)
    main_cpu: float = 0.0  # the worker's main process, of ``usage.watched``

    def since_ready(self, instant: float | None) -> float:
        return (instant or float("nan")) - self.ready

    @property
    def seconds(self) -> float:
        return max(self.since_ready(self.last_email), self.since_ready(self.last_webhook))


def watch_drain(
    process: subprocess.Popen[bytes], log_path: Path, inbox: Inbox, receiver: Receiver
) -> Drain:
    """From the worker's launch until the sinks hold ``BACKLOG`` emails and webhooks."""
    drain = Drain(time.perf_counter())
    wait_for_log(process, log_path, " ready.", "the celery worker")
    drain.ready = time.perf_counter()
    pids = [process.pid, *children(process.pid)]
    before, main_before = Snapshot.take(pids), process_cpu(process.pid)
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while True:
        now = time.perf_counter()
        emails, webhooks = len(inbox.messages), len(receiver.requests)
        if emails and drain.first_email is None:
            drain.first_email = now
        if webhooks and drain.first_webhook is None:
            drain.first_webhook = now
        if emails >= BACKLOG and drain.last_email is None:
            drain.last_email = now
        if webhooks >= BACKLOG and drain.last_webhook is None:
            drain.last_webhook = now
        if emails >= BACKLOG and webhooks >= BACKLOG:
            break
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise SystemExit(
                f"FAILED: {emails} emails and {webhooks} webhooks of {BACKLOG} delivered:\n{tail}"
            )
        time.sleep(0.02)
    drain.usage.add(before, Snapshot.take(pids))
    drain.main_cpu = process_cpu(process.pid) - main_before
    time.sleep(1.0)  # anything sent twice would arrive now
    return drain


@dataclass(frozen=True)
class Delivered:
    """What the database says of the backlog's events."""

    events: int  # delivered_at stamped
    handled_unstamped: int  # every handler's record delivered, delivered_at still empty
    webhooks: int  # webhook deliveries succeeded
    mails: int  # mail messages sent


def delivered(url: str, sub_account_ids: list[int]) -> Delivered:
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": SECRET_KEY})
    with app.app_context():
        events = select(OutboxEvent.id).where(OutboxEvent.sub_account_id.in_(sub_account_ids))
        handled = (
            select(OutboxDelivery.event_id)
            .where(OutboxDelivery.status == DeliveryStatus.DELIVERED)
            .group_by(OutboxDelivery.event_id)
            .having(func.count() == len(registered_handlers()))
        )
        counts = Delivered(
            db.session.scalar(
                select(func.count())
                .select_from(OutboxEvent)
                .where(OutboxEvent.id.in_(events), OutboxEvent.delivered_at.is_not(None))
            ),
            db.session.scalar(
                select(func.count())
                .select_from(OutboxEvent)
                .where(
                    OutboxEvent.id.in_(events),
                    OutboxEvent.id.in_(handled),
                    OutboxEvent.delivered_at.is_(None),
                )
            ),
            db.session.scalar(
                select(func.count())
                .select_from(WebhookDelivery)
                .where(
                    WebhookDelivery.event_id.in_(events),
                    WebhookDelivery.status == WebhookDeliveryStatus.SUCCEEDED,
                )
            ),
            db.session.scalar(
                select(func.count())
                .select_from(MailMessage)
                .where(
                    MailMessage.sub_account_id.in_(sub_account_ids),
                    MailMessage.status == MailStatus.SENT,
                )
            ),
        )
        db.session.remove()
        db.engine.dispose()
    return counts


def bench_worker(
    url: str,
    env: dict[str, str],
    log_dir: Path,
    port: int,
    tenants: list[Tenant],
    slots: Slots,
    inbox: Inbox,
    receiver: Receiver,
) -> None:
    broker = redis.Redis.from_url(REDIS_URL)
    queue = env["CELERY_QUEUE"]
    make_backlog(port, tenants, slots)
    waiting = queued(broker, queue)
    print(
        f"  backlog: {BACKLOG} creates on {len(tenants)} notified sub accounts with no worker"
        f" running; {waiting} messages wait in the queue"
    )
    if waiting != BACKLOG:
        raise SystemExit(f"FAILED: {waiting} messages queued for {BACKLOG} creates")
    log_path = log_dir / "worker.log"
    with celery_worker(env, log_path) as process:
        drain = watch_drain(process, log_path, inbox, receiver)
    log = log_path.read_text(errors="replace")
    banner = next((line for line in log.splitlines() if "concurrency:" in line), "")
    pool = banner.split("concurrency:", 1)[1].strip() if banner else "?"
    errors = [line for line in log.splitlines() if "ERROR" in line or "Traceback" in line]
    seconds, rate, usage = drain.seconds, BACKLOG / drain.seconds, drain.usage
    print(f"  worker: pool concurrency {pool}")
    print(
        f'  start-up (launch → "ready.") {drain.ready - drain.launched:.1f} s; from'
        f' "ready.": first email {drain.since_ready(drain.first_email):.1f} s, first webhook'
        f" {drain.since_ready(drain.first_webhook):.1f} s, all emails"
        f" {drain.since_ready(drain.last_email):.1f} s, all webhooks"
        f" {drain.since_ready(drain.last_webhook):.1f} s"
    )
    print(
        f"  drained {BACKLOG} events in {seconds:.1f} s: {rate:.1f} events/s ="
        f" {rate:.1f} emails/s + {rate:.1f} webhooks/s, {TASKS_PER_EVENT * rate:.0f} tasks/s"
    )
    print(
        f"  CPU: worker {usage.watched / usage.seconds:.0%} of one core (main process"
        f" {drain.main_cpu / usage.seconds:.0%}, pool processes"
        f" {(usage.watched - drain.main_cpu) / usage.seconds:.0%}),"
        f" SMTP server + receiver (this process) {usage.client / usage.seconds:.0%},"
        f" machine {usage.machine:.0%}; {len(errors)} ERROR/Traceback lines in the worker's log"
    )
    for line in errors[:SHOWN_ERRORS]:
        print(f"    {line[:300]}")
    task_times: dict[str, list[float]] = {}
    for name, seconds_taken in SUCCEEDED.findall(log):
        task_times.setdefault(name, []).append(float(seconds_taken))
    print(
        '  time in the pool per task (Celery\'s "succeeded in"): '
        + "; ".join(
            f"{name} {len(times)}× median {statistics.median(times) * 1000:.1f} ms,"
            f" total {sum(times):.1f} s"
            for name, times in sorted(task_times.items())
        )
    )

    recipients = {str(m["To"]) for m in inbox.messages}
    webhook_ids = {r.headers.get("webhook-id") for r in receiver.requests}
    found = delivered(url, [t.sub_account_id for t in tenants])
    verdict = (
        len(inbox.messages) == len(recipients) == BACKLOG
        and len(receiver.requests) == len(webhook_ids) == BACKLOG
        and found.webhooks == found.mails == BACKLOG
        and found.events + found.handled_unstamped == BACKLOG
    )
    print(
        f"  check: {len(inbox.messages)} emails to {len(recipients)} addresses,"
        f" {len(receiver.requests)} webhook POSTs with {len(webhook_ids)} webhook-ids;"
        f" SQL: {found.webhooks} webhook deliveries succeeded, {found.mails} mails sent:"
        f" {'ok' if verdict else 'MISMATCH'}"
    )
    print(
        f"  outbox: {found.events} events stamped delivered_at; {found.handled_unstamped} more"
        " have every handler's record delivered but no delivered_at (the last two handlers"
        " finished at once; the sweep stamps them, no beat runs here)"
    )
    if not verdict:
        raise SystemExit("FAILED: the worker did not deliver each event exactly once")


# --- main ------------------------------------------------------------------------------------


def service_env(url: str, queue: str, prefix: str, smtp_url: str) -> dict[str, str]:
    """The web process's and the worker's environment."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CELERY_BROKER_URL", "APP_ENV", "PROMETHEUS_MULTIPROC_DIR")
    }
    return {
        **env,
        "DATABASE_URL": url,
        "SECRET_KEY": SECRET_KEY,
        "REDIS_URL": REDIS_URL,
        "RATELIMIT_KEY_PREFIX": prefix,
        "CELERY_QUEUE": queue,
        "OUTBOX_DISPATCH": "1",
        "RATE_LIMIT": RATE_LIMIT,
        "RATE_LIMIT_UNAUTHENTICATED": RATE_LIMIT,
        "SMTP_URL": smtp_url,
        "WEBHOOK_ALLOW_PRIVATE": "1",
    }


def forget_keys(queue: str, prefix: str) -> None:
    broker = redis.Redis.from_url(REDIS_URL)
    for pattern in (f"{queue}*", f"*{queue}", f"*{prefix}*"):
        for key in list(broker.scan_iter(match=pattern, count=1000)):
            broker.delete(key)


def run(log_dir: Path) -> None:
    queue, prefix = f"bench-capacity-{uuid.uuid4().hex}", f"bench-{uuid.uuid4().hex}"
    slots = Slots()
    with (
        postgres_database() as url,
        smtp_server() as (smtp_url, inbox),
        webhook_receiver() as receiver,
    ):
        web, notified = prepare(url, receiver.url)
        env = service_env(url, queue, prefix, smtp_url)
        try:
            web_env = {**env, "PROMETHEUS_MULTIPROC_DIR": str(log_dir / "web-metrics")}
            with web_server(web_env, log_dir / "gunicorn.log") as (port, web_pid):
                print(
                    f"1. Web process: gunicorn -c gunicorn.conf.py wsgi:app, WEB_CONCURRENCY=1"
                    f" (1 gevent worker); {ROUNDS} rounds of {ROUND_SECONDS:g} s per row, rows"
                    " interleaved; keep-alive connections, one per client thread"
                )
                created = bench_web(port, web_pid, web, slots)
                broker = redis.Redis.from_url(REDIS_URL)
                handed = queued(broker, queue)
                print(
                    f"  {created:,} creates answered 201; {handed:,} outbox.deliver messages"
                    f" in the queue: {'ok' if handed == created else 'MISMATCH'}"
                )
                if handed != created:
                    raise SystemExit("FAILED: not every create's event reached the broker")
                empty_queue(broker, queue)
                print()
                print(
                    "2. Worker: celery -A worker worker --loglevel INFO (the Procfile's),"
                    f" Redis broker; a backlog of {BACKLOG} booking.created events, each one"
                    " email (SMTP) and one webhook (HTTP POST)"
                )
                bench_worker(url, env, log_dir, port, notified, slots, inbox, receiver)
            print()
            check_count(url, created + BACKLOG)
        finally:
            forget_keys(queue, prefix)


def main() -> None:
    started = time.monotonic()
    pg_version = postgres_version()
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    redis_version = redis.Redis.from_url(REDIS_URL).info("server")["redis_version"]
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd: a line per message
    print("Capacity benchmark: one web process and one worker")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.platform()}"
    )
    print(
        f"         PostgreSQL {pg_version}, Redis {redis_version}, gunicorn {version('gunicorn')},"
        f" gevent {version('gevent')}, celery {version('celery')}"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    print(
        f"calendars: {WEB_SUB_ACCOUNTS} web sub accounts (thread t uses t mod"
        f" {WEB_SUB_ACCOUNTS}), {NOTIFIED_SUB_ACCOUNTS} notified; rate limit {RATE_LIMIT}"
        " per key, counted in Redis"
    )
    print(
        "          creates: 15-min slots that never overlap, unique idempotencyKey, one fresh"
        f" attendee; availability: a week of {WEEK_SLOTS} open 30-min slots"
    )
    print(
        "          client threads run on the same machine as the server, PostgreSQL and"
        " Redis: CPU in % of one core (web, client), machine in % of all cores"
    )
    print()
    with tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp:
        run(Path(tmp))
    print()
    print(f"total {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
