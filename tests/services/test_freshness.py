"""When a connection is read (``app.services.integrations.calendars.freshness``), on SQLite and
PostgreSQL: asked for once however often it is asked, one sync at a time, polled by what it
has, spread over the interval, and how fresh availability says its busy time is. At a fixed
instant far ahead (``NOW``): nothing here depends on today's date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from app.extensions import db
from app.models import CalendarConnection, ConnectedCalendar, PushChannel
from app.services.integrations.calendars.freshness import (
    SYNC_LEASE,
    begin_sync,
    busy_time_as_of,
    connections_to_poll,
    end_sync,
    poll_delay,
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
    polled = a_connection(last_success_at=NOW - timedelta(minutes=5))
    pushed = a_connection(last_success_at=NOW - timedelta(minutes=5))
    live_channel(pushed, NOW + timedelta(days=3))
    stale = a_connection(last_success_at=NOW - timedelta(minutes=40))
    live_channel(stale, NOW + timedelta(days=3))
    expired = a_connection(last_success_at=NOW - timedelta(minutes=5))
    live_channel(expired, NOW - timedelta(minutes=1))
    assert connections_to_poll(NOW) == [polled, stale, expired]


def test_polls_spread_over_the_interval():
    interval = timedelta(seconds=60)
    delays = [poll_delay(connection_id, interval) for connection_id in range(1, 1001)]
    assert all(0 <= delay < 60 for delay in delays)
    per_second = [0] * 60
    for delay in delays:
        per_second[int(delay)] += 1
    assert max(per_second) <= 2 * 1000 / 60  # no second has more than twice its share
    assert poll_delay(7, interval) == poll_delay(7, interval)  # the same each time


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
