"""Inbound CalDAV sync: a connection's calendar becomes the sub account's external busy time.

``sync_connection`` is one use case in the caller's transaction (it flushes; the caller, a
Celery task or a CLI command, commits). It reads the connection in a short transaction of its
own first, so no transaction stays open while the CalDAV server is waited for, then talks to
the server (``caldav_calendar``), expands the events (``busy_time``), and only then writes, under
the calendar's write lock (the one booking writes take):

- success: the connection's ``external`` blocked times become exactly the busy periods read,
  by difference (a row whose (UID, start, end) is still busy is left as it is, same id; the
  others are deleted or inserted), and the server's change markers are kept;
- unchanged (the markers equal the kept ones and the stored busy time still covers the window
  in the same timezone): nothing but the attempt is written;
- failure: the error, its time and the attempt are recorded, the busy time stays as it was
  (an unreachable calendar does not become a free one), and the result says whether trying
  again later may help.

The window is [now - 1 day, now + the sub account's longest booking horizon (its settings and
any event type's) + 7 days]: the extra week lets an unchanged calendar be skipped for a week as
the window moves on, before it is read again to pick up the occurrences that moved in.

Events the service wrote itself (write-back: their UID is one of this sub account's bookings'
``uid``) are not busy time: the bookings occupy that time themselves.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from app.extensions import db
from app.models import (
    BlockedTime,
    BlockedTimeSource,
    Booking,
    CalendarConnection,
    CalendarSettings,
    EventType,
    SubAccount,
)
from app.scheduling.intervals import Interval
from app.scheduling.timezones import zone
from app.services.common.locking import lock_calendar
from app.services.common.transactions import owns_transactions
from app.services.integrations.calendars.access import caldav_timeout, connection_access, redacted
from app.services.integrations.calendars.busy_time import BusyPeriod, busy_periods
from app.services.integrations.calendars.caldav_calendar import (
    CalendarAccess,
    CalendarRead,
    read_calendar,
)
from app.services.integrations.calendars.errors import (
    CalendarNotFound,
    CalendarSyncError,
    ServerError,
)

log = logging.getLogger(__name__)

LOOK_BACK = timedelta(days=1)
READ_AHEAD = timedelta(days=7)
_UID_LENGTH = BlockedTime.__table__.c.external_uid.type.length
_CHUNK = 500

Status = Literal["synced", "unchanged", "probed", "failed", "skipped"]


@dataclass(frozen=True)
class SyncResult:
    """What one sync did. ``ok``: the busy time is current. On failure ``error`` says why and
    ``retryable`` whether trying again later (without anyone changing anything) may help."""

    connection_id: int
    status: Status
    busy_count: int = 0
    added: int = 0
    removed: int = 0
    error: str | None = None
    retryable: bool = False

    @property
    def ok(self) -> bool:
        return self.status in ("synced", "unchanged", "probed")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


@dataclass(frozen=True)
class _Plan:
    connection_id: int
    sub_account_id: int
    configuration: tuple
    access: CalendarAccess
    access_error: CalendarSyncError | None  # the password could not be decrypted
    timezone: str
    window: Interval
    sync_token: str | None
    ctag: str | None
    up_to_date: bool  # the stored busy time covers this window in this timezone


def sync_connection(
    connection_id: int, *, now: datetime, timeout: float | None = None
) -> SyncResult:
    """Sync one connection's busy time (see the module docstring); flushes, never commits.

    Never raises for the calendar's sake: a failure is recorded on the connection and returned
    (``status="failed"``). An inactive or missing connection, or one of an inactive sub
    account, is ``skipped``.
    """
    with Session(db.engine) as read_session:
        plan = _plan(read_session, connection_id, now, caldav_timeout(timeout))
    if isinstance(plan, SyncResult):
        return plan
    try:
        read, periods = _read(plan, incremental=True)
    except CalendarSyncError as err:
        return _record_failure(plan, err, now)
    return _record_success(plan, read, periods, now)


def probe_connection(
    connection_id: int, *, now: datetime, timeout: float | None = None
) -> SyncResult:
    """Reach the calendar and read its events in the window as a sync would, storing nothing
    (not even the outcome): for an operator checking a connection. ``busy_count`` is what a
    sync would store."""
    with Session(db.engine) as read_session:
        plan = _plan(read_session, connection_id, now, caldav_timeout(timeout), probe=True)
    if isinstance(plan, SyncResult):
        return plan
    try:
        _, periods = _read(plan, incremental=False)
    except CalendarSyncError as err:
        message = redacted(err.message, plan.access)
        return SyncResult(connection_id, "failed", error=message, retryable=err.retryable)
    return SyncResult(connection_id, "probed", busy_count=len(periods or []))


def _read(plan: _Plan, *, incremental: bool) -> tuple[CalendarRead, list[BusyPeriod] | None]:
    """The server's markers and, unless the calendar is unchanged, its busy periods (None:
    unchanged). Every failure comes out as a ``CalendarSyncError``."""
    try:
        if plan.access_error is not None:
            raise plan.access_error
        known = incremental and plan.up_to_date
        read = read_calendar(
            plan.access,
            plan.window.start,
            plan.window.end,
            known_sync_token=plan.sync_token if known else None,
            known_ctag=plan.ctag if known else None,
        )
        if read.objects is None:
            return read, None
        return read, busy_periods(read.objects, plan.window, zone(plan.timezone))
    except CalendarSyncError:
        raise
    except Exception as err:  # a bug, or a library failing in a way not foreseen
        log.exception("calendar connection %s: unexpected error reading", plan.connection_id)
        raise ServerError(f"unexpected error: {type(err).__name__}") from err


def active_connection_ids() -> list[int]:
    """Every active connection of every active sub account, in id order: what a sync of all
    connections covers."""
    return list(
        db.session.scalars(
            select(CalendarConnection.id)
            .join(SubAccount, SubAccount.id == CalendarConnection.sub_account_id)
            .where(CalendarConnection.active.is_(True), SubAccount.active.is_(True))
            .order_by(CalendarConnection.id)
        )
    )


@owns_transactions
def sync_all_connections(now: datetime, *, timeout: float | None = None) -> list[SyncResult]:
    """Sync every active connection of every active sub account, each in a transaction of its
    own (committed here), in id order. A failure is recorded and the next one proceeds: a job
    of independent pieces, each kept when a later one fails."""
    ids = active_connection_ids()
    db.session.commit()  # end the read; each sync runs in its own transaction
    results = []
    for connection_id in ids:
        try:
            result = sync_connection(connection_id, now=now, timeout=timeout)
            db.session.commit()
        except Exception as err:  # the database, most likely; the next one may fare better
            db.session.rollback()
            log.exception("calendar connection %s: sync could not be saved", connection_id)
            result = SyncResult(
                connection_id, "failed", error=f"not saved: {type(err).__name__}", retryable=True
            )
        results.append(result)
    return results


def _plan(
    session: Session, connection_id: int, now: datetime, timeout: float, *, probe: bool = False
) -> _Plan | SyncResult:
    connection = session.get(CalendarConnection, connection_id)
    if connection is None:
        return SyncResult(connection_id, "skipped", error="no such connection")
    sub_account = session.get(SubAccount, connection.sub_account_id)
    if not probe and (not connection.active or not sub_account.active):
        return SyncResult(connection_id, "skipped", error="connection or sub account inactive")
    settings = session.get(CalendarSettings, connection.sub_account_id)
    longest_event_type_horizon = session.scalar(
        select(func.max(EventType.booking_horizon_days)).where(
            EventType.sub_account_id == connection.sub_account_id
        )
    )
    horizon = max(settings.booking_horizon_days, longest_event_type_horizon or 0)
    window = Interval(now - LOOK_BACK, now + timedelta(days=horizon) + READ_AHEAD)
    up_to_date = (
        connection.synced_until is not None
        and connection.synced_until >= now + timedelta(days=horizon)
        and connection.synced_timezone == settings.timezone
    )
    access, access_error = connection_access(connection, timeout)
    return _Plan(
        connection_id=connection.id,
        sub_account_id=connection.sub_account_id,
        configuration=_configuration(connection),
        access=access,
        access_error=access_error,
        timezone=settings.timezone,
        window=window,
        sync_token=connection.sync_token,
        ctag=connection.ctag,
        up_to_date=up_to_date,
    )


def _configuration(connection: CalendarConnection) -> tuple:
    """What the sync read with: if it changed meanwhile, the result is stale."""
    return (
        connection.url,
        connection.calendar,
        connection.username,
        connection.encrypted_secret,
        connection.active,
    )


def _current(plan: _Plan) -> CalendarConnection | None:
    """The connection as it is now, if it is still the one the sync read with."""
    connection = db.session.get(CalendarConnection, plan.connection_id, populate_existing=True)
    if connection is None or _configuration(connection) != plan.configuration:
        return None
    return connection


def _record_failure(plan: _Plan, err: CalendarSyncError, now: datetime) -> SyncResult:
    message = redacted(err.message, plan.access)
    log.warning("calendar connection %s: sync failed: %s", plan.connection_id, message)
    lock_calendar(plan.sub_account_id)  # SQLite: write first, never upgrade a read
    connection = _current(plan)
    if connection is None:
        return _stale(plan)
    connection.last_attempt_at = now
    connection.last_error = message
    connection.last_error_at = now
    connection.consecutive_failures += 1
    if isinstance(err, CalendarNotFound):
        connection.calendar_url = None  # look it up afresh next time
    db.session.flush()
    return SyncResult(
        plan.connection_id,
        "failed",
        busy_count=connection.busy_count,
        error=message,
        retryable=err.retryable,
    )


def _record_success(
    plan: _Plan, read: CalendarRead, periods: list[BusyPeriod] | None, now: datetime
) -> SyncResult:
    lock_calendar(plan.sub_account_id)
    connection = _current(plan)
    if connection is None:
        return _stale(plan)
    connection.last_attempt_at = now
    connection.last_success_at = now
    connection.consecutive_failures = 0
    connection.calendar_url = read.markers.calendar_url
    connection.sync_token = read.markers.sync_token
    connection.ctag = read.markers.ctag
    if periods is None:
        db.session.flush()
        return SyncResult(plan.connection_id, "unchanged", busy_count=connection.busy_count)

    added, removed, count = _replace_busy_time(connection, periods)
    connection.busy_count = count
    connection.synced_until = plan.window.end
    connection.synced_timezone = plan.timezone
    db.session.flush()
    log.info(
        "calendar connection %s: %s busy periods (%s added, %s removed)",
        plan.connection_id,
        count,
        added,
        removed,
    )
    return SyncResult(plan.connection_id, "synced", busy_count=count, added=added, removed=removed)


def _replace_busy_time(
    connection: CalendarConnection, periods: list[BusyPeriod]
) -> tuple[int, int, int]:
    """Make the connection's external blocked times exactly ``periods`` (minus the service's
    own events), touching only what changed. Returns (added, removed, total)."""
    own = _booking_uids(connection.sub_account_id, {p.uid for p in periods})
    wanted = Counter((p.uid[:_UID_LENGTH], p.start, p.end) for p in periods if p.uid not in own)
    stale_ids = []
    for row_id, uid, start, end in db.session.execute(
        select(BlockedTime.id, BlockedTime.external_uid, BlockedTime.start_at, BlockedTime.end_at)
        .where(BlockedTime.calendar_connection_id == connection.id)
        .order_by(BlockedTime.id)
    ):
        key = (uid or "", start, end)
        if wanted[key] > 0:
            wanted[key] -= 1  # still busy: the row stays as it is
        else:
            stale_ids.append(row_id)
    for chunk in _chunks(stale_ids):
        db.session.execute(delete(BlockedTime).where(BlockedTime.id.in_(chunk)))
    rows = [
        {
            "sub_account_id": connection.sub_account_id,
            "start_at": start,
            "end_at": end,
            "source": BlockedTimeSource.EXTERNAL,
            "calendar_connection_id": connection.id,
            "external_uid": uid,
        }
        for (uid, start, end), n in sorted(wanted.items())
        for _ in range(n)
    ]
    if rows:
        db.session.execute(insert(BlockedTime), rows)
    total = sum(1 for p in periods if p.uid not in own)
    return len(rows), len(stale_ids), total


def _booking_uids(sub_account_id: int, uids: set[str]) -> set[str]:
    """Which of ``uids`` are this sub account's bookings (events written back by the service)."""
    found: set[str] = set()
    for chunk in _chunks(sorted(uids)):
        found.update(
            db.session.scalars(
                select(Booking.uid).where(
                    Booking.sub_account_id == sub_account_id, Booking.uid.in_(chunk)
                )
            )
        )
    return found


def _chunks(items: list, size: int = _CHUNK) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _stale(plan: _Plan) -> SyncResult:
    return SyncResult(
        plan.connection_id,
        "skipped",
        error="the connection was changed or removed during the sync",
        retryable=True,
    )
