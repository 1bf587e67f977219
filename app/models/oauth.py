"""Agents that connect with OAuth 2.1 (the service as their authorization server): the
authorization codes of a consent, and the tokens issued (the clients that registered are
``app.models.api_key.OAuthClient``, beside the keys their grants are).

A consent is an ``ApiKey`` with ``oauth_client_id`` set (a *grant*): one sub account, the
permissions the owner chose, listed and revoked with the sub account's API keys, and the
account the API's rate limit counts. Its tokens act as that key. Codes and tokens are stored as
SHA-256 digests only (``app.services.common.tokens``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import Model
from app.models.api_key import SCOPE_MAX, ApiKey, OAuthClient
from app.models.limits import DIGEST_LENGTH
from app.models.types import UTCDateTime, utcnow

CHALLENGE_MAX = 128


class OAuthCode(Model):
    """An authorization code: what an owner's consent returns to the client, exchanged once
    (with the PKCE verifier) for the grant's first tokens."""

    __tablename__ = "oauth_codes"

    id: Mapped[int] = mapped_column(primary_key=True)
    digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH), unique=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("oauth_clients.id", ondelete="CASCADE"))
    grant_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    # As the authorization request sent it; None when it left it out (a client with one
    # registered URI), and then the exchange must leave it out too (RFC 6749 §4.1.3).
    redirect_uri: Mapped[str | None] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(String(SCOPE_MAX))
    code_challenge: Mapped[str] = mapped_column(String(CHALLENGE_MAX))
    code_challenge_method: Mapped[str] = mapped_column(String(8))
    # The RFC 8707 resource the client asked for (the MCP server's URL), as sent.
    resource: Mapped[str | None] = mapped_column(Text)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Set when exchanged: a second exchange is a replay, and revokes the grant.
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    client: Mapped[OAuthClient] = relationship()
    grant: Mapped[ApiKey] = relationship()


class OAuthToken(Model):
    """An access token and the refresh token issued with it. Refreshing rotates: the refresh
    token is spent (``refreshed_at``) and a new pair issued; a spent refresh token presented
    again is a replay, and revokes the whole grant (every token of the family)."""

    __tablename__ = "oauth_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    client_id: Mapped[int] = mapped_column(ForeignKey("oauth_clients.id", ondelete="CASCADE"))
    grant_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), index=True)
    access_digest: Mapped[str] = mapped_column(String(DIGEST_LENGTH), unique=True)
    refresh_digest: Mapped[str | None] = mapped_column(String(DIGEST_LENGTH), unique=True)
    scope: Mapped[str] = mapped_column(String(SCOPE_MAX))
    resource: Mapped[str | None] = mapped_column(Text)
    access_expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    refresh_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    refreshed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    client: Mapped[OAuthClient] = relationship()
    grant: Mapped[ApiKey] = relationship()
