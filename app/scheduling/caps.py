"""Booking caps: at most K bookings and/or M minutes of bookings per day, week or month, for one
event type or for the whole calendar, counted in the calendar's timezone over its active
bookings. Pure: the bookings come in, the full periods and the first cap a new booking would
break go out.

A period is a local calendar day, an ISO week (Monday to Sunday) or a calendar month. A booking
counts in the period its start falls in (a booking over midnight counts for the day it starts,
all its minutes there), as people count "appointments on Monday".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from enum import StrEnum

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


class Tally:
    """The bookings counted per period: how many, and their minutes, for the whole calendar and
    for one event type."""

    def __init__(self, bookings: Iterable[CountedBooking], event_type_id: int | None, tz_name: str):
        self._tz = zone(tz_name)
        self._event_type_id = event_type_id
        self._count: Counter[tuple[Scope, Period, date]] = Counter()
        self._minutes: Counter[tuple[Scope, Period, date]] = Counter()
        for booking in bookings:
            self.add(booking)

    def _keys(self, start: datetime, event_type_id: int | None):
        day = start.astimezone(self._tz).date()
        for period in Period:
            first = period_start(day, period)
            yield Scope.CALENDAR, period, first
            if event_type_id is not None and event_type_id == self._event_type_id:
                yield Scope.EVENT_TYPE, period, first

    def add(self, booking: CountedBooking) -> None:
        minutes = int((booking.end - booking.start).total_seconds() // 60)
        for key in self._keys(booking.start, booking.event_type_id):
            self._count[key] += 1
            self._minutes[key] += minutes

    def broken_by(self, slot: Interval, caps: Iterable[Cap]) -> Cap | None:
        """The first of ``caps`` a booking of ``slot`` (of the tallied event type) would break."""
        minutes = int((slot.end - slot.start).total_seconds() // 60)
        day = slot.start.astimezone(self._tz).date()
        for cap in caps:
            key = (cap.scope, cap.period, period_start(day, cap.period))
            if cap.count is not None and self._count[key] + 1 > cap.count:
                return cap
            if cap.minutes is not None and self._minutes[key] + minutes > cap.minutes:
                return cap
        return None
