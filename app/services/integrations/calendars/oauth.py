"""OAuth 2.0 for the calendar providers that use it (Google, Microsoft): the endpoints and
scopes of each, the authorization-code flow with PKCE, and the grant a connection keeps.

The protocol is Authlib's (``OAuth2Client`` over httpx): the authorization URL with an S256
code challenge, the code exchange, refreshing and revoking. What is kept per connection is a
``Grant`` (refresh token, the current access token and when it expires), encrypted with the
service's secret machinery (``app.services.common.encryption``) in the connection's
``encrypted_secret``. An access token is refreshed ``REFRESH_MARGIN`` before it expires, by
whoever needs it first (``valid_access_token``), and the refreshed grant is saved at once, so
a sync, a write-back and the dashboard share one token instead of each refreshing their own.

Endpoint URLs come from configuration (``GOOGLE_*_URL``, ``MICROSOFT_LOGIN_URL``,
``MICROSOFT_GRAPH_URL``), defaulting to the real providers; tests point them at loopback fakes.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass
from typing import Any, cast

import httpx
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import OAuth2Client
from authlib.oauth2.rfc6749.errors import OAuth2Error
from sqlalchemy import select

from app.config import Settings, settings
from app.database import session_apart
from app.extensions import db
from app.models import CalendarConnection, ConnectionKind
from app.services.common.encryption import (
    SecretUnreadable,
    decrypt_secret,
    encrypt_secret,
)
from app.services.common.tls import shared_tls_context
from app.services.integrations.calendars.errors import (
    AuthenticationFailed,
    CredentialsUnreadable,
    ServerTimeout,
    ServerUnreachable,
)

# Refresh this long before the access token would expire: a request started with it must not
# outlive it.
REFRESH_MARGIN_SECONDS = 300


@dataclass(frozen=True)
class OAuthProvider:
    """One provider's OAuth client as configured. ``scopes``: the narrowest that read the
    calendars' events and write the service's own (and, for Microsoft, a refresh token)."""

    kind: str
    label: str
    client_id: str | None
    client_secret: str | None
    authorize_url: str
    token_url: str
    revoke_url: str | None
    api_url: str
    scopes: tuple[str, ...]
    extra_authorize_params: tuple[tuple[str, str], ...]

    @property
    def configured(self) -> bool:
        return bool(self.client_id and self.client_secret)

    @property
    def missing_settings(self) -> list[str]:
        """What an operator must set before people can connect this provider."""
        prefix = self.kind.upper()
        return [
            f"{prefix}_{name}"
            for name, value in (
                ("CLIENT_ID", self.client_id),
                ("CLIENT_SECRET", self.client_secret),
            )
            if not value
        ]


def oauth_provider(kind: str, configured: Settings | None = None) -> OAuthProvider:
    """The OAuth client of ``kind`` (``google`` or ``microsoft``) from the settings."""
    config = configured or settings()
    if kind == ConnectionKind.GOOGLE:
        return OAuthProvider(
            kind=kind,
            label="Google",
            client_id=config.google_client_id,
            client_secret=config.google_client_secret,
            authorize_url=config.google_authorize_url,
            token_url=config.google_token_url,
            revoke_url=config.google_revoke_url,
            api_url=config.google_calendar_api_url.rstrip("/"),
            # Events of every calendar (read, and write the service's own), and the list of
            # calendars to choose from; nothing else of the account.
            scopes=(
                "https://www.googleapis.com/auth/calendar.events",
                "https://www.googleapis.com/auth/calendar.calendarlist.readonly",
            ),
            extra_authorize_params=(("access_type", "offline"), ("prompt", "consent")),
        )
    if kind == ConnectionKind.MICROSOFT:
        login = f"{config.microsoft_login_url.rstrip('/')}/{config.microsoft_tenant}/oauth2/v2.0"
        return OAuthProvider(
            kind=kind,
            label="Microsoft 365",
            client_id=config.microsoft_client_id,
            client_secret=config.microsoft_client_secret,
            authorize_url=f"{login}/authorize",
            token_url=f"{login}/token",
            revoke_url=None,  # the identity platform revokes sessions, not one grant
            api_url=config.microsoft_graph_url.rstrip("/"),
            scopes=("offline_access", "User.Read", "Calendars.ReadWrite"),
            extra_authorize_params=(("prompt", "select_account"),),
        )
    raise ValueError(f"{kind} does not use OAuth")


@dataclass(frozen=True)
class Grant:
    """What a connection keeps of its OAuth grant."""

    refresh_token: str
    access_token: str | None = None
    expires_at: float | None = None  # Unix time

    def fresh(self, now: float) -> bool:
        return bool(
            self.access_token
            and self.expires_at is not None
            and self.expires_at - REFRESH_MARGIN_SECONDS > now
        )

    def sealed(self, secret_key: str) -> str:
        return encrypt_secret(json.dumps(asdict(self)), secret_key)

    @classmethod
    def opened(cls, sealed: str, keys: list[str]) -> Grant:
        return cls(**json.loads(decrypt_secret(sealed, keys)))


def _client(provider: OAuthProvider, timeout: float, **kwargs: Any) -> OAuth2Client:
    return OAuth2Client(
        client_id=provider.client_id,
        client_secret=provider.client_secret,
        scope=" ".join(provider.scopes),
        token_endpoint_auth_method="client_secret_post",
        timeout=timeout,
        verify=shared_tls_context(),
        **kwargs,
    )


def authorization_url(
    provider: OAuthProvider, redirect_uri: str, state: str, code_verifier: str, timeout: float
) -> str:
    """Where to send the person to consent (PKCE S256 with ``code_verifier``)."""
    with _client(provider, timeout, redirect_uri=redirect_uri, code_challenge_method="S256") as c:
        url, _ = c.create_authorization_url(
            provider.authorize_url,
            state=state,
            code_verifier=code_verifier,
            **dict(provider.extra_authorize_params),
        )
    return url


def exchange_code(
    provider: OAuthProvider, redirect_uri: str, code: str, code_verifier: str, timeout: float
) -> Grant:
    """The grant for the code the provider redirected back with."""
    with _client(provider, timeout, redirect_uri=redirect_uri) as client:
        token = _requested(
            provider,
            lambda: client.fetch_token(
                provider.token_url,
                code=code,
                code_verifier=code_verifier,
                grant_type="authorization_code",
            ),
        )
    if not token.get("refresh_token"):
        raise AuthenticationFailed(f"{provider.label} granted no offline access: connect again")
    return _grant(token, token["refresh_token"])


def refreshed(provider: OAuthProvider, grant: Grant, timeout: float) -> Grant:
    """The grant with a new access token (and the new refresh token, where the provider
    rotates them)."""
    with _client(provider, timeout) as client:
        token = _requested(
            provider,
            lambda: client.refresh_token(provider.token_url, refresh_token=grant.refresh_token),
        )
    return _grant(token, token.get("refresh_token") or grant.refresh_token)


def revoke(provider: OAuthProvider, grant: Grant, timeout: float) -> None:
    """Tell the provider the grant is no longer wanted (where it can be told); a grant it no
    longer knows is no error."""
    if provider.revoke_url is None:
        return
    with _client(provider, timeout) as client, contextlib.suppress(OAuthError, OAuth2Error):
        client.revoke_token(provider.revoke_url, token=grant.refresh_token)


def _grant(token: dict[str, Any], refresh_token: str) -> Grant:
    expires_in = token.get("expires_in")
    expires_at = time.time() + float(expires_in) if expires_in else token.get("expires_at")
    return Grant(refresh_token, token.get("access_token"), expires_at)


def _requested(provider: OAuthProvider, request):
    """The token endpoint's answer; its refusals and failures as ``CalendarSyncError``s."""
    try:
        return request()
    except (OAuthError, OAuth2Error) as err:
        code = getattr(err, "error", None) or "error"
        if code in ("invalid_grant", "unauthorized_client", "invalid_client"):
            raise AuthenticationFailed(
                f"{provider.label} no longer accepts this connection ({code}): the access was"
                " revoked or has expired; reconnect it"
            ) from None
        raise AuthenticationFailed(f"{provider.label} refused the token request ({code})") from None
    except httpx.TimeoutException:
        raise ServerTimeout(f"{provider.label}'s token endpoint did not answer in time") from None
    except httpx.HTTPError as err:
        raise ServerUnreachable(
            f"cannot reach {provider.label}'s token endpoint: {type(err).__name__}"
        ) from None


