"""What agents would be offered over the coming days: the availability the API answers
(``availability.check_availability``), asked for the dashboard's preview."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.models import SubAccount
from app.scheduling.timezones import InstantInput, zone
from app.services.availability.open_time import (
    AvailabilityDay,
    AvailabilityQuery,
    check_availability,
)

PREVIEW_DAYS = 7


def preview_open_slots(
    sub_account: SubAccount, event_type_id: int | None, now: datetime
) -> list[AvailabilityDay]:
    """Open slots of today and the next six days, dates in the sub account's timezone, for
    the offered event type ``event_type_id`` (None: the calendar's default duration)."""
    timezone = sub_account.settings.timezone
    today = now.astimezone(zone(timezone)).date()
    query = AvailabilityQuery(
        start_date=InstantInput(today),
        end_date=InstantInput(today + timedelta(days=PREVIEW_DAYS - 1)),
        event_type_id=event_type_id,
        timezone=timezone,
    )
    return check_availability(sub_account, query, now)
