"""The transactional outbox: each booking write stores its event in its own transaction, and
each handler gets each event at most once."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.jobs import outbox as outbox_job
from app.models import OutboxDelivery, OutboxEvent
from app.models.types import utcnow
from app.services.integrations import outbox
from app.services.integrations.registry import app_registry
from tests.factories import make_booking, next_monday, ny, z

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday

MONDAY = next_monday()


def create(client, tenant, start):
    return client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings",
        json={
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "attendees": [{"email": "pat@example.test"}],
        },
        headers=tenant.headers(),
    )


def outbox_rows():
    db.session.expire_all()
    return db.session.scalars(select(OutboxEvent).order_by(OutboxEvent.id)).all()


@pytest.fixture
def handlers(app):
    """The registry of the test's own app, emptied of the app's handlers (write-back, mail,
    webhooks): only what the test registers on it runs."""
    registry = app_registry(app)
    registry.handlers.clear()
    return registry


@pytest.fixture
def calls(handlers):
    """A handler registered under "test", recording the events it was given."""
    seen: list[int] = []
    handlers.register_handler("test", lambda delivery, now: seen.append(delivery.event_id))
    return seen


@pytest.fixture
def failing(handlers):
    """A handler registered under "flaky" that fails while ``failures`` is not empty."""
    failures = ["server away"]

    def handler(delivery, now):
        if failures:
            raise outbox.DeliveryFailed(failures[0])

    handlers.register_handler("flaky", handler)
    return failures


def record(event_id, handler):
    db.session.expire_all()
    return db.session.get(OutboxDelivery, (event_id, handler))


@pytest.fixture
def event_id(tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    row = OutboxEvent(
        kind="booking.created",
        sub_account_id=tenant.sub_account_id,
        booking_id=booking.id,
        changed=[],
        occurred_at=utcnow() - timedelta(minutes=5),
    )
    db.session.add(row)
    db.session.commit()
    return row.id


def test_a_create_stores_its_event_with_the_booking(client, tenant):
    booking_id = create(client, tenant, ny(MONDAY, 10)).json["id"]
    (row,) = outbox_rows()
    assert (row.kind, row.booking_id, row.sub_account_id) == (
        "booking.created",
        booking_id,
        tenant.sub_account_id,
    )
    assert row.delivered_at is None


def test_a_refused_write_stores_no_event(client, tenant):
    create(client, tenant, ny(MONDAY, 10))
    assert create(client, tenant, ny(MONDAY, 10)).status_code == 400
    assert [row.kind for row in outbox_rows()] == ["booking.created"]


def test_update_and_cancel_store_their_events(client, tenant):
    booking_id = create(client, tenant, ny(MONDAY, 10)).json["id"]
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking_id}"
    client.put(url, json={"startTime": z(ny(MONDAY, 11))}, headers=tenant.headers())
    client.put(url, json={"title": "Renamed"}, headers=tenant.headers())
    client.delete(f"/v1/api/calendar/bookings/{booking_id}", headers=tenant.headers())
    rows = outbox_rows()
    assert [row.kind for row in rows] == [
        "booking.created",
        "booking.rescheduled",
        "booking.updated",
        "booking.cancelled",
    ]
    assert rows[2].changed == ["title"]


def test_a_handler_runs_once_however_often_the_event_is_delivered(event_id, calls):
    assert outbox_job.handle_event(event_id, "test", utcnow()) is True
    db.session.commit()
    assert outbox_job.handle_event(event_id, "test", utcnow()) is False
    db.session.commit()
    assert calls == [event_id]
    assert db.session.scalar(select(func.count()).select_from(OutboxDelivery)) == 1
    assert record(event_id, "test").status == "delivered"


def test_the_app_registers_calendar_write_back(app):
    assert "calendar_write_back" in outbox.registered_handlers()


def test_each_app_has_its_own_handlers(app, make_app):
    """Handlers live on the app, not in the process: what one app registers, another built
    in the same process does not run."""
    app_registry(app).register_handler("only-here", lambda delivery, now: None)
    other = make_app()
    assert "only-here" in app_registry(app).handlers
    assert "only-here" not in app_registry(other).handlers
    assert list(app_registry(other).handlers) == [
        "calendar_write_back",
        "notifications",
        "webhooks",
    ]


def test_a_failed_delivery_waits_then_is_offered_again(event_id, failing):
    now = utcnow()
    assert outbox_job.handle_event(event_id, "flaky", now) is True
    db.session.commit()
    failed = record(event_id, "flaky")
    assert (failed.status, failed.attempts, failed.last_error) == ("retrying", 1, "server away")
    wait = failed.next_attempt_at - now
    assert timedelta(seconds=47) <= wait <= timedelta(seconds=73)  # a minute, ±20 %

    assert outbox.handlers_due(event_id, now) == []
    assert outbox_job.handle_event(event_id, "flaky", now) is False
    failing.clear()  # the server is back
    later = failed.next_attempt_at
    assert outbox.handlers_due(event_id, later) == ["flaky"]
    assert outbox_job.handle_event(event_id, "flaky", later) is True
    db.session.commit()
    done = record(event_id, "flaky")
    assert (done.status, done.attempts, done.last_error) == ("delivered", 2, None)


def test_the_wait_doubles_up_to_an_hour():
    delays = [outbox.retry_delay(n, timedelta(minutes=1)) for n in (1, 2, 3, 7, 9)]
    assert all(
        m * 0.8 <= d / timedelta(minutes=1) <= m * 1.2
        for d, m in zip(delays, (1, 2, 4, 60, 60), strict=True)
    )


def test_a_handler_is_given_up_after_the_last_attempt(event_id, failing):
    now = utcnow()
    for _ in range(outbox.MAX_ATTEMPTS):
        assert outbox_job.handle_event(event_id, "flaky", now) is True
        db.session.commit()
        now = record(event_id, "flaky").next_attempt_at or now
    given_up = record(event_id, "flaky")
    assert (given_up.status, given_up.attempts) == ("failed", outbox.MAX_ATTEMPTS)
    assert outbox.handlers_due(event_id, now + timedelta(days=1)) == []
    assert outbox.mark_delivered_if_done(event_id, now) is True


def test_an_unexpected_error_rolls_back_the_handlers_writes(event_id, handlers):
    def broken(delivery, now):
        db.session.add(OutboxEvent(**{**_copy(delivery), "kind": "booking.updated"}))
        db.session.flush()
        raise KeyError("bug")

    handlers.register_handler("broken", broken)
    assert outbox_job.handle_event(event_id, "broken", utcnow()) is True
    db.session.commit()
    assert [row.kind for row in outbox_rows()] == ["booking.created"]
    assert record(event_id, "broken").last_error == "unexpected error: KeyError: 'bug'"


def _copy(delivery):
    return {
        "sub_account_id": delivery.sub_account_id,
        "booking_id": delivery.booking_id,
        "changed": [],
        "occurred_at": delivery.occurred_at,
    }


def test_an_event_is_done_once_every_handler_has_delivered_it(event_id, calls):
    now = utcnow()
    assert outbox.mark_delivered_if_done(event_id, now) is False
    outbox_job.handle_event(event_id, "test", now)
    assert outbox.mark_delivered_if_done(event_id, now) is True
    db.session.commit()
    assert outbox_rows()[0].delivered_at is not None


def test_the_sweep_finds_old_undelivered_events_only(event_id, tenant, calls):
    now = utcnow()
    fresh = OutboxEvent(
        kind="booking.updated",
        sub_account_id=tenant.sub_account_id,
        booking_id=outbox_rows()[0].booking_id,
        changed=["title"],
        occurred_at=now,
    )
    db.session.add(fresh)
    db.session.commit()
    assert outbox.undelivered_events(now) == [event_id]
    assert outbox.undelivered_events(now, grace=timedelta(0)) == [event_id, fresh.id]
    outbox_job.handle_event(event_id, "test", now)
    outbox.mark_delivered_if_done(event_id, now)
    db.session.commit()
    assert outbox.undelivered_events(now) == []


def test_the_sweep_leaves_an_event_until_its_retry_is_due(event_id, failing):
    now = utcnow()
    outbox_job.handle_event(event_id, "flaky", now)
    db.session.commit()
    assert outbox.undelivered_events(now) == []
    assert outbox.undelivered_events(record(event_id, "flaky").next_attempt_at) == [event_id]


def test_an_event_waits_for_workers_from_when_it_is_due_not_while_its_retry_waits(
    event_id, failing
):
    """What health counts as work the workers leave waiting (``waiting_for_workers``)."""
    written = outbox_rows()[0].occurred_at
    assert outbox.waiting_for_workers(written + timedelta(minutes=2), timedelta(minutes=3)) == 0
    assert outbox.waiting_for_workers(written + timedelta(minutes=4), timedelta(minutes=3)) == 1
    outbox_job.handle_event(event_id, "flaky", written + timedelta(minutes=4))
    db.session.commit()
    due = record(event_id, "flaky").next_attempt_at
    assert outbox.waiting_for_workers(due + timedelta(minutes=2), timedelta(minutes=3)) == 0
    assert outbox.waiting_for_workers(due + timedelta(minutes=4), timedelta(minutes=3)) == 1


def test_two_handlers_finishing_at_once_leave_the_event_delivered(app, event_id, handlers):
    """Each handler's task records its delivery and checks whether the event is done, in its
    own transaction; the one that checks second must see the first one's record."""
    handlers.register_handler("mail", lambda delivery, now: None)
    handlers.register_handler("hook", lambda delivery, now: None)

    def finish(handler: str) -> None:
        with app.app_context():
            outbox_job.handle_event(event_id, handler, utcnow())
            outbox.mark_delivered_if_done(event_id, utcnow())
            db.session.commit()
            db.session.remove()

    with app.app_context():
        outbox_job.handle_event(event_id, "mail", utcnow())
        assert outbox.mark_delivered_if_done(event_id, utcnow()) is False
        other = threading.Thread(target=finish, args=("hook",))
        other.start()
        other.join(timeout=1)  # it waits for this transaction to end
        db.session.commit()
    other.join()
    assert outbox_rows()[0].delivered_at is not None


