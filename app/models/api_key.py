"""API keys: the agent's identity. Only a digest of the key is ever stored."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import JSON, Boolean, ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import Model
from app.models.limits import DIGEST_LENGTH, NAME_MAX
from app.models.tenancy import Agency, SubAccount
from app.models.types import UTCDateTime, utcnow

# What a client id looks like: ``cbc_`` and 43 URL-safe characters (public: no secret).
CLIENT_ID_MAX = 64
SCOPE_MAX = 255


class Permission(StrEnum):
    CHECK_AVAILABILITY = "canCheckAvailability"
    GET_BOOKINGS = "canGetBookings"
    BOOK = "canBook"
    CANCEL = "canCancel"


class OAuthClient(Model):
    """A client that registered itself (RFC 7591): an MCP client, an assistant. Public: it
    has no secret, and proves itself with PKCE on every authorization."""

    __tablename__ = "oauth_clients"

    id: Mapped[int] = mapped_column(primary_key=True)
    client_id: Mapped[str] = mapped_column(String(CLIENT_ID_MAX), unique=True)
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    # Matched exactly, character for character.
    redirect_uris: Mapped[list[str]] = mapped_column(JSON)
    client_uri: Mapped[str | None] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(String(SCOPE_MAX))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


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
    # Set for an agent's OAuth grant (``app.models.oauth``): the client the owner consented
    # to. Its tokens act as this key; it has no plain key of its own.
    oauth_client_id: Mapped[int | None] = mapped_column(
        ForeignKey("oauth_clients.id", ondelete="CASCADE"), index=True
    )

    agency: Mapped[Agency] = relationship()
    sub_account: Mapped[SubAccount | None] = relationship()
    oauth_client: Mapped[OAuthClient | None] = relationship()
