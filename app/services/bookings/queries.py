"""Reading bookings: always scoped to one sub account, so another tenant's booking is simply
not found.

The API's reads (``show_booking``, ``list_bookings``) load what the API shows as plain rows
(``ShownBooking``), not ORM objects: no identity map, no instance state, a third of the time
of loading the same rows as objects. Writes load ``Booking``s (``get_booking``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, func, select
from sqlalchemy.orm import InstrumentedAttribute, joinedload
from sqlalchemy.sql.elements import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from app.api_terms import LIST_LIMIT_DEFAULT
from app.extensions import db
from app.models import (
    ACTIVE_STATUSES,
    Attendee,
    Booking,
    BookingChange,
    BookingHost,
    Host,
    SubAccount,
)
from app.scheduling.round_robin import AssignmentReason
from app.scheduling.timezones import InstantInput, zone
from app.services.common.errors import BookingNotFound
from app.services.common.ids import is_storable_id
from app.services.common.instants import resolve_instant


@dataclass(frozen=True)
class BookingListQuery:
    start_date: InstantInput | None = None
    end_date: InstantInput | None = None
    status: str | None = None
    active_only: bool = False  # pending and confirmed (the dashboard's "upcoming")
    event_type_id: int | None = None
    email: str | None = None
    limit: int = LIST_LIMIT_DEFAULT
    offset: int = 0


def _filtered(sub_account: SubAccount, query: BookingListQuery) -> Select[Booking]:
    tz = zone(sub_account.settings.timezone)
    scope: ColumnElement[int] | InstrumentedAttribute[int] = Booking.sub_account_id
    if query.email is not None:
        # The email's few attendees drive the query; the sub account only filters their
        # bookings. A unary plus keeps the (sub_account_id, …) indexes out of the plan, so it
        # starts from the email's attendees whatever the table statistics say, never walking
        # the sub account's whole history to test each booking against the email's list.
        # (UnaryExpression is annotated for a ColumnElement only; the ORM attribute serves as one.)
        scope = UnaryExpression(scope, operator=custom_op("+"), type_=Integer())  # type: ignore[arg-type]
    stmt = select(Booking).where(scope == sub_account.id)
    if query.start_date is not None:
        stmt = stmt.where(Booking.start_at >= resolve_instant("start_date", query.start_date, tz))
    if query.end_date is not None:
        end = resolve_instant("end_date", query.end_date, tz, date_means="end")
        # start_at < end_at (a CHECK constraint), so the redundant start_at < end lets the
        # (sub_account_id, start_at) index stop at the window's end instead of reading on
        # through the rest of the history.
        stmt = stmt.where(Booking.end_at <= end, Booking.start_at < end)
    if query.status is not None:
        stmt = stmt.where(Booking.status == query.status)
    if query.active_only:
        stmt = stmt.where(Booking.status.in_(ACTIVE_STATUSES))
    if query.event_type_id is not None:
        stmt = stmt.where(Booking.event_type_id == query.event_type_id)
    if query.email is not None:
        # Emails are stored lower-cased: compare the column as it is, so ix_attendees_email
        # finds the few attendees and their bookings are looked up by id.
        stmt = stmt.where(
            Booking.id.in_(
                select(Attendee.booking_id).where(Attendee.email == query.email.strip().lower())
            )
        )
    return stmt


@dataclass(slots=True)
class ShownAttendee:
    """An attendee as the API shows it (``AttendeeSchema``): ``_SHOWN_ATTENDEE``'s columns."""

    id: int
    email: str
    name: str
    first_name: str | None
    last_name: str | None
    phone: str | None
    timezone: str
    is_organizer: bool
    created_at: datetime
    updated_at: datetime
    manage_link_version: int
    link_key: str


@dataclass(frozen=True, slots=True)
class ShownHost:
    """A host of a booking as the API shows it (``BookingHostSchema``)."""

    id: int
    name: str
    email: str | None


@dataclass(slots=True)
class ShownBooking:
    """A booking as the API shows it (``BookingSchema``): ``_SHOWN_BOOKING``'s columns."""

    id: int
    uid: str
    start_at: datetime
    end_at: datetime
    status: str
    title: str
    description: str | None
    location: str | None
    timezone: str
    meta: dict[str, Any]
    responses: dict[str, Any]
    confirmed_at: datetime | None
    cancelled_at: datetime | None
    completed_at: datetime | None
    # A seat of a seated slot (the dashboard shows them; the API does not): its group, its
    # number and the group's seats, and (lists) how many of its seats active bookings take.
    seat_group: str | None
    seat_number: int | None
    seat_count: int | None
    assignment_reason: str
    host_id: int
    host_name: str
    host_email: str | None
    attendees: list[ShownAttendee] = field(default_factory=list)
    seats_taken: int | None = None
    co_hosts: list[ShownHost] = field(default_factory=list)  # a collective booking's others

    @property
    def hosts(self) -> list[ShownHost]:
        return [ShownHost(self.host_id, self.host_name, self.host_email), *self.co_hosts]


