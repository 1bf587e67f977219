"""Who owns what: agencies, their users, and the sub accounts (one calendar each)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Integer,
    String,
    Table,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import Model, db
from app.models.limits import (
    DIGEST_LENGTH,
    DURATION_MAX_MINUTES,
    DURATION_MIN_MINUTES,
    EMAIL_MAX,
    HORIZON_MAX_DAYS,
    LOCATION_MAX,
    NAME_MAX,
    TIMEZONE_MAX,
)
from app.models.types import UTCDateTime, stored_enum, utcnow


class Role(StrEnum):
    AGENCY_OWNER = "agency_owner"
    AGENCY_USER = "agency_user"


class Agency(Model):
    __tablename__ = "agencies"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    users: Mapped[list[User]] = relationship(back_populates="agency")
    sub_accounts: Mapped[list[SubAccount]] = relationship(back_populates="agency")


# Which sub accounts an agency_user may open in the dashboard (owners see all of them).
user_sub_account_access = Table(
    "user_sub_account_access",
    db.Model.metadata,
    Column("user_id", ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    Column("sub_account_id", ForeignKey("sub_accounts.id", ondelete="CASCADE"), primary_key=True),
)


class User(Model):
    """A person who signs in to the dashboard. It answers what Flask-Login asks of a user
    (``is_authenticated``, ``is_active``, ``is_anonymous``, ``get_id``) without the model
    importing the web layer's library."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    agency_id: Mapped[int] = mapped_column(
        ForeignKey("agencies.id", ondelete="CASCADE"), index=True
    )
    email: Mapped[str] = mapped_column(String(EMAIL_MAX), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    # Stored as the members' values, in a VARCHAR(20) whose CHECK the Enum makes (ck_users_role,
    # migration 0019); loaded as Role members.
    role: Mapped[Role] = mapped_column(
        stored_enum(Role, "role", 20),
        default=Role.AGENCY_USER,
    )
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    agency: Mapped[Agency] = relationship(back_populates="users")
    granted_sub_accounts: Mapped[list[SubAccount]] = relationship(secondary=user_sub_account_access)

    is_authenticated = True
    is_anonymous = False

    @property
    def is_active(self) -> bool:  # Flask-Login: a deactivated user cannot sign in
        return self.active

    def get_id(self) -> str:
        return str(self.id)


class DashboardSession(Model):
    """A signed-in dashboard session, kept by the server so that it can end.

    The session cookie carries a random token; only its SHA-256 digest is stored. Each request
    is let in only while its row exists: signing out deletes it, and a password change or an
    owner removing the user (or a grant of theirs) deletes the user's others, so a copied
    cookie stops working at once instead of when it expires.
    """

    __tablename__ = "dashboard_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SubAccount(Model):
    """A client workspace. It has exactly one calendar, so calendar data hangs off it."""

    __tablename__ = "sub_accounts"

    id: Mapped[int] = mapped_column(primary_key=True)
    agency_id: Mapped[int] = mapped_column(
        ForeignKey("agencies.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    agency: Mapped[Agency] = relationship(back_populates="sub_accounts")
    settings: Mapped[CalendarSettings] = relationship(
        back_populates="sub_account", uselist=False, cascade="all, delete-orphan"
    )


class CalendarSettings(Model):
    """The sub account calendar's defaults: what applies when an event type says nothing."""

    __tablename__ = "calendar_settings"
    __table_args__ = (
        CheckConstraint(
            f"default_duration BETWEEN {DURATION_MIN_MINUTES} AND {DURATION_MAX_MINUTES}",
            name="default_duration",
        ),
        CheckConstraint("minimum_notice_minutes >= 0", name="minimum_notice"),
        CheckConstraint(
            f"booking_horizon_days BETWEEN 1 AND {HORIZON_MAX_DAYS}", name="booking_horizon"
        ),
    )

    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), primary_key=True
    )
    timezone: Mapped[str] = mapped_column(String(TIMEZONE_MAX), default="UTC")
    default_duration: Mapped[int] = mapped_column(Integer, default=30)
    minimum_notice_minutes: Mapped[int] = mapped_column(Integer, default=0)
    booking_horizon_days: Mapped[int] = mapped_column(Integer, default=60)
    default_location: Mapped[str | None] = mapped_column(String(LOCATION_MAX))
    notify_on_booking: Mapped[bool] = mapped_column(Boolean, default=True)
    notification_email: Mapped[str | None] = mapped_column(String(EMAIL_MAX))
    # The reminders of the bookings whose event type has no list of its own
    # (``app.models.reminder.Reminder`` items); ``reminderMinutesBefore`` in documents is
    # shorthand for one attendee mail (migration 0021 moved the column it was into this).
    reminders: Mapped[list[Any]] = mapped_column(JSON, default=list)
    # The calendar's caps over all its event types, shaped as an event type's
    # ``booking_limits``; None: no cap.
    booking_limits: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    auto_complete_bookings: Mapped[bool] = mapped_column(Boolean, default=False)
    # How late an attendee may still cancel or move from their manage link (hours before the
    # start; 0: until it starts), and how many times they may move it (None: no limit).
    attendee_change_notice_hours: Mapped[int] = mapped_column(Integer, default=0)
    attendee_max_reschedules: Mapped[int | None] = mapped_column(Integer)

    sub_account: Mapped[SubAccount] = relationship(back_populates="settings")


class Invitation(Model):
    """A one-time link that lets an invited agency user choose a password and sign in.

    The invited user exists from the start (inactive, with no usable password), so the owner
    grants sub accounts to them like to anyone else. Only a SHA-256 digest of the link's token
    is stored: the link is shown to the owner once.
    """

    __tablename__ = "invitations"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH), unique=True)
    invited_by_user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    accepted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    user: Mapped[User] = relationship(foreign_keys=[user_id])


class PasswordReset(Model):
    """A one-time link that lets a user who forgot their password choose a new one.

    Only a SHA-256 digest of the link's token is stored, with when it stops working
    (``expires_at``) and when it was used (``used_at``): it works once, within its hour.
    """

    __tablename__ = "password_resets"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    user: Mapped[User] = relationship()
