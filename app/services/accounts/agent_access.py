"""Agents that connect with OAuth 2.1, the storage side: clients registering, an owner's
consent making a grant, authorization codes, access and refresh tokens, and revocation.

The protocol (RFC 6749 with PKCE, RFC 7591, RFC 7009, RFC 8414) is Authlib's, driven by
``app.oauth``; these functions are what it stores and looks up. The rules kept here:

- A grant is an ``ApiKey`` of the consented sub account with the chosen permissions and
  ``oauth_client_id`` set. Its tokens act as that key (``authenticate_access_token``), so the
  API's 401/403 texts, its rate limit (per key) and the dashboard's list and revocation are
  the API keys' own.
- Codes, access and refresh tokens are stored as SHA-256 digests only.
- A code is exchanged once; presented again it revokes its grant (RFC 6749 §4.1.2). A refresh
  token is spent when used and a new pair issued; a spent one presented again revokes the
  grant with every token of it (OAuth 2.1 §4.3.1, refresh token rotation).
- Redirect URIs are matched exactly; they must be https, or http on a loopback address (a
  native client's local listener).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select, update
from sqlalchemy.orm import joinedload

from app.extensions import db
from app.models import ApiKey, OAuthClient, OAuthCode, OAuthToken, Permission, SubAccount
from app.models.limits import NAME_MAX
from app.models.oauth import CHALLENGE_MAX
from app.services.accounts.api_keys import (
    INVALID_KEY,
    ApiKeyNotFound,
    get_key,
    issue_api_key,
    usable_key,
)
from app.services.common.errors import AuthenticationFailed
from app.services.common.tokens import new_token, token_digest

CLIENT_ID_PREFIX = "cbc_"
ACCESS_TOKEN_PREFIX = "cba_"
REFRESH_TOKEN_PREFIX = "cbr_"
# The scopes are the four permissions, by their API names.
SCOPES = tuple(permission.value for permission in Permission)
# A code is exchanged by the client right after the redirect: a minute is plenty.
CODE_LIFETIME = timedelta(seconds=60)
REDIRECT_URIS_MAX = 10
REDIRECT_URI_MAX = 2000
CLIENT_NAME_DEFAULT = "An MCP client"
_LOOPBACK_NAMES = {"localhost"}


def redirect_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a redirect URI, or None: an absolute https URL, or http on a
    loopback address (RFC 8252 §7.3), without a fragment."""
    if not isinstance(uri, str) or not uri or len(uri) > REDIRECT_URI_MAX:
        return "must be a URL of at most 2000 characters"
    parts = urlsplit(uri)
    if parts.fragment:
        return "must not have a fragment"
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname and _is_loopback(parts.hostname):
        return None
    return "must be https, or http on a loopback address (127.0.0.1, [::1], localhost)"


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def register_client(
    *,
    client_id: str,
    name: str | None,
    redirect_uris: Sequence[str],
    client_uri: str | None,
    now: datetime,
) -> OAuthClient:
    """A new public client ``client_id`` (``CLIENT_ID_PREFIX`` and a fresh token) with these
    exact redirect URIs (checked by the caller with ``redirect_uri_problem``)."""
    client = OAuthClient(
        client_id=client_id,
        name=((name or "").strip() or CLIENT_NAME_DEFAULT)[:NAME_MAX],
        redirect_uris=list(redirect_uris),
        client_uri=client_uri,
        scope=" ".join(SCOPES),
        created_at=now,
    )
    db.session.add(client)
    db.session.flush()
    return client


def find_client(client_id: str | None) -> OAuthClient | None:
    if not client_id or not client_id.startswith(CLIENT_ID_PREFIX):
        return None
    return db.session.scalar(select(OAuthClient).where(OAuthClient.client_id == client_id))


