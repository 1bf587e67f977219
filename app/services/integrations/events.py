"""Domain events: what happened to a booking, recorded with it and told to whoever listens.

A use case calls ``emit``: the event becomes an ``outbox_events`` row in the same transaction as
the change (so it exists exactly when the change does), with the booking as the event left
it in the events' own versioned schema (``event_schema``, never the API's shape), and waits on
the session until the commit. Then every subscriber of the app the write ran in (its
``registry``, filled by ``create_app``) gets it, with its row id; the Celery dispatcher is one
of them and hands the id to the worker (``app.services.integrations.outbox`` delivers it to
the handlers: write-back, notifications, webhooks). A rollback drops both the row and the
in-process call; a failing subscriber is logged and affects neither the request nor the other
subscribers; an event whose dispatch was lost (a crash, a broker outage) is found by the
worker's sweep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, scoped_session

from app.models import Booking, BookingChange, BookingReminder, OutboxEvent
from app.services.common.after_commit import after_commit
from app.services.integrations.event_schema import booking_snapshot
from app.services.integrations.registry import IntegrationRegistry, Subscriber, app_registry

log = logging.getLogger(__name__)


class BookingEventKind(StrEnum):
    CREATED = "booking.created"
    RESCHEDULED = "booking.rescheduled"
    UPDATED = "booking.updated"
    CONFIRMED = "booking.confirmed"
    CANCELLED = "booking.cancelled"
    COMPLETED = "booking.completed"
    NO_SHOW = "booking.no_show"
    # A reminder of the booking went out (``app.services.bookings.reminders``): nothing changed.
    REMINDER = "booking.reminder"


class Actor(StrEnum):
    """Who made a change: an attendee from their manage link, or the business (its API keys,
    its dashboard, the service on its behalf). Webhooks carry it as ``actor``; mails and the
    dashboard's history say "by the attendee"."""

    ATTENDEE = "attendee"
    BUSINESS = "business"


@dataclass(frozen=True)
class BookingEvent:
    kind: BookingEventKind
    booking_id: int
    sub_account_id: int
    occurred_at: datetime
    changed: tuple[str, ...] = field(default=())
    event_id: int | None = None  # the outbox row's id, once committed
    actor: Actor = Actor.BUSINESS


def subscribe(subscriber: Subscriber) -> Subscriber:
    """Register ``subscriber`` with the current app for every booking event (usable as a
    decorator). The app's registry (``app.services.integrations.registry``) holds it."""
    return app_registry().subscribe(subscriber)


def unsubscribe(subscriber: Subscriber) -> None:
    app_registry().unsubscribe(subscriber)


def emit(session: Session | scoped_session[Any], booking_event: BookingEvent) -> OutboxEvent:
    """Record ``booking_event`` in the outbox and in the booking's history, in ``session``'s
    transaction, and queue it for the subscribers when that transaction commits; returns the
    outbox row (unflushed)."""
    booking = session.get(Booking, booking_event.booking_id)
    row = OutboxEvent(
        kind=str(booking_event.kind),
        sub_account_id=booking_event.sub_account_id,
        booking_id=booking_event.booking_id,
        changed=list(booking_event.changed),
        actor=str(booking_event.actor),
        snapshot=booking_snapshot(booking) if booking is not None else None,
        occurred_at=booking_event.occurred_at,
    )
    session.add(row)
    # The booking's history, kept as long as the booking (the outbox row goes once delivered
    # and old: ``RETENTION_DAYS``).
    session.add(
        BookingChange(
            booking_id=row.booking_id,
            kind=row.kind,
            actor=row.actor,
            changed=row.changed,
            occurred_at=row.occurred_at,
        )
    )
    # The subscribers are those of the app the write runs in, looked up now: the commit's
    # listener runs wherever SQLAlchemy calls it.
    after_commit(
        session,
        partial(_tell_subscribers, booking_event, row, app_registry()),
        f"telling the subscribers of {booking_event.kind}",
    )
    return row


def reminder_channels(session: Session, event_id: int) -> list[str]:
    """Where the reminder a ``booking.reminder`` event stands for goes (its
    ``booking_reminders`` row's channels; none for an event without one)."""
    channels = session.scalar(
        select(BookingReminder.channels).where(BookingReminder.event_id == event_id)
    )
    return list(channels or ())


def reminder_minutes(session: Session, event_id: int) -> int | None:
    """How long before the start the reminder of a ``booking.reminder`` event was due."""
    return session.scalar(
        select(BookingReminder.minutes_before).where(BookingReminder.event_id == event_id)
    )


def _tell_subscribers(
    booking_event: BookingEvent, row: OutboxEvent, registry: IntegrationRegistry
) -> None:
    """After the commit: every subscriber gets the event with its row's id; one that fails is
    logged and the others still get it."""
    booking_event = replace(booking_event, event_id=row.id)
    for subscriber in list(registry.subscribers):
        try:
            subscriber(booking_event)
        except Exception:
            log.exception("subscriber %r failed on %s", subscriber, booking_event.kind)
