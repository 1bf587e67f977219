"""Reading bookings: always scoped to one sub account, so another tenant's booking is simply
not found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Select, exists, func, select

from app.extensions import db
from app.models import Attendee, Booking, SubAccount
from app.scheduling.timezones import InstantInput, zone
from app.services.errors import BookingNotFound


@dataclass(frozen=True)
class BookingListQuery:
    start_date: InstantInput | None = None
    end_date: InstantInput | None = None
    status: str | None = None
    event_type_id: int | None = None
    email: str | None = None
    limit: int = 50
    offset: int = 0


def _filtered(sub_account: SubAccount, query: BookingListQuery) -> Select[tuple[Booking]]:
    tz = zone(sub_account.settings.timezone)
    stmt = select(Booking).where(Booking.sub_account_id == sub_account.id)
    if query.start_date is not None:
        stmt = stmt.where(Booking.start_at >= query.start_date.resolve(tz, date_means="start"))
    if query.end_date is not None:
        stmt = stmt.where(Booking.end_at <= query.end_date.resolve(tz, date_means="end"))
    if query.status is not None:
        stmt = stmt.where(Booking.status == query.status)
    if query.event_type_id is not None:
        stmt = stmt.where(Booking.event_type_id == query.event_type_id)
    if query.email is not None:
        stmt = stmt.where(
            exists().where(
                Attendee.booking_id == Booking.id,
                func.lower(Attendee.email) == query.email.strip().lower(),
            )
        )
    return stmt


def list_bookings(
    sub_account: SubAccount, query: BookingListQuery
) -> tuple[Sequence[Booking], int]:
    """One page of matching bookings (by start time, then id) and the count of all matches."""
    stmt = _filtered(sub_account, query)
    total = db.session.scalar(select(func.count()).select_from(stmt.order_by(None).subquery()))
    page = db.session.scalars(
        stmt.order_by(Booking.start_at, Booking.id).limit(query.limit).offset(query.offset)
    ).all()
    return page, total or 0


def get_booking(sub_account: SubAccount, booking_id: int) -> Booking:
    booking = db.session.scalar(
        select(Booking).where(Booking.id == booking_id, Booking.sub_account_id == sub_account.id)
    )
    if booking is None:
        raise BookingNotFound()
    return booking
