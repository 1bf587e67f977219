"""Seats (app.scheduling.seats, and held seats in app.scheduling.offered): a slot of a seated
event type stays open while seats remain, and its time is busy for everything else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.scheduling.intervals import Interval
from app.scheduling.offered import HeldTime, SlotSet
from app.scheduling.seats import (
    SeatedSlots,
    SeatProblem,
    first_free_seat,
    group_slot,
    seat_group,
)
from app.scheduling.slots import SlotRules

T0 = datetime(2026, 12, 1, 10, tzinfo=UTC)
HALF_HOUR = timedelta(minutes=30)
RULES = SlotRules(duration=HALF_HOUR, step=HALF_HOUR, buffer_after=timedelta(minutes=10))


def slot_at(minutes: int) -> Interval:
    start = T0 + timedelta(minutes=minutes)
    return Interval(start, start + HALF_HOUR)


def booked(seats: int, slot: Interval, count: int) -> SeatedSlots:
    seated = SeatedSlots(seats)
    for _ in range(count):
        seated.add(slot, RULES.occupied_interval(slot))
    return seated


def test_a_group_names_its_event_type_and_slot_and_reads_back():
    group = seat_group(7, slot_at(0))
    assert group_slot(group, 7) == slot_at(0)
    assert group_slot(group, 8) is None


def test_a_slot_with_seats_left_takes_one_more():
    seated = booked(3, slot_at(0), 2)
    assert seated.problem(slot_at(0), RULES) is None
    assert seated.remaining(slot_at(0)) == 1


def test_a_full_slot_takes_no_more():
    seated = booked(2, slot_at(0), 2)
    assert seated.problem(slot_at(0), RULES) is SeatProblem.FULL
    assert seated.remaining(slot_at(0)) == 0


def test_a_live_hold_takes_a_seat():
    seated = booked(2, slot_at(0), 1)
    seated.add(slot_at(0), RULES.occupied_interval(slot_at(0)), held=True)
    assert seated.problem(slot_at(0), RULES) is SeatProblem.FULL
    assert seated.booked_only().remaining(slot_at(0)) == 1


def test_a_group_is_busy_for_the_slots_it_meets_buffers_included():
    seated = booked(5, slot_at(0), 1)
    assert seated.problem(slot_at(30), RULES) is SeatProblem.OVERLAPS  # its buffer
    assert seated.problem(slot_at(-30), RULES) is SeatProblem.OVERLAPS  # runs into it
    assert seated.problem(slot_at(60), RULES) is None
    kept = seated.keep_open([slot_at(m) for m in (-60, -30, 0, 30, 60)], RULES)
    assert kept == [slot_at(-60), slot_at(0), slot_at(60)]


def test_the_lowest_free_seat_is_taken():
    assert first_free_seat("g", 3, [1, 3]).number == 2
    assert first_free_seat("g", 3, []).number == 1
    assert first_free_seat("g", 2, [1, 2]) is None


def seated_set(booked_seats: list[int], holds: list[HeldTime], seats: int = 2) -> SlotSet:
    slots = [slot_at(m) for m in (0, 60)]
    return SlotSet(
        starts=[int(s.start.timestamp()) for s in slots],
        ends=[int(s.end.timestamp()) for s in slots],
        days=[("2026-12-01", 0, 2)],
        holds=holds,
        notice_seconds=0,
        horizon_seconds=86400 * 30,
        buffer_before_seconds=0,
        buffer_after_seconds=600,
        seats=seats,
        booked_seats=booked_seats,
    )


def held_seat(slot: Interval, expires: float) -> HeldTime:
    occupied = RULES.occupied_interval(slot)
    return HeldTime(
        int(occupied.start.timestamp()),
        int(occupied.end.timestamp()),
        expires,
        int(slot.start.timestamp()),
        int(slot.end.timestamp()),
    )


def test_a_kept_seated_slot_counts_live_held_seats_at_each_instant():
    now = T0.timestamp() - 3600
    slot_set = seated_set([0, 0], [held_seat(slot_at(0), now + 60)], seats=3)
    offer = slot_set.offer(now)
    assert slot_set.seats_remaining(offer, 0) == 2
    assert slot_set.seats_remaining(offer, 1) == 3
    later = slot_set.offer(now + 120)  # the hold expired
    assert slot_set.seats_remaining(later, 0) == 3


def test_a_kept_seated_slot_full_with_held_seats_is_not_offered():
    now = T0.timestamp() - 3600
    slot_set = seated_set([1, 0], [held_seat(slot_at(0), now + 60)], seats=2)
    offer = slot_set.offer(now)
    assert [i for _, indexes in slot_set.offered_days(offer) for i in indexes] == [1]
    assert slot_set.to_plain() == SlotSet.from_plain(slot_set.to_plain()).to_plain()
