"""Delivering booking events to webhook subscriptions, at least once.

The ``webhooks`` outbox handler (``app.jobs.webhooks.webhooks_delivery``) turns an event into
one ``webhook_deliveries`` row per active subscription that wants it (unique per event and
subscription, so a repeated handler run adds none) and enqueues each for the worker.
``app.jobs.webhooks.send_delivery`` makes one attempt: a JSON POST signed
per Standard Webhooks (``webhook-id`` = ``evt_<outbox event id>``, the same for every attempt
and every resend, so receivers de-duplicate on it), recorded in ``webhook_attempts`` (status,
time, the first bytes of the answer, or the error). The body is
``{"type", "timestamp", "eventId", "sequence", "actor", "data": {"booking"}}``, the booking as the
event stored it in the events' own schema (``app.services.integrations.event_schema``), never
re-rendered through the API's shape, so an API change cannot alter what receivers get.

- **In order**: one subscription gets one booking's deliveries in the order of its events: a
  delivery waits while an earlier one of the same booking is pending (in flight, or retrying),
  and one finishing enqueues the next (``next_delivery_in_line``). ``sequence`` (the
  booking's iCalendar SEQUENCE as the event left it: it rises with every change a calendar
  shows) lets a receiver order them too, and drop one older than what it holds. ``actor``
  says who made the change: ``attendee`` (from their manage link) or ``business``.
- **Retries**: a failed attempt (no answer within the timeout, a refused connection, any status
  but 2xx; redirects are not followed) is tried again after 30 s, 1, 2, 4 … minutes (at most an
  hour apart, ±20 % jitter), until 24 hours after the event; then the delivery is ``failed``.
- **Disabling**: a subscription whose attempts have all failed for ``WEBHOOK_DISABLE_AFTER_HOURS``
  (72 by default) is disabled; its pending deliveries are then failed. ``enable`` turns it back
  on; ``resend`` sends a delivery again.
- **Nothing lost**: each planned attempt is handed to Celery with its time (``eta``); the sweep
  (``due_deliveries``) enqueues again any attempt overdue by more than the lease
  (``WEBHOOK_LEASE_SECONDS``, 5 minutes): a worker that died mid-attempt, a lost message. The
  attempt in flight then sends once more; the receiver de-duplicates by ``webhook-id``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session
from standardwebhooks import Webhook

from app.config import settings
from app.extensions import db
from app.models import (
    Booking,
    OutboxEvent,
    ReminderChannel,
    WebhookAttempt,
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookSubscription,
)
from app.scheduling.timezones import format_utc
from app.services.common.encryption import SecretUnreadable, decrypt_secret
from app.services.common.errors import NotFound
from app.services.common.lookups import get_checked
from app.services.integrations.event_schema import booking_data, snapshot_booking
from app.services.integrations.events import (
    Actor,
    BookingEventKind,
    reminder_channels,
    reminder_minutes,
)
from app.services.integrations.outbound.addresses import UnsafeUrl, resolve_target
from app.services.integrations.outbound.transport import Answer, post
from app.services.integrations.outbox import Delivery, retry_delay
from app.services.integrations.registry import Dispatcher, app_registry
from app.services.integrations.webhooks.subscriptions import allow_private, require_https

log = logging.getLogger(__name__)

HANDLER_NAME = "webhooks"
GIVE_UP_AFTER = timedelta(hours=24)
_EARLY = timedelta(seconds=5)  # clocks of worker machines differ a little


class DeliveryNotFound(NotFound):
    message = "Webhook delivery not found"


def set_dispatcher(dispatcher: Dispatcher | None) -> None:
    """Set the current app's enqueueing of planned attempts to the worker: (delivery id,
    when). The Celery app sets one (``celery_init_app``); without it attempts wait for the
    sweep."""
    app_registry().set_dispatcher(dispatcher)


def enqueue_attempt(delivery_id: int, when: datetime) -> None:
    """Give the worker a committed delivery's attempt planned for ``when``, through the
    current app's dispatcher."""
    for dispatcher in list(app_registry().dispatchers):
        try:
            dispatcher(delivery_id, when)
        except Exception:  # the broker away: the sweep enqueues it later
            log.exception("webhook delivery %s could not be handed to the worker", delivery_id)


