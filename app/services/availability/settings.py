"""Changing a sub account's calendar settings (and its name) after provisioning.

The rules live here and provisioning reads its sub accounts with them: ``SettingsDoc`` for the
calendar's defaults and ``SubAccountNameDoc`` for the name and the timezone, so a value the
dashboard accepts is one a provisioning document could have set, and the other way round.
Fields absent from the document stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from marshmallow import Schema, ValidationError, fields, post_load, validate
from sqlalchemy import func, select

from app.extensions import db
from app.models import AvailabilityProfile, ReminderChannel, SubAccount
from app.models.limits import (
    ATTENDEE_MOVES_MAX,
    EMAIL_MAX,
    HORIZON_MAX_DAYS,
    LOCATION_MAX,
    NAME_MAX,
    NOTICE_MAX_MINUTES,
    REMINDER_MAX_MINUTES,
)
from app.services.common.errors import InvalidRequest
from app.validation import (
    DURATION_MINUTES,
    Text,
    TimezoneField,
    booking_limits,
    describe_errors,
    flatten_errors,
    reminder_list,
)

# Document field → CalendarSettings column.
_COLUMNS = {
    "timezone": "timezone",
    "defaultDuration": "default_duration",
    "minimumNoticeMinutes": "minimum_notice_minutes",
    "bookingHorizonDays": "booking_horizon_days",
    "defaultLocation": "default_location",
    "notifyOnBooking": "notify_on_booking",
    "notificationEmail": "notification_email",
    "reminders": "reminders",
    "bookingLimits": "booking_limits",
    "autoCompleteBookings": "auto_complete_bookings",
    "attendeeChangeNoticeHours": "attendee_change_notice_hours",
    "attendeeMaxReschedules": "attendee_max_reschedules",
}


class SettingsDoc(Schema):
    defaultDuration = fields.Integer(load_default=30, validate=DURATION_MINUTES, strict=True)
    minimumNoticeMinutes = fields.Integer(
        load_default=0, validate=validate.Range(min=0, max=NOTICE_MAX_MINUTES), strict=True
    )
    bookingHorizonDays = fields.Integer(
        load_default=60, validate=validate.Range(min=1, max=HORIZON_MAX_DAYS), strict=True
    )
    defaultLocation = Text(
        load_default=None, allow_none=True, validate=validate.Length(max=LOCATION_MAX)
    )
    notifyOnBooking = fields.Boolean(load_default=True)
    notificationEmail = fields.Email(
        load_default=None, allow_none=True, validate=validate.Length(max=EMAIL_MAX)
    )
    reminders = reminder_list(load_default=list)
    bookingLimits = booking_limits(load_default=None)
    # Shorthand for ``reminders``: one mail to the attendees that many minutes before (null:
    # none); ``reminders`` wins when a document has both.
    reminderMinutesBefore = fields.Integer(
        allow_none=True, validate=validate.Range(min=1, max=REMINDER_MAX_MINUTES), load_only=True
    )
    autoCompleteBookings = fields.Boolean(load_default=False)

    @post_load(pass_original=True)
    def _shorthand(self, data: dict[str, Any], original: Any, **kwargs: Any) -> dict[str, Any]:
        if "reminderMinutesBefore" in data:
            minutes = data.pop("reminderMinutesBefore")
            if not (isinstance(original, dict) and "reminders" in original):
                data["reminders"] = (
                    [{"minutesBefore": minutes, "channels": [ReminderChannel.ATTENDEE_EMAIL]}]
                    if minutes is not None
                    else []
                )
        return data

    # How late an attendee may cancel or move from their manage link, and how often they may
    # move it (``app.services.bookings.attendee_changes``).
    attendeeChangeNoticeHours = fields.Integer(
        load_default=0,
        validate=validate.Range(min=0, max=NOTICE_MAX_MINUTES // 60),
        strict=True,
    )
    attendeeMaxReschedules = fields.Integer(
        load_default=None,
        allow_none=True,
        validate=validate.Range(min=0, max=ATTENDEE_MOVES_MAX),
        strict=True,
    )


class SubAccountNameDoc(Schema):
    """A sub account's own fields: its name and its calendar's timezone. Provisioning's sub
    account document extends it; a settings change reads the same field objects."""

    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    timezone = TimezoneField(load_default="UTC")


class CalendarSettingsDoc(SettingsDoc, SubAccountNameDoc):
    """``SettingsDoc`` plus the sub account's ``name`` and ``timezone`` as ``SubAccountNameDoc``
    reads them (inherited, so the rules cannot drift apart)."""


@dataclass(frozen=True)
class SettingsChange:
    """What an update changed: document field names, and for a new timezone the old one and
    how many availability profiles still keep it (they have a timezone of their own, which a
    change of the calendar's does not move)."""

    changed: list[str]
    timezone: str
    previous_timezone: str | None = None
    profiles_in_previous_timezone: int = 0

    @property
    def timezone_changed(self) -> bool:
        return self.previous_timezone is not None


def settings_document(sub_account: SubAccount) -> dict[str, Any]:
    """The settings as a document (the form's starting values)."""
    settings = sub_account.settings
    return {
        "name": sub_account.name,
        **{field: getattr(settings, column) for field, column in _COLUMNS.items()},
    }


def update_calendar_settings(sub_account: SubAccount, document: dict[str, Any]) -> SettingsChange:
    """Apply ``document`` (any of ``name`` and the ``SettingsDoc`` fields, camelCase) to the sub
    account; every problem is named by field and nothing changes. Flushes, never commits."""
    try:
        doc = CalendarSettingsDoc().load(document, partial=True)
    except ValidationError as err:
        errors = flatten_errors(err.messages)
        raise InvalidRequest(describe_errors(errors), errors=errors) from None
    settings = sub_account.settings
    changed = []
    if "name" in doc and doc["name"] != sub_account.name:
        sub_account.name = doc["name"]
        changed.append("name")
    previous_timezone = settings.timezone
    for field, column in _COLUMNS.items():
        if field in doc and doc[field] != getattr(settings, column):
            setattr(settings, column, doc[field])
            changed.append(field)
    db.session.flush()
    if "timezone" not in changed:
        return SettingsChange(changed, settings.timezone)
    kept = db.session.scalar(
        select(func.count())
        .select_from(AvailabilityProfile)
        .where(
            AvailabilityProfile.sub_account_id == sub_account.id,
            AvailabilityProfile.timezone == previous_timezone,
        )
    )
    return SettingsChange(changed, settings.timezone, previous_timezone, kept or 0)
