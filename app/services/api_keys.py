"""Issuing API keys and recognising them on requests.

A key is ``cbk_`` + 43 URL-safe characters (256 random bits). Only its SHA-256 digest and a
short display prefix are stored, so a leaked database does not leak usable keys; the digest
is a fast hash on purpose, because the input already has full entropy.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import joinedload

from app.extensions import db
from app.models import Agency, ApiKey, Permission, SubAccount
from app.services.errors import AuthenticationFailed, PermissionDenied

KEY_PREFIX = "cbk_"
DISPLAY_PREFIX_LENGTH = 12

INVALID_KEY = "Invalid or inactive API key"
EXPIRED_KEY = "API key has expired"
NO_SUB_ACCOUNT = "API key not associated with a subaccount"


def key_digest(plain_key: str) -> str:
    return hashlib.sha256(plain_key.encode("utf-8", "surrogatepass")).hexdigest()


def issue_api_key(
    *,
    agency: Agency,
    sub_account: SubAccount | None,
    name: str,
    permissions: Iterable[str],
    expires_at: datetime | None = None,
    active: bool = True,
    created_by_user_id: int | None = None,
) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the plain key, which exists nowhere else after this."""
    plain = KEY_PREFIX + secrets.token_urlsafe(32)
    wanted = set(permissions)
    api_key = ApiKey(
        agency=agency,
        sub_account=sub_account,
        name=name,
        prefix=plain[:DISPLAY_PREFIX_LENGTH],
        digest=key_digest(plain),
        permissions=[p.value for p in Permission if p.value in wanted],
        expires_at=expires_at,
        active=active,
        created_by_user_id=created_by_user_id,
    )
    db.session.add(api_key)
    db.session.flush()
    return api_key, plain


def authenticate_api_key(plain_key: str | None, now: datetime) -> ApiKey:
    """The active, unexpired key for ``plain_key`` with a usable sub account, or
    ``AuthenticationFailed`` with the spec's exact message."""
    if not plain_key:
        raise AuthenticationFailed(INVALID_KEY)
    digest = key_digest(plain_key)
    api_key = db.session.scalar(
        select(ApiKey)
        .where(ApiKey.digest == digest)
        .options(joinedload(ApiKey.sub_account).joinedload(SubAccount.settings))
    )
    # Looked up by digest: the database compares digests, never the key, so timing tells an
    # attacker nothing about the key.
    if api_key is None or not api_key.active:
        raise AuthenticationFailed(INVALID_KEY)
    if api_key.expires_at is not None and api_key.expires_at <= now:
        raise AuthenticationFailed(EXPIRED_KEY)
    sub_account = api_key.sub_account
    if (
        sub_account is None
        or not sub_account.active
        or sub_account.agency_id != api_key.agency_id
        or sub_account.settings is None
    ):
        raise AuthenticationFailed(NO_SUB_ACCOUNT)
    return api_key


def require_permission(api_key: ApiKey, permission: Permission) -> None:
    if permission.value not in (api_key.permissions or []):
        raise PermissionDenied(f"API key does not have '{permission.value}' permission")


def record_key_use(api_key: ApiKey, now: datetime, resolution_seconds: int) -> bool:
    """Stamp ``last_used_at``, at most once per ``resolution_seconds`` per key; returns whether
    it wrote (so the caller commits only then). The UPDATE re-checks staleness, so processes
    racing on one key write once."""
    stale_before = now - timedelta(seconds=resolution_seconds)
    if api_key.last_used_at is not None and api_key.last_used_at >= stale_before:
        return False
    db.session.execute(
        update(ApiKey)
        .where(ApiKey.id == api_key.id)
        .where(or_(ApiKey.last_used_at.is_(None), ApiKey.last_used_at < stale_before))
        .values(last_used_at=now)
        .execution_options(synchronize_session=False)
    )
    return True
