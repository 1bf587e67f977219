"""Inbound sync: a connection's calendars become the sub account's external busy time.

``sync_connection`` is one use case in the caller's transaction (it flushes; the caller, a
Celery task or a CLI command, commits). It reads the connection in a short transaction of its
own first, so no transaction stays open while a server is waited for, then asks the
connection's provider (``providers``) for each calendar's changes since the last read, and only
then writes, under the calendar's write lock (the one booking writes take):

- success: each changed item's busy periods replace that item's ``external`` blocked times,
  by difference (a row whose (start, end) is still busy is left as it is, same id), removed
  items lose theirs, and the provider's markers are kept for the next read. A full read (the
  first, or when the window moved past what was read, or the timezone changed) does the same
  for every item, and drops the items it no longer finds. An item that cannot be read is
  recorded with its problem and keeps the busy time it had: the rest of the calendar stays
  current;
- unchanged (the provider's markers equal the kept ones): nothing but the attempt is written;
- failure: the error, its time and the attempt are recorded, the busy time stays as it was
  (an unreachable calendar does not become a free one), and the result says whether trying
  again later may help; if not, what a person must do is kept too (``needs_action``,
  ``health``), until a sync succeeds again.

The window is [now - 1 day, now + the sub account's longest booking horizon (its settings and
any event type's) + 7 days]: the extra week lets a calendar be read incrementally for up to a
week as the window moves on, before it is read in full to pick up the occurrences that moved
in (a day to a week, by connection, so that the full reads of many connections spread out).

Events the service wrote itself (write-back: their UID is one of this sub account's bookings'
``uid``, or, where the provider chose the event's id, a ``WrittenEvent`` names it) are not busy
time: the bookings occupy that time themselves.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from sqlalchemy import CursorResult, String, delete, func, insert, select, update
from sqlalchemy.orm import Session

from app.counters import SYNC_LAG_SECONDS
from app.extensions import db
from app.models import (
    BlockedTime,
    BlockedTimeSource,
    Booking,
    CalendarConnection,
    CalendarItem,
    CalendarSettings,
    ConnectedCalendar,
    EventType,
    SubAccount,
    WrittenEvent,
)
from app.models.calendar_connection import OAUTH_KINDS
from app.scheduling.intervals import Interval
from app.scheduling.timezones import zone
from app.services.common.locking import lock_calendar
from app.services.integrations.calendars.access import caldav_timeout, connection_access, redacted
from app.services.integrations.calendars.busy_time import BusyPeriod
from app.services.integrations.calendars.errors import (
    CalendarNotFound,
    CalendarSyncError,
    ServerError,
)
from app.services.integrations.calendars.health import action_needed
from app.services.integrations.calendars.providers import (
    CalendarChanges,
    Cursor,
    provider_for,
)
from app.services.integrations.calendars.providers.base import ItemRead

log = logging.getLogger(__name__)

LOOK_BACK = timedelta(days=1)
READ_AHEAD = timedelta(days=7)
STAGGER_HOURS = 6 * 24
_UID_LENGTH = cast(String, BlockedTime.__table__.c.external_uid.type).length
_CHUNK = 500

Status = Literal["synced", "unchanged", "probed", "failed", "skipped"]


@dataclass(frozen=True)
class SyncResult:
    """What one sync did. ``ok``: the busy time is current. On failure ``error`` says why and
    ``retryable`` whether trying again later (without anyone changing anything) may help.
    ``skipped``: events that could not be read (their earlier busy time, if any, kept)."""

    connection_id: int
    status: Status
    busy_count: int = 0
    added: int = 0
    removed: int = 0
    error: str | None = None
    retryable: bool = False
    skipped: int = 0

    @property
    def ok(self) -> bool:
        return self.status in ("synced", "unchanged", "probed")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


@dataclass(frozen=True)
class _Plan:
    connection_id: int
    sub_account_id: int
    kind: str
    configuration: tuple
    access: Any
    access_error: CalendarSyncError | None  # the secret could not be decrypted
    timezone: str
    window: Interval
    cursors: list[Cursor]  # one per calendar to read


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
        changes = _read(plan)
    except CalendarSyncError as err:
        return _record_failure(plan, err, now)
    return _record_success(plan, changes, now)


def probe_connection(
    connection_id: int, *, now: datetime, timeout: float | None = None
) -> SyncResult:
    """Reach the calendars and read their events in the window as a full sync would, storing
    nothing (not even the outcome): for an operator checking a connection. ``busy_count`` is
    what a sync would store."""
    with Session(db.engine) as read_session:
        plan = _plan(read_session, connection_id, now, caldav_timeout(timeout), probe=True)
    if isinstance(plan, SyncResult):
        return plan
    try:
        changes = _read(plan)
    except CalendarSyncError as err:
        message = redacted(err.message, plan.access)
        return SyncResult(connection_id, "failed", error=message, retryable=err.retryable)
    items = [item for change in changes for item in change.changed]
    return SyncResult(
        connection_id,
        "probed",
        busy_count=sum(len(item.periods) for item in items),
        skipped=sum(1 for item in items if item.problem),
    )


def _read(plan: _Plan) -> list[CalendarChanges]:
    """Each calendar's changes. Every failure comes out as a ``CalendarSyncError``."""
    try:
        if plan.access_error is not None:
            raise plan.access_error
        provider = provider_for(plan.kind)
        tz = zone(plan.timezone)
        return [provider.read(plan.access, cursor, plan.window, tz) for cursor in plan.cursors]
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