def grant_access(
    *,
    client: OAuthClient,
    sub_account: SubAccount,
    permissions: Iterable[str],
    user_id: int,
    now: datetime,
) -> ApiKey:
    """The owner's consent: a grant of ``sub_account`` with ``permissions`` to ``client``,
    an API key without a plain key of its own (its digest is of a token nobody keeps)."""
    grant, _ = issue_api_key(
        agency=sub_account.agency,
        sub_account=sub_account,
        name=client.name,
        permissions=permissions,
        created_by_user_id=user_id,
    )
    grant.oauth_client_id = client.id
    grant.created_at = now
    db.session.flush()
    return grant


def keep_code(
    plain_code: str,
    *,
    client: OAuthClient,
    grant: ApiKey,
    redirect_uri: str | None,
    code_challenge: str,
    code_challenge_method: str,
    resource: str | None,
    now: datetime,
) -> OAuthCode:
    code = OAuthCode(
        digest=token_digest(plain_code),
        client_id=client.id,
        grant_id=grant.id,
        redirect_uri=redirect_uri,
        scope=" ".join(grant.permissions or []),
        code_challenge=code_challenge[:CHALLENGE_MAX],
        code_challenge_method=code_challenge_method,
        resource=resource,
        expires_at=now + CODE_LIFETIME,
        created_at=now,
    )
    db.session.add(code)
    db.session.flush()
    return code


def take_code(plain_code: str, client: OAuthClient, now: datetime) -> OAuthCode | None:
    """The unexpired, unused code ``plain_code`` issued to ``client``. A code already
    exchanged is a replay: its grant is revoked, with every token issued from it. The row is
    locked until the exchange commits, so of two exchanges at once one waits and is the
    replay."""
    code = db.session.scalar(
        select(OAuthCode)
        .where(OAuthCode.digest == token_digest(plain_code))
        .options(joinedload(OAuthCode.grant))
        .with_for_update(of=OAuthCode)
    )
    return code if _usable_once(code, client, code.used_at if code else None, now) else None


def spend_code(code: OAuthCode, now: datetime) -> None:
    code.used_at = now
    db.session.flush()


def keep_tokens(
    token: dict[str, Any],
    *,
    client: OAuthClient,
    grant: ApiKey,
    resource: str | None,
    refresh_lifetime: timedelta,
    now: datetime,
) -> OAuthToken:
    """The pair Authlib issued (``access_token``, ``refresh_token``, ``expires_in``, ``scope``),
    kept as digests."""
    refresh = token.get("refresh_token")
    row = OAuthToken(
        client_id=client.id,
        grant_id=grant.id,
        access_digest=token_digest(token["access_token"]),
        refresh_digest=token_digest(refresh) if refresh else None,
        scope=token.get("scope") or " ".join(grant.permissions or []),
        resource=resource,
        access_expires_at=now + timedelta(seconds=int(token["expires_in"])),
        refresh_expires_at=now + refresh_lifetime if refresh else None,
        created_at=now,
    )
    db.session.add(row)
    db.session.flush()
    return row


def take_refresh_token(plain: str, client: OAuthClient, now: datetime) -> OAuthToken | None:
    """The live refresh token ``plain`` of ``client``. A spent one is a replay: the grant is
    revoked, every token of it with it. Locked as ``take_code``'s row is. Revoking the access
    token issued with it does not end it (only its grant's revocation does)."""
    row = db.session.scalar(
        select(OAuthToken)
        .where(OAuthToken.refresh_digest == token_digest(plain))
        .options(joinedload(OAuthToken.grant))
        .with_for_update(of=OAuthToken)
    )
    return row if _usable_once(row, client, row.refreshed_at if row else None, now) else None


def _usable_once(
    row: OAuthCode | OAuthToken | None,
    client: OAuthClient,
    spent_at: datetime | None,
    now: datetime,
) -> bool:
    """The rule of a credential used once (a code, a refresh token), ``row`` locked: usable
    when it is ``client``'s, not spent, unexpired and its grant active. A spent one presented
    again is a replay, and revokes its grant with every token of it."""
    if row is None or row.client_id != client.id:
        return False
    if spent_at is not None:
        revoke_grant(row.grant, now)
        return False
    expires_at = row.expires_at if isinstance(row, OAuthCode) else row.refresh_expires_at
    return row.grant.active and expires_at is not None and expires_at > now


