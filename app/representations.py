"""The resources' shapes as the API shows them, shared with whatever else shows them (webhook
payloads): a booking in a webhook is exactly the API's Booking."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from marshmallow import fields, validate

from app.compiled_dump import CompiledSchema, register_converter
from app.models import BookingStatus
from app.scheduling.timezones import format_utc

STATUSES = [s.value for s in BookingStatus]


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
    id = fields.Integer(dump_only=True)
    email = fields.String()
    name = fields.String()
    firstName = fields.String(attribute="first_name", allow_none=True)
    lastName = fields.String(attribute="last_name", allow_none=True)
    phone = fields.String(allow_none=True)
    timezone = fields.String()
    isOrganizer = fields.Boolean(attribute="is_organizer")
    createdAt = UTCTimestamp(attribute="created_at")
    updatedAt = UTCTimestamp(attribute="updated_at")


class BookingSchema(CompiledSchema):
    id = fields.Integer(dump_only=True)
    uid = fields.String(dump_only=True)
    startTime = UTCTimestamp(attribute="start_at")
    endTime = UTCTimestamp(attribute="end_at")
    status = fields.String(validate=validate.OneOf(STATUSES))
    title = fields.String()
    description = fields.String(allow_none=True)
    location = fields.String(allow_none=True)
    timezone = fields.String()
    metadata = fields.Dict(attribute="meta", keys=fields.String())
    attendees = fields.List(fields.Nested(AttendeeSchema))
    confirmedAt = UTCTimestamp(attribute="confirmed_at", allow_none=True)
    cancelledAt = UTCTimestamp(attribute="cancelled_at", allow_none=True)
    completedAt = UTCTimestamp(attribute="completed_at", allow_none=True)