def _plan(
    session: Session, connection_id: int, now: datetime, timeout: float, *, probe: bool = False
) -> _Plan | SyncResult:
    connection = session.get(CalendarConnection, connection_id)
    if connection is None:
        return SyncResult(connection_id, "skipped", error="no such connection")
    sub_account = session.get(SubAccount, connection.sub_account_id)
    assert sub_account is not None  # the connection's (a foreign key)
    if not probe and (not connection.active or not sub_account.active):
        return SyncResult(connection_id, "skipped", error="connection or sub account inactive")
    settings = session.get(CalendarSettings, connection.sub_account_id)
    assert settings is not None  # every sub account has its settings
    longest_event_type_horizon = session.scalar(
        select(func.max(EventType.booking_horizon_days)).where(
            EventType.sub_account_id == connection.sub_account_id
        )
    )
    horizon = max(settings.booking_horizon_days, longest_event_type_horizon or 0)
    window = Interval(now - LOOK_BACK, now + timedelta(days=horizon) + READ_AHEAD)
    # A calendar is read in full again once the window nears the end of what was read; how
    # near depends on the connection, so connections synced together (after an upgrade, say)
    # do not all read in full on the same day every week.
    covered_until = now + timedelta(days=horizon) + _stagger(connection.id)
    calendars = session.scalars(
        select(ConnectedCalendar)
        .where(ConnectedCalendar.calendar_connection_id == connection.id)
        .order_by(ConnectedCalendar.id)
    ).all()
    cursors = [
        Cursor(
            remote_id=row.remote_id,
            sync_token=row.sync_token,
            ctag=row.ctag,
            incremental=(
                not probe
                and row.synced_until is not None
                and row.synced_until >= covered_until
                and row.synced_timezone == settings.timezone
            ),
            known_etags=_etags_loader(row.id),
        )
        for row in calendars
    ] or [Cursor(remote_id=None)]
    access, access_error = connection_access(connection, timeout)
    return _Plan(
        connection_id=connection.id,
        sub_account_id=connection.sub_account_id,
        kind=connection.kind,
        configuration=_configuration(connection),
        access=access,
        access_error=access_error,
        timezone=settings.timezone,
        window=window,
        cursors=cursors,
    )


def _stagger(connection_id: int) -> timedelta:
    """0 to 6 days, by connection: the part of ``READ_AHEAD`` it gives up to spread the weekly
    full reads (each still has at least a day of incremental ones)."""
    return timedelta(hours=connection_id % STAGGER_HOURS)


def _etags_loader(connected_calendar_id: int):
    """The stored items' ETags by key, read when a provider asks (in a session of its own:
    the sync holds no transaction while a server is waited for)."""

    def load() -> dict[str, str | None]:
        with Session(db.engine) as session:
            return dict(
                session.execute(
                    select(CalendarItem.key, CalendarItem.etag).where(
                        CalendarItem.connected_calendar_id == connected_calendar_id
                    )
                ).all()
            )

    return load


