"""Booking writes: create, update/reschedule and cancel.

Each function is one use case in the caller's transaction: it takes the calendar's write lock
first (``locking.lock_calendar``), checks, writes, flushes and emits its domain event; the
caller commits. The time rule is the availability engine's (``app.scheduling.slots``), fed by
the same loaders as ``GET /availability``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.dialects.postgresql import insert

from app.counters import IDEMPOTENT_REPLAYS
from app.extensions import db
from app.models import (
    ACTIVE_STATUSES,
    Attendee,
    Booking,
    BookingHost,
    BookingStatus,
    Contact,
    EventType,
    SubAccount,
)
from app.models.limits import NAME_MAX
from app.scheduling.intervals import Interval
from app.scheduling.round_robin import AssignmentReason
from app.scheduling.timezones import InstantInput, zone
from app.services.availability.questions import check_responses
from app.services.bookings.assignment import HostClaim, plan_host_claim
from app.services.bookings.holds import HoldToConsume, find_hold_to_consume
from app.services.bookings.planned import PlannedWrite, begin_apply
from app.services.bookings.queries import get_booking
from app.services.bookings.time_claims import (
    flush_claimed,
    requested_slot,
    take_seat,
)
from app.services.common.errors import BookingNotFound, ErrorCode, EventTypeNotFound, InvalidRequest
from app.services.common.ids import is_storable_id
from app.services.common.instants import resolve_instant
from app.services.common.locking import lock_calendar
from app.services.integrations.calendars.live_check import LiveAnswer, LiveQuestion
from app.services.integrations.events import Actor, BookingEvent, BookingEventKind, emit
from app.services.scheduling_inputs import get_event_type

ALREADY_CANCELLED = "Booking is already cancelled"

IDEMPOTENCY_WINDOW = timedelta(hours=24)

IDEMPOTENCY_MISMATCH = "idempotency_key has already been used with a different request"

# What a new time changes, as a booking event names it (``BookingEvent.changed``, stored in the
# outbox): the events' own vocabulary, that of their booking snapshot (``event_schema``).
EVENT_TIME_FIELDS = ("startTime", "endTime")


@dataclass(frozen=True)
class AttendeeInput:
    email: str
    name: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    phone: str | None = None
    timezone: str | None = None

    @property
    def normalized_email(self) -> str:
        return self.email.strip().lower()

    def display_name(self) -> str:
        """``name``, else first and last name joined, else the part of the email before @
        (cut to the ``NAME_MAX`` characters a name may have)."""
        if self.name:
            return self.name
        joined = " ".join(p for p in (self.first_name, self.last_name) if p)
        return (joined or self.normalized_email.split("@", 1)[0])[:NAME_MAX]


@dataclass(frozen=True)
class NewBooking:
    start_time: InstantInput
    end_time: InstantInput
    attendees: Sequence[AttendeeInput]
    timezone: str | None = None
    title: str | None = None
    description: str | None = None
    idempotency_key: str | None = None
    hold_token: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)  # as received, for the fingerprint
    # Round robin: book this host (``hostId``), when free.
    host_id: int | None = None
    # The answers to the event type's questions (``app.services.availability.questions``).
    responses: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BookingChanges:
    """An update: only the fields named in ``sent`` (``start_time``, ``title``, …) change."""

    sent: frozenset[str]
    start_time: InstantInput | None = None
    end_time: InstantInput | None = None
    attendees: Sequence[AttendeeInput] = ()
    timezone: str | None = None
    title: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    hold_token: str | None = None
    # Move the booking to this host (``hostId``), when free.
    host_id: int | None = None


def _as_json(value: Any) -> str:
    """Canonical JSON: key order and whitespace do not matter, values and their types do."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def request_fingerprint(event_type_id: int, body: Mapping[str, Any]) -> str:
    """SHA-256 of the event type id and the body (as received: the API's names) as canonical
    JSON. Stored with the booking, so its wording, ``eventTypeId`` included, never changes."""
    return hashlib.sha256(
        _as_json({"eventTypeId": event_type_id, "body": body}).encode()
    ).hexdigest()