def valid_access_token(connection_id: int, timeout: float, *, renew: bool = False) -> str:
    """An access token for the connection that is good for at least ``REFRESH_MARGIN``,
    refreshed and saved (committed, in a transaction of its own) when it was not, or when
    ``renew`` (the provider refused it before its time): a job that must keep what the
    provider answered whatever becomes of its caller's transaction, since a rotated refresh
    token is the only one that works from then on."""
    configured = settings()
    with session_apart(db.engine) as session:
        connection = session.get(CalendarConnection, connection_id)
        assert connection is not None  # the connection asking for its token
        grant = _opened(connection, configured)
        if grant.fresh(time.time()) and not renew:
            assert grant.access_token is not None  # fresh: it has one
            return grant.access_token
        session.rollback()
        # One refresh at a time per connection: the row is locked while the provider answers.
        connection = session.scalars(
            select(CalendarConnection)
            .where(CalendarConnection.id == connection_id)
            .with_for_update()
        ).one()
        locked = _opened(connection, configured)
        if renew and locked.access_token != grant.access_token and locked.fresh(time.time()):
            assert locked.access_token is not None  # fresh: it has one
            return locked.access_token  # renewed by someone else meanwhile
        grant = locked
        if renew or not grant.fresh(time.time()):
            grant = refreshed(oauth_provider(connection.kind, configured), grant, timeout)
            connection.encrypted_secret = grant.sealed(configured.secret_keys[0])
        # Fresh, or just refreshed: a token endpoint answers with an access token (RFC 6749,
        # 5.1), which is not checked here.
        return cast(str, grant.access_token)


def _opened(connection: CalendarConnection, configured: Settings) -> Grant:
    assert connection.encrypted_secret is not None  # an OAuth connection keeps its grant
    try:
        return Grant.opened(connection.encrypted_secret, configured.secret_keys)
    except SecretUnreadable:
        raise CredentialsUnreadable(
            "the stored grant cannot be decrypted with this SECRET_KEY; reconnect the calendar"
        ) from None
