"""The transactional outbox: every domain event is a row written in the transaction that
caused it, so no event is lost between a commit and a queue, and each handler's delivery is
recorded so none is applied twice."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model
from app.models.types import UTCDateTime


class OutboxEvent(Model):
    """A booking event (``booking.created`` …). ``delivered_at`` is set once every handler is
    done with it (delivered, or given up); until then the worker's sweep hands it to Celery
    again when a handler is due."""

    __tablename__ = "outbox_events"
    __table_args__ = (
        Index("ix_outbox_events_undelivered", "delivered_at", "id"),
        # A booking's events in order: the handlers' ordering check, the cascade of a deleted
        # booking.
        Index("ix_outbox_events_booking_id", "booking_id", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    booking_id: Mapped[int] = mapped_column(ForeignKey("bookings.id", ondelete="CASCADE"))
    changed: Mapped[list[str]] = mapped_column(JSON, default=list)
    # Who made the change: "attendee" (from their manage link) or "business" (the API, the
    # dashboard, the service itself). NULL in rows written before it was recorded: "business".
    actor: Mapped[str | None] = mapped_column(String(16))
    # The booking as the event left it (``app.services.integrations.events.booking_snapshot``):
    # messages about the event tell of that state, however late they go out.
    snapshot: Mapped[dict | None] = mapped_column(JSON)
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class DeliveryStatus(StrEnum):
    DELIVERED = "delivered"
    RETRYING = "retrying"  # failed so far; offered again from ``next_attempt_at``
    FAILED = "failed"  # given up after the last attempt


class OutboxDelivery(Model):
    """One handler's record of one event: written in the handler's transaction, so a second
    delivery of a delivered (or given up) event finds it and skips the handler."""

    __tablename__ = "outbox_deliveries"
    __table_args__ = (Index("ix_outbox_deliveries_retrying", "status", "next_attempt_at"),)

    event_id: Mapped[int] = mapped_column(
        ForeignKey("outbox_events.id", ondelete="CASCADE"), primary_key=True
    )
    handler: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default=DeliveryStatus.DELIVERED)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    last_error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @property
    def finished(self) -> bool:
        return self.status != DeliveryStatus.RETRYING
