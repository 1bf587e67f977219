"""Email the service sent (or, with no SMTP server configured, kept for someone to read)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model
from app.models.limits import EMAIL_MAX
from app.models.types import UTCDateTime, utcnow


class MailStatus(StrEnum):
    SENT = "sent"  # handed to the SMTP server
    KEPT = "kept"  # no SMTP server configured: kept here, listed by ``flask outbox``


class MailMessage(Model):
    """One message to one recipient. ``dedupe_key`` says what it is about (the outbox event,
    the reminder of one booking time, one password-reset link) and is unique, so a repeated
    delivery finds the message it already sent and does not send it again."""

    __tablename__ = "mail_messages"
    __table_args__ = (
        Index("uq_mail_messages_dedupe_key", "dedupe_key", unique=True),
        Index("ix_mail_messages_sub_account_created", "sub_account_id", "created_at"),
        # What the retention deletes (``RETENTION_DAYS``), and the SET NULL of an event's
        # deletion.
        Index("ix_mail_messages_created_at", "created_at"),
        Index("ix_mail_messages_event_id", "event_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    dedupe_key: Mapped[str] = mapped_column(String(400))
    # The sub account the mail speaks for; none for mail to a dashboard user about their
    # account (a password-reset link), which no sub account's mail log shows.
    sub_account_id: Mapped[int | None] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE")
    )
    booking_id: Mapped[int | None] = mapped_column(
        ForeignKey("bookings.id", ondelete="SET NULL"), index=True
    )
    event_id: Mapped[int | None] = mapped_column(
        ForeignKey("outbox_events.id", ondelete="SET NULL")
    )
    # An event name, "booking.reminder", "connection.needs_action" or "password.reset".
    kind: Mapped[str] = mapped_column(String(32))
    recipient: Mapped[str] = mapped_column(String(EMAIL_MAX))
    subject: Mapped[str] = mapped_column(String(500))
    message_id: Mapped[str] = mapped_column(String(300))
    text_body: Mapped[str] = mapped_column(Text)
    html_body: Mapped[str] = mapped_column(Text)
    ics: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
