"""The event types an agent reads: what it needs to book each one right."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.models import HostAssignment, LocationKind
from app.models.limits import (
    DURATION_MAX_MINUTES,
    DURATION_MIN_MINUTES,
    HORIZON_MAX_DAYS,
    LOCATION_MAX,
    NAME_MAX,
    SEATS_MAX,
    TEAM_HOSTS_MAX,
)
from app.representations import ID_RANGE
from app.validation import TimezoneField

DURATION_RANGE = validate.Range(min=DURATION_MIN_MINUTES, max=DURATION_MAX_MINUTES)


class EventTypeHostSchema(Schema):
    """A host an event type's bookings may be made with: send its `id` as `hostId`."""

    id = fields.Integer(validate=ID_RANGE)
    name = fields.String(validate=validate.Length(max=NAME_MAX))


class EventTypeSchema(Schema):
    """An offered event type: book it with its `id` as `eventTypeId`."""

    id = fields.Integer(attribute="event_type.id", validate=ID_RANGE)
    name = fields.String(attribute="event_type.name", validate=validate.Length(max=NAME_MAX))
    duration = fields.Integer(
        attribute="event_type.duration",
        validate=DURATION_RANGE,
        metadata={"description": "Minutes a booking lasts"},
    )
    slotInterval = fields.Integer(
        attribute="slot_interval",
        validate=DURATION_RANGE,
        metadata={"description": "Minutes between the starts of offered slots"},
    )
    timezone = TimezoneField(
        metadata={
            "description": "The timezone of its working hours: availability counts its days in "
            "it unless a timezone is asked"
        }
    )
    locationKind = fields.String(
        attribute="event_type.location_kind",
        validate=validate.OneOf([kind.value for kind in LocationKind]),
        metadata={
            "description": "Where it happens: `google_meet` and `microsoft_teams` get a link "
            "made per booking (the booking's `location`); the others are `location` as written"
        },
    )
    location = fields.String(
        attribute="event_type.location",
        allow_none=True,
        validate=validate.Length(max=LOCATION_MAX),
        metadata={"description": "The address, number or link; null: none set"},
    )
    seats = fields.Integer(
        attribute="event_type.seats",
        validate=validate.Range(min=1, max=SEATS_MAX),
        metadata={"description": "Bookings one slot takes (1: one booking a slot)"},
    )
    minimumNoticeMinutes = fields.Integer(
        attribute="minimum_notice_minutes",
        validate=validate.Range(min=0),
        metadata={"description": "A booking starts at least this many minutes from now"},
    )
    bookingHorizonDays = fields.Integer(
        attribute="booking_horizon_days",
        validate=validate.Range(min=1, max=HORIZON_MAX_DAYS),
        metadata={"description": "A booking starts at most this many days ahead"},
    )
    assignment = fields.String(
        attribute="event_type.assignment",
        validate=validate.OneOf([kind.value for kind in HostAssignment]),
        metadata={
            "description": "`single`: one host; `round_robin`: one free host of `hosts` chosen "
            "per booking (or the one sent as `hostId`); `collective`: every host at once"
        },
    )
    hosts = fields.List(
        fields.Nested(EventTypeHostSchema),
        validate=validate.Length(min=1, max=TEAM_HOSTS_MAX),
    )
    questions = fields.Dict(
        keys=fields.String(),
        metadata={
            "description": "What a booking must answer, as the JSON Schema (draft 2020-12) of "
            "the create's `responses` object: one property per question in the order asked, "
            "its `title` the question; `required` lists the ones that must be answered; no "
            "other keys are taken",
            "additionalProperties": True,
        },
    )