def later_event(first_event_id: int) -> int:
    """A second event of the same booking as ``first_event_id``, after it."""
    first = db.session.get(OutboxEvent, first_event_id)
    row = OutboxEvent(
        kind="booking.rescheduled",
        sub_account_id=first.sub_account_id,
        booking_id=first.booking_id,
        changed=["startTime"],
        occurred_at=first.occurred_at + timedelta(seconds=1),
    )
    db.session.add(row)
    db.session.commit()
    return row.id


def test_a_later_event_waits_for_the_handler_to_be_done_with_the_earlier_one(event_id, calls):
    second = later_event(event_id)
    assert outbox_job.handle_event(second, "test", utcnow()) is False
    assert calls == []


def test_a_later_event_is_waited_for_while_the_earlier_one_is_under_way(event_id, calls):
    second = later_event(event_id)
    assert outbox.waiting_for_earlier(second, "test") is True
    outbox_job.handle_event(event_id, "test", utcnow())
    db.session.commit()
    assert outbox_job.handle_event(second, "test", utcnow()) is True
    assert calls == [event_id, second]
    assert outbox.waiting_for_earlier(second, "test") is False  # it has had it


def test_a_later_event_is_left_to_the_sweep_while_the_earlier_one_waits_to_retry(event_id, failing):
    second = later_event(event_id)
    outbox_job.handle_event(event_id, "flaky", utcnow())
    db.session.commit()
    assert outbox.waiting_for_earlier(second, "flaky") is False
    assert outbox_job.handle_event(second, "flaky", utcnow()) is False


