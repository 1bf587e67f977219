"""Domain events: what happened to a booking, told to whoever subscribed, after the commit.

A use case calls ``emit``; the event waits on the session until its transaction commits, then
goes to every subscriber (notifications, webhooks, CalDAV write-back). A rollback drops it, so
nobody hears of a booking that does not exist; a failing subscriber is logged and does not
affect the request or the other subscribers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

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


def emit(session: Session, booking_event: BookingEvent) -> None:
    """Queue ``booking_event`` for delivery when ``session``'s transaction commits."""
    session.info.setdefault(_PENDING, []).append(booking_event)


@event.listens_for(Session, "after_commit")
def _deliver(session: Session) -> None:
    for booking_event in session.info.pop(_PENDING, []):
        for subscriber in list(_subscribers):
            try:
                subscriber(booking_event)
            except Exception:
                log.exception("subscriber %r failed on %s", subscriber, booking_event.kind)


@event.listens_for(Session, "after_soft_rollback")
def _discard(session: Session, previous_transaction: SessionTransaction) -> None:
    if not previous_transaction.nested:
        session.info.pop(_PENDING, None)
