"""What agents would be offered over the coming days: the availability the API answers
(``availability.check_availability``), asked for the dashboard's preview."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from app.models import SubAccount
from app.scheduling.intervals import Interval
from app.scheduling.timezones import InstantInput, local_to_utc, zone
from app.services.availability.open_time import AvailabilityQuery, check_availability
from app.services.scheduling_inputs import booking_caps, get_event_type

PREVIEW_DAYS = 7


@dataclass(frozen=True)
class PreviewedDay:
    """A day of the preview: its open slots, and the cap that closes it, if one does."""

    date: date
    slots: list[Interval]
    capped: str | None = None  # "daily cap reached", …


def preview_open_slots(
    sub_account: SubAccount, event_type_id: int | None, now: datetime
) -> list[PreviewedDay]:
    """Open slots of today and the next six days, dates in the sub account's timezone, for
    the offered event type ``event_type_id`` (None: the calendar's default duration); a day
    without any says which cap closed it, when one did."""
    timezone = sub_account.settings.timezone
    tz = zone(timezone)
    today = now.astimezone(tz).date()
    query = AvailabilityQuery(
        start_date=InstantInput(today),
        end_date=InstantInput(today + timedelta(days=PREVIEW_DAYS - 1)),
        event_type_id=event_type_id,
        timezone=timezone,
    )
    days = check_availability(sub_account, query, now)
    event_type = (
        get_event_type(sub_account, event_type_id, offered_only=True) if event_type_id else None
    )
    caps = booking_caps(sub_account, event_type)
    if not caps.caps:
        return [PreviewedDay(day.date, day.slots) for day in days]
    length = timedelta(
        minutes=event_type.duration if event_type else sub_account.settings.default_duration
    )
    first = local_to_utc(today, time(12), tz)
    tally = caps.tally(Interval(first, first + timedelta(days=PREVIEW_DAYS)))
    previewed = []
    for day in days:
        capped = None
        if not day.slots:
            noon = local_to_utc(day.date, time(12), tz)
            cap = tally.broken_by(Interval(noon, noon + length), caps.caps)
            capped = cap.short() if cap else None
        previewed.append(PreviewedDay(day.date, day.slots, capped))
    return previewed
