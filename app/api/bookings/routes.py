"""Bookings by id: list, read and cancel."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from app.api import examples
from app.api.auth import current_sub_account
from app.api.bookings.schemas import BookingListArgsSchema, BookingListSchema, BookingSchema
from app.api.bookings.write_schemas import CancelBookingSchema
from app.api.field_names import ContractNames
from app.api.smorest import Blueprint
from app.extensions import db
from app.models import Booking, Permission
from app.models.types import utcnow
from app.representations import CancellationSchema
from app.services.bookings.queries import (
    BookingListQuery,
    ShownBooking,
    list_bookings,
    show_booking,
)
from app.services.bookings.writes import cancel_booking

# Refusals naming a parameter, in the contract's names (``app.api.field_names``).
LIST_NAMES = ContractNames(BookingListArgsSchema())

blp = Blueprint(
    "bookings", __name__, url_prefix="/calendar/bookings", description="Bookings of the calendar"
)


@blp.route("")
class BookingViews(MethodView):
    @blp.requires(Permission.GET_BOOKINGS)
    @blp.arguments(BookingListArgsSchema, location="query", as_kwargs=False)
    @blp.response(200, BookingListSchema, example=examples.BOOKING_LIST)
    @blp.error(
        400,
        "A parameter that does not parse or a window that cannot be read",
        examples.INVALID_QUERY,
    )
    @blp.doc(operationId="listBookings")
    def get(self, query: BookingListQuery) -> dict[str, Any]:
        """List bookings

        Ordered by start time, then id. `startDate` and `endDate` accept an ISO 8601 instant
        or a date; a naive value is read in the sub account's timezone.
        """
        with LIST_NAMES.told_in_refusals():
            bookings, total = list_bookings(current_sub_account(), query)
        return {"bookings": bookings, "total": total, "limit": query.limit, "offset": query.offset}


@blp.route("/<id:booking_id>")
class BookingByIdViews(MethodView):
    @blp.requires(Permission.GET_BOOKINGS)
    @blp.response(200, BookingSchema, example=examples.BOOKING)
    @blp.error(404, "Booking not found", examples.not_found("Booking not found"))
    @blp.doc(operationId="getBooking")
    def get(self, booking_id: int) -> ShownBooking:
        """Get one booking"""
        return show_booking(current_sub_account(), booking_id)

    @blp.requires(Permission.CANCEL)
    @blp.arguments(CancelBookingSchema, required=False, example=examples.CANCEL_BOOKING)
    @blp.response(200, CancellationSchema, example=examples.CANCELLATION)
    @blp.error(
        400, "A body that does not parse, or a booking no longer active", examples.CANCEL_REFUSED
    )
    @blp.error(404, "Booking not found", examples.not_found("Booking not found"))
    @blp.error(413, "Request body too large", examples.TOO_LARGE)
    @blp.doc(operationId="cancelBooking")
    def delete(self, body: dict[str, Any], booking_id: int) -> Booking:
        """Cancel a booking

        Only pending or confirmed bookings can be cancelled; the time is free at once.
        """
        booking = cancel_booking(
            current_sub_account(), booking_id, body.get("reason"), now=utcnow()
        )
        db.session.commit()
        return booking
