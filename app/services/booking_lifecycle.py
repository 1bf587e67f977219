"""Bookings moving on by themselves once their time has passed."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.extensions import db
from app.models import Booking, BookingStatus, CalendarSettings
from app.services.events import BookingEvent, BookingEventKind, emit


def complete_finished_bookings(now: datetime) -> list[int]:
    """Move confirmed bookings that have ended to ``completed``, in the calendars whose
    ``autoCompleteBookings`` setting asks for it; returns their ids.

    Pending bookings are left as they are: nobody confirmed them, so the service cannot tell
    whether they took place (a person marks them in the dashboard). Rows are locked as they
    are read (PostgreSQL), so two overlapping runs complete each booking once.
    """
    finished = db.session.scalars(
        select(Booking)
        .join(CalendarSettings, CalendarSettings.sub_account_id == Booking.sub_account_id)
        .where(
            CalendarSettings.auto_complete_bookings.is_(True),
            Booking.status == BookingStatus.CONFIRMED,
            Booking.end_at <= now,
        )
        .order_by(Booking.id)
        .with_for_update(of=Booking, skip_locked=True)
    ).all()
    for booking in finished:
        booking.status = BookingStatus.COMPLETED
        booking.completed_at = now
        booking.updated_at = now
        emit(
            db.session,
            BookingEvent(BookingEventKind.COMPLETED, booking.id, booking.sub_account_id, now),
        )
    db.session.flush()
    return [booking.id for booking in finished]
