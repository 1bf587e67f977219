"""Webhook deliveries (``app.services.integrations.webhooks.deliveries``): the outbox handler
that makes one delivery per subscription, and one attempt of one delivery."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import settings
from app.extensions import db
from app.services.integrations.outbox import Delivery
from app.services.integrations.webhooks.deliveries import (
    SendOutcome,
    attempt,
    claim_attempt,
    enqueue_attempt,
    message_for,
    new_delivery,
    record_attempt,
    subscriptions_wanting,
)


def webhooks_delivery(delivery: Delivery, now: datetime) -> None:
    """Outbox handler: one delivery per active subscription that wants the event, each
    committed on its own: a delivery an earlier run made is skipped by its unique key without
    undoing the others. Each committed one is enqueued for the worker."""
    created = []
    with Session(db.engine) as session:
        for subscription_id in subscriptions_wanting(session, delivery):
            row = new_delivery(subscription_id, delivery.event_id, now)
            session.add(row)
            try:
                session.commit()
            except IntegrityError:  # made by an earlier run of this handler
                session.rollback()
                continue
            created.append(row.id)
    for delivery_id in created:
        enqueue_attempt(delivery_id, now)


def send_delivery(delivery_id: int, now: datetime) -> SendOutcome:
    """Make the delivery's next attempt, if it is pending and its turn, and record it
    (flushed; the caller commits, then enqueues ``retry_at``). The attempt is claimed and
    committed before the subscriber's server is waited on."""
    with Session(db.engine) as session:
        found = message_for(session, delivery_id, now)
    if isinstance(found, str):
        return SendOutcome(found)
    claimed = claim_attempt(delivery_id, now)
    db.session.commit()
    if not claimed:
        return SendOutcome("taken")  # another worker's attempt of it is under way
    answer = attempt(found, now, settings().webhook_timeout_seconds)
    return record_attempt(found, answer, now)
