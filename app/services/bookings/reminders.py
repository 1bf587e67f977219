"""Reminders: which each booking gets, when, and deciding each one exactly once.

- **The list**: the event type's ``reminders``, else its sub account's; each an offset before
  the start (``minutesBefore``) and channels (``attendeeEmail``, ``businessEmail``,
  ``webhook``).
- **Deciding**: every minute the worker's beat runs ``app.jobs.reminders.send_due_reminders``.
  A reminder of a pending or confirmed booking is due from ``start - minutesBefore``; once
  due it is decided, in one transaction per booking: a ``booking_reminders`` row (unique per
  booking, start and offset) and a ``booking.reminder`` event in the outbox, which the
  handlers turn into the mails and the webhook its channels name (``notifications.booking_mail``,
  ``webhooks.deliveries``), in line with the booking's other messages. A second sweep, or one
  after a crash, finds the row (or is refused by its unique key) and sends nothing again.
- **Not sent late**: a reminder whose time has passed by more than its own offset (the booking
  has started) is never sent: only bookings that have not started are looked at. When several
  reminders of one booking are due at once (it was booked or moved at short notice, or the
  worker was away), only the nearest goes out; the others are recorded as skipped, so a
  person gets one reminder, not a burst.
- **Reschedules**: the rows are keyed by the start they were for; a booking moved to a new
  start has its reminders planned again for that start. Cancelled bookings get none.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select

from app.extensions import db
from app.models import (
    ACTIVE_STATUSES,
    Booking,
    BookingReminder,
    CalendarSettings,
    EventType,
    Reminder,
    ReminderStatus,
    SubAccount,
)
from app.models.limits import REMINDER_MAX_MINUTES
from app.services.integrations.events import BookingEvent, BookingEventKind, emit

log = logging.getLogger(__name__)

# No reminder is further ahead than this: the sweep reads the bookings starting within it.
_SWEEP_AHEAD = timedelta(minutes=REMINDER_MAX_MINUTES)


def reminders_of(event_type: EventType, settings: CalendarSettings) -> list[Reminder]:
    """The reminders of the event type's bookings (its own list, else the sub account's),
    furthest ahead first."""
    listed = event_type.reminders if event_type.reminders is not None else settings.reminders
    return sorted(listed or [], key=lambda r: -r["minutesBefore"])


@dataclass(frozen=True)
class ReminderPlan:
    """One reminder of a booking's current time, as the dashboard shows it."""

    minutes_before: int
    channels: list[str]
    due_at: datetime
    status: str  # "planned", or a ReminderStatus once decided
    decided_at: datetime | None


def reminder_plan(booking: Booking, settings: CalendarSettings) -> list[ReminderPlan]:
    """The reminders of ``booking``'s current start: planned, sent or skipped."""
    decided = {
        r.minutes_before: r
        for r in db.session.scalars(
            select(BookingReminder).where(
                BookingReminder.booking_id == booking.id,
                BookingReminder.start_at == booking.start_at,
            )
        )
    }
    plans = []
    for reminder in reminders_of(booking.event_type, settings):
        minutes = reminder["minutesBefore"]
        row = decided.pop(minutes, None)
        plans.append(
            ReminderPlan(
                minutes,
                list(row.channels if row else reminder["channels"]),
                booking.start_at - timedelta(minutes=minutes),
                row.status if row else "planned",
                row.decided_at if row else None,
            )
        )
    for row in decided.values():  # decided under a list that has changed since
        plans.append(
            ReminderPlan(
                row.minutes_before,
                list(row.channels),
                booking.start_at - timedelta(minutes=row.minutes_before),
                row.status,
                row.decided_at,
            )
        )
    return sorted(plans, key=lambda p: p.due_at)


def bookings_with_reminders_near(now: datetime) -> list[int]:
    """The active bookings of active sub accounts starting within ``_SWEEP_AHEAD`` of ``now``:
    those whose reminders may be due, soonest first."""
    return list(
        db.session.scalars(
            select(Booking.id)
            .join(SubAccount, SubAccount.id == Booking.sub_account_id)
            .where(
                SubAccount.active.is_(True),
                Booking.status.in_(ACTIVE_STATUSES),
                Booking.start_at > now,
                Booking.start_at <= now + _SWEEP_AHEAD,
            )
            .order_by(Booking.start_at, Booking.id)
        )
    )


def decide_reminders(booking_id: int, now: datetime) -> int:
    """Decide the booking's due reminders: the nearest is sent (its ``booking.reminder`` event
    written), the others skipped; returns 1 if one was sent. Flushes; a unique key refuses a
    second decision of the same reminder (``IntegrityError``)."""
    booking = db.session.get(Booking, booking_id)
    if booking is None or booking.status not in ACTIVE_STATUSES or booking.start_at <= now:
        return 0
    settings = db.session.get(CalendarSettings, booking.sub_account_id)
    assert settings is not None  # every sub account has its settings
    decided = set(
        db.session.scalars(
            select(BookingReminder.minutes_before).where(
                BookingReminder.booking_id == booking.id,
                BookingReminder.start_at == booking.start_at,
            )
        )
    )
    due = [
        r
        for r in reminders_of(booking.event_type, settings)
        if r["minutesBefore"] not in decided
        and booking.start_at - timedelta(minutes=r["minutesBefore"]) <= now
    ]
    if not due:
        return 0
    nearest = min(due, key=lambda r: r["minutesBefore"])
    for reminder in due:
        row = BookingReminder(
            booking_id=booking.id,
            start_at=booking.start_at,
            minutes_before=reminder["minutesBefore"],
            channels=list(reminder["channels"]),
            status=ReminderStatus.SENT if reminder is nearest else ReminderStatus.SKIPPED,
            decided_at=now,
        )
        if reminder is nearest:
            event = emit(
                db.session,
                BookingEvent(BookingEventKind.REMINDER, booking.id, booking.sub_account_id, now),
            )
            db.session.flush()
            row.event_id = event.id
        db.session.add(row)
        db.session.flush()
    return 1
