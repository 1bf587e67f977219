"""When a connection is read (``app.services.integrations.calendars.freshness``): asked for once
however often it is asked, one sync at a time, polled by what it has, spread over the interval, and
how fresh availability says its busy time is. At a fixed instant far ahead (``NOW``): nothing here
depends on today's date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from app.extensions import db
from app.models import CalendarConnection, ConnectedCalendar, PushChannel
from app.services.integrations.calendars.freshness import (
    POLL_TICK,
    SYNC_LEASE,
    begin_sync,
    busy_time_as_of,
    connections_to_poll,
    end_sync,
    next_poll,
    request_sync,
)
from app.services.integrations.registry import app_registry
from tests.factories import TenantFactory, availability_through_api, next_monday

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)

pytestmark = pytest.mark.usefixtures("app")


@pytest.fixture
def handed_over(app):
    """The syncs the app hands to the worker after each commit."""
    seen: list[tuple[int, float]] = []
    app_registry(app).set_task_dispatcher(
        lambda task, args, delay: (
            seen.append((args[0], delay)) if task == "calendars.sync" else None
        )
    )
    return seen


def a_connection(**fields) -> int:
    """A feed connection (nothing is read: the marks are what is looked at), its mark cleared."""
    tenant = TenantFactory().create(
        calendarConnections=[{"name": "Feed", "kind": "ics", "url": "https://example.test/f.ics"}]
    )
    connection_id = tenant.connections["Feed"]
    db.session.execute(
        update(CalendarConnection)
        .where(CalendarConnection.id == connection_id)
        .values(sync_requested_at=None, **fields)
    )
    db.session.commit()
    return connection_id


def connection(connection_id: int) -> CalendarConnection:
    return db.session.get(CalendarConnection, connection_id, populate_existing=True)


def test_a_new_connection_is_handed_to_the_worker_when_its_transaction_commits(handed_over):
    tenant = TenantFactory().create(
        calendarConnections=[{"name": "Feed", "kind": "ics", "url": "https://example.test/f.ics"}]
    )
    assert handed_over == [(tenant.connections["Feed"], 0.0)]


def test_asking_again_while_a_sync_is_queued_hands_nothing_more_over(handed_over):
    connection_id = a_connection()
    assert [request_sync(connection_id, NOW) for _ in range(5)] == [True] + [False] * 4
    db.session.commit()
    assert handed_over[-1:] == [(connection_id, 0.0)] and len(handed_over) == 2


def test_a_request_rolled_back_hands_nothing_over(handed_over):
    connection_id = a_connection()
    request_sync(connection_id, NOW)
    db.session.rollback()
    assert handed_over == [(connection_id, 0.0)]  # the creation's alone
    assert connection(connection_id).sync_requested_at is None


def test_a_queued_sync_whose_message_was_lost_is_handed_over_again_later(handed_over):
    connection_id = a_connection()
    request_sync(connection_id, NOW)
    db.session.commit()
    assert not request_sync(connection_id, NOW + timedelta(minutes=1))
    assert request_sync(connection_id, NOW + timedelta(minutes=3))


def test_one_sync_runs_at_a_time_and_a_request_meanwhile_waits_for_it():
    connection_id = a_connection()
    request_sync(connection_id, NOW)
    assert begin_sync(connection_id, NOW) == "begun"
    assert connection(connection_id).sync_requested_at is None
    assert begin_sync(connection_id, NOW) == "nothing"  # nothing queued: the first reads it
    request_sync(connection_id, NOW + timedelta(seconds=1))  # a change during the sync
    assert begin_sync(connection_id, NOW + timedelta(seconds=2)) == "running"
    end_sync(connection_id)
    assert begin_sync(connection_id, NOW + timedelta(seconds=3)) == "begun"


def test_a_crashed_syncs_lease_is_taken_over_once_it_has_passed():
    connection_id = a_connection()
    request_sync(connection_id, NOW)
    assert begin_sync(connection_id, NOW) == "begun"
    request_sync(connection_id, NOW)
    assert begin_sync(connection_id, NOW + SYNC_LEASE - timedelta(seconds=1)) == "running"
    assert begin_sync(connection_id, NOW + SYNC_LEASE + timedelta(seconds=1)) == "begun"


def live_channel(connection_id: int, expires_at: datetime) -> None:
    calendar = ConnectedCalendar(calendar_connection_id=connection_id, remote_id="primary")
    db.session.add(calendar)
    db.session.flush()
    db.session.add(
        PushChannel(
            calendar_connection_id=connection_id,
            connected_calendar_id=calendar.id,
            kind="google",
            channel_id=f"channel-{connection_id}",
            resource_id="resource",
            secret_digest="0" * 64,
            expires_at=expires_at,
            created_at=NOW,
        )
    )
    db.session.commit()


def test_a_pushed_connection_is_polled_only_when_its_safety_net_read_is_due():
    polled, pushed, stale, expired = (a_connection() for _ in range(4))
    # The pushed one's safety-net read is due at ``due``, 20 minutes after its last read.
    due = next_poll(pushed, NOW, PUSH_RESYNC)
    set_fields(pushed, last_success_at=due - timedelta(minutes=20))
    live_channel(pushed, due + timedelta(days=3))
    set_fields(stale, last_success_at=due - timedelta(minutes=40))
    live_channel(stale, due + timedelta(days=3))
    set_fields(expired, last_attempt_at=due - timedelta(minutes=12))
    live_channel(expired, due - timedelta(minutes=11))
    early = due - timedelta(minutes=10)
    assert [c for c, _ in connections_to_poll(early)] == [polled, stale, expired]
    late = due - POLL_TICK + timedelta(seconds=1)
    assert (pushed, due) in connections_to_poll(late)


def set_fields(connection_id: int, **fields) -> None:
    db.session.execute(
        update(CalendarConnection).where(CalendarConnection.id == connection_id).values(**fields)
    )
    db.session.commit()


INTERVAL = timedelta(seconds=60)  # SYNC_INTERVAL_SECONDS' default
PUSH_RESYNC = timedelta(seconds=1800)  # PUSH_RESYNC_SECONDS' default


def test_a_connection_is_polled_at_most_one_interval_after_its_last_read():
    for connection_id in range(1, 1001):
        for last_read in (NOW, NOW + timedelta(seconds=connection_id, microseconds=7)):
            due = next_poll(connection_id, last_read, INTERVAL)
            assert last_read < due <= last_read + INTERVAL
            assert next_poll(connection_id, due, INTERVAL) == due + INTERVAL  # same phase


def test_polls_spread_over_the_interval():
    offsets = [
        (next_poll(connection_id, NOW, INTERVAL) - NOW).total_seconds()
        for connection_id in range(1, 1001)
    ]
    per_second = [0] * 60
    for offset in offsets:
        per_second[int(offset) % 60] += 1
    assert max(per_second) <= 2 * 1000 / 60  # no second has more than twice its share


def test_a_connection_read_just_now_is_handed_over_to_run_when_its_poll_is_due(handed_over):
    connection_id = a_connection(last_attempt_at=NOW)
    due = next_poll(connection_id, NOW, INTERVAL)
    assert connections_to_poll(due - POLL_TICK - timedelta(seconds=1)) == []
    look = due - POLL_TICK
    assert connections_to_poll(look) == [(connection_id, due)]
    assert request_sync(connection_id, look, due=due)
    db.session.commit()
    assert handed_over[-1] == (connection_id, POLL_TICK.total_seconds())


def test_a_connection_never_read_is_polled_at_once():
    connection_id = a_connection()
    assert connections_to_poll(NOW) == [(connection_id, NOW)]


def test_a_running_sync_counts_as_a_read_begun_when_its_lease_was_taken():
    connection_id = a_connection(last_attempt_at=NOW - timedelta(minutes=5))
    request_sync(connection_id, NOW)
    assert begin_sync(connection_id, NOW) == "begun"
    db.session.commit()
    assert connections_to_poll(NOW + timedelta(seconds=1)) == []  # not overdue: just begun
    due = next_poll(connection_id, NOW, INTERVAL)
    assert connections_to_poll(due - POLL_TICK) == [(connection_id, due)]


def test_a_poll_is_not_asked_for_once_a_read_has_begun_since_it_was_due(handed_over):
    connection_id = a_connection(last_attempt_at=NOW - timedelta(minutes=5))
    [(_, due)] = connections_to_poll(NOW)
    # A sync (a person's "Sync now") begins between the poll's look and its request.
    request_sync(connection_id, NOW)
    assert begin_sync(connection_id, NOW) == "begun"
    db.session.commit()
    assert not request_sync(connection_id, NOW, due=due)
    end_sync(connection_id)
    set_fields(connection_id, last_attempt_at=NOW)
    assert not request_sync(connection_id, NOW, due=due)


def test_busy_time_is_as_of_the_last_read_or_now_with_a_live_channel():
    connection_id = a_connection(last_success_at=NOW - timedelta(minutes=2))
    sub_account_id = connection(connection_id).sub_account_id
    assert busy_time_as_of(sub_account_id, NOW).as_of == NOW - timedelta(minutes=2)
    live_channel(connection_id, NOW + timedelta(days=1))
    assert busy_time_as_of(sub_account_id, NOW).as_of == NOW
    db.session.execute(
        update(CalendarConnection)
        .where(CalendarConnection.id == connection_id)
        .values(consecutive_failures=1)
    )
    db.session.commit()
    assert busy_time_as_of(sub_account_id, NOW).as_of == NOW - timedelta(minutes=2)


@pytest.mark.date_sensitive
def test_availability_says_how_fresh_the_connected_calendars_are(client):
    tenant = TenantFactory().create()
    monday = next_monday()
    assert "Busy-Time-As-Of" not in availability_through_api(client, tenant, monday).headers
    tenant = TenantFactory().create(
        calendarConnections=[{"name": "Feed", "kind": "ics", "url": "https://example.test/f.ics"}]
    )
    answer = availability_through_api(client, tenant, monday)
    assert answer.headers["Busy-Time-As-Of"] == "unknown"  # not read yet
    db.session.execute(
        update(CalendarConnection)
        .where(CalendarConnection.id == tenant.connections["Feed"])
        .values(last_success_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    )
    db.session.commit()
    answer = availability_through_api(client, tenant, monday)
    assert answer.headers["Busy-Time-As-Of"] == "2026-01-02T03:04:05Z"
