"""The reminders that are due, decided one booking at a time
(``app.services.bookings.reminders``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.exc import IntegrityError

from app.extensions import db
from app.services.bookings.reminders import bookings_with_reminders_near, decide_reminders


def send_due_reminders(now: datetime) -> int:
    """Decide every due reminder; returns how many were sent (their events written). Each
    booking's reminders are decided and committed on their own, so one refused (another sweep
    decided them first) leaves the others."""
    booking_ids = bookings_with_reminders_near(now)
    db.session.commit()
    sent = 0
    for booking_id in booking_ids:
        try:
            sent += decide_reminders(booking_id, now)
            db.session.commit()
        except IntegrityError:  # another sweep decided this booking's reminders first
            db.session.rollback()
    return sent