def _upsert_contacts(
    sub_account_id: int, attendees: Sequence[AttendeeInput], now: datetime
) -> None:
    """Every attendee becomes (or updates) a contact, in one ``INSERT … ON CONFLICT``: the
    name always follows the latest booking, first and last name and phone only when sent.
    A contact whose values do not change is not written (its ``updated_at`` stays)."""
    stmt = insert(Contact).values(
        [
            {
                "sub_account_id": sub_account_id,
                "email": attendee.normalized_email,
                "name": attendee.display_name(),
                "first_name": attendee.first_name,
                "last_name": attendee.last_name,
                "phone": attendee.phone,
                "created_at": now,
                "updated_at": now,
            }
            for attendee in attendees
        ]
    )
    sent = stmt.excluded
    kept_unless_sent = {
        column: func.coalesce(getattr(sent, column), getattr(Contact, column))
        for column in ("first_name", "last_name", "phone")
    }
    changes = {"name": sent.name, **kept_unless_sent}
    db.session.execute(
        stmt.on_conflict_do_update(
            index_elements=[Contact.sub_account_id, Contact.email],
            set_={**changes, "updated_at": sent.updated_at},
            where=or_(
                *(getattr(Contact, column).is_distinct_from(new) for column, new in changes.items())
            ),
        )
    )


def _attendee_row(attendee: AttendeeInput, booking_timezone: str) -> Attendee:
    return Attendee(
        email=attendee.normalized_email,
        name=attendee.display_name(),
        first_name=attendee.first_name,
        last_name=attendee.last_name,
        phone=attendee.phone,
        timezone=attendee.timezone or booking_timezone,
    )


def _idempotent_replay(
    sub_account_id: int, key: str, fingerprint: str, now: datetime
) -> Booking | None:
    """The booking an earlier request with ``key`` created, if the key is still remembered.

    A key older than the window is forgotten: it is released so it can name a new booking.
    """
    earlier = db.session.scalar(
        select(Booking).where(
            Booking.sub_account_id == sub_account_id, Booking.idempotency_key == key
        )
    )
    if earlier is None:
        return None
    if earlier.created_at <= now - IDEMPOTENCY_WINDOW:
        earlier.idempotency_key = None
        db.session.flush()
        return None
    if earlier.request_fingerprint != fingerprint:
        raise InvalidRequest(IDEMPOTENCY_MISMATCH, code=ErrorCode.IDEMPOTENCY_MISMATCH)
    return earlier


def _remembered_key(sub_account_id: int, key: str | None, now: datetime) -> bool:
    """Whether an earlier create used ``key`` within the window: its replay asks no calendar
    (its own event is there). Read before the lock; the lock's check decides."""
    if key is None:
        return False
    return (
        db.session.scalar(
            select(Booking.id).where(
                Booking.sub_account_id == sub_account_id,
                Booking.idempotency_key == key,
                Booking.created_at > now - IDEMPOTENCY_WINDOW,
            )
        )
        is not None
    )


def create_booking(
    sub_account: SubAccount,
    event_type_id: int,
    new: NewBooking,
    *,
    now: datetime,
    api_key_id: int | None = None,
) -> PlannedWrite[tuple[Booking, bool]]:
    """Plan booking ``new`` on the event type (``app.services.bookings.planned``). Applied, it
    returns the booking and whether it is an idempotent replay of an earlier request (then
    nothing was written).

    The plan reads the event type, its working hours, the hold the token names (configuration,
    or the caller's own) and the question for the connected calendars (none for a remembered
    idempotency key: its own event is there). The apply takes the calendar's lock, which guards
    the idempotency check, busy time and the inserts. Refusals keep their order: a remembered
    idempotency key first, then the event type, then the answers to its questions, then the
    time."""
    try:
        event_type: EventType | None = get_event_type(sub_account, event_type_id, offered_only=True)
    except EventTypeNotFound:
        event_type = None  # refused after the idempotency check: a replay still answers
    timezone = new.timezone or sub_account.settings.timezone
    plan: HostClaim | None = None
    refusal: InvalidRequest | None = None
    hold: HoldToConsume | None = None
    answers: dict[str, Any] = {}
    if event_type is not None:
        hold = find_hold_to_consume(sub_account, event_type, new.hold_token, now)
        try:
            answers = check_responses(event_type.questions, new.responses)
            slot = requested_slot(new.start_time, new.end_time, timezone)
            plan = plan_host_claim(
                sub_account,
                event_type,
                slot,
                timezone=timezone,
                now=now,
                host_id=new.host_id,
                prefer_host=hold.host_id if hold is not None else None,
            )
        except InvalidRequest as err:
            refusal = err
    question = None
    if plan is not None and not _remembered_key(sub_account.id, new.idempotency_key, now):
        question = plan.live_question()

    def apply(seen: LiveAnswer | None) -> tuple[Booking, bool]:
        begin_apply(sub_account.id, seen)
        fingerprint = request_fingerprint(event_type_id, new.body)
        if new.idempotency_key is not None:
            # Before anything else: a replay answers with the booking as it is now, even if its
            # event type has been deactivated since.
            earlier = _idempotent_replay(sub_account.id, new.idempotency_key, fingerprint, now)
            if earlier is not None:
                IDEMPOTENT_REPLAYS.inc()
                return earlier, True
        if event_type is None:
            raise EventTypeNotFound()
        if plan is None:
            raise refusal or InvalidRequest()
        return _insert_booking(
            sub_account,
            event_type,
            plan,
            new,
            _Kept(timezone, answers, fingerprint, api_key_id),
            hold,
            now,
        ), False

    return PlannedWrite(question, apply)


