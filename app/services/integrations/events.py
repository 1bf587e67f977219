"""Domain events: what happened to a booking, recorded with it and told to whoever listens.

A use case calls ``emit``: the event becomes an ``outbox_events`` row in the same transaction as
the change (so it exists exactly when the change does), and waits on the session until the
commit. Then every in-process subscriber gets it, with its row id; the Celery dispatcher is one
of them and hands the id to the worker (``app.services.integrations.outbox`` delivers it to
the handlers: write-back, notifications, webhooks). A rollback drops both the row and the
in-process call; a failing subscriber is logged and affects neither the request nor the other
subscribers; an event whose dispatch was lost (a crash, a broker outage) is found by the
worker's sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

from app.models import Attendee, Booking, OutboxEvent
from app.representations import BookingSchema
from app.scheduling.timezones import format_utc

log = logging.getLogger(__name__)

_PENDING = "pending_domain_events"


class BookingEventKind(StrEnum):
    CREATED = "booking.created"
    RESCHEDULED = "booking.rescheduled"
    UPDATED = "booking.updated"
    CONFIRMED = "booking.confirmed"
    CANCELLED = "booking.cancelled"
    COMPLETED = "booking.completed"
    NO_SHOW = "booking.no_show"


@dataclass(frozen=True)
class BookingEvent:
    kind: BookingEventKind
    booking_id: int
    sub_account_id: int
    occurred_at: datetime
    changed: tuple[str, ...] = field(default=())
    event_id: int | None = None  # the outbox row's id, once committed


Subscriber = Callable[[BookingEvent], Any]
_subscribers: list[Subscriber] = []


def subscribe(subscriber: Subscriber) -> Subscriber:
    """Register ``subscriber`` for every booking event (usable as a decorator)."""
    if subscriber not in _subscribers:
        _subscribers.append(subscriber)
    return subscriber


def unsubscribe(subscriber: Subscriber) -> None:
    if subscriber in _subscribers:
        _subscribers.remove(subscriber)


def booking_snapshot(booking: Booking) -> dict[str, Any]:
    """The booking as the API shows it, plus what messages about it need besides (its
    iCalendar sequence, the cancellation reason, when it was made)."""
    return {
        "booking": BookingSchema().dump(booking),
        "sequence": booking.sequence,
        "cancellationReason": booking.cancellation_reason,
        "createdAt": format_utc(booking.created_at),
        "updatedAt": format_utc(booking.updated_at),
    }


def booking_from_snapshot(snapshot: dict[str, Any], sub_account_id: int) -> Booking:
    """A detached ``Booking`` (never added to a session) of sub account ``sub_account_id`` as
    ``snapshot`` recorded it, for building the messages about that moment
    (``app.services.integrations.ical``, the emails)."""
    shown = snapshot["booking"]
    booking = Booking(
        id=shown["id"],
        sub_account_id=sub_account_id,
        uid=shown["uid"],
        status=shown["status"],
        sequence=snapshot["sequence"],
        title=shown["title"],
        description=shown["description"],
        location=shown["location"],
        timezone=shown["timezone"],
        meta=shown["metadata"],
        start_at=_instant(shown["startTime"]),
        end_at=_instant(shown["endTime"]),
        cancellation_reason=snapshot["cancellationReason"],
        created_at=_instant(snapshot["createdAt"]),
        updated_at=_instant(snapshot["updatedAt"]),
    )
    booking.attendees = [
        Attendee(
            email=a["email"],
            name=a["name"],
            first_name=a["firstName"],
            last_name=a["lastName"],
            phone=a["phone"],
            timezone=a["timezone"],
            is_organizer=a["isOrganizer"],
        )
        for a in shown["attendees"]
    ]
    return booking


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def emit(session: Session, booking_event: BookingEvent) -> None:
    """Record ``booking_event`` in the outbox, in ``session``'s transaction, and queue it for
    the subscribers when that transaction commits."""
    booking = session.get(Booking, booking_event.booking_id)
    row = OutboxEvent(
        kind=str(booking_event.kind),
        sub_account_id=booking_event.sub_account_id,
        booking_id=booking_event.booking_id,
        changed=list(booking_event.changed),
        snapshot=booking_snapshot(booking) if booking is not None else None,
        occurred_at=booking_event.occurred_at,
    )
    session.add(row)
    session.info.setdefault(_PENDING, []).append((booking_event, row))


@event.listens_for(Session, "after_commit")
def _deliver(session: Session) -> None:
    for booking_event, row in session.info.pop(_PENDING, []):
        booking_event = replace(booking_event, event_id=row.id)
        for subscriber in list(_subscribers):
            try:
                subscriber(booking_event)
            except Exception:
                log.exception("subscriber %r failed on %s", subscriber, booking_event.kind)


@event.listens_for(Session, "after_soft_rollback")
def _discard(session: Session, previous_transaction: SessionTransaction) -> None:
    if not previous_transaction.nested:
        session.info.pop(_PENDING, None)
