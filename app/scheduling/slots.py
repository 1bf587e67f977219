"""Open slots and the time rule for a booking: the one place that decides whether a stretch of
time can be booked. The availability endpoint lists what passes; booking writes check one
interval against the same rule.

The rule (DESIGN.md, Availability): the slot lies inside working hours; it starts at or after
now + minimum notice and before now + booking horizon; its occupied interval (the slot widened by
the event type's buffers) overlaps no busy interval. Buffers may reach outside working hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from app.scheduling.intervals import Interval, first_overlap, merge


@dataclass(frozen=True)
class SlotRules:
    """What an event type (or the calendar default) asks of a slot."""

    duration: timedelta
    step: timedelta
    buffer_before: timedelta = timedelta(0)
    buffer_after: timedelta = timedelta(0)
    earliest_start: datetime | None = None  # now + minimum notice
    latest_start: datetime | None = None  # now + booking horizon, exclusive

    def occupied_interval(self, slot: Interval) -> Interval:
        return Interval(slot.start - self.buffer_before, slot.end + self.buffer_after)


def _first_grid_point(anchor: datetime, step: timedelta, at_least: datetime) -> datetime:
    """The first ``anchor + k * step`` (k ≥ 0) that is ≥ ``at_least``."""
    if at_least <= anchor:
        return anchor
    steps = -((anchor - at_least) // step)  # ceiling division on timedeltas
    return anchor + steps * step


def open_slots(
    working: list[Interval],
    busy: list[Interval],
    rules: SlotRules,
    window: Interval,
) -> list[Interval]:
    """Every bookable slot inside ``window``.

    ``working`` is the list of open ranges as configured (``working_ranges``; merged lists work
    too), ``busy`` a merged list. A slot must fit inside the merged working time. Slots start on
    a grid of ``rules.step`` anchored at each range's start and running until the next range
    starts, so a day's slots do not depend on where the window begins. One sweep: candidates
    only move forward, and a conflict jumps straight past the busy interval.
    """
    slots: list[Interval] = []
    duration, step = rules.duration, rules.step
    lower = window.start
    if rules.earliest_start is not None:
        lower = max(lower, rules.earliest_start)
    upper_start = window.end - duration  # the slot must end inside the window
    if rules.latest_start is not None:
        upper_start = min(upper_start, rules.latest_start - timedelta.resolution)
    anchors = sorted({w.start for w in working})
    a = j = 0
    for _, open_end in merge(working):
        group_start = a
        while a < len(anchors) and anchors[a] < open_end:
            a += 1
        group = anchors[group_start:a]
        last_start = min(open_end - duration, upper_start)
        for k, anchor in enumerate(group):
            grid_end = group[k + 1] if k + 1 < len(group) else open_end
            start = _first_grid_point(anchor, step, lower)
            while start < grid_end and start <= last_start:
                occupied_start = start - rules.buffer_before
                occupied_end = start + duration + rules.buffer_after
                while j < len(busy) and busy[j].end <= occupied_start:
                    j += 1
                if j < len(busy) and busy[j].start < occupied_end:
                    # Skip to the first grid point whose occupied time clears this busy time.
                    start = _first_grid_point(anchor, step, busy[j].end + rules.buffer_before)
                    continue
                slots.append(Interval(start, start + duration))
                start += step
    return slots


class TimeProblem(StrEnum):
    """Why an interval cannot be booked, in the order they are checked."""

    NOT_AFTER_START = "endTime must be after startTime"
    TOO_LONG = "A booking may last at most 24 hours"
    TOO_SOON = "startTime is within the minimum notice period"
    TOO_FAR = "startTime is beyond the booking horizon"
    OUTSIDE_HOURS = "Time slot is outside available hours"


MAX_BOOKING_LENGTH = timedelta(hours=24)


def time_problem(slot: Interval, working: list[Interval], rules: SlotRules) -> TimeProblem | None:
    """What, if anything, keeps ``slot`` from being bookable apart from busy time. The same
    rule ``open_slots`` applies, without its grid: a booking need not be aligned to it."""
    if slot.end <= slot.start:
        return TimeProblem.NOT_AFTER_START
    if slot.end - slot.start > MAX_BOOKING_LENGTH:
        return TimeProblem.TOO_LONG
    if rules.earliest_start is not None and slot.start < rules.earliest_start:
        return TimeProblem.TOO_SOON
    if rules.latest_start is not None and slot.start >= rules.latest_start:
        return TimeProblem.TOO_FAR
    if not any(w.contains(slot) for w in working):
        return TimeProblem.OUTSIDE_HOURS
    return None


def conflicting(slot: Interval, busy: list[Interval], rules: SlotRules) -> Interval | None:
    """The busy interval the slot's occupied interval runs into, if any (``busy`` merged)."""
    return first_overlap(rules.occupied_interval(slot), busy)


def slots_by_day(
    slots: list[Interval], tz: ZoneInfo, first_day: date, last_day: date
) -> list[tuple[date, list[Interval]]]:
    """Every date from ``first_day`` to ``last_day`` in ``tz``, each with the slots starting on
    it (in order); closed days get an empty list."""
    days: list[tuple[date, list[Interval]]] = []
    index: dict[date, list[Interval]] = {}
    day = first_day
    while day <= last_day:
        index[day] = []
        days.append((day, index[day]))
        day += timedelta(days=1)
    for slot in slots:
        bucket = index.get(slot.start.astimezone(tz).date())
        if bucket is not None:
            bucket.append(slot)
    return days
