"""Round robin's fairness over many bookings (``app.scheduling.round_robin``), made one after
another through the create service with a clock of the test's own: equal hosts end level,
weights give their shares, and a host added halfway through the month joins at the others'
level instead of being handed the month's backlog."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from app.extensions import db
from app.models import Booking, EventTypeHost, Host, SubAccount
from app.scheduling.timezones import InstantInput
from app.services.bookings.writes import AttendeeInput, NewBooking, create_booking
from app.unit_of_work import perform
from tests.factories import ALWAYS_OPEN, TenantFactory

pytestmark = pytest.mark.slow  # 300 creates a test


def month_ahead() -> datetime:
    """The 3rd of next month, 00:00 UTC: a month of the test's own, whatever today is."""
    today = datetime.now(UTC).date()
    following = (today.replace(day=1) + timedelta(days=32)).replace(day=1)
    return datetime(following.year, following.month, 3, tzinfo=UTC)


def team(weights: dict[str, int]):
    return TenantFactory().create(
        timezone="UTC",
        hosts=[{"name": name} for name in weights],
        availabilityProfiles=[
            {"name": "Always", "default": True, "timezone": "UTC", "weeklyHours": ALWAYS_OPEN}
        ],
        eventTypes=[
            {
                "name": "Intro",
                "duration": 30,
                "assignment": "round_robin",
                "hosts": [{"name": name, "weight": weight} for name, weight in weights.items()],
            }
        ],
    )


def book_in_turn(tenant, count: int, start: datetime, first_slot: int = 0) -> list[int]:
    """``count`` bookings, one after another, each in a slot of its own (so every host is free
    for each), made a minute apart from ``start``; the hosts they went to, in order."""
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    hosts = []
    for i in range(count):
        slot = start + timedelta(days=1, minutes=30 * (first_slot + i))
        booking, _ = perform(
            create_booking(
                sub_account,
                tenant.event_types["Intro"],
                NewBooking(
                    start_time=InstantInput(slot),
                    end_time=InstantInput(slot + timedelta(minutes=30)),
                    attendees=[AttendeeInput(email=f"lead{i}@example.test")],
                ),
                now=start + timedelta(minutes=i),
            )
        )
        hosts.append(booking.host_id)
    return hosts


def shares(tenant, hosts: list[int]) -> dict[str, int]:
    names = {host_id: name for name, host_id in tenant.hosts.items()}
    return {names[host_id]: n for host_id, n in Counter(hosts).items()}


def test_three_hundred_bookings_over_three_equal_hosts_end_within_one(app):
    tenant = team({"Ana": 100, "Ben": 100, "Cy": 100})
    counts = shares(tenant, book_in_turn(tenant, 300, month_ahead()))
    assert max(counts.values()) - min(counts.values()) <= 1, counts


def test_weights_200_100_100_give_shares_within_five_percent_of_50_25_25(app):
    tenant = team({"Ana": 200, "Ben": 100, "Cy": 100})
    counts = shares(tenant, book_in_turn(tenant, 300, month_ahead()))
    for name, share in {"Ana": 0.50, "Ben": 0.25, "Cy": 0.25}.items():
        assert abs(counts[name] / 300 - share) <= 0.05 * share, counts


def test_a_host_added_halfway_is_not_handed_the_backlog(app):
    tenant = team({"Ana": 100, "Ben": 100, "Cy": 100})
    start = month_ahead()
    book_in_turn(tenant, 150, start)
    joined_at = start + timedelta(minutes=150)
    dee = Host(sub_account_id=tenant.sub_account_id, name="Dee")
    db.session.add(dee)
    db.session.flush()
    db.session.add(
        EventTypeHost(
            event_type_id=tenant.event_types["Intro"], host_id=dee.id, eligible_since=joined_at
        )
    )
    db.session.commit()
    later = book_in_turn(tenant, 150, joined_at, first_slot=150)
    # Joined at the others' level: about a quarter of what follows, not the first 50 in a row.
    assert later[:12].count(dee.id) <= 4, later[:12]
    assert 150 / 4 - 3 <= later.count(dee.id) <= 150 / 4 + 3, Counter(later)
    active = db.session.query(Booking).filter_by(sub_account_id=tenant.sub_account_id).count()
    assert active == 300
