"""Busy periods in iCalendar data: the events of calendar object resources expanded into
their occurrences inside a window, as UTC intervals. No I/O.

Parsing is ``icalendar``'s, expansion ``recurring-ical-events``' (RRULE, RDATE, EXDATE and
RECURRENCE-ID overrides). The rules on top:

- an occurrence with ``TRANSP:TRANSPARENT`` or ``STATUS:CANCELLED`` is not busy (an override
  decides for its own occurrence: a cancelled instance of a busy series frees that instance);
- a date-time with a TZID or in UTC is that instant; a floating date-time (no zone) is wall
  time in the sub account's timezone;
- an all-day event (``VALUE=DATE``) blocks its dates in the sub account's timezone: from the
  first instant of its first day to the first instant of the day after its last (DTEND is
  exclusive; no DTEND and no DURATION means one day);
- a zero-length event (DTEND = DTSTART, or a date-time DTSTART alone) blocks nothing;
- an occurrence lasts its series' DTEND - DTSTART or DURATION, except one an RDATE adds as a
  PERIOD, which keeps the period's own end or duration (RFC 5545 3.8.5.2), and one an override
  (RECURRENCE-ID) replaces, which has its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo

import icalendar
import recurring_ical_events

from app.scheduling.intervals import Interval
from app.scheduling.timezones import local_to_utc
from app.services.integrations.calendars.errors import MalformedCalendarData, TooManyBusyPeriods

# A window of a few months holds hundreds of events, not tens of thousands; past this the
# calendar has a runaway rule (FREQ=MINUTELY) and storing it would only slow every lookup.
MAX_BUSY_PERIODS = 20_000

# All-day and floating times are placed in the sub account's timezone only after expansion, so
# the expansion looks a day further on both sides (no offset is a day or more).
_MARGIN = timedelta(days=1)
_FIRST_SLICE = timedelta(days=7)


@dataclass(frozen=True, order=True)
class BusyPeriod:
    start: datetime
    end: datetime
    uid: str


@dataclass(frozen=True)
class CalendarObject:
    """One calendar object resource as the server sent it: all components of one UID."""

    href: str
    data: str


def busy_periods(
    objects: Iterable[CalendarObject],
    window: Interval,
    tz: ZoneInfo,
    *,
    limit: int = MAX_BUSY_PERIODS,
) -> list[BusyPeriod]:
    """Every busy occurrence overlapping ``window``, from all ``objects``: for a reader that
    needs all or nothing. Raises ``MalformedCalendarData`` naming the first resource that
    cannot be read, and ``TooManyBusyPeriods`` past ``limit`` in all."""
    periods: list[BusyPeriod] = []
    for obj in objects:
        _, found = object_busy_periods(obj, window, tz, limit=limit - len(periods))
        periods.extend(found)
    return periods


def object_busy_periods(
    obj: CalendarObject, window: Interval, tz: ZoneInfo, *, limit: int = MAX_BUSY_PERIODS
) -> tuple[str | None, list[BusyPeriod]]:
    """One resource's UID and busy occurrences overlapping ``window``.

    Raises ``MalformedCalendarData`` naming the resource when it cannot be read, and
    ``TooManyBusyPeriods`` when it has more than ``limit`` occurrences in the window.
    """
    try:
        return _object_periods(obj.data, window, tz, limit)
    except TooManyBusyPeriods:
        raise TooManyBusyPeriods(
            f"more than {limit} busy periods between {window.start:%Y-%m-%d} and"
            f" {window.end:%Y-%m-%d} (a runaway recurrence rule?) in {obj.href}"
        ) from None
    except Exception as err:  # icalendar and recurring-ical-events raise many kinds
        raise MalformedCalendarData(
            f"cannot read the event at {obj.href}: {type(err).__name__}: {_short(err)}"
        ) from err


def _object_periods(
    data: str, window: Interval, tz: ZoneInfo, room: int
) -> tuple[str | None, list[BusyPeriod]]:
    """The object's UID and busy periods. A recurring object is expanded slice by slice (7
    days, then doubling) so that a runaway rule is caught after computing about ``room``
    occurrences, not all of them; any other (most of a calendar) in one go."""
    calendar = icalendar.Calendar.from_ical(data)
    uid = next((str(e["UID"]) for e in calendar.walk("VEVENT") if "UID" in e), None)
    durations = _exact_durations(calendar)
    query = recurring_ical_events.of(calendar)
    periods: list[BusyPeriod] = []
    seen: set[tuple[datetime, datetime]] = set()  # an occurrence across a slice edge is in both
    start, last = window.start - _MARGIN, window.end + _MARGIN
    _refuse_runaway_rules(calendar, last, room)
    span = _FIRST_SLICE if _recurs(calendar) else last - start
    while start < last:
        stop = min(start + span, last)
        for occurrence in query.between(start, stop):
            if not _is_busy(occurrence):
                continue
            begin = _instant(occurrence.start, tz)
            exact = _duration_of(occurrence, durations)
            if exact is None:
                end = _instant(occurrence.end, tz, ceil=True)
            else:
                end = _instant(occurrence.start + exact[0], tz, ceil=True) + exact[1]
            if not (begin < end and begin < window.end and end > window.start):
                continue
            if (begin, end) in seen:
                continue
            if len(periods) >= room:
                raise TooManyBusyPeriods("")
            seen.add((begin, end))
            periods.append(BusyPeriod(begin, end, str(occurrence.get("UID", uid or ""))))
        start, span = stop, span * 2
    return uid, periods


# RFC 5545 3.3.6: a duration's weeks and days are nominal (the same wall time that many days
# later, whatever a DST change does), its hours, minutes and seconds exact (elapsed time).
_DURATION = re.compile(
    r"^(?P<sign>[+-])?P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+)S)?)?$"
)
_Duration = tuple[timedelta, timedelta]  # (nominal part, exact part)


def _exact_durations(
    calendar: icalendar.Calendar,
) -> dict[tuple[str, str | None], _Duration | None]:
    """The duration each timed occurrence ends by, split into its nominal and exact parts (None:
    the end the expansion gives is right), by (UID, RECURRENCE-ID or None for the series):
    recurring-ical-events adds a whole duration in wall time, which is an hour off for hours
    across a DST change. Each VEVENT gives its DURATION (None when it has a DTEND); each RDATE
    PERIOD of a series gives the period's own length under its start as a RECURRENCE-ID (its
    duration, or None for an end, which the expansion keeps), so that the series' duration never
    replaces it, while an override of that occurrence (later in the mapping) still decides its
    own. Empty when no occurrence needs the correction."""
    found: dict[tuple[str, str | None], _Duration | None] = {}
    events = calendar.walk("VEVENT")
    for event in events:
        if "RECURRENCE-ID" not in event:
            uid = str(event.get("UID", ""))
            found.update(((uid, start), length) for start, length in _rdate_periods(event))
    for event in events:
        key = (str(event.get("UID", "")), _recurrence_id(event))
        found[key] = _exact_duration(event)
    return found if any(found.values()) else {}


def _rdate_periods(event: icalendar.cal.Component) -> list[tuple[str, _Duration | None]]:
    """A series' RDATE PERIOD values (RFC 5545 3.3.9) as (start in the form of
    ``_recurrence_id``, the period's own length: its duration split as ``_split_duration``
    does, or None when the period gives its end)."""
    found = event.get("RDATE")
    # Several RDATE lines are a list, each of which holds values.
    lines = found if isinstance(found, list) else [] if found is None else [found]
    periods = []
    for line in lines:
        for value in getattr(line, "dts", []):
            period = value.dt
            if not (isinstance(period, tuple) and isinstance(period[0], datetime)):
                continue  # a DATE or DATE-TIME: the series' duration (3.8.5.2)
            start, end_or_length = period
            length = (
                _split_duration(cast(bytes, icalendar.vDuration(end_or_length).to_ical()))
                if isinstance(end_or_length, timedelta)
                else None
            )
            periods.append((_instance_id(start), length))
    return periods


def _exact_duration(event: icalendar.cal.Component) -> _Duration | None:
    if "DURATION" not in event or "DTEND" in event or "DTSTART" not in event:
        return None
    if not isinstance(event.decoded("DTSTART"), datetime):
        return None  # all-day: a duration of dates says only days
    # bytes: icalendar's values serialize to str only for GEO and UTC offsets.
    return _split_duration(cast(bytes, event["DURATION"].to_ical()))


def _split_duration(duration: bytes) -> _Duration | None:
    """A DURATION value's nominal and exact parts (RFC 5545 3.3.6); None if it is not one."""
    parts = _DURATION.match(duration.decode().strip().upper())
    if parts is None:
        return None
    sign = -1 if parts["sign"] == "-" else 1
    number = {name: int(value or 0) for name, value in parts.groupdict().items() if name != "sign"}
    nominal = timedelta(weeks=number["weeks"], days=number["days"])
    exact = timedelta(hours=number["hours"], minutes=number["minutes"], seconds=number["seconds"])
    return nominal * sign, exact * sign


