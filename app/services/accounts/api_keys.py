"""Issuing API keys and recognising them on requests.

A key is ``cbk_`` + 43 URL-safe characters (256 random bits). Only its SHA-256 digest and a
short display prefix are stored, so a leaked database does not leak usable keys; the digest
is a fast hash on purpose, because the input already has full entropy.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from marshmallow import Schema, ValidationError, fields, validate
from sqlalchemy import or_, select, update
from sqlalchemy.orm import joinedload

from app.api_terms import PERMISSION_LABELS
from app.extensions import db
from app.models import Agency, ApiKey, Permission, SubAccount
from app.models.limits import NAME_MAX
from app.scheduling.timezones import InvalidInstant, zone
from app.services.common.errors import (
    AuthenticationFailed,
    ErrorCode,
    InvalidRequest,
    NotFound,
    PermissionDenied,
)
from app.services.common.lookups import find_owned
from app.services.common.tokens import new_token, token_digest
from app.validation import InstantField, Text, describe_errors, flatten_errors

KEY_PREFIX = "cbk_"
DISPLAY_PREFIX_LENGTH = 12

INVALID_KEY = "Invalid or inactive API key"
GRANT_STAYS_REVOKED = "A revoked agent connection stays revoked: connect the agent again."
EXPIRED_KEY = "API key has expired"
NO_SUB_ACCOUNT = "API key not associated with a subaccount"


class ApiKeyNotFound(NotFound):
    message = "API key not found"


class KeyStatus(StrEnum):
    ACTIVE = "active"
    DEACTIVATED = "deactivated"
    EXPIRED = "expired"


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
    """Create a key; returns the row and the plain key, which exists nowhere else after this.

    The row is added to the session, not flushed: provisioning issues many keys at once, and
    one flush writes them in one statement. A caller that needs the id flushes."""
    plain = KEY_PREFIX + new_token()
    wanted = set(permissions)
    api_key = ApiKey(
        agency=agency,
        sub_account=sub_account,
        name=name,
        prefix=plain[:DISPLAY_PREFIX_LENGTH],
        digest=token_digest(plain),
        permissions=[p.value for p in Permission if p.value in wanted],
        expires_at=expires_at,
        active=active,
        created_by_user_id=created_by_user_id,
    )
    db.session.add(api_key)
    return api_key, plain


class KeptKeys(Protocol):
    """A memory of keys recently read, which the caller may hand to ``authenticate_api_key``:
    the API keeps one per process (``app.api.key_cache``); the service only asks it."""

    def get(self, digest: str) -> ApiKey | None:
        """The kept key for ``digest``, detached, if still fresh enough to use."""

    def keep(self, digest: str, api_key: ApiKey) -> None:
        """Remember ``api_key``, detached from its session, as read just now."""


def authenticate_api_key(
    plain_key: str | None, now: datetime, cache: KeptKeys | None = None
) -> ApiKey:
    """The active, unexpired key for ``plain_key`` with a usable sub account, or
    ``AuthenticationFailed`` with the spec's exact message. With a ``cache``, a key read less
    than a second ago is taken from it without SQL (the API's ``app.api.key_cache``); every check
    below runs either way."""
    if not plain_key:
        raise AuthenticationFailed(INVALID_KEY)
    digest = token_digest(plain_key)
    kept = cache.get(digest) if cache is not None else None
    if kept is not None:
        api_key: ApiKey | None = db.session.merge(kept, load=False)
    else:
        api_key = db.session.scalar(
            select(ApiKey)
            .where(ApiKey.digest == digest)
            .options(joinedload(ApiKey.sub_account).joinedload(SubAccount.settings))
        )
        if api_key is not None and cache is not None:
            cache.keep(digest, _detached(api_key))
            api_key = db.session.merge(api_key, load=False)
    # Looked up by digest: the database compares digests, never the key, so timing tells an
    # attacker nothing about the key.
    if api_key is None:
        raise AuthenticationFailed(INVALID_KEY)
    return usable_key(api_key, now)


def usable_key(api_key: ApiKey, now: datetime) -> ApiKey:
    """``api_key`` if the API may act on it now: active, unexpired, of an active sub account
    of its agency; else ``AuthenticationFailed`` with the spec's message (an OAuth grant's
    tokens are held to the same, ``agent_access.authenticate_access_token``)."""
    if not api_key.active:
        raise AuthenticationFailed(INVALID_KEY)
    if api_key.expires_at is not None and api_key.expires_at <= now:
        raise AuthenticationFailed(EXPIRED_KEY, code=ErrorCode.API_KEY_EXPIRED)
    sub_account = api_key.sub_account
    if (
        sub_account is None
        or not sub_account.active
        or sub_account.agency_id != api_key.agency_id
        or sub_account.settings is None
    ):
        raise AuthenticationFailed(NO_SUB_ACCOUNT, code=ErrorCode.NO_SUB_ACCOUNT)
    return api_key


def _detached(api_key: ApiKey) -> ApiKey:
    """Take the key, its sub account and their settings out of the session as loaded, to be
    kept; the request works on a merged copy."""
    sub_account = api_key.sub_account
    settings = sub_account.settings if sub_account is not None else None
    for instance in (api_key, sub_account, settings):  # expunge cascades along some of them
        if instance is not None and instance in db.session:
            db.session.expunge(instance)
    return api_key


def permission_missing(permission: Permission) -> str:
    """The 403's message (the spec's words)."""
    return f"API key does not have '{permission.value}' permission"


def require_permission(api_key: ApiKey, permission: Permission) -> None:
    if permission.value not in (api_key.permissions or []):
        raise PermissionDenied(permission_missing(permission))


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
        # Not a change the key cache must forget keys for: KeyCache.note_use records it.
        .execution_options(synchronize_session=False, key_use_stamp=True)
    )
    return True


# Keys as an agency owner manages them for one sub account (the dashboard)


class NewKeyDoc(Schema):
    """A key as a person asks for it. ``expiresAt`` may be naive: it is read in the sub
    account's timezone, as a person means it."""

    name = Text(
        required=True,
        validate=[
            validate.Length(min=1, error="Give the key a name."),
            validate.Length(max=NAME_MAX, error=f"Use at most {NAME_MAX} characters."),
        ],
    )
    permissions = fields.List(
        fields.String(
            validate=validate.OneOf(PERMISSION_LABELS, error="Unknown permission '{input}'.")
        ),
        load_default=list,
    )
    expiresAt = InstantField(
        load_default=None,
        allow_none=True,
        error_messages={
            "invalid": "Give a date (2027-03-31) or a date and time (2027-03-31T17:00)."
        },
    )


