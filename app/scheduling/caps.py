"""Booking caps: at most K bookings and/or M minutes of bookings per day, week or month, for one
event type or for the whole calendar, counted in the calendar's timezone over its active
bookings. Pure: the bookings come in, the full periods and the first cap a new booking would
break go out.

A period is a local calendar day, an ISO week (Monday to Sunday) or a calendar month. A booking
counts in the period its start falls in (a booking over midnight counts for the day it starts,
all its minutes there), as people count "appointments on Monday".
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from functools import lru_cache

from app.scheduling.intervals import Interval
from app.scheduling.timezones import local_to_utc, zone


class Period(StrEnum):
    DAY = "perDay"
    WEEK = "perWeek"
    MONTH = "perMonth"


class Scope(StrEnum):
    EVENT_TYPE = "event type"
    CALENDAR = "calendar"


_PERIOD_WORDS = {Period.DAY: "day", Period.WEEK: "week", Period.MONTH: "month"}
_PERIOD_ADJECTIVES = {Period.DAY: "daily", Period.WEEK: "weekly", Period.MONTH: "monthly"}


@dataclass(frozen=True)
class Cap:
    """One limit: in each ``period``, at most ``count`` bookings and/or ``minutes`` minutes of
    bookings, of the event type (``Scope.EVENT_TYPE``) or of the whole calendar."""

    scope: Scope
    period: Period
    count: int | None = None
    minutes: int | None = None

    def describe(self) -> str:
        """``Daily limit of 3 bookings reached for this event type`` and the like."""
        parts = []
        if self.count is not None:
            parts.append(f"{self.count} booking{'s' if self.count != 1 else ''}")
        if self.minutes is not None:
            parts.append(f"{self.minutes} minutes of bookings")
        whose = "this event type" if self.scope is Scope.EVENT_TYPE else "the calendar"
        return f"Limit of {' and '.join(parts)} a {_PERIOD_WORDS[self.period]} reached for {whose}"

    def short(self) -> str:
        """``daily cap reached``: why a day shows no open time."""
        return f"{_PERIOD_ADJECTIVES[self.period]} cap reached"


@dataclass(frozen=True)
class CountedBooking:
    """An active booking as caps count it: its start and length, and its event type."""

    start: datetime
    end: datetime
    event_type_id: int


def caps_from(limits: dict | None, scope: Scope) -> list[Cap]:
    """The caps of a ``bookingLimits`` document (``{"perDay": {"count", "minutes"}, …}``)."""
    caps = []
    for period in Period:
        part = (limits or {}).get(period.value)
        if part and (part.get("count") is not None or part.get("minutes") is not None):
            caps.append(Cap(scope, period, part.get("count"), part.get("minutes")))
    return caps


def period_start(day: date, period: Period) -> date:
    """The first day of the period ``day`` falls in."""
    if period is Period.DAY:
        return day
    if period is Period.WEEK:
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def period_end(first: date, period: Period) -> date:
    """The day after the period that starts on ``first``."""
    if period is Period.DAY:
        return first + timedelta(days=1)
    if period is Period.WEEK:
        return first + timedelta(days=7)
    return (first.replace(day=28) + timedelta(days=4)).replace(day=1)


def counting_span(window: Interval, caps: Iterable[Cap], tz_name: str) -> Interval:
    """The instants whose bookings decide ``caps`` for slots starting in ``window``: from the
    start of the widest period around its start to the end of the one around its end."""
    tz = zone(tz_name)
    periods = {cap.period for cap in caps} or {Period.DAY}
    first = min(period_start(window.start.astimezone(tz).date(), p) for p in periods)
    last = max(period_end(period_start(window.end.astimezone(tz).date(), p), p) for p in periods)
    return Interval(local_to_utc(first, time(0), tz), local_to_utc(last, time(0), tz))


@lru_cache(maxsize=64)
def _local_days(
    first: date, last: date, tz_name: str
) -> tuple[list[date], list[float], dict[date, int]]:
    """The days from ``first`` to ``last``, their local midnights (epoch seconds) and each
    day's index: the same few spans are asked for again and again."""
    tz = zone(tz_name)
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    midnights = [local_to_utc(day, time(0), tz).timestamp() for day in days]
    return days, midnights, {day: n for n, day in enumerate(days)}


def _start(slot: Interval) -> datetime:
    return slot.start


