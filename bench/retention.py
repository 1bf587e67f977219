"""Benchmark of the retention job (``app.jobs.retention.purge_old_records``)
working off a backlog of a million old outbox events while bookings are being made.

Run from the project root (about 4 minutes on 2 cores: 2.5 growing the database, the
100,000 bookings' row triggers most of that, 1 purging; needs the venv, PostgreSQL at
``TEST_POSTGRES_URL``, default
``postgresql://postgres@127.0.0.1:5432/postgres``, and the Redis the API's rate limits use,
``TEST_REDIS_URL``)::

    .venv/bin/python -m bench.retention

* A throw-away PostgreSQL database (created through the admin database, migrated, dropped at
  the end) with one sub account as ``bench/booking_writes.py`` provisions it: calendar open
  24/7 in UTC, no minimum notice, one 15-minute event type, one full-permission API key.
* Grown by bulk SQL (``INSERT … SELECT generate_series``, then ``VACUUM ANALYZE``):
  ``PAST_BOOKINGS`` completed bookings spread over the last 400 days, ``EVENTS_PER_BOOKING``
  outbox events each (``OLD_EVENTS`` in all, ids in time order, occurred and delivered 31–400
  days ago, a ~500-byte booking snapshot each) with their two handlers' records
  (``notifications`` and ``webhooks``, delivered); a webhook delivery (succeeded) and its
  attempt for every ``WEBHOOK_EVERY``-th event; a mail message for every ``MAIL_EVERY``-th
  event (``OLD_MAIL``, made when the event was delivered, its ``event_id`` set); a reminder for
  every ``REMINDER_EVERY``-th booking pointing at its ``booking.reminder`` event. What must
  survive: ``RECENT_EVENTS`` events delivered a day ago (with handler records, webhook
  deliveries, a mail message each), ``KEPT_PENDING`` old events whose webhook delivery still
  waits for an attempt, ``KEPT_UNDELIVERED`` old events never delivered.
* A real gunicorn (``wsgi:app``, 2 sync workers) serves the API on that database. The load:
  ``CLIENTS`` client threads, each sending creates back-to-back (a distinct 15-minute slot and
  a fresh attendee each, as in ``bench/booking_writes.py``; every answer's time and status
  recorded). After ``WARMUP`` untimed creates, the floor: the load alone for
  ``FLOOR_SECONDS``. Then the load again while this process runs ``purge_old_records(utcnow(),
  run_seconds=PURGE_RUN_SECONDS)`` in an app context (with the app's default settings, the
  statement timeout included) until a run reports ``finished``; the beat task runs it bounded
  to 60 s every 10 minutes, which only splits the same batches into runs.

Printed: the growth's time and the tables' sizes; rows deleted, the purge's time, rows per
second, the batches' seconds (median, p95, max, and the median by tenth of the event batches,
to show a drift as the index's dead entries pile up); the creates during the purge against the
floor (count, median, p95, max, statuses) and the slowest ones with the batch they met; a census
of the rows before and after. The run fails (exit status 1) if any create answered other than
201 or slower than ``LIMIT_SECONDS``, if anything old is left or anything that must survive is
gone, or if a reminder still points at a deleted event.

The client threads and the purge share this process (the purge waits on PostgreSQL, so it
rarely holds the GIL), and the server, PostgreSQL and the clients share the machine's cores:
the load average at the start is printed.
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from flask import Flask

from app import create_app
from app.config import settings_of
from app.extensions import db
from app.jobs.retention import RETENTION_BATCH, Purged, purge_old_records
from app.models.types import utcnow
from bench.availability import Timing, gunicorn, postgres_database, postgres_version
from bench.booking_writes import Calendar, Client, Slots, migrate_and_provision, tenant_document

RETENTION_DAYS = 30  # the setting's default, given explicitly to the purging app
PAST_BOOKINGS = 100_000
EVENTS_PER_BOOKING = 10
OLD_EVENTS = PAST_BOOKINGS * EVENTS_PER_BOOKING
OLDEST_DAYS, NEWEST_DAYS = 400, 31  # the old events' age
HANDLERS = ("notifications", "webhooks")
WEBHOOK_EVERY = 10
MAIL_EVERY = 5
OLD_MAIL = OLD_EVENTS // MAIL_EVERY
REMINDER_EVERY = 2
RECENT_EVENTS = 10_000  # delivered a day ago: kept
KEPT_PENDING = 100  # old and delivered, but a webhook delivery still pending: kept
KEPT_UNDELIVERED = 100  # old, never delivered: kept
KEPT_AGE_DAYS = 60
# A booking's 10 events, in order; the one at REMINDER_KIND is the reminders' event.
KINDS = (
    "booking.created",
    "booking.confirmed",
    "booking.updated",
    "booking.reminder",
    "booking.rescheduled",
    "booking.updated",
    "booking.reminder",
    "booking.rescheduled",
    "booking.reminder",
    "booking.completed",
)
REMINDER_KIND = 3
CLIENTS = 2
WARMUP = 20
FLOOR_SECONDS = 10.0
PURGE_RUN_SECONDS = 3600.0
LIMIT_SECONDS = 2.0
SLOWEST = 5
SHOWN_ERRORS = 3
TENTHS = 10

TEXT_BODY = (
    "Hello,\n\nyour booking is confirmed. When: see the attached invitation. Where: the"
    " address in the invitation. To change or cancel it, use the link below; the business"
    " will be told at once.\n\nSee you soon,\nBench calendar 0\n"
)
HTML_BODY = (
    '<!doctype html><html><body style="font-family: sans-serif"><p>Hello,</p><p>your booking'
    " is <strong>confirmed</strong>. When: see the attached invitation. Where: the address in"
    ' the invitation.</p><p>To change or cancel it, use <a href="https://book.example.test/'
    "manage\">your booking's page</a>; the business will be told at once.</p><p>See you soon,"
    "<br>Bench calendar 0</p></body></html>"
)


# --- the database ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tenant:
    sub_account_id: int
    event_type_id: int
    calendar: Calendar


@dataclass
class Grown:
    """The id ranges of the outbox events grown, by what should become of them."""

    old: tuple[int, int] = (0, -1)
    recent: tuple[int, int] = (0, -1)
    pending: tuple[int, int] = (0, -1)
    undelivered: tuple[int, int] = (0, -1)
    steps: dict[str, float] = field(default_factory=dict)  # seconds per step


def prepare(url: str) -> Tenant:
    """Migrate and provision one always-open sub account."""
    created = migrate_and_provision(url, tenant_document(1))[0]
    event_type_id = created["eventTypes"]["Call"]
    path = f"/v1/api/calendar/event-types/{event_type_id}/bookings"
    return Tenant(created["id"], event_type_id, Calendar(created["apiKeys"]["bench"], path))


def dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def row(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> tuple[Any, ...]:
    """The one row ``sql`` answers."""
    found = conn.execute(sql, params).fetchone()
    if found is None:
        raise RuntimeError(f"no row: {sql}")
    return found


def _snapshot_sql(booking: str, n: str) -> str:
    """A booking snapshot about as large as ``booking_snapshot`` writes (~500 bytes)."""
    return f"""json_build_object(
        'schemaVersion', 2,
        'booking', json_build_object(
            'uid', {booking}.uid, 'status', 'confirmed', 'title', {booking}.title,
            'startTime', {booking}.start_at, 'endTime', {booking}.end_at, 'timezone', 'UTC',
            'location', NULL, 'locationKind', 'in_person', 'description', NULL,
            'attendees', json_build_array(json_build_object(
                'email', 'past' || {booking}.id || '@bench.test', 'name', 'Past attendee',
                'timezone', 'UTC', 'isOrganizer', false,
                'manageUrl', 'https://book.example.test/manage/' || md5({booking}.uid)))),
        'sequence', mod({n}, 4), 'cancellationReason', NULL,
        'createdAt', {booking}.created_at, 'updatedAt', {booking}.updated_at)"""


def grow(url: str, tenant: Tenant, now: datetime) -> Grown:
    """Bulk-insert the past (see the module docstring); returns the events' id ranges and each
    step's seconds."""
    grown = Grown()
    params: dict[str, Any] = {
        "sub": tenant.sub_account_id,
        "et": tenant.event_type_id,
        "bookings": PAST_BOOKINGS,
        "events": OLD_EVENTS,
        "per": EVENTS_PER_BOOKING,
        "oldest": now - timedelta(days=OLDEST_DAYS),
        "span": timedelta(days=OLDEST_DAYS - NEWEST_DAYS),
        "kinds": list(KINDS),
        "kept_at": now - timedelta(days=KEPT_AGE_DAYS),
        "recent_at": now - timedelta(days=1),
        "recent": RECENT_EVENTS,
        "pending": KEPT_PENDING,
        "undelivered": KEPT_UNDELIVERED,
        "now": now,
        "text": TEXT_BODY,
        "html": HTML_BODY,
    }

    with psycopg.connect(dsn(url), autocommit=True) as conn:

        def step(name: str, sql: str) -> None:
            started = time.monotonic()
            conn.execute(sql, params)
            grown.steps[name] = grown.steps.get(name, 0.0) + time.monotonic() - started

        def events_range() -> tuple[int, int]:
            """The events inserted since the last call (one session, no other writer)."""
            low = params.get("next_event", 1)
            high = row(conn, "SELECT coalesce(max(id), 0) FROM outbox_events")[0]
            params["next_event"] = high + 1
            return low, high

        # Bookings: booking b starts where its first event happens, 15 minutes, completed
        # (not active: outside the exclusion constraint, so they may overlap).
        step(
            "bookings",
            """
            INSERT INTO bookings (uid, sub_account_id, event_type_id, status, title, timezone,
                metadata, start_at, end_at, occupied_start, occupied_end, completed_at,
                created_at, updated_at)
            SELECT 'past-' || b, %(sub)s, %(et)s, 'completed', 'Call with past' || b, 'UTC',
                '{}', s, s + interval '15 minutes', s, s + interval '15 minutes',
                s + interval '15 minutes', s - interval '7 days', s + interval '15 minutes'
            FROM generate_series(0, %(bookings)s - 1) AS b,
                LATERAL (SELECT %(oldest)s::timestamptz + b * %(span)s::interval / %(bookings)s)
                    AS t(s)
            ORDER BY b
            """,
        )
        first_booking, last_booking = row(
            conn, "SELECT min(id), max(id) FROM bookings WHERE uid LIKE 'past-%%'"
        )
        if last_booking - first_booking != PAST_BOOKINGS - 1:
            raise SystemExit("FAILED: the past bookings' ids are not consecutive")
        params["first_booking"] = first_booking

        # Old events: event n of booking n / per, ids in time order, delivered 3 s later.
        step(
            "outbox_events",
            f"""
            INSERT INTO outbox_events (kind, sub_account_id, booking_id, changed, actor,
                snapshot, occurred_at, delivered_at)
            SELECT (%(kinds)s::text[])[mod(n, %(per)s) + 1], %(sub)s, bk.id, '[]', 'business',
                {_snapshot_sql("bk", "n")}, t, t + interval '3 seconds'
            FROM generate_series(0, %(events)s - 1) AS n
                JOIN bookings AS bk ON bk.id = %(first_booking)s + n / %(per)s,
                LATERAL (SELECT %(oldest)s::timestamptz + n * %(span)s::interval / %(events)s)
                    AS x(t)
            ORDER BY n
            """,
        )
        grown.old = events_range()
        # Kept: recent events (a day ago), old ones with a pending webhook, old undelivered.
        for name, count, at, delivered in (
            ("recent", "recent", "recent_at", True),
            ("pending", "pending", "kept_at", True),
            ("undelivered", "undelivered", "kept_at", False),
        ):
            step(
                "outbox_events",
                f"""
                INSERT INTO outbox_events (kind, sub_account_id, booking_id, changed, actor,
                    snapshot, occurred_at, delivered_at)
                SELECT (%(kinds)s::text[])[mod(n, %(per)s) + 1], %(sub)s, bk.id, '[]',
                    'business', {_snapshot_sql("bk", "n")}, t,
                    {"t + interval '3 seconds'" if delivered else "NULL"}
                FROM generate_series(0, %({count})s - 1) AS n
                    JOIN bookings AS bk ON bk.id = %(first_booking)s + mod(n, %(bookings)s),
                    LATERAL (SELECT %({at})s::timestamptz - n * interval '1 second') AS x(t)
                ORDER BY n
                """,
            )
            setattr(grown, name, events_range())
        params |= {
            "old_lo": grown.old[0],
            "old_hi": grown.old[1],
            "pending_lo": grown.pending[0],
            "pending_hi": grown.pending[1],
            "recent_lo": grown.recent[0],
            "recent_hi": grown.recent[1],
            "all_hi": grown.undelivered[1],
        }
        step(
            "outbox_deliveries",
            """
            INSERT INTO outbox_deliveries (event_id, handler, status, attempts, delivered_at)
            SELECT e.id, h.handler, 'delivered', 1, e.delivered_at
            FROM outbox_events AS e
                CROSS JOIN (VALUES ('notifications'), ('webhooks')) AS h(handler)
            WHERE e.delivered_at IS NOT NULL AND e.id <= %(all_hi)s
            ORDER BY e.id, h.handler
            """,
        )
        # Webhooks: one subscription (inactive: nothing here sends), a succeeded delivery and
        # its attempt for every WEBHOOK_EVERY-th delivered event, a pending one (one failed
        # attempt, retried in an hour) for each kept-pending event.
        step(
            "webhooks",
            """
            INSERT INTO webhook_subscriptions (sub_account_id, name, url, events,
                encrypted_secret, active, created_at)
            VALUES (%(sub)s, 'crm', 'https://crm.example.test/hooks', '["*"]', 'unused',
                false, %(oldest)s)
            """,
        )
        step(
            "webhooks",
            f"""
            INSERT INTO webhook_deliveries (subscription_id, event_id, status, attempts,
                next_attempt_at, last_status_code, last_error, created_at, finished_at)
            SELECT (SELECT id FROM webhook_subscriptions), e.id,
                CASE WHEN e.id >= %(pending_lo)s THEN 'pending' ELSE 'succeeded' END, 1,
                CASE WHEN e.id >= %(pending_lo)s THEN %(now)s + interval '1 hour' END,
                CASE WHEN e.id >= %(pending_lo)s THEN 503 ELSE 200 END,
                CASE WHEN e.id >= %(pending_lo)s THEN 'HTTP 503' END,
                e.occurred_at,
                CASE WHEN e.id >= %(pending_lo)s THEN NULL ELSE e.delivered_at END
            FROM outbox_events AS e
            WHERE e.delivered_at IS NOT NULL AND e.id <= %(all_hi)s
                AND (mod(e.id, {WEBHOOK_EVERY}) = 0 OR e.id >= %(pending_lo)s)
            ORDER BY e.id
            """,
        )
        step(
            "webhooks",
            """
            INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, duration_ms,
                response_excerpt)
            SELECT d.id, d.created_at, d.last_status_code, 80 + mod(d.id, 400),
                CASE WHEN d.last_status_code = 200 THEN '{"ok":true}' ELSE 'Service Unavailable'
                END
            FROM webhook_deliveries AS d
            ORDER BY d.id
            """,
        )
        # Mail: one message for every MAIL_EVERY-th old event and for every recent one.
        step(
            "mail_messages",
            f"""
            INSERT INTO mail_messages (dedupe_key, sub_account_id, booking_id, event_id, kind,
                recipient, subject, message_id, text_body, html_body, ics, status, created_at)
            SELECT 'event:' || e.id || ':attendee:past' || e.booking_id || '@bench.test',
                e.sub_account_id, e.booking_id, e.id, e.kind,
                'past' || e.booking_id || '@bench.test', 'Booking confirmed: Call',
                '<event-' || e.id || '@mail.bench.test>', %(text)s, %(html)s, NULL, 'sent',
                e.delivered_at
            FROM outbox_events AS e
            WHERE (e.id BETWEEN %(old_lo)s AND %(old_hi)s AND mod(e.id, {MAIL_EVERY}) = 0)
                OR e.id BETWEEN %(recent_lo)s AND %(recent_hi)s
            ORDER BY e.id
            """,
        )
        # Reminders: every REMINDER_EVERY-th past booking's, pointing at its reminder event.
        step(
            "booking_reminders",
            f"""
            INSERT INTO booking_reminders (booking_id, start_at, minutes_before, channels,
                status, event_id, decided_at)
            SELECT e.booking_id, bk.start_at, 1440, '["email"]', 'sent', e.id, e.occurred_at
            FROM outbox_events AS e JOIN bookings AS bk ON bk.id = e.booking_id
            WHERE e.id BETWEEN %(old_lo)s AND %(old_hi)s
                AND mod(e.id - %(old_lo)s, %(per)s * {REMINDER_EVERY}) = {REMINDER_KIND}
            ORDER BY e.id
            """,
        )
        started = time.monotonic()
        conn.execute(
            "VACUUM ANALYZE bookings, outbox_events, outbox_deliveries, webhook_subscriptions,"
            " webhook_deliveries, webhook_attempts, mail_messages, booking_reminders"
        )
        grown.steps["VACUUM ANALYZE"] = time.monotonic() - started
    return grown


