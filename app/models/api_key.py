"""API keys: the agent's identity. Only a digest of the key is ever stored."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Boolean, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import Model
from app.models.limits import DIGEST_LENGTH, NAME_MAX
from app.models.tenancy import Agency, SubAccount
from app.models.types import UTCDateTime, utcnow


class Permission(StrEnum):
    CHECK_AVAILABILITY = "canCheckAvailability"
    GET_BOOKINGS = "canGetBookings"
    BOOK = "canBook"
    CANCEL = "canCancel"


class ApiKey(Model):
    """An API key. ``sub_account_id`` is empty for an agency-level key, which the API refuses
    (401 "not associated with a subaccount") but an operator may still hold."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    agency_id: Mapped[int] = mapped_column(
        ForeignKey("agencies.id", ondelete="CASCADE"), index=True
    )
    sub_account_id: Mapped[int | None] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    prefix: Mapped[str] = mapped_column(String(16))
    digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH), unique=True)
    permissions: Mapped[list[str]] = mapped_column(JSON, default=list)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_by_user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL")
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    agency: Mapped[Agency] = relationship()
    sub_account: Mapped[SubAccount | None] = relationship()
