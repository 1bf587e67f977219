"""External calendars whose busy time keeps the calendar from double booking."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.models.types import UTCDateTime, utcnow


class CalendarConnection(db.Model):
    """A CalDAV calendar. The password is stored encrypted (see ``app.services.secrets``)."""

    __tablename__ = "calendar_connections"

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    provider: Mapped[str] = mapped_column(String(32), default="caldav")
    url: Mapped[str] = mapped_column(String(1000))
    username: Mapped[str | None] = mapped_column(String(255))
    encrypted_secret: Mapped[str | None] = mapped_column(Text)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    sync_token: Mapped[str | None] = mapped_column(Text)
    last_synced_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_sync_status: Mapped[str | None] = mapped_column(String(16))
    last_sync_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
