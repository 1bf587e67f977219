"""Hosts: the people (or rooms) a sub account's bookings are made with.

A sub account has one host or more (a clinic's dentists, a sales team). What occupies time
belongs to a host: its connected calendars, the bookings and holds made with it, and blocked
time that is its own (blocked time without a host is everyone's). Two active bookings of one
host never overlap; two hosts may be booked at the same instant (migration 0029's exclusion
constraints). Every sub account has at least one: the first is the one-host case, and a row
written without a host takes it (the ``hosts_default`` trigger).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, FetchedValue, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model
from app.models.limits import EMAIL_MAX, NAME_MAX, TIMEZONE_MAX
from app.models.types import UTCDateTime, utcnow


class Host(Model):
    """``email`` gets the host's notifications; ``availability_profile_id`` names the host's
    working hours (None: the sub account's default profile); ``timezone`` the host's own (None:
    the sub account's); ``user_id`` the dashboard user who is this host, if any. A host is
    deactivated, never deleted while bookings name it."""

    __tablename__ = "hosts"
    __table_args__ = (UniqueConstraint("sub_account_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(ForeignKey("sub_accounts.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    email: Mapped[str | None] = mapped_column(String(EMAIL_MAX))
    timezone: Mapped[str | None] = mapped_column(String(TIMEZONE_MAX))
    availability_profile_id: Mapped[int | None] = mapped_column(
        ForeignKey("availability_profiles.id", ondelete="SET NULL"), index=True
    )
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), index=True
    )
    active: Mapped[bool] = mapped_column(Boolean, default=True, server_default="true")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


def host_column(*, nullable: bool = False) -> Mapped[Any]:
    """The ``host_id`` of a row that occupies a host's time: filled by the database with the
    sub account's first host when a write names none (migration 0029), and read back after the
    insert."""
    return mapped_column(
        ForeignKey("hosts.id", ondelete="CASCADE" if nullable else "RESTRICT"),
        index=True,
        nullable=nullable,
        server_default=None if nullable else FetchedValue(),
    )
