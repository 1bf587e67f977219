"""The availability pages' forms. They carry text, dates and numbers; what a value may be
(HH:MM clocks, ranges, names, timezones, blocked time) is the services' to say, next to the
field. Fields that two forms of one page share a name with get ids of their own, so each
label points at its own input."""

from __future__ import annotations

from typing import Any

from flask_wtf import FlaskForm
from wtforms import BooleanField, DateField, DateTimeLocalField, SelectField, StringField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import InputRequired

from app.services.availability.profiles import WEEKDAYS

WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
OPENS_HINT = {"placeholder": "09:00", "autocomplete": "off"}
CLOSES_HINT = {"placeholder": "17:00", "autocomplete": "off"}

# Service document fields → form fields.
PROFILE_FIELDS = {"name": "name", "timezone": "timezone"}
RANGE_FIELDS = {"weekday": "weekday", "start": "start", "end": "end", "date": "date"}
BLOCKED_FIELDS = {"start": "start", "end": "end", "reason": "reason"}


def _text(value: Any) -> str:
    return (value or "").strip()


class ProfileForm(FlaskForm):
    name = StringField("Name", validators=[InputRequired("Enter a name.")])
    timezone = StringField("Timezone (IANA name; empty: the sub account's)")

    def document(self) -> dict[str, Any]:
        return {"name": _text(self.name.data), "timezone": _text(self.timezone.data) or None}


class WeeklyHoursForm(FlaskForm):
    weekday = SelectField(
        "Day",
        choices=[SelectChoice(d, n) for d, n in zip(WEEKDAYS, WEEKDAY_NAMES, strict=True)],
        validate_choice=False,
    )
    start = StringField("Opens (HH:MM)", id="weekly-start", render_kw=OPENS_HINT)
    end = StringField("Closes (HH:MM, 24:00 for midnight)", id="weekly-end", render_kw=CLOSES_HINT)

    def document(self) -> dict[str, Any]:
        return {
            "weekday": self.weekday.data,
            "start": _text(self.start.data),
            "end": _text(self.end.data),
        }


class WeeklyRangeForm(FlaskForm):
    """A weekly range's new times, from the small form in its row (rendered by hand: one per
    row, each with ids of its own)."""

    start = StringField("Opens (HH:MM)")
    end = StringField("Closes (HH:MM, 24:00 for midnight)")

    def document(self) -> dict[str, Any]:
        return {"start": _text(self.start.data), "end": _text(self.end.data)}


class DateOverrideForm(FlaskForm):
    date = DateField("Date", validators=[InputRequired("Enter a date.")])
    closed = BooleanField("Closed all day (the hours below are not needed)")
    start = StringField("Opens (HH:MM)", id="override-start", render_kw=OPENS_HINT)
    end = StringField(
        "Closes (HH:MM, 24:00 for midnight)", id="override-end", render_kw=CLOSES_HINT
    )

    def document(self) -> dict[str, Any]:
        """``{"date"}`` for a closed date, else ``{"date", "start", "end"}``."""
        document: dict[str, Any] = {"date": self.date.data.isoformat()}
        if not self.closed.data:
            document.update(start=_text(self.start.data), end=_text(self.end.data))
        return document


class BlockedTimeForm(FlaskForm):
    start = DateTimeLocalField("Starts", validators=[InputRequired("Enter a date and time.")])
    end = DateTimeLocalField("Ends", validators=[InputRequired("Enter a date and time.")])
    reason = StringField("Reason (optional)")

    def document(self) -> dict[str, Any]:
        """Wall-clock date-times, read in the sub account's timezone by the service."""
        return {
            "start": self.start.data.isoformat(),
            "end": self.end.data.isoformat(),
            "reason": _text(self.reason.data) or None,
        }


class PreviewForm(FlaskForm):
    """Which event type's open slots to preview: a GET form, so no CSRF token."""

    class Meta:
        csrf = False

    event_type = SelectField("Event type", coerce=int)