def table_sizes(url: str) -> dict[str, int]:
    """Each table's bytes, indexes and TOAST included."""
    tables = ("outbox_events", "outbox_deliveries", "webhook_deliveries", "mail_messages")
    with psycopg.connect(dsn(url)) as conn:
        return {
            t: row(conn, "SELECT pg_total_relation_size(%s::regclass)", (t,))[0] for t in tables
        }


CENSUS = {
    # What the purge must delete ...
    "old events": "SELECT count(*) FROM outbox_events WHERE id BETWEEN %(old_lo)s AND %(old_hi)s",
    "their handler records": (
        "SELECT count(*) FROM outbox_deliveries WHERE event_id BETWEEN %(old_lo)s AND %(old_hi)s"
    ),
    "their webhook deliveries": (
        "SELECT count(*) FROM webhook_deliveries WHERE event_id BETWEEN %(old_lo)s AND %(old_hi)s"
    ),
    "their webhook attempts": (
        "SELECT count(*) FROM webhook_attempts AS a JOIN webhook_deliveries AS d"
        " ON d.id = a.delivery_id WHERE d.event_id BETWEEN %(old_lo)s AND %(old_hi)s"
    ),
    "old mail messages": "SELECT count(*) FROM mail_messages WHERE created_at < %(cutoff)s",
    # ... what must stay ...
    "recent events": (
        "SELECT count(*) FROM outbox_events WHERE id BETWEEN %(recent_lo)s AND %(recent_hi)s"
    ),
    "old events, webhook pending": (
        "SELECT count(*) FROM outbox_events WHERE id BETWEEN %(pending_lo)s AND %(pending_hi)s"
    ),
    "old events, undelivered": (
        "SELECT count(*) FROM outbox_events"
        " WHERE id BETWEEN %(undelivered_lo)s AND %(undelivered_hi)s"
    ),
    "kept events' handler records": (
        "SELECT count(*) FROM outbox_deliveries"
        " WHERE event_id BETWEEN %(recent_lo)s AND %(undelivered_hi)s"
    ),
    "kept events' webhook deliveries": (
        "SELECT count(*) FROM webhook_deliveries"
        " WHERE event_id BETWEEN %(recent_lo)s AND %(undelivered_hi)s"
    ),
    "kept events' webhook attempts": (
        "SELECT count(*) FROM webhook_attempts AS a JOIN webhook_deliveries AS d"
        " ON d.id = a.delivery_id WHERE d.event_id BETWEEN %(recent_lo)s AND %(undelivered_hi)s"
    ),
    "recent mail messages": (
        "SELECT count(*) FROM mail_messages WHERE created_at >= %(cutoff)s AND event_id"
        " BETWEEN %(recent_lo)s AND %(recent_hi)s"
    ),
    "reminders": "SELECT count(*) FROM booking_reminders",
    "past bookings": "SELECT count(*) FROM bookings WHERE uid LIKE 'past-%%'",
    # ... and what the purge changes in what stays.
    "reminders with an event": "SELECT count(*) FROM booking_reminders WHERE event_id IS NOT NULL",
}
GONE = (  # the census's rows the purge must leave at 0
    "old events",
    "their handler records",
    "their webhook deliveries",
    "their webhook attempts",
    "old mail messages",
    "reminders with an event",
)


