"""PostgreSQL restarted, stopped and frozen under steady booking traffic: every answer is a 201
or a fast 503 with ``Retry-After``, every 201's booking is in the database, and the service
recovers by itself within a second of PostgreSQL coming back.

Each test runs a PostgreSQL server of its own (``tests.postgres_servers``) behind a real
gunicorn (two gevent workers), with short database timeouts so an outage shows quickly.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from tests.postgres_servers import OwnPostgres, own_postgres_server
from tests.servers import Demo, gunicorn, migrate_and_run_demo

pytestmark = [
    pytest.mark.date_sensitive,  # the demo's open slots of the next 60 days
    pytest.mark.one_shifted_clock,  # a database fault test; the dates only pick open slots
]

DATABASE_TIMEOUTS = {
    "DB_CONNECT_TIMEOUT_S": "2",
    "DB_STATEMENT_TIMEOUT_MS": "1000",
    "DB_POOL_TIMEOUT_S": "1",
}
# The longest a request may wait on the database: a connection attempt (2 s), an answer
# (1 s statement timeout + 0.5 s margin) and a free pooled connection (1 s); plus one second
# for everything else under load on a 2-core machine.
SLOWEST_ANSWER_S = 2 + 1.5 + 1 + 1
RECOVERY_S = 1.0
OUTAGE_S = 10
LOAD_THREADS = 4
BUFFER_AFTER = timedelta(minutes=10)  # the demo Consultation's
PAUSE_S = 0.2  # between one thread's requests: about 15 creates a second in all


@dataclass
class Answer:
    sent_at: float
    seconds: float
    status: int
    retry_after: str | None
    body: dict


@dataclass
class Service:
    postgres: OwnPostgres
    database_url: str
    base: str
    demo: Demo


@pytest.fixture
def service(tmp_path) -> Iterator[Service]:
    with own_postgres_server(tmp_path) as postgres:
        database_url = postgres.create_database("faults")
        demo = migrate_and_run_demo(
            {**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "faults"}
        )
        env = {**DATABASE_TIMEOUTS, "RATE_LIMIT": "100000/minute"}
        with gunicorn(database_url, workers=2, env=env, log_path=tmp_path / "web.log") as base:
            yield Service(postgres, database_url, base, demo)


def open_slots(service: Service, days: int = 60) -> queue.Queue:
    """Consultation slots of the next ``days`` days (the demo's booking horizon), as many as
    fit without touching each other's buffers, each with its own idempotency key
    (a slot whose create answered 503 is sent again with the same key)."""
    event_type = service.demo.event_types["Consultation"]
    slots: queue.Queue = queue.Queue()
    start = datetime.now(UTC).date() + timedelta(days=1)
    for offset in range(0, days, 30):
        first, last = start + timedelta(days=offset), start + timedelta(days=offset + 29)
        url = (
            f"{service.base}/v1/api/calendar/availability?eventTypeId={event_type}"
            f"&startDate={first.isoformat()}&endDate={last.isoformat()}"
        )
        request = urllib.request.Request(url, headers={"x-calendar-api-key": service.demo.api_key})
        with urllib.request.urlopen(request, timeout=10) as response:
            for day in json.loads(response.read()):
                free_from = None
                for slot in day["slots"]:
                    begins = datetime.fromisoformat(slot["start"])
                    if free_from is None or begins >= free_from:  # past the last one's buffer
                        slots.put((slot["start"], slot["end"], uuid.uuid4().hex))
                        free_from = datetime.fromisoformat(slot["end"]) + BUFFER_AFTER
    return slots


@dataclass
class SteadyLoad:
    """Threads creating bookings one after another until stopped."""

    service: Service
    slots: queue.Queue
    answers: list[Answer] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def create(self, start: str, end: str, key: str) -> Answer:
        event_type = self.service.demo.event_types["Consultation"]
        payload = {
            "startTime": start,
            "endTime": end,
            "attendees": [{"email": "steady@example.test"}],
            "idempotencyKey": key,
        }
        request = urllib.request.Request(
            f"{self.service.base}/v1/api/calendar/event-types/{event_type}/bookings",
            data=json.dumps(payload).encode(),
            method="POST",
            headers={
                "x-calendar-api-key": self.service.demo.api_key,
                "Content-Type": "application/json",
            },
        )
        sent_at = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, headers, body = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            status, headers, body = error.code, error.headers, error.read()
        return Answer(
            sent_at,
            time.monotonic() - sent_at,
            status,
            headers.get("Retry-After"),
            json.loads(body),
        )

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                start, end, key = self.slots.get_nowait()
            except queue.Empty:
                return
            answer = self.create(start, end, key)
            self.answers.append(answer)
            if answer.status == 503:
                self.slots.put((start, end, key))  # the same create again, with its key
            time.sleep(PAUSE_S)

    def __enter__(self) -> SteadyLoad:
        self.threads = [threading.Thread(target=self.run) for _ in range(LOAD_THREADS)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=60)


def booking_ids_in(database_url: str) -> set[int]:
    with psycopg.connect(database_url) as connection:
        return {row[0] for row in connection.execute("SELECT id FROM bookings")}


def outage_under_load(service: Service, fault: Callable[[], None], restore: Callable[[], None]):
    """Steady load for 2 s, then ``fault``, ``OUTAGE_S`` seconds, ``restore``; the load goes on
    for 3 s after. Returns the answers and the moment PostgreSQL was back."""
    with SteadyLoad(service, open_slots(service)) as load:
        time.sleep(2)
        fault()
        time.sleep(OUTAGE_S)
        restore()
        restored_at = time.monotonic()
        time.sleep(3)
    return load.answers, restored_at


def assert_degraded_cleanly(service: Service, answers: list[Answer], restored_at: float) -> None:
    statuses = {answer.status for answer in answers}
    assert statuses <= {201, 503}, [
        (a.status, a.body) for a in answers if a.status not in (201, 503)
    ]
    unavailable = [answer for answer in answers if answer.status == 503]
    for answer in unavailable:
        assert answer.retry_after == "1"
        assert answer.body["statusCode"] == 503
    slowest = max(answer.seconds for answer in answers)
    assert slowest <= SLOWEST_ANSWER_S, f"an answer took {slowest:.2f} s"

    created = {answer.body["id"] for answer in answers if answer.status == 201}
    assert created <= booking_ids_in(service.database_url)

    after_recovery = [a for a in answers if a.sent_at >= restored_at + RECOVERY_S]
    assert after_recovery, "no request was sent after the recovery"
    assert {a.status for a in after_recovery} == {201}, [
        (round(a.sent_at - restored_at, 2), a.status) for a in after_recovery if a.status != 201
    ]


@pytest.mark.slow
def test_postgres_restarted_under_load_answers_201_or_fast_503_and_recovers(service):
    answers, restored_at = outage_under_load(
        service, fault=service.postgres.restart, restore=lambda: None
    )
    assert_degraded_cleanly(service, answers, restored_at)


# How PostgreSQL goes away for OUTAGE_S seconds, and comes back.
OUTAGES = {
    "stopped": (OwnPostgres.stop, OwnPostgres.start),
    "frozen": (OwnPostgres.freeze, OwnPostgres.thaw),
}


@pytest.mark.slow
@pytest.mark.parametrize("outage", OUTAGES)
def test_postgres_away_for_ten_seconds_answers_fast_503s_and_recovers(service, outage):
    fault, restore = OUTAGES[outage]
    answers, restored_at = outage_under_load(
        service,
        fault=lambda: fault(service.postgres),
        restore=lambda: restore(service.postgres),
    )
    assert any(answer.status == 503 for answer in answers)
    assert_degraded_cleanly(service, answers, restored_at)