def _configuration(connection: CalendarConnection) -> tuple:
    """What the sync read with: if it changed meanwhile, the result is stale. (An OAuth grant
    changes when its access token is refreshed, which the sync itself may do: not counted.)"""
    oauth = connection.kind in OAUTH_KINDS
    return (
        connection.kind,
        connection.url,
        connection.calendar,
        connection.username,
        None if oauth else connection.encrypted_secret,
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
    lock_calendar(plan.sub_account_id)  # as _record_success: one writer of the calendar at a time
    connection = _current(plan)
    if connection is None:
        return _stale(plan)
    connection.last_attempt_at = now
    connection.last_error = message
    connection.last_error_at = now
    connection.consecutive_failures += 1
    # What a person must do; a failure that may mend by itself (a timeout) leaves it as it was.
    connection.needs_action = action_needed(connection.kind, err) or connection.needs_action
    if isinstance(err, CalendarNotFound):
        forget_sync_state(connection.id)  # look it up afresh next time
    db.session.flush()
    return SyncResult(
        plan.connection_id,
        "failed",
        busy_count=connection.busy_count,
        error=message,
        retryable=err.retryable,
        skipped=connection.skipped_count,
    )


def _record_success(plan: _Plan, changes: list[CalendarChanges], now: datetime) -> SyncResult:
    lock_calendar(plan.sub_account_id)
    connection = _current(plan)
    if connection is None:
        return _stale(plan)
    connection.last_attempt_at = now
    connection.last_success_at = now
    connection.consecutive_failures = 0
    connection.needs_action = connection.action_mailed_at = None  # working again (``health``)
    rows = {row.remote_id: row for row in _calendar_rows(connection.id)}
    for remote_id in rows.keys() - {change.remote_id for change in changes}:
        _drop_calendar(rows.pop(remote_id))  # no longer read (another calendar was found)
    added = removed = 0
    for change in changes:
        row = rows.get(change.remote_id)
        if row is None:
            row = ConnectedCalendar(
                calendar_connection_id=connection.id, remote_id=change.remote_id
            )
            db.session.add(row)
            db.session.flush()
        row.name = change.name
        row.sync_token, row.ctag = change.sync_token, change.ctag
        if change.unchanged:
            continue
        more, fewer = _apply(connection, row, change)
        added, removed = added + more, removed + fewer
        if change.complete:
            row.synced_until = plan.window.end
            row.synced_timezone = plan.timezone
    if all(change.unchanged for change in changes):
        db.session.flush()
        return SyncResult(
            plan.connection_id,
            "unchanged",
            busy_count=connection.busy_count,
            skipped=connection.skipped_count,
        )
    if any(change.complete for change in changes):
        removed += _drop_unitemised(connection.id)
    recount(connection)
    _observe_lag(changes, now)
    db.session.flush()
    log.info(
        "calendar connection %s: %s (%s added, %s removed, %s skipped)",
        plan.connection_id,
        counted(connection.busy_count, "busy period"),
        added,
        removed,
        counted(connection.skipped_count, "event"),
    )
    return SyncResult(
        plan.connection_id,
        "synced",
        busy_count=connection.busy_count,
        added=added,
        removed=removed,
        skipped=connection.skipped_count,
    )


def record_seen(connection_id: int, remote_id: str, window: Interval, items: list[ItemRead]) -> int:
    """Store what a live check (``live_check``) saw of one calendar in ``window``, as a sync
    would store it, but for ``window`` alone: an event's busy time there becomes what the
    calendar says now (a new event blocks at once, before the next sync), its busy time
    elsewhere (other occurrences of a series) stays as the last sync left it, and stored events
    busy in ``window`` that the calendar no longer lists there lose their busy time there
    (deleted or moved since the last sync). The sync markers stay as they are, so the next
    sync still reads everything that changed since its own. Returns the busy periods added.
    Call with the calendar's write lock held; flushes."""
    connection = db.session.get(CalendarConnection, connection_id)
    if connection is None or not connection.active:
        return 0
    row = db.session.scalar(
        select(ConnectedCalendar).where(
            ConnectedCalendar.calendar_connection_id == connection_id,
            ConnectedCalendar.remote_id == remote_id,
        )
    )
    if row is None:  # never synced: the sync will find this calendar under the same id
        row = ConnectedCalendar(calendar_connection_id=connection_id, remote_id=remote_id)
        db.session.add(row)
        db.session.flush()

    def inside(start: datetime, end: datetime) -> bool:
        return start < window.end and end > window.start

    stored: dict[str, list[BusyPeriod]] = {}
    for key, start, end, uid in db.session.execute(
        select(CalendarItem.key, BlockedTime.start_at, BlockedTime.end_at, BlockedTime.external_uid)
        .join(BlockedTime, BlockedTime.calendar_item_id == CalendarItem.id)
        .where(CalendarItem.connected_calendar_id == row.id)
        .where(
            CalendarItem.key.in_([item.key for item in items])
            | (BlockedTime.start_at < window.end) & (BlockedTime.end_at > window.start)
        )
        .order_by(BlockedTime.id)
    ):
        stored.setdefault(key, []).append(BusyPeriod(start, end, uid or ""))
    seen: list[ItemRead] = []
    for item in items:
        here = [p for p in item.periods if inside(p.start, p.end)]
        if item.key not in stored and not here and item.problem is None:
            continue  # beside the question: the sync's to store
        elsewhere = [p for p in stored.get(item.key, []) if not inside(p.start, p.end)]
        seen.append(replace(item, periods=elsewhere + here))
    listed = {item.key for item in items}
    for key, periods in stored.items():
        if key not in listed and any(inside(p.start, p.end) for p in periods):
            elsewhere = [p for p in periods if not inside(p.start, p.end)]
            seen.append(ItemRead(key, None, None, elsewhere))
    if not seen:
        return 0
    change = CalendarChanges(remote_id, row.name, False, seen, [], row.sync_token, row.ctag)
    added, removed = _apply(connection, row, change)
    if added or removed:
        recount(connection)
    db.session.flush()
    return added


def _observe_lag(changes: list[CalendarChanges], now: datetime) -> None:
    """How long changes read incrementally took to arrive (a full read's items changed at any
    time, so they say nothing of it)."""
    for change in changes:
        if change.complete:
            continue
        for item in change.changed:
            if item.changed_at is not None and item.changed_at <= now:
                SYNC_LAG_SECONDS.observe((now - item.changed_at).total_seconds())


def forget_sync_state(connection_id: int) -> None:
    """Make the next sync look the connection's calendars up afresh and read them in full
    (its configuration changed). Their busy time stays until that sync replaces it."""
    for row in _calendar_rows(connection_id):
        row.forget_sync_state()


def _calendar_rows(connection_id: int) -> list[ConnectedCalendar]:
    return list(
        db.session.scalars(
            select(ConnectedCalendar)
            .where(ConnectedCalendar.calendar_connection_id == connection_id)
            .order_by(ConnectedCalendar.id)
        )
    )


def _drop_calendar(row: ConnectedCalendar) -> None:
    """A calendar no longer read: its items and their busy time go with it."""
    item_ids = select(CalendarItem.id).where(CalendarItem.connected_calendar_id == row.id)
    db.session.execute(delete(BlockedTime).where(BlockedTime.calendar_item_id.in_(item_ids)))
    db.session.execute(delete(CalendarItem).where(CalendarItem.connected_calendar_id == row.id))
    db.session.delete(row)
    db.session.flush()


def counted(number: int, noun: str) -> str:
    """``1 busy period``, ``2 busy periods``: a count as people write it."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _drop_unitemised(connection_id: int) -> int:
    """Busy time stored before items were kept (migration 0012): a full read replaces it."""
    result = cast(
        CursorResult[Any],  # a DELETE's result, typed as a plain Result
        db.session.execute(
            delete(BlockedTime).where(
                BlockedTime.calendar_connection_id == connection_id,
                BlockedTime.calendar_item_id.is_(None),
            )
        ),
    )
    return result.rowcount or 0


def recount(connection: CalendarConnection) -> None:
    """The connection's totals for operators: busy periods stored, events skipped and why (after
    a sync, and after its calendars changed). Flushes nothing."""
    busy_count = db.session.scalar(
        select(func.count())
        .select_from(BlockedTime)
        .where(BlockedTime.calendar_connection_id == connection.id)
    )
    assert busy_count is not None  # a count is one row
    connection.busy_count = busy_count
    problems = db.session.scalars(
        select(CalendarItem.problem)
        .join(ConnectedCalendar, ConnectedCalendar.id == CalendarItem.connected_calendar_id)
        .where(
            ConnectedCalendar.calendar_connection_id == connection.id,
            CalendarItem.problem.is_not(None),
        )
        .order_by(CalendarItem.id)
    ).all()
    connection.skipped_count = len(problems)
    connection.skipped_reason = problems[0] if problems else None


def _apply(
    connection: CalendarConnection, row: ConnectedCalendar, change: CalendarChanges
) -> tuple[int, int]:
    """Store one calendar's changes, touching only the rows of items whose busy time changed.
    Returns (busy periods added, removed)."""
    changed = {item.key: item for item in change.changed}
    stored = _stored_items(
        row.id, None if change.complete else changed.keys() | set(change.removed)
    )
    gone = (
        (stored.keys() - changed.keys()) if change.complete else set(change.removed) & stored.keys()
    )
    gone_ids = [stored[key][0] for key in sorted(gone)]
    removed = 0
    for chunk in _chunks(gone_ids):
        deleted = cast(
            CursorResult[Any],  # a DELETE's result, typed as a plain Result
            db.session.execute(delete(BlockedTime).where(BlockedTime.calendar_item_id.in_(chunk))),
        )
        removed += deleted.rowcount or 0
        db.session.execute(delete(CalendarItem).where(CalendarItem.id.in_(chunk)))

    own_uids = _booking_uids(connection.sub_account_id, {i.uid for i in changed.values() if i.uid})
    own_keys = _written_event_ids(connection.id, set(changed))
    updates, new = [], []
    for key, item in changed.items():
        if item.kept:
            continue
        values = {"etag": item.etag, "uid": item.uid, "problem": item.problem}
        if key in stored:
            updates.append({"id": stored[key][0], **values})
        else:
            new.append({"connected_calendar_id": row.id, "key": key, **values})
    if updates:
        db.session.execute(update(CalendarItem), updates)
    item_ids = {key: item_id for key, (item_id, _) in stored.items() if key in changed}
    for chunk in _chunks(new):
        item_ids.update(
            (key, item_id)
            for item_id, key in db.session.execute(
                insert(CalendarItem).returning(CalendarItem.id, CalendarItem.key), chunk
            )
        )
    wanted = {
        item_ids[key]: [] if item.uid in own_uids or key in own_keys else item.periods
        for key, item in changed.items()
        if item.problem is None and not item.kept  # unreadable: its earlier busy time stays
    }
    added, fewer = _replace_periods(connection, wanted)
    return added, removed + fewer


def _stored_items(
    connected_calendar_id: int, keys: set[str] | None
) -> dict[str, tuple[int, str | None]]:
    """The calendar's stored items (or those of ``keys``) as key → (id, etag)."""
    query = select(CalendarItem.key, CalendarItem.id, CalendarItem.etag).where(
        CalendarItem.connected_calendar_id == connected_calendar_id
    )
    if keys is None:
        return {key: (item_id, etag) for key, item_id, etag in db.session.execute(query)}
    found: dict[str, tuple[int, str | None]] = {}
    for chunk in _chunks(sorted(keys)):
        for key, item_id, etag in db.session.execute(query.where(CalendarItem.key.in_(chunk))):
            found[key] = (item_id, etag)
    return found