class Tally:
    """The bookings counted per local day of a span, for the whole calendar and for one event
    type; a week's or a month's count is the sum of its days'.

    Built from instants as epoch seconds: each booking's local day is found by bisecting the
    span's local midnights (no timezone arithmetic per booking), since a month of a busy
    calendar is a thousand bookings and availability counts them for every answer.
    """

    def __init__(
        self,
        bookings: Iterable[tuple[float, float, int]],
        event_type_id: int | None,
        tz_name: str,
        span: Interval,
    ):
        tz = zone(tz_name)
        first = span.start.astimezone(tz).date() - timedelta(days=1)
        last = span.end.astimezone(tz).date() + timedelta(days=1)
        self._days, self._midnights, self._index = _local_days(first, last, tz_name)
        self._tz = tz
        size = len(self._days)
        # [scope][0: count, 1: minutes][day index]
        self._per_day = {
            Scope.CALENDAR: ([0] * size, [0] * size),
            Scope.EVENT_TYPE: ([0] * size, [0] * size),
        }
        self._event_type_id = event_type_id
        for start, end, booking_event_type in bookings:
            self._count(start, end, booking_event_type, 1)
        self._sums: dict[tuple[Scope, Period, date], tuple[int, int]] = {}
        self._broken: dict[tuple[date, int, int], Cap | None] = {}

    def _count(self, start: float, end: float, event_type_id: int, sign: int) -> None:
        n = bisect_right(self._midnights, start) - 1
        if not 0 <= n < len(self._days):
            return
        minutes = int((end - start) // 60) * sign
        calendar, own = self._per_day[Scope.CALENDAR], self._per_day[Scope.EVENT_TYPE]
        calendar[0][n] += sign
        calendar[1][n] += minutes
        if event_type_id == self._event_type_id:
            own[0][n] += sign
            own[1][n] += minutes

    def remove(self, start: float, end: float, event_type_id: int) -> None:
        """Take one booking (epoch seconds) out again: the booking being moved."""
        self._count(start, end, event_type_id, -1)

    def add_days(self, days: Iterable[tuple[date, int, int, int, int]]) -> None:
        """Counts already summed per local day (by the database): each day with the calendar's
        bookings and minutes, then the event type's."""
        for day, count, minutes, own_count, own_minutes in days:
            n = self._index.get(day)
            if n is None:
                continue
            self._per_day[Scope.CALENDAR][0][n] += count
            self._per_day[Scope.CALENDAR][1][n] += minutes
            self._per_day[Scope.EVENT_TYPE][0][n] += own_count
            self._per_day[Scope.EVENT_TYPE][1][n] += own_minutes

    @classmethod
    def of(
        cls,
        bookings: Iterable[CountedBooking],
        event_type_id: int | None,
        tz_name: str,
        span: Interval,
    ) -> Tally:
        """A tally of ``CountedBooking``s (instants as datetimes)."""
        return cls(
            ((b.start.timestamp(), b.end.timestamp(), b.event_type_id) for b in bookings),
            event_type_id,
            tz_name,
            span,
        )

    def _sum(self, scope: Scope, period: Period, first: date) -> tuple[int, int]:
        """The counts of the period starting on ``first``: its tallied days' (the days run on
        one after another, so the period is a slice of them)."""
        key = (scope, period, first)
        if key not in self._sums:
            counts, minutes = self._per_day[scope]
            origin, size = self._days[0], len(self._days)
            lo = min(max((first - origin).days, 0), size)
            hi = min(max((period_end(first, period) - origin).days, 0), size)
            self._sums[key] = (sum(counts[lo:hi]), sum(minutes[lo:hi]))
        return self._sums[key]

    def keep_open(self, slots: list[Interval], caps: Sequence[Cap]) -> list[Interval]:
        """The slots (in time order, all one length) that break none of ``caps``: what
        availability offers. Each day's answer is worked out once, and applies to the run of
        its slots found by bisection."""
        if not slots or not caps:
            return slots
        minutes = int((slots[0].end - slots[0].start).total_seconds() // 60)
        kept: list[Interval] = []
        i, count = 0, len(slots)
        while i < count:
            n = bisect_right(self._midnights, slots[i].start.timestamp()) - 1
            if not 0 <= n < len(self._days) - 1:  # outside the tallied days: one by one
                if self.broken_by(slots[i], caps) is None:
                    kept.append(slots[i])
                i += 1
                continue
            day_end = datetime.fromtimestamp(self._midnights[n + 1], UTC)
            j = bisect_left(slots, day_end, lo=i, key=_start)
            if self._first_broken(self._days[n], minutes, caps) is None:
                kept.extend(slots[i:j])
            i = j
        return kept

    def broken_by(self, slot: Interval, caps: Sequence[Cap]) -> Cap | None:
        """The first of ``caps`` a booking of ``slot`` (of the tallied event type) would break.
        Availability asks this of every slot of a window: the answer is the same for every
        slot of one day and length, so it is worked out once for each."""
        minutes = int((slot.end - slot.start).total_seconds() // 60)
        start = slot.start.timestamp()
        n = bisect_right(self._midnights, start) - 1
        day = self._days[n] if 0 <= n < len(self._days) else slot.start.astimezone(self._tz).date()
        key = (day, minutes, id(caps))
        if key not in self._broken:
            self._broken[key] = self._first_broken(day, minutes, caps)
        return self._broken[key]

    def _first_broken(self, day: date, minutes: int, caps: Sequence[Cap]) -> Cap | None:
        for cap in caps:
            count, booked = self._sum(cap.scope, cap.period, period_start(day, cap.period))
            if cap.count is not None and count + 1 > cap.count:
                return cap
            if cap.minutes is not None and booked + minutes > cap.minutes:
                return cap
        return None
