"""Bookings, their attendees, and the contacts attendees become."""

from __future__ import annotations

import secrets
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Date,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import Model
from app.models.event_type import EventType, LocationKind
from app.models.host import Host, host_column
from app.models.limits import (
    DIGEST_LENGTH,
    EMAIL_MAX,
    LINK_KEY_LENGTH,
    LOCATION_MAX,
    NAME_MAX,
    PHONE_MAX,
    REASON_MAX,
    SEAT_GROUP_MAX,
    TIMEZONE_MAX,
    UID_MAX,
)
from app.models.types import UTCDateTime, stored_enum, utcnow
from app.scheduling.round_robin import AssignmentReason


class BookingStatus(StrEnum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    NO_SHOW = "no_show"


# Bookings in these states hold their time; the others free it.
ACTIVE_STATUSES = (BookingStatus.PENDING, BookingStatus.CONFIRMED)
ACTIVE_SQL = f"status IN ({', '.join(repr(status.value) for status in ACTIVE_STATUSES)})"
# A seat's number is one of its group's seats.
SEAT_CHECK = "seat_group IS NULL OR seat_number BETWEEN 1 AND seat_count"


class Booking(Model):
    """A booking of an event type.

    ``occupied_start``/``occupied_end`` are the booking widened by its event type's buffers,
    copied at write time so conflict checks (and PostgreSQL's exclusion constraint) need no
    join and are not changed after the fact by an edit of the event type.
    """

    __tablename__ = "bookings"
    __table_args__ = (
        CheckConstraint("start_at < end_at", name="interval"),
        CheckConstraint(
            "occupied_start <= start_at AND occupied_end >= end_at", name="occupied_interval"
        ),
        Index("ix_bookings_sub_account_start", "sub_account_id", "start_at", "id"),
        # Led by the end: a lookup of what overlaps a window reads only what ends after it
        # starts, not the whole past (migration 0003).
        Index(
            "ix_bookings_sub_account_occupied", "sub_account_id", "occupied_end", "occupied_start"
        ),
        Index("uq_bookings_idempotency_key", "sub_account_id", "idempotency_key", unique=True),
        # One active booking per seat of a group: with the CHECK, a group never holds more
        # bookings than its seats, whatever the application does (migration 0023).
        CheckConstraint(SEAT_CHECK, name="seat"),
        Index(
            "uq_bookings_seat",
            "seat_group",
            "seat_number",
            unique=True,
            postgresql_where=text(ACTIVE_SQL),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    uid: Mapped[str] = mapped_column(String(UID_MAX), unique=True)
    sub_account_id: Mapped[int] = mapped_column(ForeignKey("sub_accounts.id", ondelete="CASCADE"))
    host_id: Mapped[int] = host_column()
    # Why the booking has its host (``app.scheduling.round_robin``): ``single`` for a one-host
    # event type.
    assignment_reason: Mapped[AssignmentReason] = mapped_column(
        stored_enum(AssignmentReason, "assignment_reason", 24),
        default=AssignmentReason.SINGLE,
        server_default=AssignmentReason.SINGLE.value,
    )
    event_type_id: Mapped[int] = mapped_column(
        ForeignKey("event_types.id", ondelete="RESTRICT"), index=True
    )
    # Stored as the members' values ("pending"), in a VARCHAR(16) whose CHECK the Enum makes
    # (ck_bookings_status, migration 0019); loaded as BookingStatus members.
    status: Mapped[BookingStatus] = mapped_column(
        stored_enum(BookingStatus, "status", 16),
        default=BookingStatus.PENDING,
    )
    # The iCalendar SEQUENCE of the booking's event: raised by each change a calendar shows,
    # so calendars and mail clients take the newest revision (RFC 5545 3.8.7.4).
    sequence: Mapped[int] = mapped_column(Integer, default=0)
    title: Mapped[str] = mapped_column(String(NAME_MAX))
    description: Mapped[str | None] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(String(LOCATION_MAX))
    # The event type's when the booking was made: Google Meet and Microsoft Teams have the
    # worker ask for a meeting when it writes the booking's event.
    location_kind: Mapped[LocationKind] = mapped_column(
        stored_enum(LocationKind, "location_kind", 16),
        default=LocationKind.IN_PERSON,
        server_default=LocationKind.IN_PERSON.value,
    )
    # A seat of a seated event type's slot (``app.scheduling.seats``): the slot's group, which
    # of its seats, and how many seats the group had when this one was taken. None: unseated.
    seat_group: Mapped[str | None] = mapped_column(String(SEAT_GROUP_MAX))
    seat_number: Mapped[int | None] = mapped_column(Integer)
    seat_count: Mapped[int | None] = mapped_column(Integer)
    timezone: Mapped[str] = mapped_column(String(TIMEZONE_MAX))
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    # The answers to its event type's questions, by question key, as the create sent them
    # (``app.services.availability.questions``).
    responses: Mapped[dict[str, Any]] = mapped_column(
        JSON, default=dict, server_default=text("'{}'")
    )
    start_at: Mapped[datetime] = mapped_column(UTCDateTime)
    end_at: Mapped[datetime] = mapped_column(UTCDateTime)
    occupied_start: Mapped[datetime] = mapped_column(UTCDateTime)
    occupied_end: Mapped[datetime] = mapped_column(UTCDateTime)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancellation_reason: Mapped[str | None] = mapped_column(String(REASON_MAX))
    idempotency_key: Mapped[str | None] = mapped_column(String(NAME_MAX))
    request_fingerprint: Mapped[str | None] = mapped_column(String(DIGEST_LENGTH))
    # How many times an attendee moved the booking from their manage link: the sub account's
    # ``attendeeMaxReschedules`` caps it (the business's own moves do not count).
    attendee_moves: Mapped[int] = mapped_column(Integer, default=0)
    api_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_keys.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    event_type: Mapped[EventType] = relationship()
    host: Mapped[Host] = relationship()
    # A collective booking's other hosts (``BookingHost``), whose time it takes too.
    co_hosts: Mapped[list[Host]] = relationship(
        secondary="booking_hosts", order_by="Host.id", viewonly=True
    )
    attendees: Mapped[list[Attendee]] = relationship(
        back_populates="booking",
        cascade="all, delete-orphan",
        order_by="Attendee.id",
        lazy="selectin",
    )

    @property
    def hosts(self) -> list[Host]:
        """The hosts the booking is made with (``BookingSchema.hosts``): its first, then a
        collective booking's others."""
        return [self.host, *self.co_hosts]


def new_link_key() -> str:
    """A new attendee's ``link_key``: 128 random bits."""
    return secrets.token_urlsafe(16)


class Attendee(Model):
    __tablename__ = "attendees"

    id: Mapped[int] = mapped_column(primary_key=True)
    booking_id: Mapped[int] = mapped_column(
        ForeignKey("bookings.id", ondelete="CASCADE"), index=True
    )
    email: Mapped[str] = mapped_column(String(EMAIL_MAX), index=True)
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    first_name: Mapped[str | None] = mapped_column(String(NAME_MAX))
    last_name: Mapped[str | None] = mapped_column(String(NAME_MAX))
    phone: Mapped[str | None] = mapped_column(String(PHONE_MAX))
    timezone: Mapped[str] = mapped_column(String(TIMEZONE_MAX))
    is_organizer: Mapped[bool] = mapped_column(Boolean, default=False)
    # Signed into the attendee's manage link (``app.services.common.manage_links``): raising
    # it re-issues the link, and every earlier one stops working.
    manage_link_version: Mapped[int] = mapped_column(Integer, default=0)
    # Whom the manage link names: random, so a token says nothing about how many attendees
    # there are or which came before (the row's id is sequential).
    link_key: Mapped[str] = mapped_column(
        String(LINK_KEY_LENGTH), unique=True, default=new_link_key
    )
    # The hold this attendee's manage link placed while they choose a new time: a link holds
    # one choice at a time, so their next choice replaces it.
    choice_hold_id: Mapped[int | None] = mapped_column(
        ForeignKey("slot_holds.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    booking: Mapped[Booking] = relationship(back_populates="attendees")


class Contact(Model):
    """Everyone who was ever an attendee of the sub account's bookings. Dashboard only: the
    API never exposes contacts."""

    __tablename__ = "contacts"
    __table_args__ = (
        Index("uq_contacts_sub_account_email", "sub_account_id", "email", unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(ForeignKey("sub_accounts.id", ondelete="CASCADE"))
    email: Mapped[str] = mapped_column(String(EMAIL_MAX))
    name: Mapped[str | None] = mapped_column(String(NAME_MAX))
    first_name: Mapped[str | None] = mapped_column(String(NAME_MAX))
    last_name: Mapped[str | None] = mapped_column(String(NAME_MAX))
    phone: Mapped[str | None] = mapped_column(String(PHONE_MAX))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class BookingDayCount(Model):
    """How many active bookings of an event type start on a local day of the sub account's
    timezone, and their minutes: what caps count (``app.scheduling.caps``), read as a few
    dozen rows instead of summing the bookings of a month for every answer.

    PostgreSQL keeps it exact by triggers on ``bookings`` and on the timezone of
    ``calendar_settings`` (migration 0024), in the transaction of each write.
    """

    __tablename__ = "booking_day_counts"

    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), primary_key=True
    )
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    event_type_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bookings: Mapped[int] = mapped_column(Integer)
    minutes: Mapped[int] = mapped_column(Integer)


class BookingChange(Model):
    """One line of a booking's history as the dashboard shows it: what happened (an event's
    kind), who did it, which fields changed, when. Written beside the booking's outbox event
    (``app.services.integrations.events.emit``) and kept as long as the booking, while the
    outbox row, a queue's entry, is deleted once delivered and old (``RETENTION_DAYS``)."""

    __tablename__ = "booking_changes"
    __table_args__ = (Index("ix_booking_changes_booking_id", "booking_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    booking_id: Mapped[int] = mapped_column(ForeignKey("bookings.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32))
    # "attendee" (their manage link) or "business" (the API, the dashboard, the service).
    actor: Mapped[str] = mapped_column(String(16))
    changed: Mapped[list[str]] = mapped_column(JSON, default=list)
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime)


class BookingHost(Model):
    """A host a collective booking is made with besides its first (``Booking.host_id``): the
    booking takes this host's time too (``scheduling_inputs.load_busy``)."""

    __tablename__ = "booking_hosts"

    booking_id: Mapped[int] = mapped_column(
        ForeignKey("bookings.id", ondelete="CASCADE"), primary_key=True
    )
    host_id: Mapped[int] = mapped_column(
        ForeignKey("hosts.id", ondelete="RESTRICT"), primary_key=True, index=True
    )
