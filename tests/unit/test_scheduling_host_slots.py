"""A team's slots from its hosts' (``app.scheduling.host_slots``): round robin's union,
collective's intersection, and who can take a slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.scheduling.host_slots import any_host_open, every_host_open, hosts_open_at
from app.scheduling.intervals import Interval

MONDAY = datetime(2031, 1, 6, tzinfo=UTC)


def at(hour: int) -> Interval:
    start = MONDAY + timedelta(hours=hour)
    return Interval(start, start + timedelta(minutes=30))


OPEN = {
    1: [at(9), at(10), at(11)],  # Dr. Kim, mornings
    2: [at(11), at(13)],  # Dr. Lee
    3: [],  # on leave this week
}


def test_round_robin_offers_a_slot_any_host_can_take_once_in_time_order():
    assert any_host_open(OPEN) == [at(9), at(10), at(11), at(13)]


def test_round_robin_offers_only_the_hosts_not_held_back():
    assert any_host_open(OPEN, offered={2}) == [at(11), at(13)]


def test_collective_offers_only_times_when_every_host_is_free():
    assert every_host_open({1: OPEN[1], 2: OPEN[2]}) == [at(11)]
    assert every_host_open(OPEN) == []  # one host free never: nothing
    assert every_host_open({}) == []


def test_the_hosts_open_at_a_slot_are_named_by_id():
    assert hosts_open_at(at(11), OPEN) == [1, 2]
    assert hosts_open_at(at(13), OPEN) == [2]
    assert hosts_open_at(at(15), OPEN) == []
