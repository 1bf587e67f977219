"""Outbound write-back: a booking made through the service appears in the connected calendars
whose connection has ``write_back`` on, and follows the booking's changes.

The outbox handler (``write_back_delivery``) does not replay the event it is given: it writes the
booking *as it is now*: cancelled → its event is deleted, anything else → its event is stored
(``app.services.integrations.ical``: UID = the booking's uid, SEQUENCE = its ``sequence``).
So deliveries that come late, twice or out of order still leave the calendar with the latest
version, and a repeated write is a PUT of the same data to the same place. Should the booking
change while its event is being written, it is written again (a slower delivery of an older
event must not have the last word).

Like the inbound sync, no transaction is open while a server is waited for: the booking and
connections are read in a short session of their own, the servers are written, then the outcome
is recorded on each connection (``last_write_at``, ``last_write_error``). A failure raises
``DeliveryFailed``, so the outbox offers the event again later with backoff.

A booking of a Google Meet or Microsoft Teams event type (its ``location_kind``) has its event
written with a meeting in one connection: the first active write-back connection (by id) whose
provider makes that kind (``WritesEvents.meetings``). The provider answers the meeting's
join link; when it differs from the booking's ``location``, it becomes the location in the
transaction that records the outcome (``sequence`` raised), with a ``booking.updated`` event
changing ``("location",)``: webhooks, a mail to the attendees and the calendars' copies follow
it. A link the provider is still making fails the delivery, so the outbox writes the event
again later, which answers it. Every write of the event carries the same meeting request
(Google's ``requestId``, Graph's ``isOnlineMeeting`` on an event it keeps by id), so a retry
or a reschedule keeps the meeting and a cancel deletes it with the event. Without such a
connection (removed after the event type was saved) no meeting is made and the location stays
the event type's text.

One writer at a time writes a booking's event into a connection's calendar: the delivery of
an event, a second delivery of it (a broker's redelivery, the sweep), and the writing of
existing bookings could otherwise write the same booking at once, making two events where the
provider chooses the id (Graph). A writer claims the booking and connection
(``CalendarWriteLease``, committed at once) before it writes and gives the claim back in the
transaction that records the outcome (the event's id included). A writer is named for what it
writes (an outbox event's delivery, one connection's existing bookings), so the same writer
run again (its task redelivered after its process was killed, or enqueued again by the sweep)
takes its own claim back at once. Another writer that finds it claimed does not wait: its outcome is
``deferred``, not an error of the connection's, and the delivery is offered again later (the
existing bookings' run stops there and goes on at its next run), when it writes the booking as
it is then. Two deliveries of one event at once both write; the providers keep one event (the
same UID, Graph's ``transactionId``).

Bookings made before a connection wrote back (it was connected later, or write-back was
switched on later) have no event to deliver: ``write_existing_bookings`` writes the sub
account's future active bookings into that one connection once, when the connection asks for
it (``write_existing_pending``); the worker runs it after a successful sync.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from psycopg.errors import LockNotAvailable
from sqlalchemy import CursorResult, delete, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.database import session_apart
from app.extensions import db
from app.models import (
    ACTIVE_STATUSES,
    MEETING_KINDS,
    Booking,
    BookingHost,
    BookingStatus,
    CalendarConnection,
    CalendarWriteLease,
    SubAccount,
    WrittenEvent,
)
from app.models.calendar_connection import NO_EVENT_ID
from app.models.limits import LOCATION_MAX
from app.models.types import utcnow
from app.services.integrations.calendars.access import caldav_timeout, connection_access, redacted
from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.providers import event_writer, kinds_making
from app.services.integrations.events import BookingEvent, BookingEventKind, emit
from app.services.integrations.ical import booking_calendar
from app.services.integrations.outbox import Delivery, DeliveryFailed

log = logging.getLogger(__name__)

HANDLER_NAME = "calendar_write_back"
# Events that change nothing a calendar shows; the handler takes every other kind.
_NOT_SHOWN = {
    str(BookingEventKind.COMPLETED),
    str(BookingEventKind.NO_SHOW),
    str(BookingEventKind.REMINDER),
}
KINDS = frozenset(str(kind) for kind in BookingEventKind) - _NOT_SHOWN
_MAX_ROUNDS = 3
# How long one run of ``write_existing_bookings`` goes on before leaving the rest to the next
# (a worker task may run 120 s; each write waits at most ``CALDAV_TIMEOUT_SECONDS``).
EXISTING_BUDGET_SECONDS = 45.0
# How long a writer's claim on a booking's event in a calendar holds: longer than any write-back
# runs (a worker task is killed at 180 s, ``app.celery_app``), so a writer that died frees it.
WRITE_LEASE = timedelta(seconds=180)
CLAIM_WAIT_MS = 1000
UNDER_WAY = "another write of this booking to this calendar is under way (written again later)"


@dataclass(frozen=True)
class _Target:
    connection_id: int
    name: str
    kind: str
    access: Any
    access_error: CalendarSyncError | None
    event_id: str | None  # where the event was written before (``WrittenEvent``), if kept
    meeting: str | None = None  # the online meeting its event carries (the booking's kind)
    # Not one of the booking's hosts' calendars (any more): its earlier event is deleted.
    not_a_host: bool = False


@dataclass(frozen=True)
class _Plan:
    booking_id: int
    sub_account_id: int
    uid: str
    sequence: int
    status: str
    data: bytes | None  # the VCALENDAR to store; None: delete
    targets: list[_Target]


@dataclass(frozen=True)
class WriteOutcome:
    connection_id: int
    name: str
    action: str  # "stored" or "deleted"
    error: str | None = None
    event_id: str | None = None  # the event's id, for providers that choose it
    join_url: str | None = None  # the link of the meeting the event carries, once made
    meeting_pending: bool = False  # a meeting was asked for and is still being made
    deferred: bool = False  # another writer had the booking's event in this calendar


def write_back_delivery(delivery: Delivery, now: datetime) -> None:
    """Outbox handler (of the events of ``KINDS``): bring the booking's event in the
    connected calendars up to date."""
    outcomes = write_back_booking(
        delivery.booking_id, now=now, writer=f"outbox event {delivery.event_id}"
    )
    failed = [f"{o.name}: {o.error}" for o in outcomes if o.error]
    failed += [
        f"{o.name}: the meeting's link is not ready yet (asking again)"
        for o in outcomes
        if o.meeting_pending
    ]
    if failed:
        raise DeliveryFailed("; ".join(failed))


def write_back_booking(
    booking_id: int,
    *,
    now: datetime,
    timeout: float | None = None,
    connection_id: int | None = None,
    writer: str | None = None,
) -> list[WriteOutcome]:
    """Store (or, once cancelled, delete) the booking's event in every active write-back
    connection of its sub account (or only in ``connection_id``, if it is one of them); record
    each outcome on its connection (flushed, not committed). Never raises for a server's sake:
    failures are in the outcomes. A meeting's new join link becomes the booking's location,
    with a ``booking.updated`` event (flushed too). ``writer`` names what writes (the same
    name takes its own claims back; None: a writer of its own); a connection another writer
    has is left out, its outcome ``deferred``."""
    outcomes: list[WriteOutcome] = []
    plan = None
    learned: dict[int, str | None] = {}  # event ids answered in an earlier round
    holder = writer or f"writer {secrets.token_hex(8)}"
    claimed: set[int] = set()
    refused: dict[int, str] = {}  # connections another writer has, by name
    for _ in range(_MAX_ROUNDS):
        with Session(db.engine) as read_session:
            plan = _plan(
                read_session, booking_id, now, caldav_timeout(timeout), learned, connection_id
            )
        if plan is None or not plan.targets:
            _give_back(booking_id, claimed, holder)
            return []
        for target in plan.targets:
            if target.connection_id not in claimed | refused.keys():
                if _claim(booking_id, target.connection_id, holder):
                    claimed.add(target.connection_id)
                else:
                    refused[target.connection_id] = target.name
        outcomes = [_write(plan, t) for t in plan.targets if t.connection_id in claimed]
        learned.update((o.connection_id, o.event_id) for o in outcomes if o.error is None)
        if _sequence_now(booking_id) == plan.sequence:
            break
    assert plan is not None  # the last round's
    _record(plan, outcomes, now)
    _give_back(booking_id, claimed, holder)
    action = "deleted" if plan.data is None else "stored"
    return outcomes + [
        WriteOutcome(connection, name, action, UNDER_WAY, deferred=True)
        for connection, name in refused.items()
    ]


def _claim(booking_id: int, connection_id: int, holder: str) -> bool:
    """Claim the booking's event in the connection's calendar for ``holder``, committed at
    once (a session of its own) so every other writer sees it; whether it is ``holder``'s: no
    one had it, ``holder`` had it already, or the claim there was is past its time. A record
    that must be kept whatever becomes of the caller's transaction."""
    now = utcnow()
    claim = insert(CalendarWriteLease).values(
        booking_id=booking_id,
        calendar_connection_id=connection_id,
        holder=holder,
        until=now + WRITE_LEASE,
    )
    taken_over = claim.on_conflict_do_update(
        index_elements=[CalendarWriteLease.booking_id, CalendarWriteLease.calendar_connection_id],
        set_={"holder": claim.excluded.holder, "until": claim.excluded.until},
        where=(CalendarWriteLease.until <= now) | (CalendarWriteLease.holder == holder),
    )
    try:
        with session_apart(db.engine) as session:
            # Never waited for: the row is locked only by a claim being made or given back,
            # which is over in milliseconds, or by a transaction of this very thread that gave
            # its claim back and has not committed yet (two writes in one transaction), which
            # would wait forever. Either way the booking is left to a later write.
            session.execute(text(f"SET LOCAL lock_timeout = '{CLAIM_WAIT_MS}ms'"))
            won = session.scalar(taken_over.returning(CalendarWriteLease.holder))
    except OperationalError as error:
        if not isinstance(error.orig, LockNotAvailable):
            raise
        return False
    return won == holder


