"""Delivering outbox events to their handlers: each handler's work is recorded once done.

Handlers (CalDAV write-back, notifications, webhooks) register under a stable name, on the app
(``app.services.integrations.registry``; ``create_app`` registers them). The worker
fans an event out to one task per handler; each records its outcome in ``outbox_deliveries``,
in the transaction of the handler's own database writes, so a repeated delivery (a retry, the
sweep, a second worker) of a delivered event finds the record and does nothing. Effects outside
the database must still be safe to repeat: a crash can come between them and the commit of the
record, and two deliveries that overlap both run the handler (at least once, not exactly once).

One booking's events reach each handler in the order they happened, however many workers run:
a handler is given an event only once it is done with every earlier event of the same booking
(delivered or given up). So the mail about a reschedule never leaves before the mail about the
booking, nor is a webhook delivery made before the earlier one's. An event whose turn has not
come is asked about again while the earlier one is under way (``waiting_for_earlier``: its
task asks again, backing off, a bounded number of times, ``worker.tasks.outbox``), and by the
sweep after that, or while the earlier one waits to retry.

A handler that fails (raises ``DeliveryFailed``, or anything unexpected) is offered the event
again after 1, 2, 4 … minutes (at most an hour apart, with jitter) by the sweep, up to
``MAX_ATTEMPTS`` attempts; then its record says ``failed`` with the last error, and the event
no longer waits for it.

No transaction stays open while a handler works (it may wait on a remote server): the
delivery's reads end before the handler runs (the job: ``app.jobs.outbox``).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Exists, exists, func, select
from sqlalchemy.dialects.postgresql import insert

from app.config import settings
from app.counters import DELIVERIES
from app.extensions import db
from app.models import DeliveryStatus, OutboxDelivery, OutboxEvent
from app.services.integrations.events import Actor
from app.services.integrations.registry import Handler, app_registry

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10
RETRY_CAP = timedelta(hours=1)
_ERROR_LENGTH = 2000


@dataclass(frozen=True)
class Delivery:
    """What a handler is given: the event, detached from any session, and which attempt this is
    (1 for the first)."""

    event_id: int
    kind: str
    booking_id: int
    sub_account_id: int
    changed: tuple[str, ...]
    occurred_at: datetime
    attempt: int
    # The booking as the event left it, in the events' schema (``event_schema``; read it with
    # its functions, which know the versions).
    snapshot: dict | None = None
    # Who made the change (``events.Actor``'s values); events older than the column: business.
    actor: str = Actor.BUSINESS


class DeliveryFailed(Exception):
    """The handler could not do its work this time (a server away, say). What it wrote to the
    database before raising is kept; the event is offered to it again later."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def register_handler(name: str, handler: Handler, kinds: frozenset[str] | None = None) -> None:
    """Register ``handler`` under ``name`` for the events of ``kinds`` (None: every kind) with
    the current app (its registry, which ``create_app`` fills with the app's own handlers)."""
    app_registry().register_handler(name, handler, kinds)


def unregister_handler(name: str) -> None:
    app_registry().unregister_handler(name)


def registered_handlers() -> list[str]:
    """The current app's handler names, in registration order."""
    return list(app_registry().handlers)


def retry_delay(attempts: int, base: timedelta) -> timedelta:
    """How long to wait after the ``attempts``-th failed attempt: doubling from ``base``, at
    most an hour, ±20 % (so retries of many failures do not arrive together). The schedule of
    outbox handlers, webhook attempts and calendar sync retries."""
    delay = min(base * 2 ** (attempts - 1), RETRY_CAP)
    return delay * random.uniform(0.8, 1.2)


def handlers_due(event_id: int, now: datetime) -> list[str]:
    """The handlers taking the event's kind that are not done with event ``event_id`` and not
    waiting to retry."""
    event = db.session.get(OutboxEvent, event_id)
    if event is None:
        return []
    records = {
        record.handler: record
        for record in db.session.scalars(
            select(OutboxDelivery).where(OutboxDelivery.event_id == event_id)
        )
    }
    return [name for name in app_registry().handlers_of(event.kind) if _due(records.get(name), now)]


def _due(record: OutboxDelivery | None, now: datetime) -> bool:
    if record is None:
        return True
    return not record.finished and (record.next_attempt_at is None or record.next_attempt_at <= now)


