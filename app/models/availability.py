"""When a calendar is open (profiles of weekly hours and date overrides) and when it is not
(blocked time, manual or synced from an external calendar)."""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Date,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import Model
from app.models.host import host_column
from app.models.limits import NAME_MAX, REASON_MAX, TIMEZONE_MAX
from app.models.types import UTCDateTime, utcnow

_MINUTE_RANGE = "start_minute >= 0 AND end_minute <= 1440 AND start_minute < end_minute"


class AvailabilityProfile(Model):
    __tablename__ = "availability_profiles"

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    timezone: Mapped[str] = mapped_column(String(TIMEZONE_MAX))
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    weekly_hours: Mapped[list[WeeklyHours]] = relationship(
        cascade="all, delete-orphan", order_by="(WeeklyHours.weekday, WeeklyHours.start_minute)"
    )
    date_overrides: Mapped[list[DateOverride]] = relationship(
        cascade="all, delete-orphan", order_by="(DateOverride.date, DateOverride.start_minute)"
    )


class WeeklyHours(Model):
    """One open range on a weekday, in minutes after local midnight (1440 = end of day)."""

    __tablename__ = "weekly_hours"
    __table_args__ = (
        CheckConstraint("weekday BETWEEN 0 AND 6", name="weekday"),
        CheckConstraint(_MINUTE_RANGE, name="minute_range"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    profile_id: Mapped[int] = mapped_column(
        ForeignKey("availability_profiles.id", ondelete="CASCADE"), index=True
    )
    weekday: Mapped[int] = mapped_column(SmallInteger)  # 0 = Monday, as date.weekday()
    start_minute: Mapped[int] = mapped_column(Integer)
    end_minute: Mapped[int] = mapped_column(Integer)


class DateOverride(Model):
    """Replaces one date's weekly hours. A row without minutes marks the date closed; rows
    with minutes are that date's open ranges."""

    __tablename__ = "date_overrides"
    __table_args__ = (
        CheckConstraint(
            f"(start_minute IS NULL AND end_minute IS NULL) OR ({_MINUTE_RANGE})",
            name="minute_range",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    profile_id: Mapped[int] = mapped_column(
        ForeignKey("availability_profiles.id", ondelete="CASCADE"), index=True
    )
    date: Mapped[date] = mapped_column(Date)
    start_minute: Mapped[int | None] = mapped_column(Integer)
    end_minute: Mapped[int | None] = mapped_column(Integer)


class BlockedTimeSource(StrEnum):
    MANUAL = "manual"
    EXTERNAL = "external"


class BlockedTime(Model):
    """Time the calendar is busy outside of bookings.

    ``manual`` rows are entered in the dashboard; ``external`` rows are the busy time of a
    connected calendar's item (``CalendarItem``), replaced when a sync finds that item changed.
    """

    __tablename__ = "blocked_times"
    __table_args__ = (
        CheckConstraint("start_at < end_at", name="interval"),
        CheckConstraint("source IN ('manual', 'external')", name="source"),
        # Led by the end: a lookup of what overlaps a window reads only what ends after it
        # starts, not the whole past (migration 0003).
        Index("ix_blocked_times_sub_account_span", "sub_account_id", "end_at", "start_at"),
        # Busy-time lookups ask for range overlap here (migration 0003).
        Index(
            "ix_blocked_times_sub_account_range",
            "sub_account_id",
            text("tstzrange(start_at, end_at, '[)')"),
            postgresql_using="gist",
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(ForeignKey("sub_accounts.id", ondelete="CASCADE"))
    # The host whose time this is; None: everyone's.
    host_id: Mapped[int | None] = host_column(nullable=True)
    start_at: Mapped[datetime] = mapped_column(UTCDateTime)
    end_at: Mapped[datetime] = mapped_column(UTCDateTime)
    reason: Mapped[str | None] = mapped_column(String(REASON_MAX))
    source: Mapped[str] = mapped_column(String(16), default=BlockedTimeSource.MANUAL)
    calendar_connection_id: Mapped[int | None] = mapped_column(
        ForeignKey("calendar_connections.id", ondelete="CASCADE"), index=True
    )
    # The connected calendar's item whose busy period this is (its UID repeated beside it).
    calendar_item_id: Mapped[int | None] = mapped_column(
        ForeignKey("calendar_items.id", ondelete="CASCADE"), index=True
    )
    external_uid: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