def _give_back(booking_id: int, connections: set[int], holder: str) -> None:
    """End ``holder``'s claims, in the transaction that records the outcome (flushed): the
    next writer finds the event's id the provider chose."""
    if connections:
        db.session.execute(
            delete(CalendarWriteLease).where(
                CalendarWriteLease.booking_id == booking_id,
                CalendarWriteLease.calendar_connection_id.in_(connections),
                CalendarWriteLease.holder == holder,
            )
        )


@dataclass(frozen=True)
class ExistingBookingsWritten:
    """What one run of ``app.jobs.calendars.write_existing_bookings`` did: ``written``
    bookings; ``done``: every one is in the calendar now and the connection asks no more;
    ``error``: why it stopped at a booking (the next run begins again with that one)."""

    connection_id: int
    written: int = 0
    done: bool = False
    error: str | None = None


@dataclass(frozen=True)
class ExistingToWrite:
    """The bookings a connection asking for the existing ones is still to be given, in id
    order after ``after`` (the progress of the runs before)."""

    connection_id: int
    after: int | None
    booking_ids: list[int]


def existing_bookings_to_write(
    connection_id: int, now: datetime
) -> ExistingToWrite | ExistingBookingsWritten | None:
    """What ``app.jobs.calendars.write_existing_bookings`` is to write into the connection: the
    sub account's future active bookings (not cancelled, ending after ``now``) after the
    progress so far, if the connection asks for them (``write_existing_pending``). None: it
    does not ask. A run with nothing to do now (``ExistingBookingsWritten``): the connection
    or its sub account is inactive (it keeps asking). A connection that does not write back (a
    feed, write-back off) is given no bookings, so it asks no more at once. Read in a session
    of its own: the caller waits on the calendar's server next."""
    with Session(db.engine) as read_session:
        connection = read_session.get(CalendarConnection, connection_id)
        if connection is None or not connection.write_existing_pending:
            return None
        writes = connection.write_back and event_writer(connection.kind) is not None
        sub_account = read_session.get(SubAccount, connection.sub_account_id)
        assert sub_account is not None  # the connection's (a foreign key)
        if writes and not (connection.active and sub_account.active):
            return ExistingBookingsWritten(connection_id)
        after = connection.write_existing_after
        booking_ids = (
            list(
                read_session.scalars(
                    select(Booking.id)
                    .where(
                        Booking.sub_account_id == connection.sub_account_id,
                        Booking.status.in_(ACTIVE_STATUSES),
                        Booking.end_at > now,
                        Booking.id > (after or 0),
                        # The connection's host's bookings, collective ones included.
                        or_(
                            Booking.host_id == connection.host_id,
                            Booking.id.in_(
                                select(BookingHost.booking_id).where(
                                    BookingHost.host_id == connection.host_id
                                )
                            ),
                        ),
                    )
                    .order_by(Booking.id)
                )
            )
            if writes
            else []
        )
    return ExistingToWrite(connection_id, after, booking_ids)


