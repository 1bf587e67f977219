"""Booking writes addressed through the event type: create, and update/reschedule."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from app.api import examples
from app.api.auth import current_api_key, current_sub_account
from app.api.bookings.write_schemas import CreateBookingSchema, UpdateBookingSchema
from app.api.field_names import ContractNames
from app.api.smorest import Blueprint
from app.models import Booking, Permission
from app.models.types import utcnow
from app.representations import BookingSchema, BookingUpdateResultSchema
from app.services.bookings.writes import BookingChanges, NewBooking, create_booking, update_booking
from app.unit_of_work import perform

# What an agent (or a generated client, or a stateful fuzzer) can do next with a booking it made.
BOOKING_LINKS = {
    "GetBooking": {
        "operationId": "getBooking",
        "parameters": {"booking_id": "$response.body#/id"},
        "description": "Read the booking just made",
    },
    "UpdateBooking": {
        "operationId": "updateBooking",
        "parameters": {
            "event_type_id": "$request.path.event_type_id",
            "booking_id": "$response.body#/id",
        },
        "description": "Reschedule or edit it",
    },
    "CancelBooking": {
        "operationId": "cancelBooking",
        "parameters": {"booking_id": "$response.body#/id"},
        "description": "Cancel it",
    },
}

# Refusals naming a field of the body, in the contract's names (``app.api.field_names``).
CREATE_NAMES = ContractNames(CreateBookingSchema())
UPDATE_NAMES = ContractNames(UpdateBookingSchema())

blp = Blueprint(
    "event_type_bookings",
    __name__,
    url_prefix="/calendar/event-types",
    description="Creating and changing bookings of an event type",
)

REPLAY_HEADER = {
    "Idempotent-Replayed": {
        "description": "`true` when an earlier request with this idempotencyKey made the booking",
        "schema": {"type": "string", "enum": ["true"]},
    }
}


@blp.route("/<id:event_type_id>/bookings")
class EventTypeBookingViews(MethodView):
    @blp.requires(Permission.BOOK)
    @blp.arguments(CreateBookingSchema, example=examples.CREATE_BOOKING)
    @blp.response(201, BookingSchema, headers=REPLAY_HEADER, example=examples.BOOKING)
    @blp.error(
        400, "A body that does not parse, or a time that cannot be booked", examples.WRITE_REFUSED
    )
    @blp.error(404, "Event type not found", examples.not_found("Event type not found"))
    @blp.error(413, "Request body too large", examples.TOO_LARGE)
    @blp.calendars_unreachable()
    @blp.doc(
        operationId="createBooking",
        responses={201: {"links": BOOKING_LINKS}},
    )
    def post(self, new: NewBooking, event_type_id: int) -> tuple[Booking, dict[str, str]]:
        """Create a booking

        The booking starts `pending`. Reusing an idempotencyKey with the same body returns the
        original booking (header `Idempotent-Replayed: true`); with another body it is a 400.
        """
        with CREATE_NAMES.told_in_refusals():
            booking, replayed = perform(
                create_booking(
                    current_sub_account(),
                    event_type_id,
                    new,
                    now=utcnow(),
                    api_key_id=current_api_key().id,
                )
            )
        return booking, ({"Idempotent-Replayed": "true"} if replayed else {})


@blp.route("/<id:event_type_id>/bookings/<id:booking_id>")
class EventTypeBookingByIdViews(MethodView):
    @blp.requires(Permission.BOOK)
    @blp.arguments(UpdateBookingSchema, example=examples.UPDATE_BOOKING)
    @blp.response(200, BookingUpdateResultSchema, example=examples.UPDATED)
    @blp.error(
        400, "A body that does not parse, or a time that cannot be booked", examples.WRITE_REFUSED
    )
    @blp.error(
        404,
        "Event type or booking not found",
        {
            **examples.not_found("Booking not found"),
            **examples.not_found_as("eventTypeNotFound", "Event type not found"),
        },
    )
    @blp.error(413, "Request body too large", examples.TOO_LARGE)
    @blp.calendars_unreachable()
    @blp.doc(operationId="updateBooking")
    def put(self, changes: BookingChanges, event_type_id: int, booking_id: int) -> Any:
        """Update or reschedule a booking

        Only the fields sent change. A sent `attendees` list replaces the attendees (those
        whose email stays keep their id). Answers with the reduced booking form.
        """
        with UPDATE_NAMES.told_in_refusals():
            booking = perform(
                update_booking(
                    current_sub_account(), event_type_id, booking_id, changes, now=utcnow()
                )
            )
        return booking