def census(url: str, grown: Grown, cutoff: datetime) -> dict[str, int]:
    params: dict[str, Any] = {"cutoff": cutoff}
    for name in ("old", "recent", "pending", "undelivered"):
        params[f"{name}_lo"], params[f"{name}_hi"] = getattr(grown, name)
    with psycopg.connect(dsn(url)) as conn:
        return {name: row(conn, sql, params)[0] for name, sql in CENSUS.items()}


# --- the load --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    at: float  # time.perf_counter() when the request was sent
    seconds: float
    status: int
    body: bytes


@contextmanager
def create_load(port: int, calendar: Calendar, slots: Slots) -> Iterator[list[Answer]]:
    """``CLIENTS`` threads sending creates back-to-back until the block ends; every answer is
    appended to the list yielded."""
    answers: list[Answer] = []
    stop = threading.Event()

    def run() -> None:
        client = Client(port, calendar, slots)
        while not stop.is_set():
            started = time.perf_counter()
            try:
                elapsed, status, body = client.send("POST", calendar.create_path, slots.body())
            except Exception as err:  # anything http.client raises is a failed answer
                client.conn.close()
                elapsed, status, body = time.perf_counter() - started, 0, repr(err).encode()
            answers.append(Answer(started, elapsed, status, body[:300]))
        client.close()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    try:
        yield answers
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def describe(answers: list[Answer]) -> str:
    timing = Timing([a.seconds for a in answers])
    statuses = ", ".join(f"{s}: {n}" for s, n in sorted(Counter(a.status for a in answers).items()))
    worst = max(a.seconds for a in answers) * 1000
    return f"{len(answers):5,} creates  {timing}   max {worst:7.1f} ms   statuses {{{statuses}}}"


