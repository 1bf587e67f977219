"""The whole Procfile under ``honcho``, as a deployment runs it: ``release`` migrates a fresh
PostgreSQL database, then two ``web`` processes (each a gunicorn of its own, on its own port),
one ``worker`` and one ``beat`` share PostgreSQL and Redis. Agents drive both ports with one API
key: the rate limit is counted once across them, racing creates never double-book, each
booking's emails and webhook leave exactly once, and ``/metrics`` counts what happened."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import icalendar
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.models.types import utcnow
from tests.celery_workers import wait_for, worker_idle
from tests.factories import ALWAYS_OPEN, tenant_document, z
from tests.mail_servers import ics_of, smtp_server
from tests.servers import BIN, MACHINE_REDIS, PATIENT, ROOT, free_port
from tests.webhook_receivers import webhook_receiver

pytestmark = pytest.mark.slow

OWNER = "front-desk@clinic.test"
TOKEN = "procfile-metrics-token"
SLOTS = 5
RACERS_PER_SLOT = 4


def two_free_ports() -> int:
    """A base port whose successor is free too (honcho numbers ``web.1`` and ``web.2`` so)."""
    while True:
        base = free_port()
        try:
            with socket.create_server(("127.0.0.1", base + 1)):
                return base
        except OSError:
            continue


@contextmanager
def procfile(env: dict[str, str], log_path: Path) -> Iterator[tuple[str, str]]:
    """``honcho start -c web=2 web worker beat`` after ``honcho start release``; yields the two
    web processes' base URLs once both see the deployment well (``/statusz``: database, Redis,
    migrations, a worker)."""
    honcho = [str(BIN / "honcho"), "--app-root", str(ROOT), "--procfile", "Procfile"]
    release = subprocess.run(
        [*honcho, "start", "release"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert release.returncode == 0, release.stdout + release.stderr
    port = two_free_ports()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [*honcho, "start", "--port", str(port), "-c", "web=2", "web", "worker", "beat"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        bases = (f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}")
        try:
            ready = wait_for(
                lambda: process.poll() is None and all(deployment_status(b) == 200 for b in bases),
                timeout=90,
            )
            assert ready, log_path.read_text()
            yield bases
            assert process.poll() is None, log_path.read_text()  # nobody died on the way
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def request(
    base: str, method: str, path: str, *, headers: dict[str, str], body: Any = None
) -> tuple[int, Any]:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        payload = None if body is None else json.dumps(body)
        sent = {**headers, **({"Content-Type": "application/json"} if payload else {})}
        connection.request(method, path, body=payload, headers=sent)
        response = connection.getresponse()
        data = response.read()
        is_json = response.getheader("Content-Type", "").startswith("application/json")
        return response.status, json.loads(data) if is_json else data.decode()
    finally:
        connection.close()


def deployment_status(base: str) -> int:
    try:
        return request(base, "GET", "/statusz", headers={})[0]
    except OSError:
        return 0


def scraped(base: str) -> list:
    status, text = request(base, "GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def counted(samples_by_port: list[list], name: str, **labels: str) -> float:
    """One counter summed over both web processes."""
    return sum(
        s.value
        for samples in samples_by_port
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def provision(env: dict[str, str], webhook_url: str) -> dict[str, Any]:
    document = tenant_document(
        settings={
            "defaultDuration": 30,
            "minimumNoticeMinutes": 0,
            "bookingHorizonDays": 60,
            "notificationEmail": OWNER,
        },
        availabilityProfiles=[{"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}],
        eventTypes=[{"name": "Visit", "duration": 30, "availabilityProfile": "Always"}],
        webhooks=[{"name": "crm", "url": webhook_url, "events": ["booking.created"]}],
    )
    printed = subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", "provision", "-"],
        cwd=ROOT,
        env=env,
        input=json.dumps(document),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(printed)["agencies"][0]["subAccounts"][0]


def race_for_slots(bases: tuple[str, str], path: str, key: str) -> list[tuple[int, Any]]:
    """``RACERS_PER_SLOT`` agents per slot, alternating between the two ports, released at
    once; returns every answer."""
    first = (utcnow() + timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
    answers: list[tuple[int, Any]] = []
    gate = threading.Barrier(SLOTS * RACERS_PER_SLOT)

    def create(n: int) -> None:
        start = first + timedelta(hours=n % SLOTS)
        body = {
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "attendees": [{"email": f"agent{n}@example.test"}],
        }
        gate.wait()
        answers.append(
            request(bases[n % 2], "POST", path, headers={"x-calendar-api-key": key}, body=body)
        )

    threads = [threading.Thread(target=create, args=(n,)) for n in range(SLOTS * RACERS_PER_SLOT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def test_the_procfile_serves_from_two_web_ports_sharing_one_database_and_redis(
    postgres_database, tmp_path
):
    queue = f"procfile-{uuid.uuid4().hex}"
    with smtp_server() as (smtp_url, inbox), webhook_receiver() as receiver:
        env = {
            **os.environ,
            "PATH": f"{BIN}:{os.environ['PATH']}",
            "HOST": "127.0.0.1",
            "DATABASE_URL": postgres_database(),
            "REDIS_URL": MACHINE_REDIS,
            "RATELIMIT_KEY_PREFIX": queue,  # this test's own counts in the shared Redis
            "CELERY_QUEUE": queue,
            "SECRET_KEY": "procfile-secret-key",
            "METRICS_TOKEN": TOKEN,
            "SMTP_URL": smtp_url,
            "MAIL_FROM": "Bookings <bookings@service.test>",
            "WEBHOOK_ALLOW_PRIVATE": "1",
            "WORKER_METRICS_PORT": str(free_port()),
            **PATIENT,  # the race queues its creates on one calendar's lock
        }
        with procfile(env, tmp_path / "honcho.log") as bases:
            sub_account = provision(env, receiver.url)
            key = sub_account["apiKeys"]["all"]
            bookings = f"/v1/api/calendar/event-types/{sub_account['eventTypes']['Visit']}/bookings"

            answers = race_for_slots(bases, bookings, key)
            created = [body for status, body in answers if status == 201]
            refused = [body["message"] for status, body in answers if status != 201]
            assert len(created) == SLOTS
            assert refused == ["Time slot conflicts with an existing booking"] * len(refused)
            assert len({b["startTime"] for b in created}) == SLOTS

            # The rate limit (60 a minute per key) is counted once for both ports.
            spent = len(answers)
            reads = [
                request(
                    bases[n % 2],
                    "GET",
                    "/v1/api/calendar/bookings?limit=1",
                    headers={"x-calendar-api-key": key},
                )[0]
                for n in range(70 - spent)
            ]
            assert reads.count(200) == 60 - spent and reads.count(429) == 10

            # Each booking: one email to its attendee, one to the owner, one webhook.
            inbox.wait_for(2 * SLOTS, timeout=60)
            receiver.wait_for(SLOTS, timeout=60)
            # Nothing more arrives: the worker has finished every task it was given.
            assert wait_for(lambda: worker_idle(tmp_path / "honcho.log"), timeout=60)
            metrics = [scraped(base) for base in bases]
            worker_metrics = scraped(f"http://127.0.0.1:{env['WORKER_METRICS_PORT']}")
        honcho_log = (tmp_path / "honcho.log").read_text()

    recipients: dict[str, list[str]] = {}
    for message in inbox.messages:
        event = icalendar.Calendar.from_ical(ics_of(message)).walk("VEVENT")[0]
        recipients.setdefault(str(event["UID"]), []).append(str(message["To"]))
    uids = sorted(b["uid"] for b in created)
    assert sorted(recipients) == uids
    for booking in created:
        (to_attendee, to_owner) = sorted(recipients[booking["uid"]], key=lambda to: OWNER in to)
        assert booking["attendees"][0]["email"] in to_attendee and OWNER in to_owner
    hooked = [json.loads(r.body)["data"]["booking"]["uid"] for r in receiver.requests]
    assert sorted(hooked) == uids
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == SLOTS
    for handler in ("notifications", "webhooks"):
        assert counted([worker_metrics], "calendar_deliveries_total", handler=handler) == SLOTS

    route = "/v1/api/calendar/event-types/<id:event_type_id>/bookings"
    http_total = "calendar_http_requests_total"
    assert counted(metrics, http_total, method="POST", route=route, status="201") == SLOTS
    assert (
        counted(metrics, http_total, method="POST", route=route, status="400")
        == len(answers) - SLOTS
    )
    assert counted(metrics, "calendar_booking_events_total", event="booking.created") == SLOTS
    assert (
        counted(metrics, "calendar_booking_conflicts_total", cause="booking")
        == len(answers) - SLOTS
    )
    assert counted(metrics, "calendar_rate_limit_rejections_total", bucket="key") == 10
    assert all(process in honcho_log for process in ("web.1", "web.2", "worker.1", "beat.1")), (
        honcho_log
    )
