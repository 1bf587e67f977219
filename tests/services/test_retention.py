"""The retention (``RETENTION_DAYS``, ``app.jobs.retention``): delivered outbox
events and mail messages older than the retention are deleted in bounded batches; what a worker
may still look at, bookings and their history are kept; a booking's history is read through an
index of its own table."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import event, func, select, text

from app.extensions import db
from app.jobs.retention import purge_old_records
from app.models import (
    Booking,
    MailMessage,
    OutboxDelivery,
    OutboxEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookSubscription,
)
from app.models.types import utcnow
from app.services.bookings.queries import booking_history
from app.services.integrations.events import BookingEvent, BookingEventKind, emit
from tests.factories import Tenant, make_booking, make_outbox_event

pytestmark = pytest.mark.date_sensitive

DAYS = 30  # RETENTION_DAYS's default


def old_event(booking: Booking, *, days: float, delivered: bool = True) -> int:
    """An outbox event of ``booking`` that happened ``days`` ago, delivered then (with its
    handlers' records) or still waiting."""
    when = utcnow() - timedelta(days=days)
    row = make_outbox_event(booking, when, delivered_at=when if delivered else None)
    if delivered:
        for handler in ("notifications", "webhooks"):
            db.session.add(OutboxDelivery(event_id=row.id, handler=handler, delivered_at=when))
        db.session.commit()
    return row.id


def mail(tenant: Tenant, *, days: float, key: str) -> int:
    message = MailMessage(
        dedupe_key=key,
        sub_account_id=tenant.sub_account_id,
        kind="booking.created",
        recipient="pat@example.test",
        subject="Booked",
        message_id=f"<{key}@service.test>",
        text_body="Booked",
        html_body="<p>Booked</p>",
        status="sent",
        created_at=utcnow() - timedelta(days=days),
    )
    db.session.add(message)
    db.session.commit()
    return message.id


def webhook_delivery(tenant: Tenant, event_id: int, status: str) -> int:
    subscription = db.session.scalar(select(WebhookSubscription)) or WebhookSubscription(
        sub_account_id=tenant.sub_account_id,
        name="crm",
        url="https://crm.example.test/hooks",
        events=["*"],
        encrypted_secret="unused",
    )
    delivery = WebhookDelivery(subscription=subscription, event_id=event_id, status=status)
    db.session.add(delivery)
    db.session.flush()
    db.session.add(WebhookAttempt(delivery_id=delivery.id, attempted_at=utcnow(), duration_ms=12))
    db.session.commit()
    return delivery.id


def remaining(model, ids: list[int]) -> set[int]:
    db.session.expire_all()
    return set(db.session.scalars(select(model.id).where(model.id.in_(ids))))


@pytest.fixture
def booking(app, tenant) -> Booking:
    return make_booking(tenant, utcnow() - timedelta(days=60))


def test_delivered_events_older_than_the_retention_go_with_their_records(app, booking):
    old = [old_event(booking, days=DAYS + 1), old_event(booking, days=DAYS + 5)]
    purged = purge_old_records(utcnow())
    assert (purged.outbox_events, purged.finished) == (2, True)
    assert remaining(OutboxEvent, old) == set()
    assert db.session.scalar(select(func.count()).select_from(OutboxDelivery)) == 0


def test_recent_and_undelivered_events_are_kept(app, booking):
    recent = old_event(booking, days=DAYS - 1)
    waiting = old_event(booking, days=DAYS + 10, delivered=False)
    purge_old_records(utcnow())
    assert remaining(OutboxEvent, [recent, waiting]) == {recent, waiting}


def test_an_old_event_whose_webhook_still_waits_for_an_attempt_is_kept(app, tenant, booking):
    pending = old_event(booking, days=DAYS + 1)
    webhook_delivery(tenant, pending, "pending")
    given_up = old_event(booking, days=DAYS + 1)
    given_up_delivery = webhook_delivery(tenant, given_up, "failed")
    purge_old_records(utcnow())
    assert remaining(OutboxEvent, [pending, given_up]) == {pending}
    assert remaining(WebhookDelivery, [given_up_delivery]) == set()
    attempts = db.session.scalar(select(func.count()).select_from(WebhookAttempt))
    assert attempts == 1  # the pending delivery's


def test_mail_messages_older_than_the_retention_go_and_newer_ones_stay(app, tenant):
    old = mail(tenant, days=DAYS + 1, key="old")
    new = mail(tenant, days=DAYS - 1, key="new")
    purged = purge_old_records(utcnow())
    assert purged.mail_messages == 1
    assert remaining(MailMessage, [old, new]) == {new}


def test_retention_days_sets_what_is_old(app, booking, make_app):
    event_id = old_event(booking, days=8)
    with make_app(RETENTION_DAYS=7).app_context():
        purge_old_records(utcnow())
    assert remaining(OutboxEvent, [event_id]) == set()


def test_a_run_deletes_in_batches_of_the_size_given(app, booking):
    for _ in range(5):
        old_event(booking, days=DAYS + 1)
    purged = purge_old_records(utcnow(), batch=2)
    assert purged.outbox_events == 5
    # 2 + 2 + 1 events, then one batch that finds no mail.
    assert len(purged.batch_seconds) == 4


def test_a_run_past_its_time_stops_and_says_it_has_not_finished(app, booking):
    event_id = old_event(booking, days=DAYS + 1)
    purged = purge_old_records(utcnow(), run_seconds=0)
    assert (purged.outbox_events, purged.finished) == (0, False)
    assert remaining(OutboxEvent, [event_id]) == {event_id}


def test_a_bookings_history_outlives_its_purged_events(app, tenant, booking):
    emit(
        db.session,
        BookingEvent(
            kind=BookingEventKind.RESCHEDULED,
            booking_id=booking.id,
            sub_account_id=tenant.sub_account_id,
            occurred_at=utcnow() - timedelta(days=DAYS + 2),
            changed=("startTime", "endTime"),
        ),
    )
    db.session.commit()
    db.session.execute(text("UPDATE outbox_events SET delivered_at = occurred_at"))
    db.session.commit()

    assert purge_old_records(utcnow()).outbox_events == 1
    (change,) = booking_history(booking)
    assert (change.kind, change.actor, change.changed) == (
        "booking.rescheduled",
        "business",
        ["startTime", "endTime"],
    )
    assert db.session.get(Booking, booking.id) is not None


def explained_indexes(statement: str, parameters) -> set[str]:
    """The indexes PostgreSQL's plan for the statement reads, with sequential scans priced
    out: an index is named only if one serves the statement's conditions."""
    connection = db.session.connection()
    connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
    document = connection.exec_driver_sql(
        "EXPLAIN (FORMAT JSON) " + statement, parameters
    ).scalar_one()
    document = json.loads(document) if isinstance(document, str) else document
    found: set[str] = set()
    nodes = [document[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        found |= {node["Index Name"]} if "Index Name" in node else set()
        nodes += node.get("Plans", [])
    return found


def test_a_bookings_history_is_read_through_an_index(app, booking):
    seen: list[tuple[str, object]] = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", capture)
    try:
        booking_history(booking)
    finally:
        event.remove(db.engine, "before_cursor_execute", capture)
    (statement, parameters) = next((s, p) for s, p in seen if "booking_changes" in s)
    assert "ix_booking_changes_booking_id" in explained_indexes(statement, parameters)


def test_a_bookings_outbox_events_are_found_through_an_index(app, booking):
    statement = "SELECT id FROM outbox_events WHERE booking_id = %(b)s AND id < %(e)s"
    indexes = explained_indexes(statement, {"b": booking.id, "e": 10})
    assert "ix_outbox_events_booking_id" in indexes