def subscriptions_wanting(session: Session, delivery: Delivery) -> list[int]:
    """The active subscriptions of the event's sub account that want its kind (none for a
    reminder whose channels leave out webhooks)."""
    if delivery.kind == BookingEventKind.REMINDER and ReminderChannel.WEBHOOK not in (
        reminder_channels(session, delivery.event_id)
    ):
        return []  # a reminder by mail only
    return [
        s.id
        for s in session.scalars(
            select(WebhookSubscription).where(
                WebhookSubscription.sub_account_id == delivery.sub_account_id,
                WebhookSubscription.active.is_(True),
            )
        )
        if s.wants(delivery.kind)
    ]


def new_delivery(subscription_id: int, event_id: int, now: datetime) -> WebhookDelivery:
    """A delivery of the event to the subscription, due now (unique per event and
    subscription: a second one is refused by the database)."""
    return WebhookDelivery(
        subscription_id=subscription_id,
        event_id=event_id,
        status=WebhookDeliveryStatus.PENDING,
        attempts=0,
        next_attempt_at=now,
        created_at=now,
    )


@dataclass(frozen=True)
class Message:
    delivery_id: int
    subscription_id: int
    url: str
    secret: str | None
    msg_id: str
    body: bytes
    created_at: datetime


@dataclass(frozen=True)
class SendOutcome:
    status: str
    retry_at: datetime | None = None  # the next attempt, to enqueue once committed


def message_for(session: Session, delivery_id: int, now: datetime) -> Message | str:
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None:
        return "missing"
    if delivery.status != WebhookDeliveryStatus.PENDING:
        return delivery.status
    if delivery.next_attempt_at is not None and delivery.next_attempt_at > now + _EARLY:
        return "not due"  # a stale or repeated message; the planned attempt comes later
    subscription = delivery.subscription
    event = session.get(OutboxEvent, delivery.event_id)
    assert event is not None  # the delivery's event (a foreign key)
    if _earlier_pending(session, delivery.subscription_id, event) is not None:
        return "waiting"  # for the booking's earlier delivery, whose end hands this one over
    if event.snapshot is not None:
        shown = snapshot_booking(event.snapshot)  # the booking as the event left it
        sequence = event.snapshot["sequence"]
    else:  # an event stored before snapshots were: the booking as it is now
        booking = session.get(Booking, event.booking_id)
        assert booking is not None  # the event's booking (a foreign key)
        shown, sequence = booking_data(booking), booking.sequence
    try:
        secret = decrypt_secret(subscription.encrypted_secret, settings().secret_keys)
    except SecretUnreadable:
        secret = None
    payload: dict[str, Any] = {
        "type": event.kind,
        "timestamp": format_utc(event.occurred_at),
        "eventId": f"evt_{event.id}",
        "sequence": sequence,
        "actor": event.actor or Actor.BUSINESS,
        "data": {"booking": shown},
    }
    if event.kind == BookingEventKind.REMINDER:
        payload["reminder"] = {"minutesBefore": reminder_minutes(session, event.id)}
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return Message(
        delivery_id=delivery.id,
        subscription_id=subscription.id,
        url=subscription.url,
        secret=secret,
        msg_id=f"evt_{event.id}",
        body=body,
        created_at=delivery.created_at,
    )


def claim_attempt(delivery_id: int, now: datetime) -> bool:
    """Claim the delivery's due attempt (the caller commits): its next attempt moves a lease
    on, so a second enqueueing of it meanwhile (a predecessor's end and its own message, say)
    finds it not due and sends nothing; a worker dying in the attempt leaves it to the sweep."""
    lease = settings().duration("webhook_lease_seconds")
    won = db.session.execute(
        update(WebhookDelivery)
        .where(
            WebhookDelivery.id == delivery_id,
            WebhookDelivery.status == WebhookDeliveryStatus.PENDING,
            or_(
                WebhookDelivery.next_attempt_at.is_(None),
                WebhookDelivery.next_attempt_at <= now + _EARLY,
            ),
        )
        .values(next_attempt_at=now + lease)
        .execution_options(synchronize_session=False)
    )
    return won.rowcount == 1  # type: ignore[attr-defined]  # an UPDATE's CursorResult