# --- the purge -------------------------------------------------------------------------------


@dataclass
class Purge:
    runs: list[Purged]
    started_at: float  # time.perf_counter() at the start
    ended_at: float
    retention_days: int
    statement_timeout_ms: int

    @property
    def seconds(self) -> float:
        return self.ended_at - self.started_at

    def overlapping(self, answers: list[Answer]) -> list[Answer]:
        """The answers in flight at some point of the purge."""
        return [a for a in answers if a.at < self.ended_at and a.at + a.seconds > self.started_at]

    @property
    def events(self) -> int:
        return sum(r.outbox_events for r in self.runs)

    @property
    def mail(self) -> int:
        return sum(r.mail_messages for r in self.runs)

    @property
    def batches(self) -> list[float]:
        return [s for r in self.runs for s in r.batch_seconds]

    def event_batches(self) -> list[float]:
        """The batches of the events' phase: in each run until one deleted less than a full
        batch (that one included), which ended the phase."""
        found: list[float] = []
        for run in self.runs:
            full = run.outbox_events // RETENTION_BATCH
            if run.mail_messages or run.finished:
                found += run.batch_seconds[: full + 1]
                return found
            found += run.batch_seconds
        return found


def purging_app(url: str) -> Flask:
    """An app on ``url`` as the worker would build it (its default settings, the statement
    timeout included), with ``RETENTION_DAYS`` given."""
    return create_app(
        {"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench", "RETENTION_DAYS": RETENTION_DAYS}
    )


