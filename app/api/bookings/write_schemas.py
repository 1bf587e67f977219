"""Request bodies of the booking writes, loaded into the services' inputs (their fields under
the inputs' names, the contract's camelCase as ``data_key``: ``app.api.field_names``). The
answers they give (the full booking, the update's reduced form, the cancellation) are shapes of
``app.representations``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from marshmallow import Schema, ValidationError, fields, post_load, validate, validates_schema

from app.api.field_names import CamelCaseSchema
from app.models.limits import DESCRIPTION_MAX, EMAIL_MAX, NAME_MAX, PHONE_MAX, REASON_MAX
from app.services.availability.questions import QUESTIONS_MAX, RESPONSES_OPENAPI
from app.services.bookings.writes import AttendeeInput, BookingChanges, NewBooking
from app.validation import (
    MAX_ATTENDEES,
    METADATA_KEY_MAX,
    METADATA_MAX_KEYS,
    METADATA_OPENAPI,
    METADATA_VALUE_MAX,
    InstantField,
    Text,
    TimezoneField,
    host_id_field,
    unstorable,
)


class Metadata(fields.Dict):
    """Flat key-value data: at most ``METADATA_MAX_KEYS`` keys of 1 to ``METADATA_KEY_MAX``
    characters; values are strings of up to ``METADATA_VALUE_MAX`` characters, numbers, booleans
    or null (no nesting). Errors name ``metadata`` (a bad key is not echoed back) or
    ``metadata.<key>``."""

    OPENAPI = METADATA_OPENAPI

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dict:
        result = super()._deserialize(value, attr, data, **kwargs)
        if len(result) > METADATA_MAX_KEYS:
            raise ValidationError(f"At most {METADATA_MAX_KEYS} keys.")
        for key, item in result.items():
            if not isinstance(key, str) or not 1 <= len(key) <= METADATA_KEY_MAX or unstorable(key):
                raise ValidationError(f"Keys must be strings of 1–{METADATA_KEY_MAX} characters.")
            if isinstance(item, str):
                if len(item) > METADATA_VALUE_MAX:
                    raise ValidationError({key: [f"At most {METADATA_VALUE_MAX} characters."]})
                if problem := unstorable(item):
                    raise ValidationError({key: [problem]})
            elif item is not None and not isinstance(item, bool | int | float):
                raise ValidationError({key: ["Values must be strings, numbers, booleans or null."]})
            elif isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 2**53:
                raise ValidationError({key: ["Integers must lie within ±2^53."]})
            elif isinstance(item, float) and not math.isfinite(item):
                raise ValidationError({key: ["Numbers must be finite."]})
        return result


class AttendeeInputSchema(CamelCaseSchema):
    email = fields.Email(required=True, validate=validate.Length(max=EMAIL_MAX))
    name = Text(validate=validate.Length(min=1, max=NAME_MAX))
    first_name = Text(allow_none=True, validate=validate.Length(max=NAME_MAX))
    last_name = Text(allow_none=True, validate=validate.Length(max=NAME_MAX))
    phone = Text(allow_none=True, validate=validate.Length(max=PHONE_MAX))
    timezone = TimezoneField(allow_none=True)

    @validates_schema
    def email_fits_once_normalized(self, data: dict[str, Any], **kwargs: Any) -> None:
        # Emails are stored lower-cased, and lower-casing can lengthen a string ("İ" → "i̇").
        if "email" in data and len(data["email"].strip().lower()) > EMAIL_MAX:
            raise ValidationError(f"Longer than {EMAIL_MAX} characters once lower-cased.", "email")

    @post_load
    def to_input(self, data: dict[str, Any], **kwargs: Any) -> AttendeeInput:
        return AttendeeInput(**data)


def _distinct_emails(attendees: list[AttendeeInput]) -> None:
    emails = [a.normalized_email for a in attendees]
    if len(set(emails)) != len(emails):
        raise ValidationError("Each attendee email may appear only once.")


ATTENDEES_VALIDATORS: list[Callable[[Any], Any]] = [
    validate.Length(min=1, max=MAX_ATTENDEES),
    _distinct_emails,
]
# What OpenAPI cannot say (uniqueItems compares whole objects, not one field of them).
ATTENDEES_DESCRIPTION = (
    f"1–{MAX_ATTENDEES} attendees, each email at most once (compared lower-cased); the first "
    "is the one the booking's title names"
)


class _BookingFields(CamelCaseSchema):
    start_time = InstantField(
        metadata={"description": ("ISO 8601; naive values are read in `timezone`")}
    )
    end_time = InstantField(
        metadata={"description": ("ISO 8601; after startTime, at most 24 h later")}
    )
    attendees = fields.List(
        fields.Nested(AttendeeInputSchema),
        validate=ATTENDEES_VALIDATORS,
        metadata={"description": ATTENDEES_DESCRIPTION},
    )
    timezone = TimezoneField(metadata={"description": ("IANA timezone of the booking")})
    title = Text(validate=validate.Length(min=1, max=NAME_MAX))
    description = Text(allow_none=True, validate=validate.Length(max=DESCRIPTION_MAX))
    metadata = Metadata()
    hold_token = Text(
        validate=validate.Length(min=1, max=NAME_MAX),
        metadata={
            "description": "The token of a slot hold (POST …/holds): the held time is not busy "
            "for this write, and the hold is consumed when it succeeds. A token naming no live "
            "hold of this event type holds nothing (the time rule applies as usual)."
        },
    )
    host_id = host_id_field(
        "One of the event type's hosts (a booking's `hosts[].id`): the booking is made "
        "with (moved to) that host when it is free, else refused with `host_unavailable` "
        "and that host's suggested slots. Without it a round-robin type chooses the host "
        '(docs/api.md, "Hosts").'
    )


class CreateBookingSchema(_BookingFields):
    start_time = InstantField(required=True)
    end_time = InstantField(required=True)
    attendees = fields.List(
        fields.Nested(AttendeeInputSchema),
        required=True,
        validate=ATTENDEES_VALIDATORS,
        metadata={"description": ATTENDEES_DESCRIPTION},
    )
    idempotency_key = Text(
        validate=validate.Length(min=1, max=NAME_MAX),
        metadata={"description": ("Retry key: the same key and body return the same booking")},
    )
    responses = fields.Dict(
        keys=fields.String(),
        validate=validate.Length(max=QUESTIONS_MAX),
        metadata={
            **RESPONSES_OPENAPI,
            "description": "Answers to the event type's questions, by question key: the "
            "event type's `questions` (GET /calendar/event-types) is the JSON Schema they "
            "must meet. A missing required answer, a malformed one or an unknown key is a 400 "
            "with `code: invalid_responses` naming each (`responses.<key>`); null is no answer",
        },
    )

    @post_load(pass_original=True)
    def to_new_booking(self, data: dict[str, Any], original: Any, **kwargs: Any) -> NewBooking:
        return NewBooking(**data, body=original)


class UpdateBookingSchema(_BookingFields):
    @post_load
    def to_changes(self, data: dict[str, Any], **kwargs: Any) -> BookingChanges:
        return BookingChanges(sent=frozenset(data), **data)


class CancelBookingSchema(Schema):
    reason = Text(allow_none=True, validate=validate.Length(max=REASON_MAX))
