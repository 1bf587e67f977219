"""Which open slots are offered instead of a refused time (pure, no app)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.scheduling.intervals import Interval
from app.scheduling.suggestions import nearest_slots

DAY = Interval(datetime(2027, 3, 8, 5, tzinfo=UTC), datetime(2027, 3, 9, 5, tzinfo=UTC))


def at(day_offset: int, hour: int, minute: int = 0) -> Interval:
    start = DAY.start + timedelta(days=day_offset, hours=hour - 5, minutes=minute)
    return Interval(start, start + timedelta(minutes=30))


WANTED = at(0, 12).start


def test_the_wanted_days_slots_come_nearest_first():
    slots = [at(0, 9), at(0, 11), at(0, 12, 30), at(0, 15)]
    assert nearest_slots(slots, WANTED, DAY) == [at(0, 12, 30), at(0, 11), at(0, 9), at(0, 15)]


def test_of_two_equally_near_slots_the_earlier_comes_first():
    assert nearest_slots([at(0, 13), at(0, 11)], WANTED, DAY) == [at(0, 11), at(0, 13)]


def test_following_days_come_after_the_wanted_day_from_the_earliest():
    slots = [at(2, 9), at(1, 16), at(0, 9), at(1, 9)]
    assert nearest_slots(slots, WANTED, DAY) == [at(0, 9), at(1, 9), at(1, 16), at(2, 9)]


def test_preceding_days_come_last_from_the_latest():
    slots = [at(-2, 16), at(-1, 9), at(1, 9), at(-1, 16)]
    assert nearest_slots(slots, WANTED, DAY) == [at(1, 9), at(-1, 16), at(-1, 9), at(-2, 16)]


def test_at_most_limit_slots_without_duplicates():
    slots = [at(0, h) for h in range(9, 17)] * 2
    assert nearest_slots(slots, WANTED, DAY, limit=3) == [at(0, 12), at(0, 11), at(0, 13)]


def test_no_open_slots_means_no_suggestions():
    assert nearest_slots([], WANTED, DAY) == []
