"""Connected calendars' jobs: each waits on a calendar's server, so no transaction is open
while it does, and each step's outcome is committed as it is made.

- ``sync_and_follow_up``: what the worker does for one connection each time (``calendars.sync``):
  sync it, then follow up on the outcome: the bookings made before the connection wrote back
  are written into it if it asks for them (``write_existing_bookings``); a failure only a
  person can mend is told to its people, once (``health.tell_people``); its push channels are
  made, renewed or stopped (``keep_channels``), so its next changes are pushed;
- ``sync_all_connections``: every connection, one after the other (the command line);
- ``write_existing_bookings``, ``keep_channels``, ``run_connection_test``.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from app.extensions import db
from app.services.integrations.calendars import push
from app.services.integrations.calendars.connections import (
    ConnectionTest,
    list_for_test,
    pending_test,
    record_test,
)
from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.health import PageLink, tell_people
from app.services.integrations.calendars.push import Channel, ChannelPlan, ChannelsKept
from app.services.integrations.calendars.sync import (
    SyncResult,
    active_connection_ids,
    sync_connection,
)
from app.services.integrations.calendars.write_back import (
    EXISTING_BUDGET_SECONDS,
    ExistingBookingsWritten,
    ExistingToWrite,
    existing_bookings_to_write,
    note_existing_progress,
    write_back_booking,
)

log = logging.getLogger(__name__)


def sync_and_follow_up(
    connection_id: int, *, now: datetime, page: PageLink, timeout: float | None = None
) -> SyncResult:
    """Sync the connection and commit the outcome, then follow up (the module docstring).
    ``page`` builds the link to a connection's dashboard page. The follow-up commits what it
    records too, before the channels are kept."""
    result = sync_connection(connection_id, now=now, timeout=timeout)
    db.session.commit()
    if result.ok:
        write_existing_bookings(connection_id, now=now, timeout=timeout)
    elif result.status == "failed":
        tell_people(connection_id, now=now, page=page)
    db.session.commit()
    keep_channels(connection_id, now)
    return result


def sync_all_connections(now: datetime, *, timeout: float | None = None) -> list[SyncResult]:
    """Sync every active connection of every active sub account, each in a transaction of its
    own, in id order. A failure is recorded and the next one proceeds: each is kept when a
    later one fails."""
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


def write_existing_bookings(
    connection_id: int,
    *,
    now: datetime,
    budget_seconds: float = EXISTING_BUDGET_SECONDS,
    timeout: float | None = None,
) -> ExistingBookingsWritten | None:
    """Write the bookings the connection asks for (``write_back.existing_bookings_to_write``)
    into it alone, in booking id order, as the write-back writes them (idempotent, event ids
    kept); each booking's outcome is committed with the connection's progress
    (``write_existing_after``).

    It stops at the first failure, recorded on the connection as any write-back failure is (a
    later run begins again with that booking), or once ``budget_seconds`` are spent (at least
    one booking is written; a later run goes on after it). Once every booking is written, the
    connection asks no more. None: the connection does not ask."""
    to_write = existing_bookings_to_write(connection_id, now)
    if not isinstance(to_write, ExistingToWrite):
        return to_write  # it does not ask, or cannot be written to now
    after, written = to_write.after, 0
    started = time.monotonic()
    for booking_id in to_write.booking_ids:
        if written and time.monotonic() - started >= budget_seconds:
            return ExistingBookingsWritten(connection_id, written)
        outcomes = write_back_booking(
            booking_id,
            now=now,
            timeout=timeout,
            connection_id=connection_id,
            writer=f"existing bookings {connection_id}",
        )
        if not outcomes:  # not written to now (switched off or made inactive): left to later
            return ExistingBookingsWritten(connection_id, written)
        failed = next((o.error for o in outcomes if o.error), None)
        moved_on = failed is None and note_existing_progress(
            connection_id, after, write_existing_after=booking_id
        )
        db.session.commit()  # the outcome on the connection (and the progress)
        if failed is not None:
            return ExistingBookingsWritten(connection_id, written, error=failed)
        if not moved_on:  # asked for again meanwhile (write-back switched off and on)
            return ExistingBookingsWritten(connection_id, written)
        after, written = booking_id, written + 1
    done = note_existing_progress(
        connection_id, after, write_existing_pending=False, write_existing_after=None
    )
    db.session.commit()
    log.info("calendar connection %s: %s existing bookings written", connection_id, written)
    return ExistingBookingsWritten(connection_id, written, done=done)


def keep_channels(connection_id: int, now: datetime) -> ChannelsKept:
    """Make every calendar the connection reads have a live channel (made, or renewed when
    within ``push.RENEW_BEFORE`` of expiry), and stop those it no longer needs (its calendar is
    no longer read, the connection is switched off, push is off). The provider is asked with
    no transaction open, and each channel's change is committed as it is made. Never raises
    for a provider's sake."""
    plan = push.channel_plan(connection_id)
    if plan is None:
        return ChannelsKept()
    made = renewed = stopped = 0
    errors: list[str] = []
    for channel in plan.to_stop():
        try:
            push.close_channel(plan, channel.channel_id, channel.resource_id)
            stopped += 1
        except CalendarSyncError as err:
            errors.append(err.message)  # it expires by itself; its notifications are refused
        push.forget_channel(channel)
        db.session.commit()
        push.count_channel_change("any", "stopped")
    for calendar_id, remote_id, due in plan.due(now):
        try:
            if due is None:
                _open(plan, calendar_id, remote_id, now)
                made += 1
            else:
                _renew(plan, due, remote_id, now)
                renewed += 1
        except CalendarSyncError as err:
            log.warning("calendar connection %s: push channel not kept: %s", connection_id, err)
            errors.append(err.message)
    return ChannelsKept(made, renewed, stopped, tuple(errors))