def test_two_deliveries_of_one_event_at_once_both_keep_their_outcome_delivered_wins(
    app, event_id, handlers
):
    """A broker's redelivery runs the handler twice at once: one fails, one delivers. Neither
    is undone for the other having recorded first, and the event ends delivered, whichever
    records last."""
    both_in = threading.Barrier(2, timeout=10)
    outcomes = iter([None, "server away"])
    lock = threading.Lock()

    def handler(delivery, now):
        both_in.wait()
        with lock:
            failure = next(outcomes)
        if failure:
            raise outbox.DeliveryFailed(failure)

    handlers.register_handler("twice", handler)
    ran: list[bool] = []

    def deliver() -> None:
        with app.app_context():
            ran.append(outbox_job.handle_event(event_id, "twice", utcnow()))
            db.session.commit()
            db.session.remove()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert ran == [True, True]
    assert (record(event_id, "twice").status, record(event_id, "twice").attempts) == (
        "delivered",
        1,
    )


@pytest.fixture
def cancels_only(handlers):
    """A handler registered under "cancels" for ``booking.cancelled`` events alone."""
    seen: list[int] = []
    handlers.register_handler(
        "cancels",
        lambda delivery, now: seen.append(delivery.event_id),
        frozenset({"booking.cancelled"}),
    )
    return seen


def test_a_handler_is_not_offered_an_event_of_a_kind_it_does_not_take(event_id, cancels_only):
    assert outbox.handlers_due(event_id, utcnow()) == []
    assert outbox_job.handle_event(event_id, "cancels", utcnow()) is False
    assert cancels_only == []


def test_an_event_is_delivered_once_the_handlers_taking_its_kind_are_done(
    event_id, calls, cancels_only
):
    assert outbox.handlers_due(event_id, utcnow()) == ["test"]
    outbox_job.handle_event(event_id, "test", utcnow())
    assert outbox.mark_delivered_if_done(event_id, utcnow()) is True
    assert record(event_id, "cancels") is None


def test_a_handler_waits_only_for_earlier_events_of_its_kinds(event_id, calls, cancels_only):
    first = db.session.get(OutboxEvent, event_id)  # booking.created, "test" not done with it
    row = OutboxEvent(
        kind="booking.cancelled",
        sub_account_id=first.sub_account_id,
        booking_id=first.booking_id,
        changed=[],
        occurred_at=first.occurred_at + timedelta(seconds=1),
    )
    db.session.add(row)
    db.session.commit()
    assert outbox_job.handle_event(row.id, "cancels", utcnow()) is True
    assert cancels_only == [row.id]
    assert outbox_job.handle_event(row.id, "test", utcnow()) is False  # "test" waits for the first


def test_the_apps_write_back_does_not_take_reminders(app):
    registry = app_registry(app)
    assert not registry.takes("calendar_write_back", "booking.reminder")
    assert registry.takes("calendar_write_back", "booking.rescheduled")