def spend_refresh_token(row: OAuthToken, now: datetime) -> None:
    """Rotation: the refresh token is used up, and the access token issued with it ends too."""
    row.refreshed_at = now
    row.revoked_at = row.revoked_at or now
    db.session.flush()


def find_token(plain: str) -> OAuthToken | None:
    """The token whose access or refresh token is ``plain`` (for revocation)."""
    digest = token_digest(plain)
    return db.session.scalar(
        select(OAuthToken)
        .where((OAuthToken.access_digest == digest) | (OAuthToken.refresh_digest == digest))
        .options(joinedload(OAuthToken.grant))
    )


def revoke_token(row: OAuthToken, plain: str, now: datetime) -> None:
    """RFC 7009: an access token ends alone (its refresh token still refreshes); a refresh
    token ends its grant (every token)."""
    if row.refresh_digest == token_digest(plain):
        revoke_grant(row.grant, now)
    else:
        row.revoked_at = row.revoked_at or now
        db.session.flush()


def revoke_grant(grant: ApiKey, now: datetime) -> None:
    """The grant stops working at once: the key is deactivated and every token of it ends."""
    grant.active = False
    db.session.execute(
        update(OAuthToken)
        .where(OAuthToken.grant_id == grant.id, OAuthToken.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    db.session.flush()


def revoke_connection(sub_account: SubAccount, grant_id: int, now: datetime) -> ApiKey:
    """The owner revokes an agent's connection (the dashboard): its grant and every token of
    it stop working at once. Another sub account's, or a plain API key, is not found."""
    grant = get_key(sub_account, grant_id)
    if grant.oauth_client_id is None:
        raise ApiKeyNotFound()
    revoke_grant(grant, now)
    return grant


def authenticate_access_token(plain: str, now: datetime) -> ApiKey:
    """The grant an unexpired, unrevoked access token acts as, checked as an API key is
    (active, unexpired, a usable sub account); else ``AuthenticationFailed`` with the API
    key's words."""
    return usable_key(_live_access_token(plain, now).grant, now)


def _live_access_token(plain: str, now: datetime) -> OAuthToken:
    """The unexpired, unrevoked access token ``plain`` with its grant, the grant's sub account
    and settings, and its client, in one statement; else ``AuthenticationFailed``."""
    row = db.session.scalar(
        select(OAuthToken)
        .where(OAuthToken.access_digest == token_digest(plain))
        .options(
            joinedload(OAuthToken.grant)
            .joinedload(ApiKey.sub_account)
            .joinedload(SubAccount.settings),
            joinedload(OAuthToken.client),
        )
    )
    if row is None or row.revoked_at is not None or row.access_expires_at <= now:
        raise AuthenticationFailed(INVALID_KEY)
    return row


def introspect(plain: str | None, now: datetime) -> dict[str, Any]:
    """RFC 7662's answer about an access token: ``{"active": false}`` unless it is live, else
    its client, scope, sub account and expiry."""
    if not plain:
        return {"active": False}
    try:
        row = _live_access_token(plain, now)
        grant = usable_key(row.grant, now)
    except AuthenticationFailed:
        return {"active": False}
    return {
        "active": True,
        "client_id": row.client.client_id,
        "scope": " ".join(grant.permissions or []),
        "token_type": "Bearer",
        "exp": int(row.access_expires_at.timestamp()),
        "iat": int(row.created_at.timestamp()),
        "sub": f"sub_account:{grant.sub_account_id}",
        "aud": row.resource,
    }


def new_access_token() -> str:
    """A fresh access token (``cba_`` and 43 URL-safe characters)."""
    return ACCESS_TOKEN_PREFIX + new_token()


def new_refresh_token() -> str:
    """A fresh refresh token (``cbr_`` and 43 URL-safe characters)."""
    return REFRESH_TOKEN_PREFIX + new_token()
