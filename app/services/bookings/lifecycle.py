"""A booking's life after it was made: confirmed by a person, marked completed or no-show once it
started, or completed by itself once it ended (``autoCompleteBookings``).

The predicates (``is_active``, ``can_confirm``, ``has_started``, ``can_record_outcome``) are
the rules the actions enforce, asked beforehand by whoever offers the actions (the dashboard's
booking page), so an offered button and the service's answer cannot disagree."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.extensions import db
from app.models import ACTIVE_STATUSES, Booking, BookingStatus, CalendarSettings, SubAccount
from app.services.bookings.queries import get_booking
from app.services.common.errors import InvalidRequest
from app.services.common.locking import lock_calendar
from app.services.integrations.events import BookingEvent, BookingEventKind, emit


def is_active(booking: Booking) -> bool:
    """Pending or confirmed: a booking that can still be moved, cancelled or marked (the
    update and cancel writes refuse the others with ``booking_not_active``)."""
    return booking.status in ACTIVE_STATUSES


def can_confirm(booking: Booking) -> bool:
    """Only a pending booking can be confirmed (``confirm_booking``)."""
    return booking.status == BookingStatus.PENDING


def has_started(booking: Booking, now: datetime) -> bool:
    """Whether the booking's start has come: before it, nobody can say how it went."""
    return booking.start_at <= now


def can_record_outcome(booking: Booking, now: datetime) -> bool:
    """Whether ``record_outcome`` would take an outcome for the booking now: active and
    started."""
    return is_active(booking) and has_started(booking, now)


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
    if not can_confirm(booking):
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
    if not is_active(booking):
        raise InvalidRequest(f"A {booking.status} booking cannot be marked {outcome}")
    if not has_started(booking, now):
        raise InvalidRequest("A booking can be marked once it has started")
    booking.status = outcome
    booking.completed_at = now
    booking.updated_at = now
    db.session.flush()
    emit(db.session, BookingEvent(OUTCOMES[outcome], booking.id, sub_account.id, now))
    return booking