def create_api_key(
    sub_account: SubAccount,
    *,
    name: str,
    permissions: Iterable[str],
    expires_at: str | None,
    now: datetime,
    created_by_user_id: int | None,
) -> tuple[ApiKey, str]:
    """A key for ``sub_account`` as a person typed it: a name (1 to ``NAME_MAX`` characters), any of
    the four permissions, and an optional expiry in the future. The expiry is a date and time
    in the sub account's timezone (or with an offset), or a date alone, meaning the key works
    through that day. Returns the row and the plain key, shown once; every problem is named by
    field (``name``, ``permissions``, ``expiresAt``)."""
    document = {
        "name": (name or "").strip(),
        "permissions": list(permissions),
        "expiresAt": (expires_at or "").strip() or None,
    }
    errors: dict[str, list[str]] = {}
    try:
        doc = NewKeyDoc().load(document)
    except ValidationError as err:
        for path, messages in flatten_errors(err.messages).items():
            errors.setdefault(path.split("[", 1)[0], []).extend(messages)  # permissions[2]
        doc = err.valid_data or {}  # the expiry is still checked, so every problem is named
    expires = None
    if doc.get("expiresAt") is not None:
        timezone = sub_account.settings.timezone if sub_account.settings else "UTC"
        try:
            expires = doc["expiresAt"].resolve(zone(timezone), date_means="end")
        except InvalidInstant as err:
            errors["expiresAt"] = [f"{err}."]
        else:
            if expires <= now:
                errors["expiresAt"] = ["The expiry must be in the future."]
    if errors:
        raise InvalidRequest(describe_errors(errors), errors=errors)
    issued = issue_api_key(
        agency=sub_account.agency,
        sub_account=sub_account,
        name=doc["name"],
        permissions=doc["permissions"],
        expires_at=expires,
        created_by_user_id=created_by_user_id,
    )
    db.session.flush()
    return issued


def list_keys(sub_account: SubAccount) -> list[ApiKey]:
    """The sub account's keys, newest first. Agency-level keys serve no sub account and are
    not among them, nor are agents' OAuth grants (``list_grants``)."""
    return list(
        db.session.scalars(
            select(ApiKey)
            .where(ApiKey.sub_account_id == sub_account.id, ApiKey.oauth_client_id.is_(None))
            .order_by(ApiKey.created_at.desc(), ApiKey.id.desc())
        )
    )


def list_grants(sub_account: SubAccount) -> list[ApiKey]:
    """The agents connected to the sub account with OAuth (each with its client), newest
    first: live ones and revoked ones alike."""
    return list(
        db.session.scalars(
            select(ApiKey)
            .where(ApiKey.sub_account_id == sub_account.id, ApiKey.oauth_client_id.is_not(None))
            .options(joinedload(ApiKey.oauth_client))
            .order_by(ApiKey.created_at.desc(), ApiKey.id.desc())
        )
    )


def get_key(sub_account: SubAccount, key_id: int) -> ApiKey:
    """The key, if it is ``sub_account``'s: another sub account's key does not exist here."""
    return find_owned(ApiKey, sub_account, key_id, ApiKeyNotFound)


def key_status(api_key: ApiKey, now: datetime) -> KeyStatus:
    """What the API would make of the key now (deactivation first, as ``authenticate``)."""
    if not api_key.active:
        return KeyStatus.DEACTIVATED
    if api_key.expires_at is not None and api_key.expires_at <= now:
        return KeyStatus.EXPIRED
    return KeyStatus.ACTIVE


def deactivate_key(sub_account: SubAccount, key_id: int) -> ApiKey:
    """Stop the key working; the API reads the flag on every request, so the next one fails."""
    api_key = get_key(sub_account, key_id)
    api_key.active = False
    db.session.flush()
    return api_key


def reactivate_key(sub_account: SubAccount, key_id: int) -> ApiKey:
    """Let a deactivated key work again (an expired one stays expired). An agent's revoked
    OAuth grant stays revoked: its tokens are gone, and the agent connects again."""
    api_key = get_key(sub_account, key_id)
    if api_key.oauth_client_id is not None:
        raise InvalidRequest(GRANT_STAYS_REVOKED)
    api_key.active = True
    db.session.flush()
    return api_key


def delete_key(sub_account: SubAccount, key_id: int) -> None:
    """Remove the key for good: its digest goes, so the plain key matches nothing."""
    db.session.delete(get_key(sub_account, key_id))
    db.session.flush()