def purge(app: Flask) -> Purge:
    """``purge_old_records`` run after run until one finishes."""
    runs: list[Purged] = []
    with app.app_context():
        started = time.perf_counter()
        while True:
            run = purge_old_records(utcnow(), run_seconds=PURGE_RUN_SECONDS)
            runs.append(run)
            if run.finished:
                break
        ended = time.perf_counter()
        db.session.remove()
        db.engine.dispose()
    found = settings_of(app)
    return Purge(runs, started, ended, found.retention_days, found.db_statement_timeout_ms)


def batch_line(label: str, seconds: list[float]) -> str:
    if not seconds:
        return f"    {label:<16} none"
    timing = Timing(seconds)
    return (
        f"    {label:<16} {len(seconds):5,} batches   {timing}"
        f"   max {max(seconds) * 1000:7.1f} ms   sum {sum(seconds):6.1f} s"
    )


def batch_at(batches: list[float], offset: float) -> str:
    """Which batch was running ``offset`` seconds into the purge (by their summed times)."""
    total = 0.0
    for n, seconds in enumerate(batches):
        total += seconds
        if offset < total:
            return f"batch {n + 1} ({seconds * 1000:.0f} ms)"
    return "after the last batch"


# --- report ----------------------------------------------------------------------------------


def mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


