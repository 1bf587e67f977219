"""Working hours: weekly ranges and date overrides in local wall-clock time, turned into UTC
intervals.

Hours are wall-clock times in the schedule's timezone, so "09:00–17:00" stays 09:00–17:00 local
on both sides of a DST change (8 real hours either way), while "00:00–24:00" lasts 23 or 25
real hours on the change days. A wall time that does not exist, or exists twice, is read as
RFC 5545 does (``fold=0``, see ``timezones.local_to_utc``); a range that maps to nothing (e.g.
02:00–03:00 on a spring-forward night) contributes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from app.scheduling.intervals import Interval, merge
from app.scheduling.timezones import local_to_utc, zone

# A range of minutes after local midnight, end exclusive; 1440 means the next midnight.
MinuteRange = tuple[int, int]


@dataclass(frozen=True)
class WeeklySchedule:
    """``weekly[weekday]`` (0 = Monday) lists that weekday's open ranges; ``overrides[date]``
    replaces them for that date (an empty list closes it)."""

    timezone: str
    weekly: Mapping[int, Sequence[MinuteRange]] = field(default_factory=dict)
    overrides: Mapping[date, Sequence[MinuteRange]] = field(default_factory=dict)

    def ranges_on(self, day: date) -> Sequence[MinuteRange]:
        if day in self.overrides:
            return self.overrides[day]
        return self.weekly.get(day.weekday(), ())


def _wall_instant(day: date, minute: int, tz_name: str) -> datetime:
    if minute >= 1440:
        day, minute = day + timedelta(days=minute // 1440), minute % 1440
    return local_to_utc(day, time(minute // 60, minute % 60), zone(tz_name))


def working_ranges(schedule: WeeklySchedule, start: datetime, end: datetime) -> list[Interval]:
    """Each configured open range (one per weekday range or override range and date) that
    touches ``[start, end)``, in UTC, sorted by start, not merged.

    Ranges are not clipped to the window: a slot must fit inside working hours, and the window
    cuts slots separately. Their starts anchor the slot grid (see ``slots.open_slots``).
    """
    tz = zone(schedule.timezone)
    first = start.astimezone(tz).date() - timedelta(days=1)
    last = end.astimezone(tz).date() + timedelta(days=1)
    ranges: list[Interval] = []
    day = first
    while day <= last:
        for begin, finish in schedule.ranges_on(day):
            interval = Interval(
                _wall_instant(day, begin, schedule.timezone),
                _wall_instant(day, finish, schedule.timezone),
            )
            if interval.start < interval.end and interval.end > start and interval.start < end:
                ranges.append(interval)
        day += timedelta(days=1)
    return sorted(ranges)


def working_intervals(schedule: WeeklySchedule, start: datetime, end: datetime) -> list[Interval]:
    """The open time that touches ``[start, end)``: the ranges, merged."""
    return merge(working_ranges(schedule, start, end))
