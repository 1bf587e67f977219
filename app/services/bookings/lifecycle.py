"""A booking's life after it was made: confirmed by a person, marked completed or no-show once it
started, or completed by itself once it ended (``autoCompleteBookings``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.extensions import db
from app.models import ACTIVE_STATUSES, Booking, BookingStatus, CalendarSettings, SubAccount
from app.services.bookings.queries import get_booking
from app.services.common.errors import InvalidRequest
from app.services.common.locking import lock_calendar
from app.services.integrations.events import BookingEvent, BookingEventKind, emit


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


def confirm_booking(sub_account: SubAccount, booking_id: int, *, now: datetime) -> Booking:
    """A person confirms a pending booking (the dashboard); attendees and calendars hear of it
    through ``booking.confirmed``."""
    lock_calendar(sub_account.id)
    booking = get_booking(sub_account, booking_id)
    if booking.status != BookingStatus.PENDING:
        raise InvalidRequest(f"A {booking.status} booking cannot be confirmed")
    booking.status = BookingStatus.CONFIRMED
    booking.confirmed_at = now
    booking.updated_at = now
    booking.sequence += 1  # calendars show it as CONFIRMED now, no longer TENTATIVE
    db.session.flush()
    emit(db.session, BookingEvent(BookingEventKind.CONFIRMED, booking.id, sub_account.id, now))
    return booking


OUTCOMES = {
    BookingStatus.COMPLETED: BookingEventKind.COMPLETED,
    BookingStatus.NO_SHOW: BookingEventKind.NO_SHOW,
}


def record_outcome(
    sub_account: SubAccount, booking_id: int, outcome: BookingStatus, *, now: datetime
) -> Booking:
    """A person says how a booking that has started went: ``completed`` or ``no_show``."""
    if outcome not in OUTCOMES:
        raise InvalidRequest("The outcome is completed or no_show")
    lock_calendar(sub_account.id)
    booking = get_booking(sub_account, booking_id)
    if booking.status not in ACTIVE_STATUSES:
        raise InvalidRequest(f"A {booking.status} booking cannot be marked {outcome}")
    if booking.start_at > now:
        raise InvalidRequest("A booking can be marked once it has started")
    booking.status = outcome
    booking.completed_at = now
    booking.updated_at = now
    db.session.flush()
    emit(db.session, BookingEvent(OUTCOMES[outcome], booking.id, sub_account.id, now))
    return booking
