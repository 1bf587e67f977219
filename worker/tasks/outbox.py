"""Delivering outbox events: fan out to one task per handler, and sweep up what was missed or
is due to retry."""

from __future__ import annotations

from celery import shared_task

from app.jobs.outbox import handle_event
from app.models.types import utcnow
from app.services.integrations.outbox import (
    handlers_due,
    mark_delivered_if_done,
    undelivered_events,
    waiting_for_earlier,
)


@shared_task(name="outbox.deliver")
def deliver(event_id: int) -> None:
    """Hand event ``event_id`` to every handler that is due to have it."""
    for handler_name in handlers_due(event_id, utcnow()):
        handle.delay(event_id, handler_name)
    mark_delivered_if_done(event_id, utcnow())


# How a task whose event's turn has not come waits while an earlier event of the booking is
# under way (a mail sent, a POST answered, a calendar written): it asks again after FIRST_WAIT_S,
# then twice as long each time, at most ASKS times (about 6 s in all), then leaves the event to
# the sweep. Quick at first, so a booking's rapid changes follow each other closely; bounded,
# so an earlier event stalled on a slow server costs a few tasks, not one a second.
FIRST_WAIT_S = 0.1
ASKS = 6


@shared_task(name="outbox.handle")
def handle(event_id: int, handler_name: str, waited: int = 0) -> None:
    """One handler, one event; its outcome is recorded in this task's transaction. When an
    earlier event of the booking is still under way for the handler, asks again later (a
    bounded number of times)."""
    ran = handle_event(event_id, handler_name, utcnow())
    mark_delivered_if_done(event_id, utcnow())
    if not ran and waited < ASKS and waiting_for_earlier(event_id, handler_name):
        handle.apply_async((event_id, handler_name, waited + 1), countdown=FIRST_WAIT_S * 2**waited)


@shared_task(name="outbox.sweep")
def sweep() -> int:
    """Enqueue again the events whose dispatch was lost or whose handlers are due to retry;
    returns how many."""
    event_ids = undelivered_events(utcnow())
    for event_id in event_ids:
        deliver.delay(event_id)
    return len(event_ids)