@dataclass(frozen=True)
class _Kept:
    """What the plan settled of a new booking besides its time: its timezone, the checked
    answers, the request's fingerprint and the key that made it."""

    timezone: str
    responses: dict[str, Any]
    fingerprint: str
    api_key_id: int | None


def _insert_booking(
    sub_account: SubAccount,
    event_type: EventType,
    plan: HostClaim,
    new: NewBooking,
    kept: _Kept,
    hold: HoldToConsume | None,
    now: datetime,
) -> Booking:
    """Claim the planned time and insert the booking (the calendar's lock held)."""
    timezone = kept.timezone
    slot = plan.slot
    claimed = plan.claim(consumed_hold_id=hold.id if hold is not None else None)
    occupied = claimed.occupied
    reason = claimed.reason or (hold.reason if hold is not None else AssignmentReason.SINGLE)
    first = new.attendees[0]
    booking = Booking(
        uid=secrets.token_urlsafe(16),
        sub_account_id=sub_account.id,
        host_id=claimed.host_id,
        assignment_reason=reason,
        event_type_id=event_type.id,
        status=BookingStatus.PENDING,
        title=new.title or f"{event_type.name} with {first.display_name()}"[:NAME_MAX],
        description=new.description,
        location=event_type.location or sub_account.settings.default_location,
        location_kind=event_type.location_kind,
        timezone=timezone,
        meta=dict(new.metadata),
        responses=kept.responses,
        start_at=slot.start,
        end_at=slot.end,
        occupied_start=occupied.start,
        occupied_end=occupied.end,
        idempotency_key=new.idempotency_key,
        request_fingerprint=kept.fingerprint,
        api_key_id=kept.api_key_id,
        created_at=now,
        updated_at=now,
    )
    take_seat(booking, claimed.seat)
    booking.attendees.extend(_attendee_row(a, timezone) for a in new.attendees)
    db.session.add(booking)
    flush_claimed()
    if claimed.co_hosts:  # a collective booking
        _keep_co_hosts(booking, claimed.co_hosts)
    _upsert_contacts(sub_account.id, new.attendees, now)
    db.session.flush()
    emit(db.session, BookingEvent(BookingEventKind.CREATED, booking.id, sub_account.id, now))
    return booking


def _keep_co_hosts(booking: Booking, co_hosts: tuple[int, ...]) -> None:
    """Make ``co_hosts`` the booking's other hosts (a collective booking's; none otherwise)."""
    db.session.execute(delete(BookingHost).where(BookingHost.booking_id == booking.id))
    db.session.add_all(BookingHost(booking_id=booking.id, host_id=h) for h in co_hosts)
    db.session.flush()
    db.session.expire(booking, ["co_hosts"])


