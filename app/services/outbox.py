"""Delivering outbox events to their handlers, each at most once.

Handlers (CalDAV write-back, notifications, webhooks) register under a stable name. The worker
fans an event out to one task per handler; each runs in its own transaction, which also writes
the handler's receipt (``outbox_deliveries``), so a repeated delivery (a retry, the sweep, a
second worker) finds the receipt and does nothing. Effects outside the database must still be
safe to repeat, since a crash can come between them and the commit of the receipt.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import select

from app.extensions import db
from app.models import OutboxDelivery, OutboxEvent

Handler = Callable[[OutboxEvent], None]
_handlers: dict[str, Handler] = {}

# A committed event is handed to Celery at once; the sweep leaves it this long before it
# hands it over again (a second hand-over is harmless, just wasted work).
SWEEP_GRACE = timedelta(seconds=30)


def register_handler(name: str, handler: Handler) -> None:
    _handlers[name] = handler


def unregister_handler(name: str) -> None:
    _handlers.pop(name, None)


def handlers_due(event_id: int) -> list[str]:
    """The handlers that have not had event ``event_id`` yet."""
    done = set(
        db.session.scalars(
            select(OutboxDelivery.handler).where(OutboxDelivery.event_id == event_id)
        )
    )
    return [name for name in _handlers if name not in done]


def mark_delivered_if_done(event_id: int, now: datetime) -> bool:
    """Stamp the event delivered once every handler has its receipt; returns whether it is."""
    event = db.session.get(OutboxEvent, event_id)
    if event is None:
        return True
    if event.delivered_at is None and not handlers_due(event_id):
        event.delivered_at = now
        db.session.flush()
    return event.delivered_at is not None


def handle_event(event_id: int, handler_name: str, now: datetime) -> bool:
    """Run one handler on one event unless it already ran; returns whether it ran now.

    The event row is locked first (PostgreSQL), so two deliveries of one event to one handler
    cannot run side by side; the second then finds the first one's receipt.
    """
    event = db.session.get(OutboxEvent, event_id, with_for_update=True)
    handler = _handlers.get(handler_name)
    if event is None or handler is None:
        return False
    already = db.session.get(OutboxDelivery, (event_id, handler_name))
    if already is not None:
        return False
    handler(event)
    db.session.add(OutboxDelivery(event_id=event_id, handler=handler_name, delivered_at=now))
    db.session.flush()
    return True


def undelivered_events(now: datetime, limit: int = 500) -> list[int]:
    """Events a crash or a broker outage may have left behind: not delivered, and older than
    the grace period (oldest first)."""
    return list(
        db.session.scalars(
            select(OutboxEvent.id)
            .where(OutboxEvent.delivered_at.is_(None), OutboxEvent.occurred_at <= now - SWEEP_GRACE)
            .order_by(OutboxEvent.id)
            .limit(limit)
        )
    )
