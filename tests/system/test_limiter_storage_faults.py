"""A slow or broken rate-limit store never costs a booking: requests whose work is done get
their real answer, and an outage is logged once when it starts and once when it ends."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Booking
from app.models.types import utcnow
from tests.factories import z
from tests.redis_servers import own_redis_server
from tests.servers import gunicorn

FREEZE_SECONDS = 3
CLIENTS = 8
ALWAYS_OPEN = {
    day: [["00:00", "24:00"]] for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
}


def create(url: str, headers: dict[str, str], body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={**headers, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


@pytest.mark.slow
def test_a_frozen_rate_limit_store_never_costs_a_booking(database_url, tenants, tmp_path):
    tenant = tenants.create(
        settings={"defaultDuration": 15, "minimumNoticeMinutes": 0, "bookingHorizonDays": 365},
        availabilityProfiles=[{"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}],
        eventTypes=[{"name": "Quick", "duration": 15, "availabilityProfile": "Always"}],
    )
    first_slot = utcnow().replace(minute=0, second=0, microsecond=0) + timedelta(days=2)
    slots = iter(range(1_000_000))
    slot_lock = threading.Lock()
    log_path = tmp_path / "server.log"
    answers: list[tuple[int, dict]] = []
    stop = threading.Event()

    with (
        own_redis_server(tmp_path) as store,
        gunicorn(
            database_url,
            workers=2,
            # Eight clients book one calendar, so each create waits on its write lock; on a
            # loaded machine that wait can pass the request's PostgreSQL budget (1.5 s) and be
            # a 503 of its own. The budget is not what this test is about.
            env={
                "REDIS_URL": store.url,
                "RATE_LIMIT": "1000000/minute",
                "DB_REQUEST_WAIT_S": "30",
            },
            log_path=log_path,
        ) as base,
    ):
        url = f"{base}/v1/api/calendar/event-types/{tenant.event_types['Quick']}/bookings"

        def client() -> None:
            while not stop.is_set():
                with slot_lock:
                    n = next(slots)
                start = first_slot + n * timedelta(minutes=15)
                body = {
                    "startTime": z(start),
                    "endTime": z(start + timedelta(minutes=15)),
                    "attendees": [{"email": f"guest{n}@example.test"}],
                    "idempotencyKey": str(uuid.uuid4()),
                }
                answers.append(create(url, tenant.headers(), body))

        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            for _ in range(CLIENTS):
                pool.submit(client)
            time.sleep(1)
            store.freeze()
            time.sleep(FREEZE_SECONDS)
            store.thaw()
            # Flask-Limiter re-checks the store with backoff; keep the traffic up until both
            # workers have returned to it (bounded, not a fixed wait).
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                if log_path.read_text().count("Rate limit storage recovered") >= 2:
                    break
                time.sleep(0.2)
            stop.set()

    statuses = [status for status, _ in answers]
    assert statuses and set(statuses) == {201}, {s: statuses.count(s) for s in set(statuses)}
    db.session.expire_all()
    stored = db.session.scalar(
        select(func.count()).where(Booking.sub_account_id == tenant.sub_account_id)
    )
    assert stored == len(answers)
    assert {body["id"] for _, body in answers} == set(
        db.session.scalars(
            select(Booking.id).where(Booking.sub_account_id == tenant.sub_account_id)
        )
    )

    log = log_path.read_text()
    assert 1 <= log.count("Rate limit storage unreachable") <= 2  # once per worker at most
    assert log.count("Rate limit storage recovered") == log.count("Rate limit storage unreachable")
    assert "Swallowing error" not in log and "Traceback" not in log
