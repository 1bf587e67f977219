"""Availability kept per calendar version, raced: creates, cancels and availability reads over
two gunicorn servers (two worker processes each) sharing PostgreSQL and Redis (issue 30, part
5). Two promises are checked on every answer:

* read-your-writes: an answer asked after a create was answered does not offer the time it
  took (until its cancel was sent);
* an answer names a version (its ETag), and offers no time that was busy at that version.

What was busy at each version comes from the database itself: a trigger of the test's own logs
every booking change with the version it gave the calendar (after the service's trigger, by
name), in the order the calendar's writes committed (they take the version row in turn)."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import pytest
import requests
from sqlalchemy import create_engine, text

from app import create_app
from app.extensions import db
from tests.celery_workers import wait_for
from tests.factories import TenantFactory, ny, z
from tests.servers import PATIENT, gunicorn

pytestmark = [pytest.mark.slow]

MONDAY = date(2031, 3, 3)  # far enough ahead that "now" never reaches the week
DAYS = 5
HOUR = timedelta(hours=1)
RACE_SECONDS = 30  # at most: the writers end sooner; the readers stop with them
READERS = 4
# Reads to see before the race ends (the readers go on after the writers until they have): the
# read-your-writes and per-version checks below need many answers across the writes.
ENOUGH_READS = 100
RACING = {
    **PATIENT,
    "RATE_LIMIT": "1000000 per minute",
    "API_KEY_CACHE_SECONDS": "1",
}

BOOKING_LOG = """
CREATE TABLE booking_log (
    seq bigserial PRIMARY KEY, booking_id integer, status text,
    occupied_start timestamptz, occupied_end timestamptz, version bigint
);
CREATE FUNCTION log_booking() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO booking_log (booking_id, status, occupied_start, occupied_end, version)
    SELECT NEW.id, NEW.status, NEW.occupied_start, NEW.occupied_end, version
    FROM calendar_versions WHERE sub_account_id = NEW.sub_account_id;
    RETURN NULL;
END $$;
CREATE TRIGGER zz_log_booking AFTER INSERT OR UPDATE OF status ON bookings
    FOR EACH ROW EXECUTE FUNCTION log_booking();
