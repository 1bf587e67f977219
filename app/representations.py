"""The resources' shapes as the API shows them, shared with whatever else shows them (webhook
payloads): a booking in a webhook is exactly the API's Booking."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from marshmallow import fields, validate

from app.compiled_dump import CompiledSchema, register_converter
from app.models import BookingStatus
from app.models.types import MAX_ID
from app.scheduling.timezones import format_utc
from app.validation import MAX_ATTENDEES, METADATA_OPENAPI, TimezoneField

STATUSES = [s.value for s in BookingStatus]
# Ids are PostgreSQL ``integer`` columns (the document's bounds; dumping never validates).
ID_RANGE = validate.Range(min=1, max=MAX_ID)


class UTCTimestamp(fields.DateTime):
    """An instant as UTC ISO 8601 with second precision and a trailing ``Z``."""

    def _serialize(self, value: datetime | None, attr: Any, obj: Any, **kwargs: Any) -> str | None:
        return None if value is None else format_utc(value)


register_converter(UTCTimestamp, format_utc)


class SlotSchema(CompiledSchema):
    """An open slot: in availability days, and suggested with a refused time."""

    start = UTCTimestamp(required=True)
    end = UTCTimestamp(required=True)


class AttendeeSchema(CompiledSchema):
    id = fields.Integer(dump_only=True, validate=ID_RANGE)
    email = fields.Email(validate=validate.Length(max=254))
    name = fields.String(validate=validate.Length(max=255))
    firstName = fields.String(
        attribute="first_name", allow_none=True, validate=validate.Length(max=255)
    )
    lastName = fields.String(
        attribute="last_name", allow_none=True, validate=validate.Length(max=255)
    )
    phone = fields.String(allow_none=True, validate=validate.Length(max=50))
    timezone = TimezoneField()
    isOrganizer = fields.Boolean(attribute="is_organizer")
    createdAt = UTCTimestamp(attribute="created_at")
    updatedAt = UTCTimestamp(attribute="updated_at")


class BookingSchema(CompiledSchema):
    id = fields.Integer(dump_only=True, validate=ID_RANGE)
    uid = fields.String(dump_only=True, validate=validate.Length(min=1, max=64))
    startTime = UTCTimestamp(attribute="start_at")
    endTime = UTCTimestamp(attribute="end_at")
    status = fields.String(validate=validate.OneOf(STATUSES))
    title = fields.String(validate=validate.Length(max=255))
    description = fields.String(allow_none=True, validate=validate.Length(max=5000))
    location = fields.String(allow_none=True, validate=validate.Length(max=500))
    timezone = TimezoneField()
    metadata = fields.Dict(attribute="meta", keys=fields.String(), metadata=METADATA_OPENAPI)
    attendees = fields.List(
        fields.Nested(AttendeeSchema), validate=validate.Length(max=MAX_ATTENDEES)
    )
    confirmedAt = UTCTimestamp(attribute="confirmed_at", allow_none=True)
    cancelledAt = UTCTimestamp(attribute="cancelled_at", allow_none=True)
    completedAt = UTCTimestamp(attribute="completed_at", allow_none=True)