def mark_delivered_if_done(event_id: int, now: datetime) -> bool:
    """Stamp the event delivered once every handler is done with it (delivered or given up);
    returns whether it is. The event's row is locked first: two handlers finishing at once
    would otherwise each miss the other's uncommitted record, and neither would stamp it
    (leaving it to the sweep, and to the backlog metrics, for minutes). ``FOR NO KEY UPDATE``,
    not ``FOR UPDATE``: a handler's delivery record already holds a key-share lock on the
    event (its foreign key) for the handler's whole transaction, which ``FOR UPDATE`` would
    wait for, mail and HTTP included (measured: a third of the worker's throughput)."""
    event = db.session.scalar(
        select(OutboxEvent)
        .where(OutboxEvent.id == event_id)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    )
    if event is None:
        return True
    if event.delivered_at is None:
        finished = set(
            db.session.scalars(
                select(OutboxDelivery.handler).where(
                    OutboxDelivery.event_id == event_id,
                    OutboxDelivery.status != DeliveryStatus.RETRYING,
                )
            )
        )
        if all(name in finished for name in app_registry().handlers_of(event.kind)):
            event.delivered_at = now
            db.session.flush()
    return event.delivered_at is not None


def delivery_due(event_id: int, handler_name: str, now: datetime) -> Delivery | None:
    """The event as the handler is given it, if the handler takes its kind and is due to have
    it now: not done with it, not waiting to retry, and done with every earlier event of the
    booking (None otherwise). Reads only; ``app.jobs.outbox.handle_event`` runs the handler."""
    event = db.session.get(OutboxEvent, event_id)
    if event is None or not app_registry().takes(handler_name, event.kind):
        return None
    record = db.session.get(OutboxDelivery, (event_id, handler_name))
    if not _due(record, now) or _earlier_unfinished(event, handler_name):
        return None  # done, waiting to retry, or not its turn yet
    return Delivery(
        event_id=event.id,
        kind=event.kind,
        booking_id=event.booking_id,
        sub_account_id=event.sub_account_id,
        changed=tuple(event.changed or ()),
        occurred_at=event.occurred_at,
        attempt=1 if record is None else record.attempts + 1,
        snapshot=event.snapshot,
        actor=event.actor or Actor.BUSINESS,
    )


def retry_base_now() -> timedelta:
    """The first retry's delay (``OUTBOX_RETRY_BASE_SECONDS``)."""
    return settings().duration("outbox_retry_base_seconds")


def _earlier_event(
    event: OutboxEvent, handler_name: str, *, with_record: ColumnElement[bool]
) -> bool:
    """Whether an earlier undelivered event of the event's booking, of a kind the handler
    takes, has a record for the handler such as ``with_record`` (an ``EXISTS`` clause over
    it) says."""
    kinds = app_registry().handler_kinds.get(handler_name)
    of_its_kinds = [OutboxEvent.kind.in_(kinds)] if kinds is not None else []
    found = db.session.scalar(
        select(OutboxEvent.id)
        .where(
            OutboxEvent.booking_id == event.booking_id,
            OutboxEvent.id < event.id,
            OutboxEvent.delivered_at.is_(None),
            *of_its_kinds,
            with_record,
        )
        .limit(1)
    )
    return found is not None


def _record_of(handler_name: str, *conditions: Any) -> Exists:
    """``EXISTS`` a record of the handler for the outer event, meeting ``conditions``."""
    of_the_event = OutboxDelivery.event_id == OutboxEvent.id
    return exists().where(of_the_event, OutboxDelivery.handler == handler_name, *conditions)


def _earlier_unfinished(event: OutboxEvent, handler_name: str) -> bool:
    """Whether the handler is not done yet with an earlier event of the event's booking."""
    done = _record_of(handler_name, OutboxDelivery.status != DeliveryStatus.RETRYING)
    return _earlier_event(event, handler_name, with_record=~done)


def waiting_for_earlier(event_id: int, handler_name: str) -> bool:
    """Whether the event's turn with the handler comes soon: it has not had the event yet, and
    no earlier event of the booking waits to retry with it (an earlier one under way, queued or
    just done). An earlier event waiting to retry leaves this one to the sweep instead."""
    event = db.session.get(OutboxEvent, event_id)
    if (
        event is None
        or not app_registry().takes(handler_name, event.kind)
        or db.session.get(OutboxDelivery, (event_id, handler_name)) is not None
    ):
        return False
    retrying = _record_of(handler_name, OutboxDelivery.status == DeliveryStatus.RETRYING)
    return not _earlier_event(event, handler_name, with_record=retrying)