def note_existing_progress(connection_id: int, expected_after: int | None, **values: Any) -> bool:
    """Store the existing bookings' progress, if it is still the run's own (nobody asked again
    for them meanwhile); whether it was. Flushes."""
    after = CalendarConnection.write_existing_after
    result = cast(
        CursorResult[Any],  # an UPDATE's result, typed as a plain Result
        db.session.execute(
            update(CalendarConnection)
            .where(
                CalendarConnection.id == connection_id,
                CalendarConnection.write_existing_pending.is_(True),
                after.is_(None) if expected_after is None else after == expected_after,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        ),
    )
    return result.rowcount == 1


def _plan(
    session: Session,
    booking_id: int,
    now: datetime,
    timeout: float,
    learned: dict[int, str | None],
    only: int | None = None,
) -> _Plan | None:
    booking = session.get(Booking, booking_id)
    if booking is None:
        return None
    query = (
        select(CalendarConnection)
        .join(SubAccount, SubAccount.id == CalendarConnection.sub_account_id)
        .where(
            CalendarConnection.sub_account_id == booking.sub_account_id,
            CalendarConnection.active.is_(True),
            CalendarConnection.write_back.is_(True),
            SubAccount.active.is_(True),
        )
        .order_by(CalendarConnection.id)
    )
    written_to = set(
        session.scalars(
            select(WrittenEvent.calendar_connection_id).where(WrittenEvent.booking_id == booking_id)
        )
    )
    hosts = {booking.host_id} | set(
        session.scalars(select(BookingHost.host_id).where(BookingHost.booking_id == booking_id))
    )
    # The booking's hosts' calendars, and any other that still has its event (a booking moved
    # to another host leaves the first host's calendar).
    connections = [
        c for c in session.scalars(query).all() if c.host_id in hosts or c.id in written_to
    ]
    meeting = booking.location_kind if booking.location_kind in MEETING_KINDS else None
    # The one connection whose calendar's event carries the booking's meeting.
    meeting_connection = next(
        (
            c.id
            for c in connections
            if meeting and c.host_id in hosts and c.kind in kinds_making(meeting)
        ),
        None,
    )
    if only is not None:
        connections = [c for c in connections if c.id == only]
    written = {
        **dict(
            session.execute(
                select(WrittenEvent.calendar_connection_id, WrittenEvent.event_id).where(
                    WrittenEvent.booking_id == booking_id
                )
            ).all()
        ),
        **learned,
    }
    targets = [
        _Target(
            connection.id,
            connection.name,
            connection.kind,
            *connection_access(connection, timeout),
            event_id=written.get(connection.id) or None,  # NO_EVENT_ID: found by its UID
            meeting=meeting if connection.id == meeting_connection else None,
            not_a_host=connection.host_id not in hosts,
        )
        for connection in connections
        if event_writer(connection.kind) is not None
    ]
    cancelled = booking.status == BookingStatus.CANCELLED
    return _Plan(
        booking_id=booking.id,
        sub_account_id=booking.sub_account_id,
        uid=booking.uid,
        sequence=booking.sequence,
        status=booking.status,
        data=None if cancelled else booking_calendar(booking, now=now),
        targets=targets,
    )


def _write(plan: _Plan, target: _Target) -> WriteOutcome:
    data = None if target.not_a_host else plan.data
    action = "deleted" if data is None else "stored"
    log.info(
        "calendar connection %s: writing booking %s (%s, sequence %s)",
        target.connection_id,
        plan.booking_id,
        "delete" if data is None else "store",
        plan.sequence,
    )
    try:
        if target.access_error is not None:
            raise target.access_error
        provider = event_writer(target.kind)
        assert provider is not None  # only writing kinds are targets (``_plan``)
        if data is None:
            provider.delete_event(target.access, plan.uid, target.event_id)
            stored = None
        else:
            stored = provider.put_event(
                target.access, plan.uid, data, target.event_id, meeting=target.meeting
            )
    except CalendarSyncError as err:
        message = redacted(err.message, target.access)
        log.warning(
            "calendar connection %s: write-back of booking %s failed: %s",
            target.connection_id,
            plan.booking_id,
            message,
        )
        return WriteOutcome(target.connection_id, target.name, action, message)
    except Exception as err:  # a bug, or a library failing in a way not foreseen
        log.exception("calendar connection %s: unexpected write-back error", target.connection_id)
        message = f"unexpected error: {type(err).__name__}"
        return WriteOutcome(target.connection_id, target.name, action, message)
    if stored is None:
        return WriteOutcome(target.connection_id, target.name, action)
    return WriteOutcome(
        target.connection_id,
        target.name,
        action,
        event_id=stored.event_id,
        join_url=stored.join_url,
        meeting_pending=stored.meeting_pending,
    )


def _sequence_now(booking_id: int) -> int | None:
    with Session(db.engine) as read_session:
        return read_session.scalar(select(Booking.sequence).where(Booking.id == booking_id))


def _record(plan: _Plan, outcomes: list[WriteOutcome], now: datetime) -> None:
    """Each connection's write-back outcome, as plain UPDATEs of the outcome's columns (the
    connection is not loaded first). Where a provider named the event's id, it is kept for the
    next write; a deleted event's id is forgotten."""
    for outcome in outcomes:
        values: dict[str, str | datetime]
        if outcome.error is None:
            values = {"last_write_at": now}
        else:
            values = {"last_write_error": outcome.error, "last_write_error_at": now}
        db.session.execute(
            update(CalendarConnection)
            .where(CalendarConnection.id == outcome.connection_id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if outcome.error is None:
            _keep_event_id(plan.booking_id, outcome)
    join_url = next((o.join_url for o in outcomes if o.error is None and o.join_url), None)
    if join_url is not None:
        _keep_join_url(plan, join_url, now)
    db.session.flush()


def _keep_join_url(plan: _Plan, join_url: str, now: datetime) -> None:
    """The meeting's join link as the booking's location, unless it is so already or the
    booking is no longer active (a cancel deleted the meeting meanwhile); a change raises
    the booking's sequence and emits ``booking.updated`` (changed: ``location``). One
    conditional UPDATE: of two deliveries recording the same link, one changes the row."""
    if len(join_url) > LOCATION_MAX:
        log.warning(
            "booking %s: a meeting link of %s characters is longer than a location may be",
            plan.booking_id,
            len(join_url),
        )
        return
    result = cast(
        CursorResult[Any],  # an UPDATE's result, typed as a plain Result
        db.session.execute(
            update(Booking)
            .where(
                Booking.id == plan.booking_id,
                Booking.status.in_(ACTIVE_STATUSES),
                (Booking.location.is_(None)) | (Booking.location != join_url),
            )
            .values(location=join_url, sequence=Booking.sequence + 1, updated_at=now)
            .execution_options(synchronize_session=False)
        ),
    )
    if result.rowcount != 1:
        return
    booking = db.session.get(Booking, plan.booking_id, populate_existing=True)
    assert booking is not None  # just updated, in this transaction
    log.info("booking %s: the meeting's link is its location now", plan.booking_id)
    emit(
        db.session,
        BookingEvent(
            BookingEventKind.UPDATED, booking.id, booking.sub_account_id, now, ("location",)
        ),
    )


def _keep_event_id(booking_id: int, outcome: WriteOutcome) -> None:
    where = (
        WrittenEvent.booking_id == booking_id,
        WrittenEvent.calendar_connection_id == outcome.connection_id,
    )
    if outcome.action == "deleted":
        db.session.execute(delete(WrittenEvent).where(*where))
    else:
        # Without an id of the provider's, the row says only that the event is there (an id
        # kept earlier stays).
        row = {
            "booking_id": booking_id,
            "calendar_connection_id": outcome.connection_id,
            "event_id": outcome.event_id if outcome.event_id is not None else NO_EVENT_ID,
        }
        keys = [WrittenEvent.booking_id, WrittenEvent.calendar_connection_id]
        statement = insert(WrittenEvent).values(row)
        db.session.execute(
            statement.on_conflict_do_nothing(index_elements=keys)
            if outcome.event_id is None
            else statement.on_conflict_do_update(
                index_elements=keys, set_={"event_id": outcome.event_id}
            )
        )
