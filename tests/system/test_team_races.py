"""Round robin under races, over two real server processes: simultaneous creates for one slot
take each free host once, and no host is ever booked twice at once."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import ACTIVE_STATUSES, Booking
from tests.factories import TenantFactory, next_monday, ny, z
from tests.servers import post_all

pytestmark = [
    pytest.mark.date_sensitive,  # bookings on next Monday
    pytest.mark.one_shifted_clock,  # races over servers; the dates only pick the slots
]

MONDAY = next_monday()
HOSTS = ["Ana", "Ben", "Cy", "Dee", "Eli"]


@pytest.mark.slow
def test_twenty_agents_racing_for_one_slot_over_five_hosts_book_each_host_once(servers, app):
    tenant = TenantFactory().create(
        hosts=[{"name": name} for name in HOSTS],
        eventTypes=[
            {
                "name": "Intro",
                "duration": 30,
                "availabilityProfile": "Office",
                "assignment": "round_robin",
                "hosts": [{"name": name} for name in HOSTS],
            }
        ],
    )
    path = f"/v1/api/calendar/event-types/{tenant.event_types['Intro']}/bookings"
    start = ny(MONDAY, 10)
    requests = [
        (
            servers[i % 2] + path,
            {
                "startTime": z(start),
                "endTime": z(start + timedelta(minutes=30)),
                "attendees": [{"email": f"agent{i}@example.test"}],
            },
        )
        for i in range(20)
    ]
    results = post_all(requests, tenant.headers())
    statuses = Counter(status for status, _ in results)
    assert statuses == {201: 5, 400: 15}, results
    booked_hosts = [body["hosts"][0]["id"] for status, body in results if status == 201]
    assert sorted(booked_hosts) == sorted(tenant.hosts[name] for name in HOSTS)
    for status, body in results:
        if status == 400:
            assert body["code"] == "slot_taken"
            assert z(start) not in [s["start"] for s in body["suggestedSlots"]]
            assert body["suggestedSlots"]
    db.session.expire_all()
    active = db.session.scalars(
        select(Booking).where(
            Booking.sub_account_id == tenant.sub_account_id, Booking.status.in_(ACTIVE_STATUSES)
        )
    ).all()
    assert len(active) == 5
    assert Counter(b.host_id for b in active) == Counter({tenant.hosts[n]: 1 for n in HOSTS})
