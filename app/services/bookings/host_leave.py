"""A host leaving: deactivated, with what becomes of their future bookings.

A host with bookings still to come is not deactivated without a choice (the dashboard asks):
the bookings stay theirs (the host still comes to them, or the business moves them one by one
from each booking's page), or they are cancelled, each as a cancel through the API would be
(the attendees are told, the calendars follow).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import ColumnElement, func, or_, select

from app.extensions import db
from app.models import ACTIVE_STATUSES, Booking, BookingHost, SubAccount
from app.services.availability.hosts import get_host, set_host_active
from app.services.bookings.writes import cancel_booking
from app.services.common.locking import lock_calendar


class FutureBookings(StrEnum):
    """What becomes of a leaving host's bookings still to come."""

    KEEP = "keep"
    CANCEL = "cancel"


def _future_of(host_id: int, now: datetime) -> tuple[ColumnElement[bool], ...]:
    """The conditions of a booking still to come that is made with the host."""
    return (
        Booking.status.in_(ACTIVE_STATUSES),
        Booking.start_at > now,
        or_(
            Booking.host_id == host_id,
            Booking.id.in_(select(BookingHost.booking_id).where(BookingHost.host_id == host_id)),
        ),
    )


def future_bookings_count(sub_account: SubAccount, host_id: int, now: datetime) -> int:
    """How many active bookings still to come are made with the host."""
    host = get_host(sub_account, host_id)
    return (
        db.session.scalar(
            select(func.count())
            .select_from(Booking)
            .where(Booking.sub_account_id == sub_account.id, *_future_of(host.id, now))
        )
        or 0
    )


def deactivate_host(
    sub_account: SubAccount,
    host_id: int,
    future: FutureBookings,
    *,
    now: datetime,
    reason: str | None = None,
) -> int:
    """Deactivate the host, keeping or cancelling its bookings still to come; returns how many
    were cancelled. Under the calendar's lock, so no booking is made with it meanwhile."""
    lock_calendar(sub_account.id)
    host = set_host_active(sub_account, host_id, False)
    if future is FutureBookings.KEEP:
        return 0
    booking_ids = list(
        db.session.scalars(
            select(Booking.id)
            .where(Booking.sub_account_id == sub_account.id, *_future_of(host.id, now))
            .order_by(Booking.start_at)
        )
    )
    for booking_id in booking_ids:
        cancel_booking(
            sub_account, booking_id, reason or f"{host.name} is no longer available", now=now
        )
    return len(booking_ids)
