"""The resources' shapes as the API shows them (the MCP server's answers are the API's).
Webhook payloads and stored events do not use them: their booking has a schema of its own
(``app.services.integrations.event_schema``), so a receiver never sees a shape change when the
API's does.

The answers that show part of a booking (the update's reduced form, a cancellation) are built
here from the same field declarations (``reduced_form``), so a length or format is stated once
and the reduced forms cannot drift from the full one. Lengths come from ``app.models.limits``,
the columns' own sizes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from marshmallow import Schema, fields, validate

from app.models import BookingStatus
from app.models.limits import (
    DESCRIPTION_MAX,
    EMAIL_MAX,
    LOCATION_MAX,
    NAME_MAX,
    PHONE_MAX,
    REASON_MAX,
    SEATS_MAX,
    TEAM_HOSTS_MAX,
    UID_MAX,
)
from app.models.types import MAX_ID
from app.scheduling.round_robin import AssignmentReason
from app.scheduling.timezones import format_utc
from app.services.availability.questions import RESPONSES_OPENAPI
from app.services.common.manage_links import LINK_LIFETIME_AFTER_END, manage_url
from app.validation import MAX_ATTENDEES, METADATA_OPENAPI, TimezoneField

STATUSES = [s.value for s in BookingStatus]
# Ids are PostgreSQL ``integer`` columns (the document's bounds; dumping never validates).
ID_RANGE = validate.Range(min=1, max=MAX_ID)


class UTCTimestamp(fields.DateTime):
    """An instant as UTC ISO 8601 with second precision and a trailing ``Z``."""

    def _serialize(self, value: datetime | None, attr: Any, obj: Any, **kwargs: Any) -> str | None:
        return None if value is None else format_utc(value)


class SlotSchema(Schema):
    """An open slot: in availability days, and suggested with a refused time."""

    start = UTCTimestamp(required=True)
    end = UTCTimestamp(required=True)
    # Only in availability, and only for an event type with seats (``seats`` > 1).
    seatsRemaining = fields.Integer(
        validate=validate.Range(min=1, max=SEATS_MAX),
        metadata={
            "description": "Event types with seats only: how many bookings the slot still "
            "takes (live holds count as taken seats)"
        },
    )


class AttendeeSchema(Schema):
    id = fields.Integer(dump_only=True, validate=ID_RANGE)
    email = fields.Email(validate=validate.Length(max=EMAIL_MAX))
    name = fields.String(validate=validate.Length(max=NAME_MAX))
    firstName = fields.String(
        attribute="first_name", allow_none=True, validate=validate.Length(max=NAME_MAX)
    )
    lastName = fields.String(
        attribute="last_name", allow_none=True, validate=validate.Length(max=NAME_MAX)
    )
    phone = fields.String(allow_none=True, validate=validate.Length(max=PHONE_MAX))
    timezone = TimezoneField()
    isOrganizer = fields.Boolean(attribute="is_organizer")
    createdAt = UTCTimestamp(attribute="created_at")
    updatedAt = UTCTimestamp(attribute="updated_at")
    manageUrl = fields.Function(
        manage_url,
        dump_only=True,
        metadata={
            "description": "The attendee's own link to see, cancel or reschedule the booking "
            f"(no account needed; it works until {LINK_LIFETIME_AFTER_END.days} days after the "
            "booking ends and is replaced when the business issues a new one). Hand it to the "
            "attendee.",
            "type": "string",
            "format": "uri",
        },
    )


class BookingHostSchema(Schema):
    """A host a booking is made with (``app.models.host``)."""

    id = fields.Integer(validate=ID_RANGE)
    name = fields.String(validate=validate.Length(max=NAME_MAX))
    email = fields.Email(allow_none=True, validate=validate.Length(max=EMAIL_MAX))


class BookingSchema(Schema):
    id = fields.Integer(dump_only=True, validate=ID_RANGE)
    uid = fields.String(dump_only=True, validate=validate.Length(min=1, max=UID_MAX))
    startTime = UTCTimestamp(attribute="start_at")
    endTime = UTCTimestamp(attribute="end_at")
    status = fields.String(validate=validate.OneOf(STATUSES))
    title = fields.String(validate=validate.Length(max=NAME_MAX))
    description = fields.String(allow_none=True, validate=validate.Length(max=DESCRIPTION_MAX))
    location = fields.String(allow_none=True, validate=validate.Length(max=LOCATION_MAX))
    timezone = TimezoneField()
    metadata = fields.Dict(attribute="meta", keys=fields.String(), metadata=METADATA_OPENAPI)
    attendees = fields.List(
        fields.Nested(AttendeeSchema), validate=validate.Length(max=MAX_ATTENDEES)
    )
    responses = fields.Dict(
        keys=fields.String(),
        metadata={
            "description": "The answers to its event type's questions, by question key, as "
            "they were given when it was made (`{}`: none asked or none answered)",
            **RESPONSES_OPENAPI,
        },
    )
    confirmedAt = UTCTimestamp(attribute="confirmed_at", allow_none=True)
    cancelledAt = UTCTimestamp(attribute="cancelled_at", allow_none=True)
    completedAt = UTCTimestamp(attribute="completed_at", allow_none=True)
    # Who the booking is with, and why (``docs/api.md``, "Hosts").
    hosts = fields.List(
        fields.Nested(BookingHostSchema), validate=validate.Length(min=1, max=TEAM_HOSTS_MAX)
    )
    assignmentReason = fields.String(
        attribute="assignment_reason",
        validate=validate.OneOf([reason.value for reason in AssignmentReason]),
    )


def reduced_form(
    full: type[Schema],
    name: str,
    shown: Sequence[str],
    doc: str,
    **replaced: fields.Field,
) -> type[Schema]:
    """A schema showing the fields ``shown`` of ``full``, in that order, with copies of
    ``full``'s own declarations (marshmallow's public ``Schema.declared_fields``: each instance
    holds its own copy of the class's declared fields). ``replaced`` gives a field its own
    declaration where the reduced form has always said something else (the document's
    component is named after ``name``)."""
    declarations = full().declared_fields
    declared = {field: replaced.get(field, declarations[field]) for field in shown}
    return type(name, (Schema,), {"__doc__": doc, "__module__": __name__, **declared})


# The reduced forms' ids were never marked read-only in the document; they stay as they were.
AttendeeBriefSchema = reduced_form(
    AttendeeSchema,
    "AttendeeBriefSchema",
    ("id", "email", "name", "createdAt", "updatedAt"),
    "An attendee as the update's reduced answer shows it.",
    id=fields.Integer(validate=ID_RANGE),
)

BookingUpdateResultSchema = reduced_form(
    BookingSchema,
    "BookingUpdateResultSchema",
    ("id", "startTime", "endTime", "status", "title", "description", "timezone", "attendees"),
    "The reduced booking form the update answers with.",
    id=fields.Integer(validate=ID_RANGE),
    attendees=fields.List(
        fields.Nested(AttendeeBriefSchema), validate=validate.Length(max=MAX_ATTENDEES)
    ),
)


class CancellationSchema(Schema):
    """What a cancel answers with: the booking's id, its new status and the reason kept."""

    id = fields.Integer(validate=ID_RANGE)
    status = fields.String(
        validate=validate.OneOf([BookingStatus.CANCELLED.value]),
        metadata={"description": "Always `cancelled`"},
    )
    cancelledAt = UTCTimestamp(attribute="cancelled_at")
    cancellationReason = fields.String(
        attribute="cancellation_reason", allow_none=True, validate=validate.Length(max=REASON_MAX)
    )
