"""Slot holds: a short claim on a stretch of time while an agent collects a booking's
details."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model
from app.models.booking import SEAT_CHECK
from app.models.host import host_column
from app.models.limits import DIGEST_LENGTH, SEAT_GROUP_MAX, TIMEZONE_MAX
from app.models.types import UTCDateTime, stored_enum, utcnow
from app.scheduling.round_robin import AssignmentReason


class SlotHold(Model):
    """Time held for whoever has the hold's token, until ``expires_at``.

    A hold makes its occupied interval (the slot widened by the event type's buffers, as a
    booking would) busy for everybody else until it expires, is released, or is consumed by
    the create that brings its token; the last two delete the row. An expired row is just
    ignored (every read compares ``expires_at`` with now) until a write over its time or the
    periodic purge deletes it. Only a SHA-256 digest of the token is stored.

    An exclusion constraint keeps holds of one host apart, and triggers refuse a hold
    over an active booking and an active booking over a hold (migration 0010).
    """

    __tablename__ = "slot_holds"
    __table_args__ = (
        CheckConstraint("start_at < end_at", name="interval"),
        CheckConstraint(
            "occupied_start <= start_at AND occupied_end >= end_at", name="occupied_interval"
        ),
        # Led by the end, like the bookings' (0003): a lookup of what overlaps a window reads
        # only what ends after it starts.
        Index(
            "ix_slot_holds_sub_account_occupied",
            "sub_account_id",
            "occupied_end",
            "occupied_start",
        ),
        # A held seat is one seat of its group, like a booking's (migration 0023).
        CheckConstraint(SEAT_CHECK, name="seat"),
        Index("uq_slot_holds_seat", "seat_group", "seat_number", unique=True),
    )

    # From a sequence, so never reused: a stale release of a consumed hold cannot release a
    # newer one.
    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(ForeignKey("sub_accounts.id", ondelete="CASCADE"))
    host_id: Mapped[int] = host_column()
    # Why the hold has its host; the booking made from it takes this reason.
    assignment_reason: Mapped[AssignmentReason] = mapped_column(
        stored_enum(AssignmentReason, "assignment_reason", 24),
        default=AssignmentReason.SINGLE,
        server_default=AssignmentReason.SINGLE.value,
    )
    event_type_id: Mapped[int] = mapped_column(
        ForeignKey("event_types.id", ondelete="CASCADE"), index=True
    )
    start_at: Mapped[datetime] = mapped_column(UTCDateTime)
    end_at: Mapped[datetime] = mapped_column(UTCDateTime)
    occupied_start: Mapped[datetime] = mapped_column(UTCDateTime)
    occupied_end: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    # A seat of a seated slot, as ``Booking.seat_*``.
    seat_group: Mapped[str | None] = mapped_column(String(SEAT_GROUP_MAX))
    seat_number: Mapped[int | None] = mapped_column(Integer)
    seat_count: Mapped[int | None] = mapped_column(Integer)
    token_digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH), unique=True)
    timezone: Mapped[str] = mapped_column(String(TIMEZONE_MAX))
    api_key_id: Mapped[int | None] = mapped_column(
        ForeignKey("api_keys.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
