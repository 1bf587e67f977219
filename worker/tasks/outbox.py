"""Delivering outbox events: fan out to one task per handler, and sweep up what was missed or
is due to retry."""

from __future__ import annotations

from celery import shared_task

from app.extensions import db
from app.models.types import utcnow
from app.services.integrations.outbox import (
    handle_event,
    handlers_due,
    mark_delivered_if_done,
    next_in_line,
    undelivered_events,
)


@shared_task(name="outbox.deliver")
def deliver(event_id: int) -> None:
    """Hand event ``event_id`` to every handler that is due to have it."""
    for handler_name in handlers_due(event_id, utcnow()):
        handle.delay(event_id, handler_name)
    mark_delivered_if_done(event_id, utcnow())


@shared_task(name="outbox.handle")
def handle(event_id: int, handler_name: str) -> None:
    """One handler, one event; its outcome is recorded in this task's transaction. Once the
    handler is done with it, the booking's next event goes to the handler; an event whose
    turn has not come returns at once (the earlier one hands it over when done)."""
    ran = handle_event(event_id, handler_name, utcnow())
    mark_delivered_if_done(event_id, utcnow())
    # The record committed before the next event is looked for: one that found this event
    # unfinished a moment ago is then seen without a record, and handed over.
    db.session.commit()
    following = next_in_line(event_id, handler_name) if ran else None
    if following is not None:
        handle.delay(following, handler_name)


@shared_task(name="outbox.sweep")
def sweep() -> int:
    """Hand over again the events whose dispatch was lost or whose handlers are due to retry;
    returns how many."""
    event_ids = undelivered_events(utcnow())
    for event_id in event_ids:
        deliver.delay(event_id)
    return len(event_ids)