def _earlier_pending(session: Session, subscription_id: int, event: OutboxEvent) -> int | None:
    """A pending delivery to the subscription of an earlier event of the event's booking."""
    return session.scalar(
        select(WebhookDelivery.id)
        .join(OutboxEvent, OutboxEvent.id == WebhookDelivery.event_id)
        .where(
            WebhookDelivery.subscription_id == subscription_id,
            WebhookDelivery.status == WebhookDeliveryStatus.PENDING,
            OutboxEvent.booking_id == event.booking_id,
            OutboxEvent.id < event.id,
        )
        .limit(1)
    )


def next_delivery_in_line(delivery_id: int) -> int | None:
    """Once delivery ``delivery_id`` has ended (succeeded or failed): the subscription's pending
    delivery of the booking's next event, which waited for it."""
    delivery = db.session.get(WebhookDelivery, delivery_id)
    if delivery is None or delivery.status == WebhookDeliveryStatus.PENDING:
        return None
    event = db.session.get(OutboxEvent, delivery.event_id)
    assert event is not None  # the delivery's event (a foreign key)
    return db.session.scalar(
        select(WebhookDelivery.id)
        .join(OutboxEvent, OutboxEvent.id == WebhookDelivery.event_id)
        .where(
            WebhookDelivery.subscription_id == delivery.subscription_id,
            WebhookDelivery.status == WebhookDeliveryStatus.PENDING,
            OutboxEvent.booking_id == event.booking_id,
            OutboxEvent.id > event.id,
        )
        .order_by(OutboxEvent.id)
        .limit(1)
    )


def signed_headers(secret: str, msg_id: str, body: bytes, now: datetime) -> dict[str, str]:
    """Standard Webhooks headers for ``body`` (signature over ``id.timestamp.body``)."""
    signature = Webhook(secret).sign(msg_id, now, body.decode())
    return {
        "content-type": "application/json",
        "user-agent": "calendar-booking-webhooks/1",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }


def attempt(message: Message, now: datetime, timeout: float) -> Answer:
    if message.secret is None:
        return Answer(None, 0, error="the secret cannot be decrypted with this SECRET_KEY")
    try:
        target = resolve_target(
            message.url, require_https=require_https(), allow_private=allow_private()
        )
    except UnsafeUrl as err:
        return Answer(None, 0, error=f"refused: {err.message}")
    headers = signed_headers(message.secret, message.msg_id, message.body, now)
    return post(target, message.body, headers, timeout)


def record_attempt(message: Message, answer: Answer, now: datetime) -> SendOutcome:
    """The attempt, and what follows from it, in one transaction (a write first)."""
    db.session.add(
        WebhookAttempt(
            delivery_id=message.delivery_id,
            attempted_at=now,
            status_code=answer.status,
            duration_ms=answer.duration_ms,
            response_excerpt=answer.excerpt,
            error=answer.error,
        )
    )
    db.session.flush()
    delivery = db.session.get(WebhookDelivery, message.delivery_id)
    subscription = db.session.get(WebhookSubscription, message.subscription_id)
    # The attempt just flushed refers to the delivery (a foreign key), and so holds it and,
    # through it, its subscription.
    assert delivery is not None and subscription is not None
    delivery.attempts += 1
    delivery.last_status_code = answer.status
    delivery.last_error = answer.error or (None if answer.ok else f"HTTP {answer.status}")
    if answer.ok:
        delivery.status = WebhookDeliveryStatus.SUCCEEDED
        delivery.finished_at = now
        delivery.next_attempt_at = None
        subscription.failing_since = None
        db.session.flush()
        return SendOutcome(delivery.status)
    subscription.failing_since = subscription.failing_since or now
    wait = retry_delay(
        delivery.attempts,
        settings().duration("webhook_retry_base_seconds"),
    )
    if now + wait > delivery.created_at + GIVE_UP_AFTER:
        delivery.status = WebhookDeliveryStatus.FAILED
        delivery.finished_at = now
        delivery.next_attempt_at = None
    else:
        delivery.next_attempt_at = now + wait
    disable_after = settings().duration("webhook_disable_after_hours")
    if subscription.active and now - subscription.failing_since >= disable_after:
        _disable(
            subscription,
            now,
            f"every attempt failed since {format_utc(subscription.failing_since)}",
        )
    db.session.flush()
    return SendOutcome(delivery.status, delivery.next_attempt_at)