def update_booking(
    sub_account: SubAccount,
    event_type_id: int,
    booking_id: int,
    changes: BookingChanges,
    *,
    now: datetime,
    actor: Actor = Actor.BUSINESS,
) -> PlannedWrite[Booking]:
    """Plan changing the sent fields of a pending or confirmed booking
    (``app.services.bookings.planned``); a new time must pass the time rule (the booking's own
    current time does not count as busy). The plan asks about the new time as the booking
    reads now; the apply decides under the lock."""
    event_type = get_event_type(sub_account, event_type_id, offered_only=False)
    question = _question_for_new_time(sub_account, event_type, booking_id, changes, now)
    return PlannedWrite(
        question,
        lambda seen: _apply_update(
            sub_account, event_type, booking_id, changes, now=now, actor=actor, seen=seen
        ),
    )


def _apply_update(
    sub_account: SubAccount,
    event_type: EventType,
    booking_id: int,
    changes: BookingChanges,
    *,
    now: datetime,
    actor: Actor,
    seen: LiveAnswer | None,
) -> Booking:
    """The update under the calendar's lock."""
    begin_apply(sub_account.id, seen)
    booking = get_booking(sub_account, booking_id)
    if booking.event_type_id != event_type.id:
        raise BookingNotFound()
    if booking.status not in ACTIVE_STATUSES:
        raise InvalidRequest(
            f"A {booking.status} booking cannot be updated", code=ErrorCode.BOOKING_NOT_ACTIVE
        )

    changed: list[str] = []
    if "timezone" in changes.sent and changes.timezone != booking.timezone:
        assert changes.timezone is not None  # sent, so a name: the schema takes no null
        booking.timezone = changes.timezone
        changed.append("timezone")
    start, end = _new_time(booking, changes)
    rescheduled = (start, end) != (booking.start_at, booking.end_at)
    moved_host = "host_id" in changes.sent and changes.host_id != booking.host_id
    if rescheduled or moved_host:
        hold = find_hold_to_consume(sub_account, event_type, changes.hold_token, now)
        claimed = plan_host_claim(
            sub_account,
            event_type,
            Interval(start, end),
            timezone=booking.timezone,
            now=now,
            host_id=changes.host_id if "host_id" in changes.sent else None,
            # The host keeps the booking when free at the new time; a hold's host takes it.
            prefer_host=hold.host_id if hold is not None else booking.host_id,
        ).claim(exclude_booking_id=booking.id, consumed_hold_id=hold.id if hold else None)
        # Read before the new time is set: loading them flushes, and the time may be another
        # host's to take.
        co_hosts = tuple(host.id for host in booking.co_hosts)
        booking.start_at, booking.end_at = start, end
        booking.occupied_start, booking.occupied_end = claimed.occupied
        take_seat(booking, claimed.seat)  # one seat moves, not the group
        if claimed.host_id != booking.host_id or claimed.co_hosts != co_hosts:
            booking.host_id = claimed.host_id
            _keep_co_hosts(booking, claimed.co_hosts)
            changed.append("hosts")
        if claimed.reason is not None:
            booking.assignment_reason = claimed.reason
        elif hold is not None:
            booking.assignment_reason = hold.reason
        if rescheduled:
            changed += EVENT_TIME_FIELDS
    for name, attr in (("title", "title"), ("description", "description")):
        value = getattr(changes, name)
        if name in changes.sent and value != getattr(booking, attr):
            setattr(booking, attr, value)
            changed.append(name)
    # Compared as JSON: in Python 1 == True == 1.0, but to a client they are different values.
    if "metadata" in changes.sent and _as_json(changes.metadata) != _as_json(booking.meta):
        booking.meta = dict(changes.metadata)
        changed.append("metadata")
    flush_claimed()  # a new time meets PostgreSQL's exclusion constraint here
    if "attendees" in changes.sent:
        if _replace_attendees(booking, changes.attendees, now):
            changed.append("attendees")
        _upsert_contacts(sub_account.id, changes.attendees, now)
    if changed:
        booking.updated_at = now
        if set(changed) - {"metadata"}:  # metadata is not in the calendar's copy
            booking.sequence += 1
        db.session.flush()
        kind = BookingEventKind.RESCHEDULED if rescheduled else BookingEventKind.UPDATED
        emit(
            db.session,
            BookingEvent(kind, booking.id, sub_account.id, now, tuple(changed), actor=actor),
        )
    return booking