def run(url: str, log_dir: Path) -> list[str]:
    """The whole benchmark on the database at ``url``; returns what failed."""
    failures: list[str] = []
    tenant = prepare(url)
    grow_started = time.monotonic()
    grown = grow(url, tenant, utcnow())
    grow_seconds = time.monotonic() - grow_started
    print(
        f"grown in {grow_seconds:.1f} s: "
        + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in grown.steps.items())
    )
    print(
        "sizes:   "
        + ", ".join(f"{t} {mb(size)}" for t, size in table_sizes(url).items())
        + " (indexes and TOAST included)"
    )
    cutoff = utcnow() - timedelta(days=RETENTION_DAYS)  # the census's: between old and kept
    before = census(url, grown, cutoff)

    with gunicorn(url, log_dir / "gunicorn.log") as port:
        slots = Slots()
        warm = Client(port, tenant.calendar, slots)
        for _ in range(WARMUP):
            _, status, body = warm.send("POST", tenant.calendar.create_path, slots.body())
            if status != 201:
                raise SystemExit(f"FAILED: a warm-up create answered {status} {body[:300]!r}")
        warm.close()
        with create_load(port, tenant.calendar, slots) as floor:
            time.sleep(FLOOR_SECONDS)
        app = purging_app(url)
        with create_load(port, tenant.calendar, slots) as load:
            result = purge(app)
    during = result.overlapping(load)

    after = census(url, grown, cutoff)
    batches = result.batches
    event_batches = result.event_batches()
    mail_batches = batches[len(event_batches) :]
    rows = result.events + result.mail
    print()
    print(
        f"purge:   {result.events:,} outbox events + {result.mail:,} mail messages deleted in"
        f" {len(result.runs)} run(s), {result.seconds:.1f} s: {rows / result.seconds:,.0f} rows/s"
        f" ({result.events / sum(event_batches):,.0f} events/s in the events' batches)"
    )
    print(
        f"         RETENTION_DAYS {result.retention_days}, batch {RETENTION_BATCH},"
        f" DB_STATEMENT_TIMEOUT_MS {result.statement_timeout_ms}"
    )
    print(batch_line("all", batches))
    print(batch_line("outbox events", event_batches))
    print(batch_line("mail messages", mail_batches))
    tenth = max(1, len(event_batches) // TENTHS)
    print(
        "    events' batches, median ms by tenth of the phase: "
        + " ".join(
            f"{statistics.median(event_batches[i : i + tenth]) * 1000:.0f}"
            for i in range(0, tenth * TENTHS, tenth)
            if event_batches[i : i + tenth]
        )
    )
    print()
    print(f"creates, {CLIENTS} client threads back-to-back (gunicorn 2 sync workers):")
    print(f"    floor, no purge ({FLOOR_SECONDS:.0f} s)  {describe(floor)}")
    print(f"    during the purge ({result.seconds:.0f} s) {describe(during)}")
    base, loaded = Timing([a.seconds for a in floor]), Timing([a.seconds for a in during])
    print(
        f"    during / floor: median {loaded.median_ms / base.median_ms:.2f}×,"
        f" p95 {loaded.p95_ms / base.p95_ms:.2f}×;"
        f" {sum(a.seconds > 0.5 for a in during)} creates over 0.5 s,"
        f" {sum(a.seconds > 1.0 for a in during)} over 1 s"
    )
    print("    slowest during the purge:")
    for answer in sorted(during, key=lambda a: a.seconds, reverse=True)[:SLOWEST]:
        offset = answer.at - result.started_at
        print(
            f"      {answer.seconds * 1000:7.1f} ms  status {answer.status}  at {offset:6.1f} s"
            f" into the purge, during {batch_at(batches, offset)}"
        )
    print()
    print(f"rows     {'before':>10} {'after':>10}  (cutoff {cutoff:%Y-%m-%d %H:%M} UTC)")
    for name, count in before.items():
        expected = 0 if name in GONE else count
        mark = "" if after[name] == expected else f"   FAILED: expected {expected:,}"
        print(f"  {name:<32} {count:>10,} {after[name]:>10,}{mark}")
        if mark:
            failures.append(f"{name}: {after[name]:,} after the purge, expected {expected:,}")
    if before["old events"] != OLD_EVENTS or before["old mail messages"] != OLD_MAIL:
        failures.append("the grown database is not what the benchmark says it grows")
    if result.events != OLD_EVENTS or result.mail != OLD_MAIL:
        failures.append(f"the purge deleted {result.events:,} events and {result.mail:,} mail")
    rows_kept = not failures

    answers = floor + load  # every create, the few of the load outside the purge's time too
    wrong = [a for a in answers if a.status != 201]
    if wrong:
        shown = "\n    ".join(f"{a.status} {a.body!r}" for a in wrong[:SHOWN_ERRORS])
        failures.append(f"{len(wrong)} creates answered other than 201:\n    {shown}")
    slow = [a for a in answers if a.seconds > LIMIT_SECONDS]
    if slow:
        failures.append(f"{len(slow)} creates took over {LIMIT_SECONDS:g} s")
    print()
    print(
        f"verdict: slowest create during the purge {max(a.seconds for a in during):.3f} s"
        f" (limit {LIMIT_SECONDS:g} s): {'met' if not slow else 'MISSED'};"
        f" every create 201: {'yes' if not wrong else 'NO'};"
        f" old rows gone and kept rows there: {'yes' if rows_kept else 'NO'}"
    )
    return failures


def main() -> None:
    started = time.monotonic()
    pg_version = postgres_version()
    print("Retention benchmark: purge_old_records on a backlog while bookings are made")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()}"
        f" {platform.python_version()}, {platform.platform()}"
    )
    print(f"         PostgreSQL {pg_version or 'unreachable'}")
    load1, load5, _ = os.getloadavg()
    print(f"         load average at start {load1:.2f} (5 min {load5:.2f}; other work skews this)")
    print(f"date:    {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(
        f"backlog: {PAST_BOOKINGS:,} past bookings, {OLD_EVENTS:,} outbox events delivered"
        f" {NEWEST_DAYS}–{OLDEST_DAYS} days ago ({len(HANDLERS)} handler records each, a webhook"
        f" delivery for every {WEBHOOK_EVERY}th), {OLD_MAIL:,} mail messages as old,"
        f" {PAST_BOOKINGS // REMINDER_EVERY:,} reminders"
    )
    print(
        f"kept:    {RECENT_EVENTS:,} events and mail delivered a day ago, {KEPT_PENDING} old"
        f" events with a pending webhook delivery, {KEPT_UNDELIVERED} old undelivered"
    )
    print()
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    with tempfile.TemporaryDirectory(prefix="calbook_bench_") as tmp, postgres_database() as url:
        failures = run(url, Path(tmp))
    print()
    print(f"total {time.monotonic() - started:.1f} s")
    if failures:
        raise SystemExit("FAILED:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
