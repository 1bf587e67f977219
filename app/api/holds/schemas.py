"""Slot hold request and answers."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, post_load, validate

from app.api.field_names import CamelCaseSchema
from app.models.limits import NAME_MAX
from app.representations import ID_RANGE, UTCTimestamp
from app.services.bookings.holds import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS, NewHold
from app.validation import InstantField, TimezoneField, host_id_field


class CreateHoldSchema(CamelCaseSchema):
    start_time = InstantField(
        required=True, metadata={"description": ("ISO 8601; naive values are read in `timezone`")}
    )
    end_time = InstantField(
        required=True, metadata={"description": ("ISO 8601; after startTime, at most 24 h later")}
    )
    timezone = TimezoneField(
        metadata={"description": ("IANA timezone for naive times (default: the calendar's)")}
    )
    ttl_seconds = fields.Integer(
        validate=validate.Range(min=1, max=MAX_TTL_SECONDS),
        metadata={
            "description": f"How long the hold lasts, in seconds (default {DEFAULT_TTL_SECONDS}, "
            f"at most {MAX_TTL_SECONDS})"
        },
    )

    host_id = host_id_field(
        "One of the event type's hosts: hold that host's time (refused with "
        "`host_unavailable` when that host is not free). Without it a round-robin type "
        "chooses the host, and the booking made with the hold's token goes to that host."
    )

    @post_load
    def to_new_hold(self, data: dict[str, Any], **kwargs: Any) -> NewHold:
        return NewHold(**data)


class HoldSchema(Schema):
    id = fields.Integer(attribute="hold.id", validate=ID_RANGE)
    eventTypeId = fields.Integer(attribute="hold.event_type_id", validate=ID_RANGE)
    startTime = UTCTimestamp(attribute="hold.start_at")
    endTime = UTCTimestamp(attribute="hold.end_at")
    expiresAt = UTCTimestamp(
        attribute="hold.expires_at",
        metadata={"description": ("The hold stops counting at this second")},
    )
    holdToken = fields.String(
        attribute="token",
        validate=validate.Length(min=1, max=NAME_MAX),
        metadata={
            "pattern": r"^hold_[A-Za-z0-9_-]+$",
            "description": "Send it as `holdToken` when creating the booking; shown only here",
        },
    )


class ReleasedHoldSchema(Schema):
    id = fields.Integer(validate=ID_RANGE)
    status = fields.Constant(
        "released",
        metadata={"type": "string", "enum": ["released"], "description": "Always `released`"},
    )
    releasedAt = UTCTimestamp(attribute="released_at")