def _question_for_new_time(
    sub_account: SubAccount,
    event_type: EventType,
    booking_id: int,
    changes: BookingChanges,
    now: datetime,
) -> LiveQuestion | None:
    """What to ask the connected calendars about the time a reschedule moves to, as read now
    (the lock's checks decide; a change meanwhile only means a question wasted)."""
    if not {"start_time", "end_time", "timezone", "host_id"} & changes.sent:
        return None
    if not is_storable_id(booking_id):
        return None
    # Columns, not the row: the lock's read must not find a copy in the session.
    booking = db.session.execute(
        select(Booking.start_at, Booking.end_at, Booking.timezone).where(
            Booking.id == booking_id,
            Booking.sub_account_id == sub_account.id,
            Booking.status.in_(ACTIVE_STATUSES),
        )
    ).one_or_none()
    if booking is None:
        return None
    try:
        start, end = _new_time(booking, changes)
    except InvalidRequest:
        return None  # refused under the lock, as it is now
    if (start, end) == (booking.start_at, booking.end_at) and "host_id" not in changes.sent:
        return None
    tz_name = changes.timezone if "timezone" in changes.sent else booking.timezone
    assert tz_name is not None  # a sent timezone is a name: the schema takes no null
    try:
        plan = plan_host_claim(
            sub_account,
            event_type,
            Interval(start, end),
            timezone=tz_name,
            now=now,
            host_id=changes.host_id if "host_id" in changes.sent else None,
        )
    except InvalidRequest:
        return None
    return plan.live_question()


def _new_time(booking: Any, changes: BookingChanges) -> tuple[datetime, datetime]:
    """The start and end ``changes`` give ``booking``: a start alone keeps the length."""
    tz_name = changes.timezone if "timezone" in changes.sent else booking.timezone
    tz = zone(tz_name)
    start, end = booking.start_at, booking.end_at
    if "start_time" in changes.sent:
        assert changes.start_time is not None  # sent, so a time: the schema takes no null
        start = resolve_instant("start_time", changes.start_time, tz)
        if "end_time" not in changes.sent:
            end = start + (booking.end_at - booking.start_at)  # keep the length
    if "end_time" in changes.sent:
        assert changes.end_time is not None  # sent, so a time: the schema takes no null
        end = resolve_instant("end_time", changes.end_time, tz)
    return start, end


def _replace_attendees(booking: Booking, attendees: Sequence[AttendeeInput], now: datetime) -> bool:
    """Make the attendee list ``attendees``: rows whose email stays keep their id."""
    by_email = {a.email: a for a in booking.attendees}
    before = [
        (a.id, a.email, a.name, a.first_name, a.last_name, a.phone, a.timezone)
        for a in booking.attendees
    ]
    kept: list[Attendee] = []
    for attendee in attendees:
        row = by_email.pop(attendee.normalized_email, None)
        fresh = _attendee_row(attendee, booking.timezone)
        if row is None:
            kept.append(fresh)
            continue
        for attr in ("name", "first_name", "last_name", "phone", "timezone"):
            if getattr(row, attr) != getattr(fresh, attr):
                setattr(row, attr, getattr(fresh, attr))
                row.updated_at = now
        kept.append(row)
    booking.attendees = kept
    after = [(a.id, a.email, a.name, a.first_name, a.last_name, a.phone, a.timezone) for a in kept]
    return before != after


def cancel_booking(
    sub_account: SubAccount,
    booking_id: int,
    reason: str | None,
    *,
    now: datetime,
    actor: Actor = Actor.BUSINESS,
) -> Booking:
    """Cancel a pending or confirmed booking; its time is free from the commit on."""
    lock_calendar(sub_account.id)
    booking = get_booking(sub_account, booking_id)
    if booking.status == BookingStatus.CANCELLED:
        raise InvalidRequest(ALREADY_CANCELLED, code=ErrorCode.BOOKING_NOT_ACTIVE)
    if booking.status not in ACTIVE_STATUSES:
        raise InvalidRequest(
            f"A {booking.status} booking cannot be cancelled", code=ErrorCode.BOOKING_NOT_ACTIVE
        )
    booking.status = BookingStatus.CANCELLED
    booking.cancelled_at = now
    booking.cancellation_reason = reason
    booking.updated_at = now
    booking.sequence += 1
    db.session.flush()
    emit(
        db.session,
        BookingEvent(BookingEventKind.CANCELLED, booking.id, sub_account.id, now, actor=actor),
    )
    return booking