def _duration_of(
    occurrence: icalendar.Event,
    durations: dict[tuple[str, str | None], _Duration | None],
) -> _Duration | None:
    """The duration to correct an occurrence's end with: its own (an override's, or an RDATE
    PERIOD's), else its series'."""
    if not durations or not isinstance(occurrence.start, datetime):
        return None
    uid = str(occurrence.get("UID", ""))
    own = (uid, _recurrence_id(occurrence))
    return durations[own] if own in durations else durations.get((uid, None))


def _recurrence_id(component: icalendar.cal.Component) -> str | None:
    if "RECURRENCE-ID" not in component:
        return None
    return _instance_id(component.decoded("RECURRENCE-ID"))


def _instance_id(value: date | datetime) -> str:
    """An instance's RECURRENCE-ID (or an RDATE's start) as a key: an instant in UTC, a
    floating time or a date as written."""
    return (
        value.astimezone(UTC).isoformat()
        if isinstance(value, datetime) and value.tzinfo
        else str(value)
    )


# A rule that repeats every few seconds or minutes is expanded step by step from its start, in
# the expanding library's memory, before a single occurrence in the window is known: past this
# many steps it is refused as a runaway without being expanded (an interval of a minute for
# the two months of a window is about 100,000 steps; a rule that fast is no one's calendar).
MAX_RULE_STEPS = 200_000
_STEP = {"SECONDLY": 1, "MINUTELY": 60}