_SHOWN_BOOKING = (
    Booking.id,
    Booking.uid,
    Booking.start_at,
    Booking.end_at,
    Booking.status,
    Booking.title,
    Booking.description,
    Booking.location,
    Booking.timezone,
    Booking.meta,
    Booking.responses,
    Booking.confirmed_at,
    Booking.cancelled_at,
    Booking.completed_at,
    Booking.seat_group,
    Booking.seat_number,
    Booking.seat_count,
    Booking.assignment_reason,
    Host.id,
    Host.name,
    Host.email,
)
_SHOWN_ATTENDEE = (
    Attendee.id,
    Attendee.email,
    Attendee.name,
    Attendee.first_name,
    Attendee.last_name,
    Attendee.phone,
    Attendee.timezone,
    Attendee.is_organizer,
    Attendee.created_at,
    Attendee.updated_at,
    Attendee.manage_link_version,
    Attendee.link_key,
)


def list_bookings(
    sub_account: SubAccount, query: BookingListQuery
) -> tuple[list[ShownBooking], int]:
    """One page of matching bookings (by start time, then id) and the count of all matches."""
    stmt = _filtered(sub_account, query)
    total = db.session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery()))
    page = [
        ShownBooking(*row)
        for row in db.session.execute(
            stmt.with_only_columns(*_SHOWN_BOOKING)
            .join(Host, Host.id == Booking.host_id)
            .order_by(Booking.start_at, Booking.id)
            .limit(query.limit)
            .offset(query.offset)
        ).all()
    ]
    if page:
        by_id = {booking.id: booking for booking in page}
        for booking_id, *attendee in db.session.execute(
            select(Attendee.booking_id, *_SHOWN_ATTENDEE)
            .where(Attendee.booking_id.in_(by_id))
            .order_by(Attendee.booking_id, Attendee.id)
        ).all():
            by_id[booking_id].attendees.append(ShownAttendee(*attendee))
        _count_seats(page)
        _add_co_hosts(page)
    return page, total or 0


def _add_co_hosts(page: list[ShownBooking]) -> None:
    """A collective booking's other hosts (none is, no query)."""
    collective = {b.id: b for b in page if b.assignment_reason == AssignmentReason.COLLECTIVE}
    if not collective:
        return
    for booking_id, host_id, name, email in db.session.execute(
        select(BookingHost.booking_id, Host.id, Host.name, Host.email)
        .join(Host, Host.id == BookingHost.host_id)
        .where(BookingHost.booking_id.in_(collective))
        .order_by(BookingHost.booking_id, Host.id)
    ):
        collective[booking_id].co_hosts.append(ShownHost(host_id, name, email))


def seats_taken(groups: Iterable[str | None]) -> dict[str, int]:
    """How many active bookings each seat group (``Booking.seat_group``) has; Nones (unseated
    bookings) are skipped, and no group costs no query."""
    named = {group for group in groups if group}
    if not named:
        return {}
    rows = db.session.execute(
        select(Booking.seat_group, func.count())
        .where(Booking.seat_group.in_(named), Booking.status.in_(ACTIVE_STATUSES))
        .group_by(Booking.seat_group)
    )
    return {group: count for group, count in rows if group}


def _count_seats(page: list[ShownBooking]) -> None:
    """Each seated booking's ``seats_taken``: the active bookings of its slot's group."""
    taken = seats_taken(booking.seat_group for booking in page)
    for booking in page:
        if booking.seat_group:
            booking.seats_taken = taken.get(booking.seat_group, 0)


def show_booking(sub_account: SubAccount, booking_id: int) -> ShownBooking:
    """The sub account's booking ``booking_id`` as the API shows it, attendees included, in
    one statement."""
    if not is_storable_id(booking_id):
        raise BookingNotFound()
    rows = db.session.execute(
        select(*_SHOWN_BOOKING, *_SHOWN_ATTENDEE)
        .join(Host, Host.id == Booking.host_id)
        .outerjoin(Attendee, Attendee.booking_id == Booking.id)
        .where(Booking.id == booking_id, Booking.sub_account_id == sub_account.id)
        .order_by(Attendee.id)
    ).all()
    if not rows:
        raise BookingNotFound()
    width = len(_SHOWN_BOOKING)
    booking = ShownBooking(*rows[0][:width])
    booking.attendees = [ShownAttendee(*row[width:]) for row in rows if row[width] is not None]
    _add_co_hosts([booking])
    return booking


def get_booking(sub_account: SubAccount, booking_id: int) -> Booking:
    """The sub account's booking ``booking_id`` with its attendees, in one statement (a join,
    instead of the relationship's usual second ``SELECT … IN``)."""
    if not is_storable_id(booking_id):
        raise BookingNotFound()
    booking = (
        db.session.execute(
            select(Booking)
            .where(Booking.id == booking_id, Booking.sub_account_id == sub_account.id)
            .options(joinedload(Booking.attendees))
        )
        .unique()
        .scalar_one_or_none()
    )
    if booking is None:
        raise BookingNotFound()
    return booking


def booking_history(booking: Booking) -> list[BookingChange]:
    """What happened to ``booking``, oldest first: its own table (``booking_changes``), kept
    as long as the booking, whatever the retention has deleted of its outbox events."""
    return list(
        db.session.scalars(
            select(BookingChange)
            .where(BookingChange.booking_id == booking.id)
            .order_by(BookingChange.id)
        )
    )