def _open(plan: ChannelPlan, calendar_id: int, remote_id: str, now: datetime) -> None:
    """A new channel for one calendar, its row committed as soon as the provider made it; a
    row that cannot be kept (the calendar went meanwhile, or a second keeper made one) stops
    the channel again."""
    opened, secret = push.open_channel(plan, remote_id, now)
    try:
        push.add_channel(plan, calendar_id, opened, secret, now)
        db.session.commit()
    except Exception:
        db.session.rollback()
        push.close_channel(plan, opened.channel_id, opened.resource_id)
        raise
    push.count_channel_change(plan.kind, "made")


def _renew(plan: ChannelPlan, channel: Channel, remote_id: str, now: datetime) -> None:
    """A later expiry for one channel, committed as soon as the provider gave it; a provider
    whose channels cannot be extended gets a new one, then the old one is stopped (both deliver
    for a moment; a notification more is a sync more, never one less)."""
    expires = push.renew_channel(plan, channel, now)
    if expires is not None:
        push.note_renewed(channel, expires, now)
        db.session.commit()
    else:
        assert channel.calendar_id is not None  # only the channels of calendars read are due
        push.forget_channel(channel)  # its calendar is free for the new channel's row
        db.session.commit()
        _open(plan, channel.calendar_id, remote_id, now)
        try:
            push.close_channel(plan, channel.channel_id, channel.resource_id)
        except CalendarSyncError as err:
            log.info("calendar connection %s: old channel not stopped: %s", plan.connection_id, err)
    push.count_channel_change(plan.kind, "renewed")


def run_connection_test(connection_id: int, *, now: datetime) -> ConnectionTest | None:
    """The worker's side of "Test connection": list the account's calendars and keep what was
    found, or why not, for the page. Nothing is open while the server answers; the result is
    kept only if no newer test was asked for meanwhile. None: no test was asked for."""
    asked = pending_test(connection_id)
    if asked is None:
        return None
    found = list_for_test(asked)
    tested = record_test(asked, found, now)
    db.session.commit()
    return tested
