"""External calendars whose busy time keeps the calendar from double booking."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.models.limits import CALDAV_URL_MAX, NAME_MAX, TIMEZONE_MAX
from app.models.types import UTCDateTime, utcnow


class CalendarConnection(db.Model):
    """A CalDAV calendar whose busy time blocks the sub account's calendar
    (``app.services.calendar_sync``). The password is stored encrypted
    (``app.services.common.encryption``) and never shown.

    Three groups of columns:

    - configuration: ``name`` (unique in the sub account), ``url`` (the CalDAV server or
      principal URL), ``calendar`` (the calendar's URL or display name; None: the account's only
      calendar), ``username``, ``encrypted_secret``, ``write_back``, ``active``;
    - sync state, which lets a sync skip an unchanged calendar: ``calendar_url`` (where the
      calendar was found), ``sync_token`` and ``ctag`` (the server's change markers when the
      stored busy time was read; ``ctag`` holds ``etags:<digest>`` for servers with neither),
      ``synced_until`` and ``synced_timezone`` (the end of the window that was read, and the
      timezone all-day and floating events were placed in);
    - outcome, for operators: ``last_attempt_at``, ``last_success_at``, ``last_error`` and
      ``last_error_at`` (the latest failure, kept after a success so flapping shows),
      ``consecutive_failures`` (0 = healthy), ``busy_count`` (busy periods stored);
    - write-back outcome (bookings written into the calendar, ``write_back``): ``last_write_at``
      (the latest successful write), ``last_write_error`` and ``last_write_error_at``.
    """

    __tablename__ = "calendar_connections"
    __table_args__ = (UniqueConstraint("sub_account_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    provider: Mapped[str] = mapped_column(String(32), default="caldav")
    url: Mapped[str] = mapped_column(String(CALDAV_URL_MAX))
    calendar: Mapped[str | None] = mapped_column(String(CALDAV_URL_MAX))
    username: Mapped[str | None] = mapped_column(String(255))
    encrypted_secret: Mapped[str | None] = mapped_column(Text)
    write_back: Mapped[bool] = mapped_column(Boolean, default=True)
    active: Mapped[bool] = mapped_column(Boolean, default=True)

    calendar_url: Mapped[str | None] = mapped_column(String(CALDAV_URL_MAX))
    sync_token: Mapped[str | None] = mapped_column(Text)
    ctag: Mapped[str | None] = mapped_column(Text)
    synced_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    synced_timezone: Mapped[str | None] = mapped_column(String(TIMEZONE_MAX))

    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    busy_count: Mapped[int] = mapped_column(Integer, default=0)
    last_write_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_write_error: Mapped[str | None] = mapped_column(Text)
    last_write_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def failing(self) -> bool:
        """The latest sync attempt failed."""
        return self.consecutive_failures > 0

    def forget_sync_state(self) -> None:
        """Make the next sync read the calendar in full (after the configuration changed)."""
        self.calendar_url = None
        self.sync_token = None
        self.ctag = None
        self.synced_until = None
        self.synced_timezone = None
