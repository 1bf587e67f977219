"""Booking resources as the spec shows them, and the list query."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, post_load, validate

from app.api.field_names import CamelCaseSchema
from app.models.limits import EMAIL_MAX, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX
from app.models.types import MAX_ID
from app.representations import STATUSES, BookingSchema
from app.services.bookings.queries import BookingListQuery
from app.validation import InstantField, Text

MAX_OFFSET = 2**31 - 1


class BookingListSchema(Schema):
    bookings = fields.List(
        fields.Nested(BookingSchema), required=True, validate=validate.Length(max=LIST_LIMIT_MAX)
    )
    total = fields.Integer(
        required=True,
        validate=validate.Range(min=0),
        metadata={"description": "Count of all matches"},
    )
    limit = fields.Integer(required=True, validate=validate.Range(min=1, max=LIST_LIMIT_MAX))
    offset = fields.Integer(required=True, validate=validate.Range(min=0, max=MAX_OFFSET))


class BookingListArgsSchema(CamelCaseSchema):
    start_date = InstantField(
        metadata={"description": "Bookings starting at or after this instant (a date: its start)"}
    )
    end_date = InstantField(
        metadata={"description": "Bookings ending at or before this instant (a date: its end)"}
    )
    status = fields.String(validate=validate.OneOf(STATUSES))
    event_type_id = fields.Integer(validate=validate.Range(min=1, max=MAX_ID))
    email = Text(validate=validate.Length(min=1, max=EMAIL_MAX))
    limit = fields.Integer(
        load_default=LIST_LIMIT_DEFAULT, validate=validate.Range(min=1, max=LIST_LIMIT_MAX)
    )
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0, max=MAX_OFFSET))

    @post_load
    def to_query(self, data: dict[str, Any], **kwargs: Any) -> BookingListQuery:
        return BookingListQuery(**data)