def _refuse_runaway_rules(calendar: icalendar.Calendar, last: datetime, room: int) -> None:
    """Raise ``TooManyBusyPeriods`` for a SECONDLY or MINUTELY rule whose steps from its start
    to ``last`` (or its COUNT) exceed ``MAX_RULE_STEPS``, or whose occurrences would fill
    ``room`` in the window: counted, not expanded, so it costs nothing whatever the rule."""
    for event in calendar.walk("VEVENT"):
        found = event.get("RRULE")
        if found is None or "DTSTART" not in event:
            continue
        # Several RRULE lines (Cyrus exports the same one twice) are a list: each is counted.
        for rule in found if isinstance(found, list) else [found]:
            _refuse_runaway_rule(event, rule, last, room)


def _refuse_runaway_rule(event: Any, rule: Any, last: datetime, room: int) -> None:
    """``_refuse_runaway_rules`` for one rule of one event."""
    frequency = str((rule.get("FREQ") or [""])[0]).upper()
    if frequency not in _STEP:
        return
    start = event.decoded("DTSTART")
    if not isinstance(start, datetime):
        return
    start = start if start.tzinfo else start.replace(tzinfo=UTC)
    until = (rule.get("UNTIL") or [None])[0]
    end = last
    if isinstance(until, datetime):
        end = min(end, until if until.tzinfo else until.replace(tzinfo=UTC))
    interval = int((rule.get("INTERVAL") or [1])[0]) * _STEP[frequency]
    steps = max(0, (end - start).total_seconds()) / interval
    if "COUNT" in rule:
        steps = min(steps, int(rule["COUNT"][0]))
    if steps > MAX_RULE_STEPS or ("BYSECOND" not in rule and steps > room * 10):
        raise TooManyBusyPeriods("")


def _recurs(calendar: icalendar.Calendar) -> bool:
    return any("RRULE" in event or "RDATE" in event for event in calendar.walk("VEVENT"))


def _is_busy(component: icalendar.cal.Component) -> bool:
    if str(component.get("TRANSP", "OPAQUE")).upper() == "TRANSPARENT":
        return False
    return str(component.get("STATUS", "")).upper() != "CANCELLED"


def _instant(value: date | datetime, tz: ZoneInfo, *, ceil: bool = False) -> datetime:
    """A DTSTART/DTEND value as a UTC instant: all-day dates and floating times in ``tz``."""
    if not isinstance(value, datetime):
        if not isinstance(value, date):
            raise ValueError(f"expected a date or date-time, got {type(value).__name__}")
        return local_to_utc(value, time(0), tz)
    if value.tzinfo is None:
        instant = local_to_utc(value.date(), value.time(), tz)
    else:
        instant = value.astimezone(UTC)
    if instant.microsecond:  # iCalendar has whole seconds; busy time never shrinks
        instant = instant.replace(microsecond=0) + (timedelta(seconds=1) if ceil else timedelta())
    return instant


def _short(err: Exception, limit: int = 200) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