def _disable(subscription: WebhookSubscription, now: datetime, reason: str) -> None:
    log.warning("webhook subscription %s disabled: %s", subscription.id, reason)
    subscription.active = False
    subscription.disabled_at = now
    subscription.disabled_reason = reason
    db.session.execute(
        update(WebhookDelivery)
        .where(
            WebhookDelivery.subscription_id == subscription.id,
            WebhookDelivery.status == WebhookDeliveryStatus.PENDING,
        )
        .values(
            status=WebhookDeliveryStatus.FAILED,
            finished_at=now,
            next_attempt_at=None,
            last_error="subscription disabled",
        )
        .execution_options(synchronize_session="fetch")
    )


def due_deliveries(now: datetime, limit: int = 500) -> list[int]:
    """Pending deliveries whose attempt is overdue by more than the lease (a worker died, a
    message was lost). Claims them: their next attempt is set to now, so the next sweep leaves
    them alone for another lease."""
    lease = settings().duration("webhook_lease_seconds")
    ids = list(
        db.session.scalars(
            select(WebhookDelivery.id)
            .where(
                WebhookDelivery.status == WebhookDeliveryStatus.PENDING,
                WebhookDelivery.next_attempt_at <= now - lease,
            )
            .order_by(WebhookDelivery.next_attempt_at)
            .limit(limit)
        )
    )
    if ids:
        db.session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id.in_(ids))
            .values(next_attempt_at=now)
            .execution_options(synchronize_session=False)
        )
    return ids


def resend(delivery_id: int, now: datetime) -> WebhookDelivery:
    """Send a delivery again (the same ``webhook-id``), whatever became of it. The caller
    commits, then enqueues it (``enqueue_attempt``)."""
    delivery = db.session.get(WebhookDelivery, delivery_id)
    if delivery is None:
        raise DeliveryNotFound()
    delivery.status = WebhookDeliveryStatus.PENDING
    delivery.created_at = now  # a new 24 hours of retries
    delivery.finished_at = None
    delivery.next_attempt_at = now
    db.session.flush()
    return delivery


@dataclass(frozen=True)
class DeliveryRecord:
    """A delivery with the event it carries and each of its attempts, oldest first."""

    delivery: WebhookDelivery
    event_kind: str
    attempts: list[WebhookAttempt]


def delivery_log(subscription_id: int, limit: int = 50) -> list[DeliveryRecord]:
    """The subscription's latest deliveries, newest first."""
    rows = db.session.execute(
        select(WebhookDelivery, OutboxEvent.kind)
        .join(OutboxEvent, OutboxEvent.id == WebhookDelivery.event_id)
        .where(WebhookDelivery.subscription_id == subscription_id)
        .order_by(WebhookDelivery.id.desc())
        .limit(limit)
    ).all()
    attempts: dict[int, list[WebhookAttempt]] = {d.id: [] for d, _ in rows}
    if rows:
        for attempt in db.session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.delivery_id.in_(list(attempts)))
            .order_by(WebhookAttempt.id)
        ):
            attempts[attempt.delivery_id].append(attempt)
    return [DeliveryRecord(d, kind, attempts[d.id]) for d, kind in rows]


def get_subscription_delivery(subscription_id: int, delivery_id: int) -> WebhookDelivery:
    """The delivery, if it belongs to the subscription (which the caller has scoped)."""
    return get_checked(
        WebhookDelivery,
        delivery_id,
        lambda d: d.subscription_id == subscription_id,
        DeliveryNotFound,
    )
