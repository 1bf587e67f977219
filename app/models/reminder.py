"""Reminders: which a booking gets (each event type's list, else its sub account's), and the
record of each one decided, so none goes out twice."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, TypedDict

from sqlalchemy import JSON, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model
from app.models.types import UTCDateTime


class ReminderChannel(StrEnum):
    """Where a reminder goes: a mail to each attendee, a mail to the sub account's notification
    address, and a ``booking.reminder`` webhook (for an automation tool's SMS or WhatsApp)."""

    ATTENDEE_EMAIL = "attendeeEmail"
    BUSINESS_EMAIL = "businessEmail"
    WEBHOOK = "webhook"


class Reminder(TypedDict):
    """One reminder of a list, as documents and the JSON columns hold it."""

    minutesBefore: int
    channels: list[str]


class ReminderStatus(StrEnum):
    SENT = "sent"  # its event was written: the mails and webhooks follow through the outbox
    SKIPPED = "skipped"  # a nearer reminder of the same booking was due at the same time


class BookingReminder(Model):
    """One reminder of one booking time, decided: written with its ``booking.reminder`` event in
    one transaction, and unique per booking, start and offset, so two sweeps (or a sweep after
    a crash) never send it twice. A reschedule gives the booking a new start, so its reminders
    are planned again; the rows of the earlier start stay as its history."""

    __tablename__ = "booking_reminders"
    __table_args__ = (
        Index("uq_booking_reminders_once", "booking_id", "start_at", "minutes_before", unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    booking_id: Mapped[int] = mapped_column(ForeignKey("bookings.id", ondelete="CASCADE"))
    start_at: Mapped[datetime] = mapped_column(UTCDateTime)
    minutes_before: Mapped[int] = mapped_column(Integer)
    channels: Mapped[list[Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    event_id: Mapped[int | None] = mapped_column(
        ForeignKey("outbox_events.id", ondelete="SET NULL"), index=True
    )
    decided_at: Mapped[datetime] = mapped_column(UTCDateTime)
