"""Reading bookings: always scoped to one sub account, so another tenant's booking is simply
not found."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Integer, Select, func, select
from sqlalchemy.orm import joinedload
from sqlalchemy.sql.elements import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from app.extensions import db
from app.models import Attendee, Booking, SubAccount
from app.scheduling.timezones import InstantInput, zone
from app.services.errors import BookingNotFound
from app.services.ids import is_storable_id
from app.services.instants import resolve_instant


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
    scope: ColumnElement[int] = Booking.sub_account_id
    if query.email is not None:
        # The email's few attendees drive the query; the sub account only filters their
        # bookings. A unary plus keeps the (sub_account_id, …) indexes out of the plan:
        # SQLite has no statistics (nothing runs ANALYZE) and would otherwise walk the sub
        # account's whole history, testing each booking against the email's list.
        scope = UnaryExpression(scope, operator=custom_op("+"), type_=Integer())
    stmt = select(Booking).where(scope == sub_account.id)
    if query.start_date is not None:
        stmt = stmt.where(Booking.start_at >= resolve_instant("startDate", query.start_date, tz))
    if query.end_date is not None:
        end = resolve_instant("endDate", query.end_date, tz, date_means="end")
        # start_at < end_at (a CHECK constraint), so the redundant start_at < end lets the
        # (sub_account_id, start_at) index stop at the window's end instead of reading on
        # through the rest of the history.
        stmt = stmt.where(Booking.end_at <= end, Booking.start_at < end)
    if query.status is not None:
        stmt = stmt.where(Booking.status == query.status)
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