def _replace_periods(connection: CalendarConnection, wanted: dict[int, list]) -> tuple[int, int]:
    """Make each item's blocked times exactly its periods: rows still busy stay as they are,
    the others are deleted, the missing ones inserted. Returns (added, removed)."""
    missing: dict[int, Counter] = {
        item_id: Counter((p.start, p.end, p.uid[:_UID_LENGTH]) for p in periods)
        for item_id, periods in wanted.items()
    }
    stale: list[int] = []
    for chunk in _chunks(sorted(wanted)):
        for row_id, item_id, start, end, uid in db.session.execute(
            select(
                BlockedTime.id,
                BlockedTime.calendar_item_id,
                BlockedTime.start_at,
                BlockedTime.end_at,
                BlockedTime.external_uid,
            )
            .where(BlockedTime.calendar_item_id.in_(chunk))
            .order_by(BlockedTime.id)
        ):
            assert item_id is not None  # selected by its item
            key = (start, end, uid or "")
            if missing[item_id][key] > 0:
                missing[item_id][key] -= 1  # still busy: the row stays as it is
            else:
                stale.append(row_id)
    for chunk in _chunks(stale):
        db.session.execute(delete(BlockedTime).where(BlockedTime.id.in_(chunk)))
    rows = [
        {
            "sub_account_id": connection.sub_account_id,
            # A connected calendar's busy time is its host's alone (migration 0030).
            "host_id": connection.host_id,
            "start_at": start,
            "end_at": end,
            "source": BlockedTimeSource.EXTERNAL,
            "calendar_connection_id": connection.id,
            "calendar_item_id": item_id,
            "external_uid": uid,
        }
        for item_id, counter in sorted(missing.items())
        for (start, end, uid), n in sorted(counter.items())
        for _ in range(n)
    ]
    for chunk in _chunks(rows):
        db.session.execute(insert(BlockedTime), chunk)
    return len(rows), len(stale)


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


def _written_event_ids(connection_id: int, keys: set[str]) -> set[str]:
    """Which of ``keys`` are events write-back made in this connection's calendars (for the
    providers that chose the event's id: ``WrittenEvent``)."""
    found: set[str] = set()
    for chunk in _chunks(sorted(keys)):
        found.update(
            db.session.scalars(
                select(WrittenEvent.event_id).where(
                    WrittenEvent.calendar_connection_id == connection_id,
                    WrittenEvent.event_id.in_(chunk),
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
