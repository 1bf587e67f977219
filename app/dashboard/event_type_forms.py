"""The event type form. It only turns text into numbers and a profile id; what a value may be
(ranges, lengths, unique names, the sub account's profiles) is
``app.services.availability.event_types``'s to say, next to the field."""

from __future__ import annotations

from typing import Any

from flask_wtf import FlaskForm
from wtforms import BooleanField, FormField, IntegerField, SelectField, StringField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import InputRequired, Optional

from app.dashboard.forms import BookingLimitsForm, limits_of, reminder_rows, reminders_of_rows
from app.models import AvailabilityProfile, LocationKind

# Service document field → form field.
FIELDS = {
    "name": "name",
    "duration": "duration",
    "bufferBefore": "buffer_before",
    "bufferAfter": "buffer_after",
    "slotInterval": "slot_interval",
    "location": "location",
    "locationKind": "location_kind",
    "seats": "seats",
    "availabilityProfileId": "availability_profile_id",
    "minimumNoticeMinutes": "minimum_notice_minutes",
    "bookingHorizonDays": "booking_horizon_days",
}

WHOLE_NUMBER = "Enter a whole number."


def optional_id(value: Any) -> int | None:
    """A select's value: empty is "none chosen", anything else must be a number."""
    if value is None or value == "":
        return None
    return int(value)


def _kind_value(value: Any) -> str:
    """A location kind as the form shows it (the model's member or the posted text)."""
    return value.value if isinstance(value, LocationKind) else str(value)


def _minutes(label: str, **kwargs: Any) -> IntegerField:
    return IntegerField(label, invalid_value_message=WHOLE_NUMBER, **kwargs)


class EventTypeForm(FlaskForm):
    # Field names are the model's, so an event type fills the form (``obj=``).
    name = StringField("Name", validators=[InputRequired("Enter a name.")])
    duration = _minutes("Duration (minutes)", validators=[InputRequired(WHOLE_NUMBER)])
    buffer_before = _minutes("Buffer before (minutes)", default=0, validators=[Optional()])
    buffer_after = _minutes("Buffer after (minutes)", default=0, validators=[Optional()])
    slot_interval = _minutes(
        "Slot interval (minutes; empty: the duration)", validators=[Optional()]
    )
    location_kind = SelectField(
        "Where it happens",
        choices=[
            SelectChoice(LocationKind.IN_PERSON.value, "In person (the location is the address)"),
            SelectChoice(LocationKind.PHONE.value, "Phone (the location is the number)"),
            SelectChoice(LocationKind.GOOGLE_MEET.value, "Google Meet (a link made per booking)"),
            SelectChoice(
                LocationKind.MICROSOFT_TEAMS.value, "Microsoft Teams (a link made per booking)"
            ),
            SelectChoice(LocationKind.LINK.value, "A fixed link (the location is the link)"),
        ],
        coerce=_kind_value,
        default=LocationKind.IN_PERSON.value,
        validate_choice=False,
    )
    location = StringField("Location (optional)")
    seats = _minutes(
        "Seats (how many bookings one slot takes; empty or 1: one booking a slot)",
        default=1,
        validators=[Optional()],
    )
    availability_profile_id = SelectField(
        "Availability profile", coerce=optional_id, validate_choice=False
    )
    minimum_notice_minutes = _minutes("Minimum notice (minutes)", validators=[Optional()])
    booking_horizon_days = _minutes("Booking horizon (days ahead)", validators=[Optional()])
    booking_limits = FormField(BookingLimitsForm, "Caps of this event type")
    own_reminders = BooleanField("Reminders of its own (else the calendar settings' apply)")
    reminders = reminder_rows("Its reminders")

    def show_reminders(self, reminders: list[dict] | None) -> None:
        """The event type's own list in the rows (none: the calendar settings' apply)."""
        self.own_reminders.data = reminders is not None
        self.reminders.process(None, reminders or [])

    def offer_profiles(self, profiles: list[AvailabilityProfile]) -> None:
        """The sub account's profiles to choose from, after "the default"."""
        default = next((p.name for p in profiles if p.is_default), None)
        label = f"The default profile ({default})" if default else "The default profile"
        self.availability_profile_id.choices = [
            SelectChoice("", label),
            *(SelectChoice(str(p.id), p.name) for p in profiles),
        ]

    def document(self, had_own_reminders: bool = False) -> dict[str, Any]:
        """The service's document; blank buffers and seats are the schema's default (none), blank
        location is none.

        The reminders are the type's own when "Reminders of its own" is ticked, and also when a
        reminder is filled in on a type that followed the calendar settings (``had_own_reminders``
        false): a person who fills one in means it, and a reminder dropped because a box was
        left unticked would be lost without a word. Unticking the box of a type that had its
        own (``had_own_reminders``) gives it the calendar settings' again, its rows as they
        are."""
        document = {name: getattr(self, field).data for name, field in FIELDS.items()}
        document["name"] = (document["name"] or "").strip()
        document["location"] = (document["location"] or "").strip() or None
        for name in ("bufferBefore", "bufferAfter", "seats"):
            if document[name] is None:
                del document[name]
        document["bookingLimits"] = limits_of(self.booking_limits)
        filled = reminders_of_rows(self.reminders)
        own = self.own_reminders.data or (bool(filled) and not had_own_reminders)
        document["reminders"] = filled if own else None
        return document
