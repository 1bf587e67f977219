"""Status columns as Enums (``Booking.status``, ``User.role``): stored as the same strings as
before, loaded as their enum's members, and refused when unknown, by the model before any SQL
and by the database's CHECK (the Enum's, ``ck_bookings_status`` and ``ck_users_role``) for SQL
written by hand. Fixed dates far ahead; the clock is not read."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError, StatementError

from app.extensions import db
from app.models import Booking, BookingStatus, Role, User
from tests.factories import make_booking, utc

START = utc(2031, 3, 3, 15)


def test_a_status_is_stored_as_its_value_and_loaded_as_its_member(tenant):
    booking = make_booking(tenant, START, status=BookingStatus.NO_SHOW)
    db.session.expire_all()
    assert db.session.get(Booking, booking.id).status is BookingStatus.NO_SHOW
    stored = db.session.scalar(
        text("SELECT status FROM bookings WHERE id = :id"), {"id": booking.id}
    )
    assert (type(stored), stored) == (str, "no_show")
    owner = db.session.scalar(select(User).where(User.agency_id == tenant.agency_id))
    assert owner.role is Role.AGENCY_OWNER
    assert db.session.scalar(text("SELECT role FROM users WHERE id = :id"), {"id": owner.id}) == (
        "agency_owner"
    )


def test_a_status_given_as_its_string_is_taken(tenant):
    booking = make_booking(tenant, START, status="cancelled")
    db.session.expire_all()
    assert db.session.get(Booking, booking.id).status is BookingStatus.CANCELLED
    assert db.session.scalars(select(Booking.id).where(Booking.status == "cancelled")).all() == [
        booking.id
    ]


def test_an_unknown_status_or_role_is_refused_before_any_sql(tenant):
    with pytest.raises(StatementError) as refused:
        make_booking(tenant, START, status="lost")
    assert isinstance(refused.value.orig, LookupError)
    db.session.rollback()
    owner = db.session.scalar(select(User).where(User.agency_id == tenant.agency_id))
    owner.role = "admin"
    with pytest.raises(StatementError) as refused:
        db.session.commit()
    assert isinstance(refused.value.orig, LookupError)
    db.session.rollback()


@pytest.mark.parametrize(
    ("statement", "constraint"),
    [
        ("UPDATE bookings SET status = 'lost' WHERE id = :id", "ck_bookings_status"),
        ("UPDATE users SET role = 'admin' WHERE agency_id = :agency_id", "ck_users_role"),
    ],
)
def test_an_unknown_status_or_role_written_by_hand_is_refused_by_the_database(
    tenant, statement, constraint
):
    booking = make_booking(tenant, START)
    with pytest.raises(IntegrityError) as refused:
        db.session.execute(text(statement), {"id": booking.id, "agency_id": tenant.agency_id})
    db.session.rollback()
    assert refused.value.orig.diag.constraint_name == constraint