"""


@dataclass
class Read:
    sent: float
    answered: float
    version: int | None
    starts: set[str]


@dataclass
class Write:
    kind: str  # "create" or "cancel"
    start: datetime
    sent: float
    answered: float
    booking_id: int


@pytest.fixture
def race_database(migrated_postgres_database):
    url = migrated_postgres_database()
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql(BOOKING_LOG)
    engine.dispose()
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test", "TESTING": True})
    with app.app_context():
        # A ten-year horizon, so that the fixed week is bookable whatever today is.
        tenant = TenantFactory().create(
            settings={"defaultDuration": 30, "minimumNoticeMinutes": 0, "bookingHorizonDays": 3650}
        )
        yield url, tenant, app
        db.session.remove()
        db.engine.dispose()


def test_reads_racing_creates_and_cancels_never_offer_taken_time(race_database):
    url, tenant, _ = race_database
    checkup = tenant.event_types["Checkup"]  # 60 minutes, no buffers: 8 slots a weekday
    question = {
        "eventTypeId": checkup,
        "startDate": MONDAY.isoformat(),
        "endDate": (MONDAY + timedelta(days=DAYS - 1)).isoformat(),
    }
    hours = [ny(MONDAY + timedelta(days=d), h) for d in range(DAYS) for h in range(9, 17)]
    chosen = random.Random(7).sample(hours, 16)
    reads: list[Read] = []
    writes: list[Write] = []
    done = threading.Event()
    lock = threading.Lock()

    with (
        gunicorn(url, env=RACING) as first,
        gunicorn(url, env=RACING) as second,
    ):
        servers = [first, second]
        headers = tenant.headers()

        def read(n: int) -> None:
            session = requests.Session()
            while not done.is_set():
                base = servers[n % 2]
                sent = time.monotonic()
                answer = session.get(
                    base + "/v1/api/calendar/availability",
                    params=question,
                    headers=headers,
                    timeout=30,
                )
                answered = time.monotonic()
                assert answer.status_code == 200, answer.text
                tag = answer.headers["ETag"].removeprefix('W/"').removesuffix('"')
                version = None if tag.startswith("changing.") else int(tag.split(".")[0], 16)
                starts = {slot["start"] for day in answer.json() for slot in day["slots"]}
                with lock:
                    reads.append(Read(sent, answered, version, starts))
                n += 1

        def write(n: int, starts: list[datetime]) -> None:
            session = requests.Session()
            for i, start in enumerate(starts):
                base = servers[(n + i) % 2]
                sent = time.monotonic()
                created = session.post(
                    f"{base}/v1/api/calendar/event-types/{checkup}/bookings",
                    json={
                        "startTime": z(start),
                        "endTime": z(start + HOUR),
                        "attendees": [{"email": f"race{n}-{i}@example.test"}],
                    },
                    headers=headers,
                    timeout=30,
                )
                answered = time.monotonic()
                assert created.status_code == 201, created.text
                booking_id = created.json()["id"]
                with lock:
                    writes.append(Write("create", start, sent, answered, booking_id))
                if i % 2 == 0:  # every other booking is cancelled again
                    sent = time.monotonic()
                    cancelled = session.delete(
                        f"{base}/v1/api/calendar/bookings/{booking_id}",
                        json={},
                        headers=headers,
                        timeout=30,
                    )
                    answered = time.monotonic()
                    assert cancelled.status_code == 200, cancelled.text
                    with lock:
                        writes.append(Write("cancel", start, sent, answered, booking_id))

        readers = [threading.Thread(target=read, args=(n,)) for n in range(READERS)]
        writers = [threading.Thread(target=write, args=(n, chosen[n::2])) for n in range(2)]
        for thread in readers + writers:
            thread.start()
        deadline = time.monotonic() + RACE_SECONDS
        for thread in writers:
            thread.join(max(0.0, deadline - time.monotonic()))
        last_write = max((w.answered for w in writes), default=float("inf"))

        def seen_enough() -> bool:
            """Enough reads in all, and a few sent after the last write was answered."""
            with lock:
                after = sum(1 for r in reads if r.sent > last_write)
                return len(reads) >= ENOUGH_READS and after >= 5

        enough = wait_for(seen_enough, timeout=RACE_SECONDS)  # however slow the machine
        done.set()
        for thread in readers:
            thread.join(30)
        assert not any(t.is_alive() for t in readers + writers), "the race did not end"

    assert len(writes) == 24  # 16 creates and 8 cancels
    assert enough, f"{len(reads)} reads in {RACE_SECONDS} s after the writes"

    # Read-your-writes: after a create's answer and before its cancel was sent, never offered.
    cancel_sent = {w.booking_id: w.sent for w in writes if w.kind == "cancel"}
    late = 0
    for create in (w for w in writes if w.kind == "create"):
        until = cancel_sent.get(create.booking_id, float("inf"))
        for answer in reads:
            if create.answered < answer.sent and answer.answered < until:
                late += 1
                assert z(create.start) not in answer.starts, (create, answer.version)
    assert late > 0, "no read came after a create's answer"

    # Each answer's version: what was busy then is not offered.
    engine = create_engine(url)
    with engine.connect() as connection:
        log = connection.execute(
            text(
                "SELECT seq, booking_id, status, occupied_start, occupied_end, version"
                " FROM booking_log ORDER BY seq"
            )
        ).all()
    engine.dispose()
    busy_at: dict[int, set[str]] = {}
    active: dict[int, tuple[datetime, datetime]] = {}
    for _, booking_id, status, start, end, version in log:
        if status in ("pending", "confirmed"):
            active[booking_id] = (start, end)
        else:
            active.pop(booking_id, None)
        busy_at[version] = {z(start) for start, _ in active.values()}
    named = [answer for answer in reads if answer.version is not None]
    checked = 0
    for answer in named:
        if answer.version in busy_at:
            checked += 1
            assert not (answer.starts & busy_at[answer.version]), answer.version
    assert checked > len(named) // 2, (checked, len(named))
