"""One booking's messages leave in the order its changes happened, however many workers run:
create → reschedule → cancel made within milliseconds of each other, 50 times, with two Celery
workers of two processes each, read from a real SMTP server and a real webhook receiver."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from datetime import timedelta

import pytest

from app.models.types import utcnow
from tests.celery_workers import celery_worker
from tests.mail_servers import smtp_server
from tests.servers import MACHINE_REDIS
from tests.webhook_receivers import webhook_receiver
from tests.worker.test_worker_messages import always_open, booking_api, half_hour_from, invitation

pytestmark = pytest.mark.slow

RUNS = 50
PAT = "pat@example.test"


@pytest.mark.date_sensitive  # bookings from tomorrow on
def test_a_bookings_mails_and_webhooks_arrive_in_the_order_of_its_changes(
    database_url, make_app, tenants, tmp_path
):
    queue = f"test-{uuid.uuid4().hex}"
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": queue}
    with smtp_server() as (smtp_url, inbox), webhook_receiver() as receiver:
        settings = {"SMTP_URL": smtp_url, "WEBHOOK_ALLOW_PRIVATE": "1", **broker}
        app = make_app(OUTBOX_DISPATCH=True, RATE_LIMIT="1000/minute", **settings)
        with app.app_context():
            tenant = always_open(
                tenants, webhooks=[{"name": "crm", "url": receiver.url, "events": ["*"]}]
            )
        create, move, cancel = booking_api(app.test_client(), tenant)
        first = half_hour_from(utcnow(), 24 * 60)
        with (
            celery_worker(database_url, tmp_path / "one.log", processes=2, **settings),
            celery_worker(database_url, tmp_path / "two.log", processes=2, **settings),
        ):
            uids = {}
            for run in range(RUNS):
                start = first + timedelta(hours=run)
                booking = create(start)
                move(booking, start + timedelta(minutes=30))
                cancel(booking)
                uids[booking["id"]] = booking["uid"]
            inbox.wait_for(RUNS * 3 * 2, timeout=240)  # Pat and the owner, three times each
            requests = receiver.wait_for(RUNS * 3, timeout=240)

    mails = defaultdict(list)
    for message in inbox.to(PAT):
        method, uid, sequence, _ = invitation(message)
        mails[uid].append((method, sequence))
    assert {uid: mails[uid] for uid in uids.values()} == {
        uid: [("REQUEST", 0), ("REQUEST", 1), ("CANCEL", 2)] for uid in uids.values()
    }

    hooks = defaultdict(list)
    for request in requests:
        payload = json.loads(request.body)
        hooks[payload["data"]["booking"]["id"]].append((payload["type"], payload["sequence"]))
    in_order = [("booking.created", 0), ("booking.rescheduled", 1), ("booking.cancelled", 2)]
    assert dict(hooks) == {booking_id: in_order for booking_id in uids}
