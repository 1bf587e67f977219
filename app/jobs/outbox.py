"""One handler on one outbox event (``app.services.integrations.outbox``): the reads end
before the handler runs, so no transaction stays open while it waits on another server, and
its outcome is recorded with its own writes after."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError

from app.extensions import db
from app.services.integrations.outbox import (
    DeliveryFailed,
    delivery_due,
    record_outcome,
    retry_base_now,
)
from app.services.integrations.registry import app_registry

log = logging.getLogger(__name__)


def handle_event(
    event_id: int, handler_name: str, now: datetime, *, retry_base: timedelta | None = None
) -> bool:
    """Run one handler on one event unless it is done with it, waiting to retry or waiting
    for an earlier event; returns whether it ran now. Leaves the outcome (and the handler's
    writes) in the session for the caller to commit."""
    handler = app_registry().handlers.get(handler_name)
    delivery = delivery_due(event_id, handler_name, now) if handler is not None else None
    if handler is None or delivery is None:
        db.session.rollback()
        return False
    db.session.commit()  # end the reads: no transaction waits on the handler's server

    error = None
    try:
        handler(delivery, now)
    except DeliveryFailed as failure:
        error = failure.message
    except SQLAlchemyError:
        raise  # the database itself: the task's retry policy takes it
    except Exception as exc:
        log.exception("outbox handler %s failed on event %s", handler_name, event_id)
        db.session.rollback()
        error = f"unexpected error: {type(exc).__name__}: {exc}"
    base = retry_base if retry_base is not None else retry_base_now()
    return record_outcome(event_id, handler_name, delivery.attempt, error, now, base)