def record_outcome(
    event_id: int,
    handler_name: str,
    attempt: int,
    error: str | None,
    now: datetime,
    retry_base: timedelta,
) -> bool:
    """The handler's outcome on its record, in the handler's transaction (its writes kept
    with it). Another delivery of the same event may have recorded one meanwhile (a broker's
    redelivery, the sweep): the row is made if missing, without a conflict, then locked and
    updated, so neither delivery's writes are undone; a failure never overwrites an outcome
    that is final (delivered or given up). Returns True: the handler ran."""
    DELIVERIES.labels(handler_name, "delivered" if error is None else "failed").inc()
    db.session.execute(
        insert(OutboxDelivery)
        .values(event_id=event_id, handler=handler_name, status=DeliveryStatus.RETRYING, attempts=0)
        .on_conflict_do_nothing()
    )
    record = db.session.get(
        OutboxDelivery, (event_id, handler_name), with_for_update=True, populate_existing=True
    )
    assert record is not None  # made above, or by the other delivery
    if error is not None and record.finished:
        return True  # the other delivery's final outcome stands
    record.attempts = max(attempt, record.attempts)
    if error is None:
        record.status = DeliveryStatus.DELIVERED
        record.delivered_at = now
        record.last_error = None
        record.next_attempt_at = None
    elif attempt >= MAX_ATTEMPTS:
        record.status = DeliveryStatus.FAILED
        record.last_error = error[:_ERROR_LENGTH]
        record.next_attempt_at = None
        log.warning(
            "outbox handler %s gave up on event %s after %s attempts: %s",
            handler_name,
            event_id,
            attempt,
            error,
        )
    else:
        record.status = DeliveryStatus.RETRYING
        record.last_error = error[:_ERROR_LENGTH]
        record.next_attempt_at = now + retry_delay(attempt, retry_base)
    db.session.flush()
    return True


def backlog(now: datetime) -> tuple[int, float]:
    """How many events some handler has not had yet, and the oldest one's age in seconds (0
    when there is none): the worker's lag, for monitoring."""
    count, oldest = db.session.execute(
        select(func.count(), func.min(OutboxEvent.occurred_at)).where(
            OutboxEvent.delivered_at.is_(None)
        )
    ).one()
    return count, (now - oldest).total_seconds() if oldest is not None else 0.0


def _due_undelivered(at: datetime, since: timedelta) -> list[ColumnElement[bool]]:
    """Not done, and at ``at`` older than ``since`` with no handler waiting for its retry's
    time."""
    waiting = exists().where(
        OutboxDelivery.event_id == OutboxEvent.id,
        OutboxDelivery.status == DeliveryStatus.RETRYING,
        OutboxDelivery.next_attempt_at > at,
    )
    return [OutboxEvent.delivered_at.is_(None), OutboxEvent.occurred_at <= at - since, ~waiting]


def undelivered_events(
    now: datetime, limit: int = 500, *, grace: timedelta | None = None
) -> list[int]:
    """Events a crash or a broker outage may have left behind, or whose handlers are due to
    retry: not done, older than the grace period, no handler waiting (oldest first)."""
    # A committed event is handed to Celery at once; the sweep leaves it this long before it
    # enqueues it again (a second enqueueing is harmless, just wasted work).
    since = grace if grace is not None else settings().duration("outbox_sweep_grace_seconds")
    return list(
        db.session.scalars(
            select(OutboxEvent.id)
            .where(*_due_undelivered(now, since))
            .order_by(OutboxEvent.id)
            .limit(limit)
        )
    )


def waiting_for_workers(now: datetime, longer_than: timedelta) -> int:
    """How many events have waited for a worker longer than ``longer_than``: not done, and
    already due ``longer_than`` ago (written by then, no handler waiting for a retry's time
    since). A worker that takes tasks gets each within the sweep's grace and period, so these
    wait on workers that take nothing (health)."""
    due = _due_undelivered(now - longer_than, timedelta(0))
    count = db.session.scalar(select(func.count()).select_from(OutboxEvent).where(*due))
    assert count is not None  # a count is one row
    return count
