"""When a connection is read: at once when asked for, never two at a time, and polled as a
safety net.

- **Asked for** (``request_sync``): whoever makes a connection, brings one back, switches a
  calendar on, renews a grant, receives a push notification or polls asks for a sync. The
  request is a mark on the connection (``sync_requested_at``) written in the caller's
  transaction, and handed to the worker once that transaction commits (the app's registry:
  ``task_dispatchers``, which ``celery_init_app`` fills). While the mark is there, asking again
  queues nothing more: however many notifications arrive, at most one sync of a connection is
  queued. A mark older than ``REQUEST_RESENT_AFTER`` is enqueued again (its message was
  lost), and a worker that starts finds every mark still waiting (``requested_connection_ids``)
  without waiting for the beat.
- **Run one at a time** (``begin_sync``/``end_sync``): a sync takes a lease on the connection
  (``sync_running_until``) and clears the mark as it begins, so a notification that arrives
  during a sync queues one more, read after it. A sync that finds another running waits for it
  (its mark stays); a sync that finds no mark has nothing to do (another read it already).
- **Polled** (``connections_to_poll``): a connection with no live push channel is read at
  most ``SYNC_INTERVAL_SECONDS`` (default 60) after its last read began, one with a live
  channel at most ``PUSH_RESYNC_SECONDS`` (default 1800) after its last successful read, in
  case a notification was lost. Each connection is read at its own phase of the interval
  (``next_poll``: the first instant after its last read at which its phase comes round), so
  thousands of connections do not all read in the same second, and a change waits uniformly
  (0, interval] plus a sync. Beat looks for the connections due every ``POLL_TICK`` (or
  every interval, if shorter) and hands each over to run at its due instant, so neither
  beat's own start nor its period adds to the wait (``worker.celery`` also looks once when
  beat starts: Celery runs an interval entry first one period after it starts).
- **How fresh** (``busy_time_as_of``): the instant up to which the connected calendars' busy
  time is known, for availability answers: now for a calendar with a live channel and a
  working connection, else its last successful read.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

from sqlalchemy import func, or_, select, update

from app.config import settings
from app.extensions import db
from app.models import CalendarConnection, ConnectedCalendar, PushChannel, SubAccount
from app.services.common.after_commit import after_commit
from app.services.integrations.registry import IntegrationRegistry, app_registry

log = logging.getLogger(__name__)

# A queued sync whose message never reached a worker (a broker outage, a lost message) is
# enqueued again after this long.
REQUEST_RESENT_AFTER = timedelta(minutes=2)
# How long a sync may hold its connection: the worker's hard task limit (app.celery_app), after
# which a crashed worker's lease is taken over.
SYNC_LEASE = timedelta(seconds=180)
# How often beat looks for the connections due to be polled (``calendars.sync_all``), when the
# interval is longer: a connection due before the next look is enqueued now, to run at its
# due instant, so the look's period adds nothing to a poll's wait.
POLL_TICK = timedelta(seconds=5)
# The golden ratio's fraction: successive ids land far apart in [0, 1).
_SPREAD = 0.6180339887498949
# Where every connection's phase is counted from (any fixed instant would do).
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

# The worker's task that syncs one connection (``worker.tasks.calendars``).
SYNC_TASK = "calendars.sync"


def sync_interval() -> timedelta:
    """How often a connection without a live push channel is read (``SYNC_INTERVAL_SECONDS``;
    its default is ``Settings``')."""
    return settings().duration("sync_interval_seconds")


def push_resync_interval() -> timedelta:
    """How often a connection whose calendars all have live push channels is still read
    (``PUSH_RESYNC_SECONDS``)."""
    return settings().duration("push_resync_seconds")


def request_sync(connection_id: int, now: datetime, *, due: datetime | None = None) -> bool:
    """Ask for a sync of the connection: marked in the caller's transaction and handed to the
    worker after its commit, unless one is queued already. ``due``: a poll's instant
    (``connections_to_poll``): the sync runs then, and is not asked for if a read has begun
    since (between the poll's look and this call). Returns whether this call queued it.
    Flushes, never commits."""
    conditions = [
        CalendarConnection.id == connection_id,
        CalendarConnection.active.is_(True),
        or_(
            CalendarConnection.sync_requested_at.is_(None),
            CalendarConnection.sync_requested_at < now - REQUEST_RESENT_AFTER,
        ),
    ]
    if due is not None:
        conditions += [
            or_(
                CalendarConnection.last_attempt_at.is_(None),
                CalendarConnection.last_attempt_at < due,
            ),
            or_(  # a running sync began before ``due`` (its lease is taken as it begins)
                CalendarConnection.sync_running_until.is_(None),
                CalendarConnection.sync_running_until < due + SYNC_LEASE,
            ),
        ]
    queued = db.session.execute(
        update(CalendarConnection)
        .where(*conditions)
        .values(sync_requested_at=now)
        .returning(CalendarConnection.id)
        .execution_options(synchronize_session=False)
    ).scalar()
    if queued is None:
        return False
    # Rounded up to the millisecond: a poll run early would find its due instant still ahead.
    delay = 0.0 if due is None else max(0.0, math.ceil((due - now) / _MICROSECOND / 1000) / 1000)
    enqueue_after_commit(SYNC_TASK, connection_id, delay)
    return True


def enqueue_after_commit(task: str, connection_id: int, delay: float = 0.0) -> None:
    """Enqueue ``task`` of the connection for the worker once the caller's transaction commits
    (dropped with a rollback: ``common.after_commit``); the app's registry says how
    (``task_dispatchers``)."""
    after_commit(
        db.session,
        partial(_enqueue, task, connection_id, delay, app_registry()),
        f"calendar connection {connection_id}: enqueueing {task}",
    )


def _enqueue(task: str, connection_id: int, delay: float, registry: IntegrationRegistry) -> None:
    for dispatcher in list(registry.task_dispatchers):
        try:
            dispatcher(task, [connection_id], delay)
        except Exception:
            log.exception("calendar connection %s: %s not enqueued", connection_id, task)


def begin_sync(connection_id: int, now: datetime) -> str:
    """Take the connection for a sync: ``begun`` (the mark cleared, the lease taken),
    ``running`` (another sync holds it: wait, the mark stays), or ``nothing`` (no sync is
    queued: another read it already). Flushes; the caller commits at once."""
    begun = db.session.execute(
        update(CalendarConnection)
        .where(
            CalendarConnection.id == connection_id,
            CalendarConnection.sync_requested_at.is_not(None),
            or_(
                CalendarConnection.sync_running_until.is_(None),
                CalendarConnection.sync_running_until < now,
            ),
        )
        .values(sync_requested_at=None, sync_running_until=now + SYNC_LEASE)
        .returning(CalendarConnection.id)
        .execution_options(synchronize_session=False)
    ).scalar()
    if begun is not None:
        return "begun"
    requested = db.session.scalar(
        select(CalendarConnection.sync_requested_at).where(CalendarConnection.id == connection_id)
    )
    return "running" if requested is not None else "nothing"


def end_sync(connection_id: int) -> None:
    """Give the connection back (its lease ends). Flushes."""
    db.session.execute(
        update(CalendarConnection)
        .where(CalendarConnection.id == connection_id)
        .values(sync_running_until=None)
        .execution_options(synchronize_session=False)
    )


def mark_requested(connection_id: int, now: datetime) -> None:
    """Mark a sync as queued without handing it over: for a retry the worker plans itself."""
    db.session.execute(
        update(CalendarConnection)
        .where(CalendarConnection.id == connection_id)
        .values(sync_requested_at=now)
        .execution_options(synchronize_session=False)
    )


def requested_connection_ids() -> list[int]:
    """The connections whose sync is asked for and waiting (a worker starting hands them over
    again: their messages may never have reached a worker)."""
    return list(
        db.session.scalars(
            select(CalendarConnection.id)
            .where(
                CalendarConnection.sync_requested_at.is_not(None),
                CalendarConnection.active.is_(True),
            )
            .order_by(CalendarConnection.sync_requested_at)
        )
    )


def poll_tick(interval: timedelta) -> timedelta:
    """How often beat looks for the connections due (``calendars.sync_all``), given the poll
    interval: ``POLL_TICK``, or the interval if that is shorter."""
    return min(POLL_TICK, interval)


def connections_to_poll(now: datetime) -> list[tuple[int, datetime]]:
    """The active connections of active sub accounts whose poll is due before beat looks
    again (``poll_tick``), each with its due instant (``now`` if overdue or never read), in id
    order: one without a live push channel on each of its calendars ``next_poll`` after its
    last read began (``SYNC_INTERVAL_SECONDS``), one with live channels after its last
    successful read (``PUSH_RESYNC_SECONDS``). A sync running now counts as a read begun when
    its lease was taken."""
    live, calendars = _calendar_counts(now)
    rows = db.session.execute(
        select(
            CalendarConnection.id,
            live,
            calendars,
            CalendarConnection.last_success_at,
            CalendarConnection.last_attempt_at,
            CalendarConnection.sync_running_until,
        )
        .join(SubAccount, SubAccount.id == CalendarConnection.sub_account_id)
        .where(CalendarConnection.active.is_(True), SubAccount.active.is_(True))
        .order_by(CalendarConnection.id)
    ).all()
    polled, pushed_every = sync_interval(), push_resync_interval()
    before = now + poll_tick(polled)
    due: list[tuple[int, datetime]] = []
    for connection_id, live_count, calendar_count, success, attempt, running_until in rows:
        pushed = bool(calendar_count) and live_count >= calendar_count and success is not None
        interval, last = (pushed_every, success) if pushed else (polled, attempt)
        if running_until is not None and running_until > now:
            began = running_until - SYNC_LEASE
            last = began if last is None else max(last, began)
        when = now if last is None else max(now, next_poll(connection_id, last, interval))
        if when <= before:
            due.append((connection_id, when))
    return due


def next_poll(connection_id: int, last_read: datetime, interval: timedelta) -> datetime:
    """When the connection is next polled: the first instant after ``last_read`` at which its
    own phase of ``interval`` comes round (the phases of successive ids spread evenly over
    the interval, the same each time). Never more than ``interval`` after ``last_read``."""
    period = interval // _MICROSECOND
    phase = math.floor((connection_id * _SPREAD) % 1.0 * period)
    since = (last_read - _EPOCH) // _MICROSECOND
    cycles = (since - phase) // period + 1
    return _EPOCH + (phase + cycles * period) * _MICROSECOND


def _calendar_counts(now: datetime) -> tuple:
    """Per connection (correlated): its live push channels, and its calendars."""
    live = (
        select(func.count())
        .select_from(PushChannel)
        .where(
            PushChannel.calendar_connection_id == CalendarConnection.id,
            PushChannel.connected_calendar_id.is_not(None),  # not one waiting to be stopped
            PushChannel.expires_at > now,
        )
        .scalar_subquery()
    )
    calendars = (
        select(func.count())
        .select_from(ConnectedCalendar)
        .where(ConnectedCalendar.calendar_connection_id == CalendarConnection.id)
        .scalar_subquery()
    )
    return live, calendars


@dataclass(frozen=True)
class Freshness:
    """How current the stored busy time of a sub account's connected calendars is."""

    connected: int  # active connections
    as_of: datetime | None  # the oldest instant their busy time is known for; None: never read


def busy_time_as_of(sub_account_id: int, now: datetime) -> Freshness:
    """Up to when the sub account's connected calendars' busy time is known: ``now`` for a
    working connection whose every calendar has a live push channel, else its last successful
    read; the oldest over its connections."""
    live, calendars = _calendar_counts(now)
    rows = db.session.execute(
        select(
            CalendarConnection.last_success_at,
            CalendarConnection.consecutive_failures,
            live,
            calendars,
        ).where(
            CalendarConnection.sub_account_id == sub_account_id,
            CalendarConnection.active.is_(True),
        )
    ).all()
    known: list[datetime | None] = []
    for last_success, failures, live_count, calendar_count in rows:
        pushed = calendar_count and live_count >= calendar_count
        if last_success is not None and pushed and not failures:
            known.append(now)
        else:
            known.append(last_success)
    if not known:
        return Freshness(0, None)
    if any(instant is None for instant in known):
        return Freshness(len(known), None)
    return Freshness(len(known), min(k for k in known if k is not None))


@dataclass(frozen=True)
class ConnectionFreshness:
    """How one connection's changes arrive, for the people who run it: ``pushed`` (every
    calendar it reads has a live channel; ``channel_expires_at`` the soonest expiry) or
    polled every ``poll_seconds`` (``push_available``: whether this server pushes at all);
    the latest notification; and whether a sync is queued or running now."""

    pushed: bool
    push_available: bool
    poll_seconds: int
    channel_expires_at: datetime | None
    last_notification_at: datetime | None
    queued: bool
    running: bool

    @property
    def busy(self) -> bool:
        """A sync is on its way: the page looks again until it has run."""
        return self.queued or self.running


def connection_freshness(
    connection: CalendarConnection, now: datetime, *, push_available: bool
) -> ConnectionFreshness:
    calendars = db.session.scalar(
        select(func.count())
        .select_from(ConnectedCalendar)
        .where(ConnectedCalendar.calendar_connection_id == connection.id)
    )
    assert calendars is not None  # a count is one row
    live, soonest = db.session.execute(
        select(func.count(PushChannel.id), func.min(PushChannel.expires_at)).where(
            PushChannel.calendar_connection_id == connection.id,
            PushChannel.connected_calendar_id.is_not(None),
            PushChannel.expires_at > now,
        )
    ).one()
    pushed = bool(calendars) and live >= calendars
    running = connection.sync_running_until is not None and connection.sync_running_until > now
    return ConnectionFreshness(
        pushed=pushed,
        push_available=push_available,
        poll_seconds=int((push_resync_interval() if pushed else sync_interval()).total_seconds()),
        channel_expires_at=soonest if pushed else None,
        last_notification_at=connection.last_notification_at,
        queued=connection.sync_requested_at is not None,
        running=running,
    )
