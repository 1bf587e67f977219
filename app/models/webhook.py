"""Webhook subscriptions of a sub account, and the deliveries of events to them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import Model
from app.models.limits import NAME_MAX, WEBHOOK_URL_MAX
from app.models.types import UTCDateTime, utcnow


class WebhookSubscription(Model):
    """Where to POST which events. The signing secret is stored encrypted
    (``app.services.common.encryption``) and shown once, when created. ``failing_since``: the first
    failed attempt since the last success (None: healthy); a subscription failing for long
    enough is disabled (``disabled_at``, ``disabled_reason``)."""

    __tablename__ = "webhook_subscriptions"
    __table_args__ = (UniqueConstraint("sub_account_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    url: Mapped[str] = mapped_column(String(WEBHOOK_URL_MAX))
    events: Mapped[list[str]] = mapped_column(JSON)  # event names, or ["*"]
    encrypted_secret: Mapped[str] = mapped_column(Text)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    disabled_reason: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def wants(self, event_name: str) -> bool:
        return "*" in self.events or event_name in self.events


class WebhookDeliveryStatus(StrEnum):
    PENDING = "pending"  # waiting for its next attempt (``next_attempt_at``)
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # given up


class WebhookDelivery(Model):
    """One event to one subscription, until it succeeds or is given up. ``next_attempt_at``
    doubles as a lease: set ahead while an attempt is under way, so the retry sweep does not
    send it a second time meanwhile."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("subscription_id", "event_id"),
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    subscription_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_subscriptions.id", ondelete="CASCADE")
    )
    event_id: Mapped[int] = mapped_column(
        ForeignKey("outbox_events.id", ondelete="CASCADE"), index=True
    )
    status: Mapped[str] = mapped_column(String(16), default=WebhookDeliveryStatus.PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    subscription: Mapped[WebhookSubscription] = relationship()


class WebhookAttempt(Model):
    """One POST of a delivery: what came back (status, time, the first bytes), or the error."""

    __tablename__ = "webhook_attempts"

    id: Mapped[int] = mapped_column(primary_key=True)
    delivery_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), index=True
    )
    attempted_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status_code: Mapped[int | None] = mapped_column(Integer)
    duration_ms: Mapped[int] = mapped_column(Integer)
    response_excerpt: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(String(500))
