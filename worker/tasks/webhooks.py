"""Webhook attempts: one task per attempt, the next one planned with its time; and the sweep
for attempts a dead worker or a lost message left behind."""

from __future__ import annotations

from celery import shared_task

from app.extensions import db
from app.jobs.webhooks import send_delivery
from app.models.types import utcnow
from app.services.integrations.webhooks.deliveries import (
    due_deliveries,
    enqueue_attempt,
    next_delivery_in_line,
)


@shared_task(name="webhooks.send")
def send(delivery_id: int) -> str:
    """One attempt of one delivery; a failure plans the next (enqueued once recorded)."""
    outcome = send_delivery(delivery_id, utcnow())
    db.session.commit()
    if outcome.retry_at is not None:
        enqueue_attempt(delivery_id, outcome.retry_at)
    # The booking's next delivery to this subscription, which waited for this one to end.
    following = next_delivery_in_line(delivery_id)
    db.session.commit()
    if following is not None:
        enqueue_attempt(following, utcnow())
    return outcome.status


@shared_task(name="webhooks.sweep")
def sweep() -> int:
    """Enqueue again the attempts that are overdue; returns how many."""
    now = utcnow()
    delivery_ids = due_deliveries(now)
    db.session.commit()
    for delivery_id in delivery_ids:
        enqueue_attempt(delivery_id, now)
    return len(delivery_ids)
