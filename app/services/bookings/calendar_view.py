"""What the dashboard's calendar shows for a window: every booking (in any status) and the
time the calendar is blocked, by hand or by a connected calendar's busy time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select
from sqlalchemy.orm import selectinload

from app.extensions import db
from app.models import (
    BlockedTime,
    BlockedTimeSource,
    Booking,
    BookingHost,
    CalendarConnection,
    SubAccount,
)
from app.services.bookings.queries import seats_taken
from app.services.common.errors import InvalidRequest

# A month view shows six weeks; a little more lets a view start on either weekday.
MAX_WINDOW = timedelta(days=62)


@dataclass(frozen=True)
class BookingEntry:
    booking_id: int
    title: str
    attendee: str | None
    """The first attendee's name (who the booking is with), if any."""
    status: str
    start: datetime
    end: datetime
    seats: str | None = None
    """A seat of a seated slot: "3 of 5 seats taken" (active bookings of its slot)."""
    hosts: str = ""
    """Who it is with: its hosts' names."""


@dataclass(frozen=True)
class BlockedEntry:
    """Blocked time: ``external`` when a connected calendar is busy then, named by ``label``."""

    label: str
    external: bool
    start: datetime
    end: datetime


def calendar_entries(
    sub_account: SubAccount, start: datetime, end: datetime, host_id: int | None = None
) -> tuple[list[BookingEntry], list[BlockedEntry]]:
    """Bookings and blocked time overlapping ``[start, end)``, by start; with ``host_id``,
    that host's alone (its bookings, collective ones included, the blocked time that is
    everyone's or its own, its calendars' busy time)."""
    if not start < end <= start + MAX_WINDOW:
        raise InvalidRequest("The calendar shows at most 62 days, from a start before the end.")
    query = select(Booking).where(
        Booking.sub_account_id == sub_account.id,
        Booking.start_at < end,
        Booking.end_at > start,
    )
    if host_id is not None:
        query = query.where(
            or_(
                Booking.host_id == host_id,
                Booking.id.in_(
                    select(BookingHost.booking_id).where(BookingHost.host_id == host_id)
                ),
            )
        )
    bookings = db.session.scalars(
        query.options(selectinload(Booking.host), selectinload(Booking.co_hosts)).order_by(
            Booking.start_at, Booking.id
        )
    ).all()
    taken = seats_taken(b.seat_group for b in bookings)
    blocked_query = (
        select(BlockedTime, CalendarConnection.name)
        .outerjoin(CalendarConnection, BlockedTime.calendar_connection_id == CalendarConnection.id)
        .where(
            BlockedTime.sub_account_id == sub_account.id,
            BlockedTime.start_at < end,
            BlockedTime.end_at > start,
        )
    )
    if host_id is not None:
        blocked_query = blocked_query.where(
            or_(BlockedTime.host_id.is_(None), BlockedTime.host_id == host_id)
        )
    blocked = db.session.execute(blocked_query.order_by(BlockedTime.start_at, BlockedTime.id))
    return (
        [
            BookingEntry(
                b.id,
                b.title,
                b.attendees[0].name if b.attendees else None,
                b.status,
                b.start_at,
                b.end_at,
                f"{taken.get(b.seat_group, 0)} of {b.seat_count} seats taken"
                if b.seat_group
                else None,
                ", ".join(host.name for host in b.hosts),
            )
            for b in bookings
        ],
        [
            BlockedEntry(
                label=f"Busy in {connection}"
                if row.source == BlockedTimeSource.EXTERNAL
                else f"Blocked: {row.reason}"
                if row.reason
                else "Blocked",
                external=row.source == BlockedTimeSource.EXTERNAL,
                start=row.start_at,
                end=row.end_at,
            )
            for row, connection in blocked
        ],
    )
