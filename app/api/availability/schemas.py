"""Availability query and the days it answers with."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, post_load, validate

from app.api import examples
from app.api.field_names import CamelCaseSchema
from app.models.limits import DURATION_MAX_MINUTES, DURATION_MIN_MINUTES
from app.models.types import MAX_ID
from app.representations import SlotSchema
from app.services.availability.open_time import AvailabilityQuery
from app.validation import DURATION_MINUTES, InstantField, TimezoneField, host_id_field


class AvailabilityArgsSchema(CamelCaseSchema):
    start_date = InstantField(
        required=True,
        metadata={
            "description": "Start of the window: an instant, or a date (its start)",
            "example": examples.DAY.isoformat(),
        },
    )
    end_date = InstantField(
        required=True,
        metadata={
            "description": "End of the window: an instant, or a date (its end)",
            "example": examples.DAY.isoformat(),
        },
    )
    event_type_id = fields.Integer(
        validate=validate.Range(min=1, max=MAX_ID),
        metadata={"example": examples.DEMO_EVENT_TYPE_ID},
    )
    duration = fields.Integer(
        validate=DURATION_MINUTES,
        metadata={
            "description": f"Slot length in minutes ({DURATION_MIN_MINUTES}–{DURATION_MAX_MINUTES})"
        },
    )
    timezone = TimezoneField(
        metadata={"description": ("IANA timezone for dates and day grouping")},
    )

    host_id = host_id_field(
        "One of the event type's hosts: that host's open slots alone. Without it, a "
        "round-robin type's slots are those any of its hosts can take, a collective "
        "type's those all of them can."
    )

    @post_load
    def to_query(self, data: dict[str, Any], **kwargs: Any) -> AvailabilityQuery:
        return AvailabilityQuery(**data)


# A day's slots at most: a 25-hour day (DST) of 5-minute slots every 5 minutes.
MAX_DAY_SLOTS = 300


class AvailabilityDaySchema(Schema):
    date = fields.Date(required=True)
    slots = fields.List(
        fields.Nested(SlotSchema), required=True, validate=validate.Length(max=MAX_DAY_SLOTS)
    )
